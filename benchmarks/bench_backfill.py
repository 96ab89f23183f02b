"""A backfill of N daily snapshots on a real deployment: how long from creating it to its last plan.

Starts ``make airflow`` in a temporary directory on a free port (the browser test's deployment,
``tests/e2e/deployment.py``: scheduler, DAG processor, API server, triggerer and the Spark Connect
server, LocalExecutor), with ``--days`` copies of a bundled snapshot taken at noon of consecutive
days (``snapshot.json``'s ``snapshot_time``; cluster ``bench``) as the only snapshots. Unpausing
``segment_balancing`` starts its scheduled run (on the newest snapshot); once that run is done (a
warm server, as a deployment that plans every day has), the backfill over the days after each
snapshot is created through the REST API, and timed until every one of its runs succeeded. Each
run must plan on its own day's snapshot.

Prints, per backfill run: its logical date, the snapshot it planned on, its wall from start to end,
and the wall of the whole backfill (created → last run ended), with the warm-up run for comparison.
Usage::

    .venv/bin/python benchmarks/bench_backfill.py [--days 7] [--snapshot druid_sample] [--max-active-runs 10]

The output for this machine is kept in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "plugins"))

from deployment import DAG_ID, running_deployment  # noqa: E402

SNAPSHOTS = ROOT / "include" / "segment_balancer" / "snapshots"
FIRST_DAY = datetime(2024, 1, 1, tzinfo=UTC)


def write_days(src: Path, out: Path, days: int) -> dict[str, datetime]:
    """``days`` copies of snapshot ``src`` under ``out/bench/<day>/``, taken at noon of consecutive
    days from :data:`FIRST_DAY`; returns directory name -> snapshot time."""
    written = {}
    for k in range(days):
        when = FIRST_DAY + timedelta(days=k, hours=12)
        target = out / "bench" / when.strftime("%Y-%m-%dT%H-%M-%SZ")
        shutil.copytree(src, target)
        meta = json.loads((target / "snapshot.json").read_text())
        meta.update(snapshot_time=when.strftime("%Y-%m-%dT%H:%M:%S.000Z"), cluster="bench")
        (target / "snapshot.json").write_text(json.dumps(meta, indent=2) + "\n")
        written[target.name] = when
    return written


def iso(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def planned_on(dep, run_id: str) -> str:
    """The snapshot directory's name that run ``run_id``'s published plan was computed from."""
    from segment_balancer_airflow.resolve import run_paths

    summary = json.loads((run_paths(dep.var, run_id)["publish_dir"] / "summary.json").read_text())
    return Path(summary["snapshot"]).name


def wait_for(dep, predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(1)
    raise TimeoutError(f"{what} not seen after {timeout:.0f} s; see {dep.log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--snapshot", default="druid_sample", help="a bundled snapshot")
    parser.add_argument("--max-active-runs", type=int, default=10, help="the backfill's (Airflow's default: 10)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    days = write_days(SNAPSHOTS / args.snapshot, tmp / "snapshots_src", args.days)
    started = time.monotonic()
    with running_deployment(tmp, tmp / "snapshots_src", tmp / "deployment.log") as dep:
        print(f"deployment ready in {time.monotonic() - started:.1f} s ({dep.base}, log {dep.log})", flush=True)
        dep.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
        [warm] = wait_for(dep, lambda: dep.runs(), 120, "the scheduled run")
        [warm] = dep.wait_for_runs([warm["dag_run_id"]], args.timeout)
        warm_s = (iso(warm["end_date"]) - iso(warm["start_date"])).total_seconds()
        print(f"scheduled run (warm-up) {warm['dag_run_id']}: {warm_s:.1f} s", flush=True)

        first = FIRST_DAY + timedelta(days=1)
        body = {
            "dag_id": DAG_ID,
            "from_date": first.isoformat(),
            "to_date": (first + timedelta(days=args.days - 1)).isoformat(),
            "max_active_runs": args.max_active_runs,
        }
        created = time.monotonic()
        created_at = datetime.now(UTC)
        dep.request("POST", "/api/v2/backfills", body)

        def backfill_runs():
            runs = [r for r in dep.runs() if r["run_type"] == "backfill"]
            return runs if len(runs) == args.days else None

        runs = wait_for(dep, backfill_runs, 120, f"{args.days} backfill runs")
        done = dep.wait_for_runs([r["dag_run_id"] for r in runs], args.timeout)
        wall = time.monotonic() - created
        last_end = max(iso(r["end_date"]) for r in done)

    print()
    print(f"{'logical date':<12} {'planned on':<22} {'run s':>7}")
    for r in sorted(done, key=lambda r: r["logical_date"]):
        when = iso(r["logical_date"])
        on = planned_on(dep, r["dag_run_id"])
        expected = max(name for name, t in days.items() if t <= when)
        if on != expected:
            raise AssertionError(f"run {r['dag_run_id']} planned on {on}, expected {expected}")
        print(f"{when:%Y-%m-%d}   {on:<22} {(iso(r['end_date']) - iso(r['start_date'])).total_seconds():>7.1f}")
    print()
    print(
        f"backfill of {args.days} daily {args.snapshot} snapshots (max_active_runs {args.max_active_runs}): "
        f"{wall:.1f} s created -> every run done ({(last_end - created_at).total_seconds():.1f} s to the last "
        f"run's end in the Airflow DB); one scheduled run alone: {warm_s:.1f} s"
    )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
