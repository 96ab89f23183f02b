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
