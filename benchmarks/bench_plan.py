"""Wall time, peak memory and Spark jobs of a whole plan through the CLI, per cluster size.

For each size it generates (once, cached under ``--cache``) a snapshot shaped like a cluster after an
incident (``python -m segment_balancer generate --segments N``: three tiers, two historicals lost, one
decommissioning, one added empty, ``maxSegmentsInNodeLoadingQueue`` 500; historicals default to one
per 5,000 segments, at least 30), then runs ``python -m segment_balancer plan`` in a child process and
measures:

- wall seconds of every application (``timings.json`` of the work directory) and of the whole run;
- peak resident memory of the whole process tree (the CLI's Python, the driver JVM, Python workers),
  sampled every 0.5 s with psutil;
- operations in the plan, and Spark jobs started (counted in the Spark event log, written to a
  temporary directory through ``SPARK_CONF_DIR``).

A run longer than ``--timeout`` seconds is stopped and reported unfinished, with the applications it
completed. Usage::

    .venv/bin/python benchmarks/bench_plan.py [--sizes 20000 100000 1000000] [--timeout 2400]

(10M on request: ``--sizes 10000000``.) Prints two tables (whole runs; seconds per application); the
output for this machine is kept in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from segment_balancer.common.files import replace_path, sibling_tmp

ROOT = Path(__file__).resolve().parent.parent


def snapshot_for(n: int, cache: Path) -> Path:
    """The generated snapshot of ``n`` segments, generated into ``cache`` once."""
    out = cache / f"generated-{n}"
    if not (out / "snapshot.json").exists():
        tmp = sibling_tmp(out)
        subprocess.run(
            [sys.executable, "-m", "segment_balancer", "generate", str(tmp), "--segments", str(n)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        replace_path(tmp, out)
    return out


def _tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of ``proc`` and all its descendants (0 for those that ended meanwhile)."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_plan(snapshot: Path, timeout: float) -> dict:
    """Run the CLI's ``plan`` on ``snapshot``; return wall, peak RSS, per-app seconds, ops, jobs."""
    with tempfile.TemporaryDirectory(prefix="bench_plan-") as tmp:
        tmp = Path(tmp)
        events, conf = tmp / "events", tmp / "conf"
        events.mkdir()
        conf.mkdir()
        (conf / "spark-defaults.conf").write_text(
            f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
            "spark.eventLog.compress false\nspark.eventLog.rolling.enabled false\n"
        )
        env = dict(os.environ, SPARK_CONF_DIR=str(conf))
        work, out = tmp / "work", tmp / "plan"
        cmd = [
            sys.executable,
            "-m",
            "segment_balancer",
            "plan",
            "--snapshot",
            str(snapshot),
            "--out",
            str(out),
            "--work",
            str(work),
        ]
        started = time.monotonic()
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "stderr", "w"))
        proc, peak, finished = psutil.Process(child.pid), 0, True
        while child.poll() is None:
            peak = max(peak, _tree_rss(proc))
            if time.monotonic() - started > timeout:
                for p in [*proc.children(recursive=True), proc]:
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                child.wait()
                finished = False
                break
            time.sleep(0.5)
        wall = time.monotonic() - started
        if finished and child.returncode != 0:
            raise RuntimeError(f"plan failed ({child.returncode}):\n{(tmp / 'stderr').read_text()[-3000:]}")
        timings_path = work / "timings.json"
        timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
        jobs = sum(
            line.count('"Event":"SparkListenerJobStart"')
            for log in events.rglob("*")
            if log.is_file()
            for line in open(log, errors="replace")
        )
        ops = json.loads((out / "summary.json").read_text())["operations"] if finished else None
        return {
            "wall": wall,
            "finished": finished,
            "peak_rss": peak,
            "apps": {k: v["seconds"] for k, v in timings.items()},
            "ops": ops,
            "jobs": jobs,
        }


def _historicals(snapshot: Path) -> int:
    servers = json.loads((snapshot / "servers.json").read_text())
    return sum(s["server_type"] == "historical" for s in servers)


def _segments(snapshot: Path) -> int:
    import gzip

    with gzip.open(snapshot / "segments.jsonl.gz", "rb") as lines:
        return sum(1 for _ in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000, 1_000_000])
    parser.add_argument("--timeout", type=float, default=2400.0, help="seconds before a run is stopped")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "include"))
    from segment_balancer.planner.coordinators import ISSUE7458

    args.cache.mkdir(parents=True, exist_ok=True)
    results = []
    for n in args.sizes:
        snap = snapshot_for(n, args.cache)
        results.append((_segments(snap), _historicals(snap), run_plan(snap, args.timeout)))
        seg, hist, r = results[-1]
        print(f"done: {seg} segments, {hist} historicals, {r['wall']:.0f} s", file=sys.stderr, flush=True)

    print(f"{'segments':>10} {'historicals':>11} {'wall s':>8} {'peak GiB':>9} {'operations':>10} {'spark jobs':>10}")
    for seg, hist, r in results:
        wall = f"{r['wall']:.0f}" if r["finished"] else f">{r['wall']:.0f}"
        ops = "unfinished" if r["ops"] is None else str(r["ops"])
        print(f"{seg:>10} {hist:>11} {wall:>8} {r['peak_rss'] / 2**30:>9.2f} {ops:>10} {r['jobs']:>10}")
    print()
    print(f"{'application':<28}" + "".join(f"{seg:>12}" for seg, _, _ in results))
    for app in ISSUE7458.run_apps:
        cells = [r["apps"].get(app) for _, _, r in results]
        print(f"{app:<28}" + "".join(f"{'-' if c is None else f'{c:.1f}':>12}" for c in cells))


if __name__ == "__main__":
    main()
