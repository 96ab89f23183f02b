"""The advice on real shapes (docs/ADVISOR.md): ``advise`` with the default grid of candidate configs
and ten runs on each cluster of ``sim_coordinators.py`` (the bundled snapshot, Druid's
``BalancingStrategiesTest`` clusters, the heterogeneous, near-full and bimodal (#19288) ones, the
generated 20k cluster) and on a rolling restart (the ``fresh`` cluster loaded, two replicas, one
historical away for run 1, then back).

Per cluster: the recommended candidate and what it changes, and, for it, for the snapshot's own
config and for #7458: runs until loaded, bytes moved, the widest max − min disk % after the runs
and the fullest disk during them. ``--report-only`` prints the table from an earlier ``--out``;
a cluster with its ``advice.json`` is not advised again. Usage::

    .venv/bin/python benchmarks/advise_clusters.py [--runs 10] [--out DIR] [--only NAME,...] [--report-only]

The output for this machine is kept in ``docs/ADVISOR.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the Druid simulation clusters
sys.path.insert(0, str(ROOT / "benchmarks"))  # sim_coordinators' clusters

import sim_coordinators  # noqa: E402
from druid_simulation import T1, historical, wiki_segments, write_cluster  # noqa: E402

from segment_balancer.plan.layout import ADVICE_FILE  # noqa: E402
from segment_balancer.spark.session import get_session  # noqa: E402
from segment_balancer.tools.advise import advise  # noqa: E402

ROLLING = "rolling-restart"
CLUSTERS = [*sim_coordinators.CLUSTERS, ROLLING]
GIB = 1 << 30


def rolling_restart(cache: Path) -> Path:
    """Five 1 TB historicals holding Druid's 1000 ``wiki`` segments twice (400 replicas each)."""
    served = {historical(i): [j for j in range(1000) if i in (j % 5, (j + 1) % 5)] for i in range(5)}
    rules = {"_default": [{"type": "loadForever", "tieredReplicants": {T1: 2}}]}
    return write_cluster(cache / "advise-rolling-restart", wiki_segments(), served, rules=rules)


def row(name: str, advice: dict, seconds: float | None) -> dict:
    current = next(c for c in advice["candidates"] if c["current"])
    chosen, other = advice["recommended"], advice.get("issue7458") or {}

    def of(r: dict) -> str:
        loaded = "—" if r.get("runs_to_loaded") is None else r["runs_to_loaded"]
        return (
            f"{loaded} / {r.get('bytes_moved', 0) / GIB:.0f} / {r.get('max_minus_min_disk_pct', 0):.1f}"
            f" / {r.get('peak_fullest_disk_pct', 0):.1f}"
        )

    change = {**advice["config_diff"], **advice["restart_keys"]}
    return {
        "cluster": name,
        "recommended": "the snapshot's own" if chosen["current"] else chosen["name"],
        "changes": ", ".join(f"{k.rsplit('.', 1)[-1]}={json.dumps(v)}" for k, v in change.items()) or "—",
        "own config": of(current),
        "recommended ": of(chosen),
        "#7458": of(other) if other else "—",
        "seconds": "—" if seconds is None else f"{seconds:.0f}",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-advise")
    parser.add_argument("--only", help="comma-separated cluster names")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    only = set(args.only.split(",")) if args.only else set(CLUSTERS)
    cache = args.out / "clusters"
    rows, spark = [], None
    for name in [c for c in CLUSTERS if c in only]:
        out = args.out / name
        seconds = None
        if not (out / ADVICE_FILE).is_file() and not args.report_only:
            if name == ROLLING:
                snapshot, restart = rolling_restart(cache), [historical(0)]
            else:
                snapshot, restart = sim_coordinators.build_clusters(cache, {name})[name], []
            spark = spark or get_session("advise_clusters")
            started = time.monotonic()
            advise(spark, snapshot, out, runs=args.runs, restart=restart)
            seconds = time.monotonic() - started
            print(f"{name}: {seconds:.0f} s", file=sys.stderr, flush=True)
        if (out / ADVICE_FILE).is_file():
            rows.append(row(name, json.loads((out / ADVICE_FILE).read_text()), seconds))
    if not rows:
        return 1
    print("runs to loaded / GiB moved / max − min disk % after / peak fullest disk %, over", args.runs, "runs\n")
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for r in rows:
        print("| " + " | ".join(str(v) for v in r.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
