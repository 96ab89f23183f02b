"""Making millions of long-lived Python objects at once (the ``druid`` coordinator's run at a million
segments: a ``DataSegment`` per segment, replica counts per segment and tier, the holders' maps).

CPython's cyclic garbage collector runs a full collection whenever the objects that survived grow
by a quarter, and each one walks every object alive: making five million walks them again and
again, half of a build's time at 1M. :func:`cycle_collection_paused` pauses it for such a block;
reference counting frees what the block drops as before."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


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


def give_back_memory() -> None:
    """Return what a finished bulk task freed to the operating system: the objects it left in
    reference cycles collected, then pyarrow's memory pool's unused memory and, with glibc, the C
    heap's free pages (``malloc_trim``). A Spark Python worker
    lives on after its task, idle: without this it keeps the task's peak resident (gigabytes after
    a ``druid`` duty at 10M segments) beside the next task's and the driver's. Anything that cannot
    be returned stays; nothing raises."""
    import ctypes
    import ctypes.util

    gc.collect()
    try:
        import pyarrow as pa

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
