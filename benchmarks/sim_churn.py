"""Churn against spread: balancing moves per run for margins of ``balancingMinCostReductionPercent``,
over ten simulated Coordinator runs of five clusters.

Clusters:

- ``druid_sample``: the bundled snapshot;
- ``generated-20k``: ``python -m segment_balancer generate --segments 20000`` (as ``bench_plan.py``:
  three tiers, two historicals lost, one decommissioning, one added empty; queue 500);
- Druid's ``BalancingStrategiesTest`` clusters (``tests/druid_simulation.py``; 1000 segments of
  500 MB, ``WIKI_10X100D``, one replica, historicals of 1 TB, unlimited queue): ``fresh`` (five
  empty historicals), ``added`` (four holding 250 each, round robin, and a fifth empty one),
  ``removed`` (four of five historicals holding 200 each: the fifth's are unreplicated).

Each cluster is simulated with ``simulate_margins`` (every queued load completes between runs) in
one Spark session, into ``--out/<cluster>/`` (each with its report: ``report.html`` charts the moves
per run by margin). Prints, per cluster and margin: balancing moves and GiB moved per run, the first
run from which no run moves (``-``: run 10 still moves), the final max − min of segments and of GiB
per historical per tier, and the total placement cost after run 10; then the default it
picks: the smallest margin with which every cluster has no balancing move from run 5
on, provided each cluster's final spread (segments and bytes, every tier) is within 10% of margin
0's (no more than 10% wider: a narrower spread is no loss). ``--report-only`` prints the table
from an earlier ``--out`` without simulating. Usage::

    .venv/bin/python benchmarks/sim_churn.py [--runs 10] [--margins 0,1,2,5,10] [--out DIR] [--only NAME,...]

The output for this machine is kept in ``docs/SIMULATION.md``.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the Druid simulation clusters

GIB = 1 << 30
CLUSTERS = ["druid_sample", "generated-20k", "fresh", "added", "removed"]
QUIET_BY = 5
SPREAD_TOLERANCE = 0.10


def build_clusters(cache: Path, only: set[str] | None) -> dict[str, Path]:
    """The snapshots, made once under ``cache``."""
    from druid_simulation import historical, wiki_segments, write_cluster

    out: dict[str, Path] = {}
    want = lambda name: not only or name in only  # noqa: E731
    if want("druid_sample"):
        out["druid_sample"] = ROOT / "include" / "segment_balancer" / "snapshots" / "druid_sample"
    if want("generated-20k"):
        snap = cache / "generated-20000"
        if not (snap / "snapshot.json").exists():
            subprocess.run(
                [sys.executable, "-m", "segment_balancer", "generate", str(snap), "--segments", "20000"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        out["generated-20k"] = snap
    wiki = wiki_segments()
    clusters = {
        "fresh": {historical(i): [] for i in range(5)},
        "added": {**{historical(i): [j for j in range(1000) if j % 4 == i] for i in range(4)}, historical(4): []},
        "removed": {historical(i): [j for j in range(1000) if j % 5 == i] for i in range(4)},
    }
    for name, served in clusters.items():
        if want(name):
            out[name] = write_cluster(cache / f"balancing-{name}", wiki, served)
    return out


def live_historicals(sim: Path, run: int) -> pd.DataFrame:
    """``run-NNN/historicals.csv`` of a simulation (segments and bytes per historical after ``run``)
    without the decommissioning historicals (as ``runs.csv`` leaves them out: they are being emptied)."""
    import json

    held = pd.read_csv(sim / f"run-{run:03d}" / "historicals.csv")
    servers = json.loads((sim / f"run-{run:03d}" / "plan" / "summary.json").read_text()).get("servers", [])
    return held[~held["server"].isin({s["server"] for s in servers if s["decommissioning"]})]


def per_tier_spread(sim: Path, run: int) -> dict[str, tuple[int, float]]:
    """``{tier: (max − min segments, max − min GiB)}`` over the live historicals after ``run``."""
    held = live_historicals(sim, run)
    return {
        tier: (int(p["segments"].max() - p["segments"].min()), (p["bytes"].max() - p["bytes"].min()) / GIB)
        for tier, p in held.groupby("tier")
    }


def margin_dir(out: Path, margin: float) -> Path:
    """Where ``simulate_margins`` put a margin's simulation (margin 0 is the simulation's own)."""
    from segment_balancer.plan.report import margin_name

    return out if margin == 0 else out / "margins" / margin_name(margin)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--margins", default="0,1,2,5,10")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-churn")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    parser.add_argument("--only", help="comma-separated cluster names")
    parser.add_argument("--report-only", action="store_true", help="read the simulations already in --out")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    margins = [float(m) for m in args.margins.split(",")]

    from segment_balancer.plan.report import MARGINS_FILE, margin_summary
    from segment_balancer.spark.session import get_session
    from segment_balancer.tools.simulate import simulate_margins

    results = {}
    if args.report_only:
        names = args.only.split(",") if args.only else CLUSTERS
        results = {
            n: pd.read_csv(args.out / n / MARGINS_FILE) for n in names if (args.out / n / MARGINS_FILE).is_file()
        }
    else:
        clusters = build_clusters(args.cache, set(args.only.split(",")) if args.only else None)
        spark = get_session("sim_churn")
        for name, snap in clusters.items():
            started = time.monotonic()
            results[name] = simulate_margins(
                spark, snap, args.out / name, args.runs, margins, {"balancingMinCostReductionPercent": 0}
            )
            print(
                f"{name}: {time.monotonic() - started:.0f} s for {len(margins)} × {args.runs} runs",
                file=sys.stderr,
                flush=True,
            )
        spark.stop()

    rows, verdict = [], {}
    for name, table in results.items():
        summary = {m["margin"]: m for m in margin_summary(table)}
        base = per_tier_spread(margin_dir(args.out / name, 0.0), args.runs)
        for margin in margins:
            part = table[table["margin"] == margin].sort_values("run")
            spread = per_tier_spread(margin_dir(args.out / name, margin), args.runs)
            s = summary[margin]
            quiet = s["quiet_from"] is not None and s["quiet_from"] <= QUIET_BY
            # "within 10% of margin 0's": no more than 10% wider (a narrower spread is no loss)
            close = all(
                spread[t][0] <= (1 + SPREAD_TOLERANCE) * base[t][0]
                and spread[t][1] <= (1 + SPREAD_TOLERANCE) * base[t][1]
                for t in base
            )
            verdict.setdefault(margin, []).append(quiet and close)
            rows.append(
                {
                    "cluster": name,
                    "margin %": f"{margin:g}",
                    "balancing moves per run": " ".join(str(int(v)) for v in part["balancing_moves"]),
                    "GiB moved per run": " ".join(f"{v / GIB:.0f}" for v in part["balancing_bytes"]),
                    "no move from run": s["quiet_from"] or "-",
                    "final max-min segments per tier": " ".join(f"{t} {v[0]}" for t, v in sorted(spread.items())),
                    "final max-min GiB per tier": " ".join(f"{t} {v[1]:.1f}" for t, v in sorted(spread.items())),
                    "total cost": f"{s['total_cost']:.6g}",
                    "rule": "yes" if quiet and close else ("quiet" if quiet else ("close" if close else "no")),
                }
            )
    frame = pd.DataFrame(rows)
    print(f"{args.runs} runs, every load completing; margins {args.margins}")
    print(frame.to_markdown(index=False))
    chosen = next((m for m in sorted(margins) if all(verdict[m])), None)
    print()
    print(
        f"rule: smallest margin with no balancing move from run {QUIET_BY} on in every cluster and each final spread "
        f"within {SPREAD_TOLERANCE:.0%} of margin 0's: {'none of ' + args.margins if chosen is None else f'{chosen:g}'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
