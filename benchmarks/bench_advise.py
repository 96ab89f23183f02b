"""The advisor at scale: ``python -m segment_balancer advise`` on a generated cluster in a fresh
process, as a user runs it (default grid, 16 candidates, ``--runs`` runs each, #7458 beside them),
timed phase by phase from its log, with the peak resident memory of its process tree (the CLI, the
JVM and Spark's Python workers), sampled every 0.5 s. Usage::

    .venv/bin/python benchmarks/bench_advise.py --snapshot DIR [--runs 10] [--out DIR] [-- extra advise options]

The output for this machine is kept in ``benchmarks/README.md`` and ``docs/ADVISOR.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

GIB = 1 << 30


def tree_rss(root: psutil.Process) -> int:
    """Bytes resident in ``root`` and every process under it."""
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench-advise")
    args, extra = parser.parse_known_args()
    command = [sys.executable, "-m", "segment_balancer", "advise", "--snapshot", str(args.snapshot)]
    command += ["--out", str(args.out), "--runs", str(args.runs), *[a for a in extra if a != "--"]]
    started = time.monotonic()
    stamps: dict[str, float] = {}
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    peak, done = [0], threading.Event()

    def sample():
        root = psutil.Process(proc.pid)
        while not done.wait(0.5):
            try:
                peak[0] = max(peak[0], tree_rss(root))
            except psutil.Error:
                return

    threading.Thread(target=sample, daemon=True).start()
    for line in proc.stderr:
        for mark in ("simulating", "the same"):
            if mark in line and mark not in stamps:
                stamps[mark] = time.monotonic() - started
    proc.wait()
    done.set()
    total = time.monotonic() - started
    stage0 = stamps.get("simulating", total)
    candidates_end = stamps.get("the same", total)
    print("| snapshot | runs | stage 0 (s) | candidates (s) | #7458 (s) | total (s) | peak RSS (GiB) | exit |")
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.snapshot.name} | {args.runs} | {stage0:.0f} | {candidates_end - stage0:.0f} | "
        f"{total - candidates_end:.0f} | {total:.0f} | {peak[0] / GIB:.2f} | {proc.returncode} |"
    )
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
