"""Making millions of long-lived Python objects at once (the ``druid`` coordinator's run at a million
segments: a ``DataSegment`` per segment, replica counts per segment and tier, the holders' maps).

CPython's cyclic garbage collector runs a full collection whenever the objects that survived grow
by a quarter, and each one walks every object alive: making five million walks them again and
again, half of a build's time at 1M. :func:`cycle_collection_paused` pauses it for such a block;
reference counting frees what the block drops as before."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (reference counting goes on); on exit it
    runs again as it did (a block inside another leaves it paused), and its next collection takes
    what the block left in reference cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


GIVE_BACK_ABOVE_BYTES = 1 << 30
"""The resident size above which :func:`give_back_memory` gives memory back: a process below it
keeps its heap (giving back costs the next task its first touch of the pages again)."""


def resident_bytes() -> int | None:
    """This process's resident set size, bytes (Linux ``/proc/self/statm``); None where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def give_back_memory() -> None:
    """Return what a finished bulk task freed to the operating system: the objects it left in
    reference cycles collected, then pyarrow's memory pool's unused memory and, with glibc, the C
    heap's free pages (``malloc_trim``). A Spark Python worker
    lives on after its task, idle: without this it keeps the task's peak resident (gigabytes after
    a ``druid`` duty at 10M segments) beside the next task's and the driver's. Only above
    :data:`GIVE_BACK_ABOVE_BYTES` resident (or where the size is unknown). Anything that cannot be
    returned stays; nothing raises."""
    resident = resident_bytes()
    if resident is not None and resident <= GIVE_BACK_ABOVE_BYTES:
        return
    gc.collect()
    try:
        pa.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 (best effort: a pool without it keeps its memory)
        pass
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
    except OSError:
        pass
