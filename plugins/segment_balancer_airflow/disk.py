"""Whether a run fits on the disk before it starts: the bytes it will write, estimated from its snapshot.

A run writes its work directory (the prepared tables and every stage's run state), its plan (with
``report.html``) and its segment groups as XCom objects, and a simulation writes a snapshot and a
plan per simulated run. ``benchmarks/bench_disk.py`` measures the peak of all of it against the
snapshot's uncompressed bytes (``benchmarks/README.md``, "bench_disk.py"): 5.1 MiB on
``druid_sample`` (mostly the report); that plus 0.61 × the uncompressed snapshot at 100k segments
and 0.51 × at 1M; each simulated run 6.2 MiB plus 0.47 × the snapshot (100k, 3 runs).
:func:`estimate_run_bytes` takes :data:`FIXED_BYTES` + :data:`PER_SNAPSHOT_BYTE` ×, and per
simulated run :data:`FIXED_PER_SIMULATED_RUN` + :data:`PER_SIMULATED_RUN` ×: a margin of a quarter
or more over what was measured. The other coordinator's plan of a compared run (the DAG param
``compare_with_druid``: its plan and run state, with the prepared tables shared) is counted as one
more simulated run, which writes a snapshot besides: an upper bound, not measured on its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FIXED_BYTES = 16 * 2**20
"""Bytes a run writes whatever its size (the report, the small tables): 5.1 MiB measured."""
PER_SNAPSHOT_BYTE = 0.75
"""Bytes a run writes per uncompressed byte of its snapshot (0.61 at 100k, 0.51 at 1M measured)."""
FIXED_PER_SIMULATED_RUN = 8 * 2**20
"""Bytes each simulated run writes whatever its size (its plan's report): 6.2 MiB measured."""
PER_SIMULATED_RUN = 0.75
"""Bytes each simulated run writes per uncompressed byte of the snapshot (its snapshot and plan): 0.47 measured."""


class NotEnoughRoom(Exception):
    """The run would not fit in the free space; the message is one line naming the path, the free
    bytes and the estimate."""


def uncompressed_bytes(path: Path) -> int:
    """The bytes of ``path`` once uncompressed: a ``.gz`` file's size from its gzip trailer (the
    last member's ISIZE, the size modulo 4 GiB, raised by 4 GiB steps to at least the compressed
    size), any other file's own size."""
    size = path.stat().st_size
    if path.suffix != ".gz" or size < 18:
        return size
    with path.open("rb") as fh:
        fh.seek(-4, 2)
        isize = int.from_bytes(fh.read(4), "little")
    while isize < size:
        isize += 2**32
    return isize


def snapshot_bytes(snapshot: Path) -> int:
    """The uncompressed bytes of every file of the snapshot directory (:func:`uncompressed_bytes`)."""
    return sum(uncompressed_bytes(p) for p in Path(snapshot).iterdir() if p.is_file())


def estimate_run_bytes(snapshot: Path, simulate_runs: int = 0, compare: bool = False) -> int:
    """The bytes a run on ``snapshot`` with ``simulate_runs`` simulated runs (and the other
    coordinator's plan when ``compare``) is estimated to write at its peak (module docstring)."""
    raw = snapshot_bytes(snapshot)
    runs = max(0, simulate_runs) + int(compare)
    return int(FIXED_BYTES + raw * PER_SNAPSHOT_BYTE + runs * (FIXED_PER_SIMULATED_RUN + raw * PER_SIMULATED_RUN))


def check_room(home: Path, snapshot: Path, simulate_runs: int = 0, compare: bool = False) -> int:
    """Raise :class:`NotEnoughRoom` unless the file system of ``home`` (its nearest existing
    directory) has the bytes :func:`estimate_run_bytes` gives free; returns the estimate."""
    estimate = estimate_run_bytes(snapshot, simulate_runs, compare)
    where = Path(home)
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    if free < estimate:
        runs = f" with {simulate_runs} simulated runs" if simulate_runs > 0 else ""
        raise NotEnoughRoom(
            f"{where} has {_gib(free)} free, and a run on {snapshot}{runs} is estimated to write "
            f"{_gib(estimate)} there: free some space (or let retention remove old plans) and "
            "trigger again"
        )
    return estimate


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB ({n:,} bytes)"
