"""A deployment left running: capture, plan and retention under the real scheduler, run after run.

Starts the loopback fake Druid (``tests/fake_druid.py``) and ``make airflow`` in a temporary
directory (``tests/e2e/deployment.py``: scheduler, DAG processor, API server, triggerer and the
Spark Connect server, LocalExecutor) with its Druid connections on the fake and the retention
settings of ``--plans-kept`` plans per cluster. ``segment_balancing`` is unpaused (its scheduled
run of the day comes first); then, ``--runs`` times back to back, as an hourly capture would:

1. the fake cluster changes: a day of data is added (a new segment on ``hist-1``); every tenth
   cycle ``hist-2`` is lost with its replicas, and two cycles later it is back;
2. a ``druid_snapshot_capture`` run is triggered (``keep`` = ``--captures-kept``); its capture emits
   the Asset on which ``segment_balancing`` is scheduled, and the planning run it starts is awaited;
3. every ``--retention-every`` cycles (an hour of hourly captures, compressed) a
   ``segment_balancer_retention`` run is triggered and awaited.

After each cycle (every planning run finished: the capture DAG's own hourly run starts one too)
it records: the planning runs' states, the wall of the capture's, the bytes under each area of the
deployment's ``var/`` (``runs``, ``plans``, ``xcom``, ``snapshots``, ``airflow_home/logs``,
``airflow_home/airflow.db``), the scheduler's resident memory, the DAG versions in the metadata
DB (a DAG whose serialized form changed with the cluster would add one a run), and whether
``plans/LATEST`` names the plan of the newest capture. Prints a row every ``--every`` cycles and a verdict: every run
succeeded, the disk used levels off (its last tenth against the tenth before), the scheduler's
memory does not grow (the same), ``LATEST`` always right; task logs and the metadata DB, kept by
age, as growth per run. Usage::

    .venv/bin/python benchmarks/soak_deployment.py [--runs 200] [--plans-kept 24] [--captures-kept 24]

The output for this machine is kept in ``benchmarks/README.md``; this is no test.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "plugins"))
sys.path.insert(0, str(ROOT / "include"))

import fake_druid  # noqa: E402
from deployment import running_deployment  # noqa: E402

from segment_balancer.common.files import tree_bytes  # noqa: E402

AREAS = ("runs", "plans", "xcom", "snapshots", "airflow_home/logs", "airflow_home/airflow.db")
COUNTED = AREAS[:4]
"""The areas retention keeps by count (plans, captures) or removes with each run: they must level off.
Task logs are kept by age (``retention_log_days``) and the metadata DB by Airflow's ``db clean``."""
RUN_TIMEOUT = 900


def day_segment(k: int) -> dict:
    """A segment of wikipedia for the ``k``-th day after 2026-11-24 (future days: loaded by its rule)."""
    day = time.gmtime(time.mktime((2026, 11, 24, 0, 0, 0, 0, 0, 0)) + k * 86_400)
    start = time.strftime("%Y-%m-%dT00:00:00.000Z", day)
    end = time.strftime("%Y-%m-%dT00:00:00.000Z", time.gmtime(time.mktime(day) + 86_400))
    version = end.replace("00:00:00", "01:00:00")
    seg = copy.deepcopy(fake_druid.WIKI_NEW)
    seg.update(
        interval=f"{start}/{end}",
        version=version,
        size=600 + k,
        loadSpec={**seg["loadSpec"], "key": f"wikipedia/{start[:10]}/v1/0/index.zip"},
        identifier=f"wikipedia_{start}_{end}_{version}",
    )
    return seg


def change_cluster(fake, cycle: int, lost: dict) -> str:
    """Change the fake cluster for capture number ``cycle`` (1-based); returns what changed."""
    seg = day_segment(cycle)
    fake.segments.append((seg, False, 2, 50))
    fake.server_segments.append({"server": "hist-1:8083", "segment_id": seg["identifier"]})
    what = "a day added"
    if cycle % 10 == 5 and not lost:
        lost["server"] = next(s for s in fake.servers if s["server"] == "hist-2:8083")
        lost["replicas"] = [r for r in fake.server_segments if r["server"] == "hist-2:8083"]
        fake.servers.remove(lost["server"])
        fake.server_segments[:] = [r for r in fake.server_segments if r["server"] != "hist-2:8083"]
        fake.load_queues.pop("hist-2:8083", None)
        what += ", hist-2 lost"
    elif cycle % 10 == 7 and lost:
        fake.servers.append(lost.pop("server"))
        fake.server_segments.extend(lost.pop("replicas"))
        what += ", hist-2 back"
    return what


def request(dep, method: str, path: str, body: dict | None = None):
    """``dep.request``, tried again (up to 5 times, 2 s apart) on an HTTP 5xx: SQLite's metadata DB
    answers "Database is locked" while the scheduler writes."""
    for attempt in range(5):
        try:
            return dep.request(method, path, body)
        except AssertionError as exc:
            if ": HTTP 5" not in str(exc) or attempt == 4:
                raise
            time.sleep(2)


def trigger(dep, dag_id: str, conf: dict | None = None) -> str:
    body = {"logical_date": None, "conf": conf or {}}
    return request(dep, "POST", f"/api/v2/dags/{dag_id}/dagRuns", body)["dag_run_id"]


def wait_run(dep, dag_id: str, run_id: str, timeout: float = RUN_TIMEOUT) -> dict:
    from urllib.parse import quote

    deadline = time.monotonic() + timeout
    while True:
        run = request(dep, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")
        if run["state"] in ("success", "failed"):
            return run
        if time.monotonic() > deadline:
            raise TimeoutError(f"{dag_id} run {run_id} not finished after {timeout:.0f} s; see {dep.log}")
        time.sleep(1)


def wait_for(found, dep, timeout: float = RUN_TIMEOUT):
    """Poll ``found()`` every second until it returns something true; return that."""
    deadline = time.monotonic() + timeout
    while not (value := found()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing after {timeout:.0f} s; see {dep.log}")
        time.sleep(1)
    return value


def planning_runs_after(dep, seen: set[str], timeout: float = RUN_TIMEOUT) -> list[dict]:
    """Await the ``segment_balancing`` runs not in ``seen`` (at least one: the capture's), until
    none is left unfinished (the capture DAG's own hourly run may have started one more); return
    them finished, oldest first, and add them to ``seen``."""
    deadline = time.monotonic() + timeout
    done: list[dict] = []
    while True:
        runs = request(dep, "GET", "/api/v2/dags/segment_balancing/dagRuns?limit=20&order_by=-run_after")["dag_runs"]
        new = [r for r in runs if r["dag_run_id"] not in seen]
        for run in reversed(new):
            done.append(wait_run(dep, "segment_balancing", run["dag_run_id"]))
            seen.add(run["dag_run_id"])
        if done and not new:
            return done
        if time.monotonic() > deadline:
            raise TimeoutError(f"no planning run after the capture in {timeout:.0f} s; see {dep.log}")
        time.sleep(2)


def scheduler_rss(dep) -> int:
    """Resident bytes of the deployment's ``airflow scheduler`` process(es) (not its task workers)."""
    total = 0
    for proc in psutil.Process(dep.pid).children(recursive=True):
        try:
            cmd = proc.cmdline()
            if "scheduler" in cmd and not any("LocalExecutor" in c for c in cmd):
                total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


def dag_versions(var: Path) -> int:
    """Rows of ``dag_version`` (one per serialized version of every DAG) in the metadata DB; the
    scheduler caches a deserialized DAG per version."""
    import sqlite3

    with sqlite3.connect(f"file:{var / 'airflow_home' / 'airflow.db'}?mode=ro", uri=True, timeout=30) as db:
        return db.execute("select count(*) from dag_version").fetchone()[0]


def latest_is_newest(var: Path) -> bool:
    """``plans/LATEST`` names the plan of the newest capture under ``snapshots/druid``."""
    captures = sorted(p.name for p in (var / "snapshots" / "druid").iterdir() if not p.name.startswith("."))
    latest = var / "plans" / (var / "plans" / "LATEST").read_text().strip()
    return Path(json.loads((latest / "summary.json").read_text())["snapshot"]).name == captures[-1]


def settled(values: list[float]) -> float:
    """The mean of the last tenth of ``values`` over the mean of the tenth before it."""
    n = max(1, len(values) // 10)
    last, before = values[-n:], values[-2 * n : -n] or values[:n]
    return (sum(last) / len(last)) / max(1e-9, sum(before) / len(before))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--plans-kept", type=int, default=24)
    parser.add_argument("--captures-kept", type=int, default=24)
    parser.add_argument("--retention-every", type=int, default=10)
    parser.add_argument("--every", type=int, default=10, help="print a row every N cycles")
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=0,
        help="stop after the cycle that ends past this many minutes (0: run them all)",
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, fake_druid.fake_druid() as fake:
        tmp = Path(tmp)
        (tmp / "no_snapshots").mkdir()
        host, port = fake.url.split("//")[1].split(":")
        env = {
            f"AIRFLOW_CONN_{c}": json.dumps({"conn_type": t, "host": host, "port": int(port)})
            for c, t in (("DRUID_BROKER_DEFAULT", "druid"), ("DRUID_COORDINATOR_DEFAULT", "http"))
        }
        env["AIRFLOW__SEGMENT_BALANCER__RETENTION_PLANS_PER_CLUSTER"] = str(args.plans_kept)
        started = time.monotonic()
        with running_deployment(tmp, tmp / "no_snapshots", tmp / "deployment.log", env) as dep:
            print(f"deployment up in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            seen: set[str] = set()
            # unpausing the capture starts its run of the hour, and then unpausing the planning
            # its run of the day (and one for the capture): await them all
            change_cluster(fake, 0, {})
            request(dep, "PATCH", "/api/v2/dags/druid_snapshot_capture", {"is_paused": False})
            first = wait_for(
                lambda: request(dep, "GET", "/api/v2/dags/druid_snapshot_capture/dagRuns?limit=5")["dag_runs"], dep
            )
            assert wait_run(dep, "druid_snapshot_capture", first[0]["dag_run_id"])["state"] == "success"
            request(dep, "PATCH", "/api/v2/dags/segment_balancing", {"is_paused": False})
            planning_runs_after(dep, seen)
            lost: dict = {}
            print(
                f"{'cycle':>5} {'change':<24} {'plan':>7} {'wall s':>6} "
                + " ".join(f"{a.split('/')[-1][:9] + ' MiB':>13}" for a in AREAS)
                + f" {'sched MiB':>9} {'DAG vers':>8} {'LATEST ok':>9}",
                flush=True,
            )
            for cycle in range(1, args.runs + 1):
                if args.max_minutes and time.monotonic() - started > args.max_minutes * 60:
                    print(f"stopped after {cycle - 1} cycles: --max-minutes {args.max_minutes:g}", flush=True)
                    break
                what = change_cluster(fake, cycle, lost)
                capture = wait_run(
                    dep, "druid_snapshot_capture", trigger(dep, "druid_snapshot_capture", {"keep": args.captures_kept})
                )
                assert capture["state"] == "success", f"capture {capture['dag_run_id']} failed; see {dep.log}"
                plans = planning_runs_after(dep, seen)
                plan = plans[-1]
                failed = [r["dag_run_id"] for r in plans if r["state"] != "success"]
                if cycle % args.retention_every == 0:
                    wait_run(dep, "segment_balancer_retention", trigger(dep, "segment_balancer_retention"))
                wall = time.mktime(time.strptime(plan["end_date"][:19], "%Y-%m-%dT%H:%M:%S")) - time.mktime(
                    time.strptime(plan["start_date"][:19], "%Y-%m-%dT%H:%M:%S")
                )
                areas = {a: tree_bytes(dep.var / a) for a in AREAS}
                row = {
                    "cycle": cycle,
                    "change": what,
                    "state": "failed" if failed else "success",
                    "wall": wall,
                    "planned": len(plans),
                    "areas": areas,
                    "scheduler": scheduler_rss(dep),
                    "dag_versions": dag_versions(dep.var),
                    "latest_ok": latest_is_newest(dep.var),
                }
                rows.append(row)
                if cycle % args.every == 0 or cycle == args.runs or failed:
                    print(
                        f"{cycle:>5} {what:<24} {row['state']:>7} {wall:>6.0f} "
                        + " ".join(f"{areas[a] / 2**20:>13.1f}" for a in AREAS)
                        + f" {row['scheduler'] / 2**20:>9.0f} {row['dag_versions']:>8} {str(row['latest_ok']):>9}",
                        flush=True,
                    )
    disk = [sum(r["areas"][a] for a in COUNTED) for r in rows]
    print()
    print(
        f"cycles: {len(rows)}, planning runs: {sum(r['planned'] for r in rows)} (the capture DAG's hourly runs "
        f"plan too), cycles whose runs all succeeded: {sum(r['state'] == 'success' for r in rows)}; "
        f"LATEST named the newest capture's plan after {sum(r['latest_ok'] for r in rows)} of them"
    )
    print(
        f"disk of {', '.join(COUNTED)}: last tenth / tenth before = {settled(disk):.3f}; "
        f"max {max(disk) / 2**20:.1f} MiB, last {disk[-1] / 2**20:.1f} MiB"
    )
    for area in ("airflow_home/logs", "airflow_home/airflow.db"):  # kept by age (days), not count
        grown = (rows[-1]["areas"][area] - rows[0]["areas"][area]) / max(1, len(rows) - 1)
        print(
            f"{area}: {rows[0]['areas'][area] / 2**20:.1f} → {rows[-1]['areas'][area] / 2**20:.1f} MiB "
            f"({grown / 2**10:.0f} KiB a run)"
        )
    print(f"DAG versions in the metadata DB: {rows[0]['dag_versions']} → {rows[-1]['dag_versions']}")
    print(
        f"scheduler RSS: last tenth / tenth before = {settled([r['scheduler'] for r in rows]):.3f}; "
        f"first {rows[0]['scheduler'] / 2**20:.0f} MiB, last {rows[-1]['scheduler'] / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    main()
