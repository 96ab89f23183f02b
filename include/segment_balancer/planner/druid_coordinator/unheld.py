"""The served segments a balancing run does not hold as objects, and Druid's reservoir sampler on
them (Druid 35.0.0 and 38.0.0 ``BalanceSegments``, ``ReservoirSegmentSampler``;
docs/DRUID_COORDINATOR.md "Balancing on the segments it moves").

A tier's ``BalanceSegments`` reads every segment a historical serves only to count it (its
projections, bytes and segments per datasource, which the cost strategy and the segments to move
are computed from) and to draw the few it moves from them. A run built for balancing holds as
objects the segments queued on the tier and those earlier duties acted on; every other served
segment is a row of :class:`UnheldServed`, counted into each historical at once
(:class:`UnheldShare`) and made an object only when the sampler picks it
(:meth:`UnheldServed.segment`), which then puts it on every historical of the run serving it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

MAX_DRAW_BOUND = (1 << 32) - 1
"""The largest bound :func:`randrange_stream` draws below (one 32-bit word per try)."""


@dataclass
class UnheldShare:
    """What one historical serves that its run does not hold: ``count`` segments, ``bytes``, and
    how many per interval (``intervals``: (start_ms, end_ms) -> n) and per datasource and interval
    (``datasource_intervals``: (datasource, start_ms, end_ms) -> n), as the holder's projections
    count them."""

    count: int = 0
    bytes: int = 0
    intervals: Counter = field(default_factory=Counter)
    datasource_intervals: Counter = field(default_factory=Counter)


class UnheldServed:
    """The served segments of a run's historicals, held or not, as rows ``0 .. n-1``.

    ``make``: the ``DataSegment`` of some rows (int64 array) in their order. ``held``: row -> the
    run's object of each row it holds. ``datasource_codes``: each row's datasource, int64 ``(n,)``
    into ``datasource_names``. ``used``: bool ``(n,)``. ``order``: per historical (name) its served rows in the
    order Druid's balancer walks them (datasource by datasource in the server's hash order of
    their names, each datasource's newest first: ``balancer.served_in_druid_order``), held rows
    included. ``servers``: per row not held, the names of the historicals serving it.
    """

    def __init__(
        self,
        make: Callable[[np.ndarray], list],
        held: dict[int, object],
        datasource_codes: np.ndarray,
        datasource_names: list[str],
        used: np.ndarray,
        order: dict[str, np.ndarray],
        servers: dict[int, list[str]],
    ):
        self._make, self._held, self.used = make, dict(held), used
        self.datasource_codes, self.datasource_names = datasource_codes, datasource_names
        self.order, self._servers = order, servers
        self._rows = {segment.id: row for row, segment in self._held.items()}
        self.on_segment: Callable[[object, int, list[str]], None] | None = None
        """Called with each segment made, its row and the historicals serving it (the run's own
        bookkeeping)."""

    @property
    def used_datasources(self) -> set[str]:
        """The datasources of the used rows."""
        return {self.datasource_names[c] for c in np.unique(self.datasource_codes[self.used]).tolist()}

    def row_of(self, segment) -> int | None:
        """The row of a held or made segment, None for another."""
        return self._rows.get(segment.id)

    def segment(self, row: int):
        """The run's object of ``row``: held, made before, or made now and handed to
        :attr:`on_segment` with the historicals serving it."""
        found = self._held.get(row)
        if found is None:
            found = self._held[row] = self._make(np.array([row], dtype=np.int64))[0]
            self._rows[found.id] = row
            if self.on_segment is not None:
                self.on_segment(found, row, self._servers.get(row, []))
        return found


def randrange_stream(rng: random.Random, bounds: np.ndarray) -> np.ndarray:
    """``[rng.randrange(b) for b in bounds]`` (CPython's ``_randbelow_with_getrandbits``: a 32-bit
    word per try, its top ``b.bit_length()`` bits, tried again while not below ``b``), drawn from
    the same Mersenne Twister words in bulk, ``rng`` left where those calls leave it. int64 ``(n,)``.

    Raises:
        ValueError: a bound below 1 or above :data:`MAX_DRAW_BOUND`.
    """
    bounds = np.asarray(bounds, dtype=np.int64)
    if not len(bounds):
        return np.zeros(0, dtype=np.int64)
    if bounds.min() < 1 or bounds.max() > MAX_DRAW_BOUND:
        raise ValueError(f"bounds must be within [1, {MAX_DRAW_BOUND}]")
    version, internal, gauss = rng.getstate()
    start = {
        "bit_generator": "MT19937",
        "state": {"key": np.array(internal[:-1], dtype=np.uint32), "pos": internal[-1]},
    }
    words_of = np.random.MT19937()
    words_of.state = start
    shifts = (32 - np.frexp(bounds.astype(np.float64))[1]).tolist()  # 32 - each bound's bit length
    limits = bounds.tolist()
    words = words_of.random_raw(2 * len(limits) + 64).tolist()
    out = [0] * len(limits)
    taken = 0
    for i, (limit, shift) in enumerate(zip(limits, shifts)):
        while True:
            if taken == len(words):
                words += words_of.random_raw(len(limits) + 64).tolist()
            drawn = words[taken] >> shift
            taken += 1
            if drawn < limit:
                break
        out[i] = drawn
    words_of.state = start
    words_of.random_raw(taken)
    after = words_of.state["state"]
    rng.setstate((version, (*(int(w) for w in after["key"]), int(after["pos"])), gauss))
    return np.array(out, dtype=np.int64)


def reservoir(count: int, most: int, rng: random.Random) -> np.ndarray:
    """The positions ``0 .. count-1`` a one-pass reservoir of ``most`` keeps (the first ``most``,
    then each later position ``i`` replacing slot ``rng.randrange(i + 1)`` when below ``most``), in
    slot order, drawing as that pass draws: int64 ``(min(count, most),)``."""
    kept = np.arange(min(count, most), dtype=np.int64)
    if count <= most:
        return kept
    later = np.arange(most, count, dtype=np.int64)
    slots = randrange_stream(rng, later + 1)
    hits = np.flatnonzero(slots < most)
    # each slot keeps the last position that drew it: the first in reverse
    drawn, positions = slots[hits][::-1], later[hits][::-1]
    slot, first = np.unique(drawn, return_index=True)
    kept[slot] = positions[first]
    return kept


def candidate_rows(
    unheld: UnheldServed,
    sources: Sequence,
    broadcast_datasources: set[str],
    excluded: Callable[[object, object], bool],
) -> tuple[np.ndarray, np.ndarray]:
    """The sampler's candidates over ``sources`` (holders, in order), each one's served rows in
    :attr:`UnheldServed.order`: rows of a broadcast datasource left out, and the held rows
    ``excluded(holder, segment)`` says (a move away queued). ``(holder index, row)`` int64 arrays."""
    holders, rows = [], []
    names = unheld.datasource_names
    broadcast = np.array([c for c, name in enumerate(names) if name in broadcast_datasources], dtype=np.int64)
    for k, holder in enumerate(sources):
        mine = unheld.order.get(holder.name, np.zeros(0, dtype=np.int64))
        if len(broadcast) and len(mine):
            mine = mine[~np.isin(unheld.datasource_codes[mine], broadcast)]
        drop = [
            row
            for segment in list(holder.actions)
            if excluded(holder, segment) and (row := unheld.row_of(segment)) is not None
        ]
        if drop:
            mine = mine[~np.isin(mine, np.array(drop, dtype=np.int64))]
        holders.append(np.full(len(mine), k, dtype=np.int64))
        rows.append(mine)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(holders), np.concatenate(rows)
