"""Cost against avgShedder: ten simulated Coordinator runs of each cluster with
``balancerStrategy`` ``cost`` and ``avgShedder`` (default thresholds, each run fed the previous
run's balancer state, every queued load completing between runs).

Clusters:

- ``druid_sample``: the bundled snapshot;
- ``generated-20k``: ``python -m segment_balancer generate --segments 20000`` (three tiers, lost,
  decommissioning and added historicals; queue 500);
- Druid's ``BalancingStrategiesTest`` clusters (``tests/druid_simulation.py``: 1000 segments of
  500 MB, one replica, unlimited queue) with historicals of 200 GB: ``fresh`` (five empty),
  ``added`` (four hold 250 each, a fifth is empty), ``removed`` (four of five hold 200 each: the
  fifth's are unreplicated); and ``added-1TB``, the added cluster with Druid's own 1 TB
  historicals;
- ``heterogeneous``: one tier of historicals of 100, 100, 200, 200, 400 and 400 GB holding 150
  segments of 500 MB each (round robin): 75 %, 37.5 % and 18.75 % full;
- ``jitter``: the ``fresh`` cluster; run 3's snapshot shows one historical (hist 0) with 170 queued
  loads (85 GB: 92.5 % instead of 50 %) that then fail: the plan is applied to the snapshot
  without them (``simulate``'s ``plan_on``). A strategy that moves in run 3 moves for a blip.

Per cluster and strategy, run by run: balancing moves, GiB moved, the largest max − min of usage
(% of ``max_size``) over a tier's historicals after the run, and the total placement cost
(Druid's units; lower is better spread). ``--report-only`` prints the table from an earlier
``--out``. Resumable: a simulation with its ``runs.csv`` is not run again. Usage::

    .venv/bin/python benchmarks/sim_strategies.py [--runs 10] [--out DIR] [--only NAME,...] [--report-only]

The output for this machine is kept in ``docs/SIMULATION.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the Druid simulation clusters
sys.path.insert(0, str(ROOT / "benchmarks"))  # sim_churn's clusters

GIB = 1 << 30
STRATEGIES = ("cost", "avgShedder")
CLUSTERS = ["druid_sample", "generated-20k", "fresh", "added", "added-1TB", "removed", "heterogeneous", "jitter"]
GB_MB = 1000  # Druid's tests size historicals in MB (1 << 20 bytes): 200 GB is 200,000 of them
JITTER_RUN, JITTER_SERVER, JITTER_LOADS = 3, 0, 170


def build_clusters(cache: Path, only: set[str] | None) -> dict[str, Path]:
    """The snapshots, made once under ``cache``."""
    import sim_churn  # druid_sample and the generated 20k cluster, made as the churn table makes them
    from druid_simulation import historical, wiki_segments, write_cluster

    want = lambda name: not only or name in only  # noqa: E731
    out = sim_churn.build_clusters(cache, {n for n in ("druid_sample", "generated-20k") if want(n)} or {"none"})
    wiki = wiki_segments()
    clusters = {
        "fresh": ({historical(i): [] for i in range(5)}, 200),
        "jitter": ({historical(i): [] for i in range(5)}, 200),
        "added": (
            {**{historical(i): [j for j in range(1000) if j % 4 == i] for i in range(4)}, historical(4): []},
            200,
        ),
        "added-1TB": (
            {**{historical(i): [j for j in range(1000) if j % 4 == i] for i in range(4)}, historical(4): []},
            1000,
        ),
        "removed": ({historical(i): [j for j in range(1000) if j % 5 == i] for i in range(4)}, 200),
    }
    for name, (served, gb) in clusters.items():
        if want(name):
            out[name] = write_cluster(cache / f"strategies-{name}", wiki, served, size_mb=gb * GB_MB)
    if want("heterogeneous"):
        sizes = [100, 100, 200, 200, 400, 400]
        snap = write_cluster(
            cache / "strategies-heterogeneous",
            wiki[:900],
            {historical(i): [j for j in range(900) if j % 6 == i] for i in range(6)},
        )
        servers = json.loads((snap / "servers.json").read_text())
        for row, gb in zip(servers, sizes):
            row["max_size"] = gb * GB_MB << 20
        (snap / "servers.json").write_text(json.dumps(servers, indent=1))
        out["heterogeneous"] = snap
    return out


def jitter(run: int, snapshot: Path, run_dir: Path) -> Path:
    """``simulate``'s ``plan_on`` of the jitter case: in run :data:`JITTER_RUN`, a copy of the
    snapshot in which hist 0 has :data:`JITTER_LOADS` queued loads of segments others serve."""
    from druid_simulation import historical

    if run != JITTER_RUN:
        return snapshot
    copy = run_dir / "snapshot-jitter"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(snapshot, copy)
    server = historical(JITTER_SERVER)
    rows = [json.loads(line) for line in (copy / "server_segments.jsonl").read_text().splitlines()]
    own = {r["segment_id"] for r in rows if r["server"] == server}
    others = sorted({r["segment_id"] for r in rows} - own)[:JITTER_LOADS]
    now = json.loads((copy / "snapshot.json").read_text())["snapshot_time"]
    queues = json.loads((copy / "load_queues.json").read_text()) if (copy / "load_queues.json").exists() else {}
    queues.setdefault(server, {"segmentsToLoad": [], "segmentsToDrop": []})["segmentsToLoad"] += [
        {"segment_id": s, "queue_type": "loading", "requested_at": now} for s in others
    ]
    (copy / "load_queues.json").write_text(json.dumps(queues))
    return copy


def usage_spread(sim: Path, run: int) -> dict[str, float]:
    """``{tier: max − min usage}`` (percentage points of ``max_size``) over the tier's historicals
    after ``run``, the decommissioning ones left out (``sim_churn.live_historicals``)."""
    from sim_churn import live_historicals

    held = live_historicals(sim, run)
    held = held[held["max_size"] > 0]
    usage = 100.0 * held["bytes"] / held["max_size"]
    return {tier: float(part.max() - part.min()) for tier, part in usage.groupby(held["tier"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-strategies")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    parser.add_argument("--only", help="comma-separated cluster names")
    parser.add_argument("--report-only", action="store_true", help="read the simulations already in --out")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    names = args.only.split(",") if args.only else CLUSTERS

    if not args.report_only:
        from segment_balancer.spark.session import get_session
        from segment_balancer.tools.simulate import simulate

        clusters = build_clusters(args.cache, set(names))
        spark = get_session("sim_strategies")
        for name, snap in clusters.items():
            for strategy in STRATEGIES:
                out = args.out / name / strategy
                if (out / "runs.csv").is_file():
                    continue
                started = time.monotonic()
                shutil.rmtree(out, ignore_errors=True)
                simulate(
                    spark,
                    snap,
                    out,
                    args.runs,
                    {"balancerStrategy": strategy},
                    plan_on=jitter if name == "jitter" else None,
                )
                print(
                    f"{name} {strategy}: {time.monotonic() - started:.0f} s for {args.runs} runs",
                    file=sys.stderr,
                    flush=True,
                )
        spark.stop()

    rows = []
    for name in names:
        for strategy in STRATEGIES:
            path = args.out / name / strategy / "runs.csv"
            if not path.is_file():
                continue
            runs = pd.read_csv(path)
            unit = 10 ** max(0, len(str(int(runs["total_cost"].max()))) - 3)  # three digits
            rows.append(
                {
                    "cluster": name,
                    "strategy": strategy,
                    "balancing moves per run": " ".join(str(int(v)) for v in runs["balancing_moves"]),
                    "GiB moved per run": " ".join(f"{v / GIB:.0f}" for v in runs["balancing_bytes"]),
                    "max-min usage % per run (widest tier)": " ".join(f"{v:.1f}" for v in runs["usage_max_minus_min"]),
                    "max-min usage % per tier after the last run": " ".join(
                        f"{t} {v:.1f}" for t, v in sorted(usage_spread(path.parent, len(runs)).items())
                    ),
                    "total cost per run": f"(x {unit:.0e}) " + " ".join(f"{v / unit:.0f}" for v in runs["total_cost"]),
                    "moves in all": int(runs["balancing_moves"].sum()),
                    "GiB in all": f"{runs['balancing_bytes'].sum() / GIB:.0f}",
                }
            )
    print(
        f"{args.runs} runs, every queued load completing; jitter: run {JITTER_RUN}'s snapshot shows "
        f"{JITTER_LOADS} queued loads on hist {JITTER_SERVER} that fail"
    )
    print(pd.DataFrame(rows).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
