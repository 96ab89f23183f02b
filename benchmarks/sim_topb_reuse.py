"""The seed's open doubt, measured: reusing a segment's top ``B`` between stages (ALGORITHM.md, the
default ``topBReuse: true``) against ranking it afresh every time a stage considers it
(``topBReuse: false``), over many Coordinator runs of the simulator.

For each setting it runs ``python -m segment_balancer simulate`` on a generated cluster (cached
under ``--cache``, as ``bench_plan.py`` makes them: three tiers, two historicals lost, one
decommissioning, one added empty, ``maxSegmentsInNodeLoadingQueue`` 500; every queued load
completes between runs) for ``--runs`` runs and prints one row per setting: the first stable run
(no load, no balancing move; ``-`` if none), loads and balancing moves over all runs, the largest
max − min of segments per historical over the tiers after the last run, and the mean plan seconds
per run. Usage::

    .venv/bin/python benchmarks/sim_topb_reuse.py [--segments 20000] [--runs 6]

The output for this machine is kept in ``docs/SIMULATION.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    args = parser.parse_args()
    snap = args.cache / f"generated-{args.segments}"
    if not (snap / "snapshot.json").exists():
        subprocess.run(
            [sys.executable, "-m", "segment_balancer", "generate", str(snap), "--segments", str(args.segments)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    rows = []
    with tempfile.TemporaryDirectory(prefix="sim_topb_reuse-") as tmp:
        for reuse in (True, False):
            config = Path(tmp) / f"reuse-{reuse}.json"
            config.write_text(json.dumps({"topBReuse": reuse}))
            out = Path(tmp) / f"sim-{reuse}"
            started = time.monotonic()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "segment_balancer",
                    "simulate",
                    "--snapshot",
                    str(snap),
                    "--runs",
                    str(args.runs),
                    "--out",
                    str(out),
                    "--config",
                    str(config),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return done.returncode
            wall = time.monotonic() - started
            runs = pd.read_csv(out / "runs.csv")
            stable = runs.loc[runs["stable"], "run"]
            rows.append(
                {
                    "topBReuse": str(reuse).lower(),
                    "first stable run": int(stable.iloc[0]) if len(stable) else "-",
                    "loads": int(runs["loads"].sum()),
                    "balancing moves": int(runs["balancing_moves"].sum()),
                    "max-min after": int(runs["segments_max_minus_min"].iloc[-1]),
                    "max-min per run": " ".join(str(v) for v in runs["segments_max_minus_min"]),
                    "s per run": round(wall / args.runs, 1),
                }
            )
    print(f"{args.segments} segments, {args.runs} runs")
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
