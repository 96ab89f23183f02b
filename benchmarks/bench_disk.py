"""What a DAG run writes and leaves on disk, against the size of its snapshot.

Each run is ``airflow dags test segment_balancing`` on one snapshot in a fresh Airflow home
(``bench_overhead.run_dag``, on a warm Spark Connect server), with ``$SEGMENT_BALANCER_HOME`` =
``tmp/var``. While it runs, every second, the bytes (apparent file sizes) under each area of that
home are summed: ``runs/`` (work directories), ``plans/`` (published plans), ``xcom/`` (the
object-storage XCom of the segment groups) and ``airflow_home/logs/`` (task logs). The table gives
the snapshot's uncompressed bytes, the peak of the four areas together during the run and their
ratio to the snapshot (what ``resolve_snapshot``'s disk check estimates, ``plugins/segment_balancer_airflow/disk.py``),
and what each area holds once the run ended. Inputs as ``bench_scale.py`` (``druid_sample`` or a
number of ``generate``'d segments, cached under ``--cache``). Usage::

    .venv/bin/python benchmarks/bench_disk.py [--sizes druid_sample 100000 1000000]

The output for this machine is kept in ``benchmarks/README.md``; never a timed assertion in a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_overhead  # noqa: E402
from bench_overhead import ROOT, SNAPSHOTS, snapshot_for, start_server  # noqa: E402

sys.path.insert(0, str(ROOT / "plugins"))

from segment_balancer.common.files import tree_bytes  # noqa: E402
from segment_balancer_airflow.disk import snapshot_bytes  # noqa: E402

AREAS = ("runs", "plans", "xcom", "airflow_home/logs")
SAMPLE_EVERY = 1.0


class DiskWatch(bench_overhead.Watch):
    """``bench_overhead.Watch`` that also samples the bytes of :data:`AREAS` under ``var`` every
    :data:`SAMPLE_EVERY` seconds: ``peak`` of their sum during the run, ``left`` per area after."""

    def __init__(self, extra_pids=None, var: Path | None = None):
        super().__init__(extra_pids)
        self.var, self.disk_peak, self.disk_at = var, 0, 0.0

    def areas(self) -> dict[str, int]:
        return {area: tree_bytes(self.var / area) for area in AREAS}

    def sample(self, proc) -> None:
        super().sample(proc)
        if time.monotonic() - self.disk_at >= SAMPLE_EVERY:
            self.disk_at = time.monotonic()
            self.disk_peak = max(self.disk_peak, sum(self.areas().values()))


def mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["druid_sample", "100000", "1000000"])
    parser.add_argument("--simulate-runs", type=int, default=0, help="the simulate_runs param of every run")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_disk-") as tmp:
        tmp = Path(tmp)
        server, seconds = start_server(tmp)
        print(f"Spark Connect server started and answering in {seconds:.1f} s", file=sys.stderr)
        try:
            bench_overhead.run_cli(SNAPSHOTS / "druid_sample", "connect", tmp / "warm", server, args.timeout)
            for name in args.sizes:
                snap = snapshot_for(name, args.cache)
                run = bench_overhead.run_dag(
                    snap,
                    "connect",
                    tmp / name,
                    server,
                    args.timeout,
                    DiskWatch,
                    {"simulate_runs": args.simulate_runs} if args.simulate_runs else None,
                )
                watch = run["watch"]
                watch.disk_peak = max(watch.disk_peak, sum(watch.areas().values()))
                rows.append((name, snapshot_bytes(snap), watch.disk_peak, watch.areas(), run["wall"]))
                print(f"done: {name}: {run['wall']:.1f} s", file=sys.stderr, flush=True)
        finally:
            server.stop()
    runs = f", simulate_runs {args.simulate_runs}" if args.simulate_runs else ""
    print(f"snapshot MiB: uncompressed (disk.snapshot_bytes){runs}")
    print(
        f"{'input':<14} {'snapshot MiB':>12} {'peak MiB':>9} {'peak/snap':>9} "
        + " ".join(f"{'left ' + a.split('/')[-1] + ' MiB':>15}" for a in AREAS)
        + f" {'wall s':>7}"
    )
    for name, snap, peak, left, wall in rows:
        print(
            f"{name:<14} {mib(snap):>12} {mib(peak):>9} {peak / snap:>9.2f} "
            + " ".join(f"{mib(left[a]):>15}" for a in AREAS)
            + f" {wall:>7.1f}"
        )


if __name__ == "__main__":
    main()
