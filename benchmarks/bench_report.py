"""How long building ``report.html`` takes, and how large it is, as the cluster grows.

The report reads only the plan's ``summary.json`` (never the segment tables), so its cost grows with
the historicals and tiers, not the segments. This takes the summary of a published plan (default:
the bundled ``druid_sample`` planned by the CLI into a temporary directory) and gives each of its
tiers N historicals (holdings spread evenly from the original ones), then times
``segment_balancer.plan.report.plan_report`` (best of three) and measures the HTML.

    .venv/bin/python benchmarks/bench_report.py [--plan PLAN_DIR] [--historicals 30 200 1000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def widened(summary: dict, per_tier: int) -> dict:
    """``summary`` with ``per_tier`` historicals in each tier, cycling over the tier's real rows."""
    out = dict(summary)
    rows = []
    for tier in sorted({r["tier"] for r in summary["servers"]}):
        real = [r for r in summary["servers"] if r["tier"] == tier]
        rows += [{**real[i % len(real)], "server": f"{tier}-hist-{i:04d}:8083"} for i in range(per_tier)]
    out["servers"] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, help="a published plan directory (default: druid_sample planned now)")
    parser.add_argument("--historicals", type=int, nargs="+", default=[30, 200, 1000], help="historicals per tier")
    args = parser.parse_args()

    from segment_balancer.plan.report import plan_report

    tmp = Path(tempfile.mkdtemp(prefix="bench_report-"))
    try:
        plan = args.plan
        if plan is None:
            from segment_balancer.spark.session import local_session
            from segment_balancer.tools.pipeline import run_plan

            spark = local_session("bench_report")
            plan = tmp / "druid_sample"
            run_plan(spark, REPO / "include/segment_balancer/snapshots/druid_sample", plan)
            spark.stop()
        summary = json.loads((plan / "summary.json").read_text())
        tiers = len({r["tier"] for r in summary["servers"]})
        print(f"{'historicals/tier':>16} {'tiers':>5} {'seconds':>8} {'MB':>6}")
        for n in args.historicals:
            work = tmp / f"plan-{n}"
            work.mkdir()
            (work / "summary.json").write_text(json.dumps(widened(summary, n)))
            shutil.copy(plan / "validation.json", work / "validation.json")
            best, html = float("inf"), ""
            for _ in range(3):
                start = time.perf_counter()
                html = plan_report(work)
                best = min(best, time.perf_counter() - start)
            print(f"{n:>16} {tiers:>5} {best:>8.2f} {len(html.encode()) / 1e6:>6.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
