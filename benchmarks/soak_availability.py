"""The availability soak: 200 random clusters, each planned for 3 runs in a row while a
fifth of the loads fail, every run's plan completed in 22 orders (20 random, 2 adversarial) and
checked after every step: no used segment with a load rule that was served loses its last replica,
no independent drop leaves a segment below ``required``, no historical goes over ``max_size``
(``tests/soak.py`` says how the clusters are made and what is checked).

Resumable: each cluster's figures are kept in ``OUT/results/cluster-NNNN.json`` and a cluster with
figures is not planned again, so an interrupted soak goes on where it stopped. ``--workers N`` runs
N processes (each a local Spark session on one core) over disjoint clusters. Prints the table
committed in docs/SIMULATION.md. Usage::

    .venv/bin/python benchmarks/soak_availability.py --out var/soak [--clusters 200] [--runs 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # soak.py: the clusters and the checker

from segment_balancer.common.files import write_json_atomic  # noqa: E402


def work(seeds: list[int], runs: int, out: Path, orders: int, failure_rate: float) -> None:
    """Plan and check the clusters ``seeds`` without figures yet, writing each one's figures."""
    from soak import soak

    from segment_balancer.spark.session import local_session

    spark = local_session("segment_balancer.soak")
    results = out / "results"
    results.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        path = results / f"cluster-{seed:04d}.json"
        if path.exists():
            continue
        began = time.perf_counter()
        tally = soak(spark, range(seed, seed + 1), runs, out / "clusters", orders=orders, failure_rate=failure_rate)
        figures = {
            "seed": seed,
            "runs": tally.runs,
            "operations": tally.operations,
            "orders": tally.orders,
            "steps": tally.steps,
            "violations": tally.violations,
            "seconds": round(time.perf_counter() - began, 1),
        }
        write_json_atomic(figures, path)
        print(f"cluster {seed}: {tally.operations} operations, {len(tally.violations)} violations", flush=True)


def table(out: Path, clusters: int) -> str:
    rows = [json.loads(p.read_text()) for p in sorted((out / "results").glob("cluster-*.json"))]
    rows = [r for r in rows if r["seed"] < clusters]
    total = lambda key: sum(r[key] for r in rows)  # noqa: E731
    violations = [v for r in rows for v in r["violations"]]
    lines = [
        "| clusters | runs | operations | orders tried | steps checked | violations |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {len(rows)} | {total('runs')} | {total('operations'):,} | {total('orders'):,} | {total('steps'):,} | "
        f"{len(violations)} |",
    ]
    if violations:
        lines += ["", "First violations:", *[f"- {v}" for v in violations[:10]]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "soak")
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--orders", type=int, default=20, help="random orders per run (and 2 adversarial)")
    parser.add_argument("--failure-rate", type=float, default=0.2)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seeds", help=argparse.SUPPRESS)  # a worker's share: comma-separated
    args = parser.parse_args()
    if args.seeds is not None:
        work([int(s) for s in args.seeds.split(",") if s], args.runs, args.out, args.orders, args.failure_rate)
        return
    seeds = list(range(args.clusters))
    began = time.perf_counter()
    if args.workers <= 1:
        work(seeds, args.runs, args.out, args.orders, args.failure_rate)
    else:
        env = {**os.environ, "SPARK_MASTER": "local[1]"}
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--out",
                    str(args.out),
                    "--runs",
                    str(args.runs),
                    "--orders",
                    str(args.orders),
                    "--failure-rate",
                    str(args.failure_rate),
                    "--seeds",
                    ",".join(map(str, seeds[i :: args.workers])),
                ],
                env=env,
            )
            for i in range(args.workers)
        ]
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("a worker failed")
    print(
        f"\n{args.clusters} clusters x {args.runs} runs, loads failing at {args.failure_rate:.0%} "
        f"({time.perf_counter() - began:,.0f} s this time)\n"
    )
    print(table(args.out, args.clusters))


if __name__ == "__main__":
    main()
