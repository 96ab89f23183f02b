"""Druid's balancer strategies, one run's use of them (Druid 35.0.0 and 38.0.0 ``CostBalancerStrategy``,
``DiskNormalizedCostBalancerStrategy``, ``RandomBalancerStrategy``; docs/DRUID_COORDINATOR_NOTES.md
§6). The strategy is the Coordinator's runtime property ``druid.coordinator.balancer.strategy``
(default ``cost``; ``cachingCost`` runs as ``cost``, as it does in Druid). Druid 38.0.0 rewrote
``diskNormalized`` (#19303, #19422, #19663): :class:`DiskNormalized38Strategy`.

Costs are Druid's (``planner.cost``), summed exactly: Druid adds them in a hash map's order, which no
snapshot can reproduce, so two servers of equal contents tie here where Druid's rounding may split
them. A strategy's list of servers is Druid's priority-queue array, not a sorted list: only its first
server is the cheapest (:func:`heap_order`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence

import numpy as np

from segment_balancer.druid.releases import REPRODUCED_RELEASES
from segment_balancer.planner.config_keys import DRUID_BY_NAME
from segment_balancer.planner.cost import (
    COST_WINDOW_MS,
    ETERNITY_END_MS,
    ETERNITY_START_MS,
    exact_gathered_sums,
    exact_sums,
    exact_wide_sums,
    joint_cost_same,
)
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    SegmentAction,
    ServerHolder,
    stacked_dense_counts,
)

STRATEGIES = ("cost", "cachingCost", "diskNormalized", "random")
"""The names ``druid.coordinator.balancer.strategy`` takes."""
DEFAULT_STRATEGY = "cost"
STRATEGY_KEY = "druid.coordinator.balancer.strategy"
"""The runtime property that names the balancer strategy (read at the Coordinator's start)."""
THRESHOLD_KEY = "druid.coordinator.balancer.diskNormalized.utilizationThreshold"
DEFAULT_THRESHOLD = DRUID_BY_NAME[THRESHOLD_KEY].default


def self_cost(segment: DataSegment) -> float:
    """Druid's ``intervalCost`` of a segment's interval with itself (one datasource's weight)."""
    return float(joint_cost_same(segment.start_ms, segment.end_ms, segment.start_ms, segment.end_ms, False))


def placement_cost(segment: DataSegment, holder: ServerHolder) -> float:
    """Druid's ``computePlacementCost``: the joint cost of ``segment`` with every segment the server
    projects in ``[start - 45 days, end + 45 days)`` (those of its datasource twice), less twice its
    self cost when the server projects it."""
    return placement_costs(segment, [holder])[0]


DENSE_CELLS_AT_MOST = 1 << 24
"""The holders' dense interval counts (:meth:`ServerHolder.dense_interval_counts`, int64: 128 MiB)
:func:`placement_costs` keeps at most, counted as holders x numbered intervals x (datasources + 1);
past it, each decision gathers the holders' interval rows instead."""


def placement_costs(segment: DataSegment, holders: Sequence[ServerHolder]) -> list[float]:
    """:func:`placement_cost` of ``segment`` on each of ``holders`` in one vectorised pass, each
    server's sum still exact and its own. When the holders share one numbering of intervals (those
    of one ``DruidCluster``), the window is found once over the numbered intervals, the joint cost
    of each interval in it is computed once however many of them project it, and the sums are
    taken on integers (:func:`~segment_balancer.planner.cost.exact_gathered_sums`); else each
    holder's intervals are windowed and costed on their own (:func:`~segment_balancer.planner.cost.
    exact_sums`). The same floats either way."""
    if not holders:
        return []
    eternity = segment.start_ms <= ETERNITY_START_MS and segment.end_ms >= ETERNITY_END_MS
    lo = segment.start_ms if eternity else segment.start_ms - COST_WINDOW_MS
    hi = segment.end_ms if eternity else segment.end_ms + COST_WINDOW_MS
    minus = np.array([2.0 * self_cost(segment) if holder.is_projected(segment) else 0.0 for holder in holders])
    numbering = holders[0].interval_ids
    if all(holder.interval_ids is numbering for holder in holders):
        kinds = 1 + max(holder.datasources_projected for holder in holders)
        in_window = (numbering.starts < hi) & (numbering.ends > lo)
        window = np.flatnonzero(in_window)
        starts, ends = numbering.starts[window], numbering.ends[window]
        each = joint_cost_same(segment.start_ms, segment.end_ms, starts, ends, False)
        if len(window) and len(numbering) * len(holders) * kinds <= DENSE_CELLS_AT_MOST:
            # each holder's counts by interval as a dense row, its datasource's counted again
            matrix, rows, weights = stacked_dense_counts(list(holders), segment.datasource)
            dense = exact_wide_sums(each, window, matrix, rows, weights, minus)
            if dense is not None:
                return dense
        arrays = [(holder.interval_arrays(), holder.interval_arrays(segment.datasource)) for holder in holders]
        local = np.full(len(numbering), -1, dtype=np.int64)
        local[window] = np.arange(len(window), dtype=np.int64)
        parts = [part for pair in arrays for part in pair]  # per holder: every interval, then its datasource's
        ids = np.concatenate([part[3] for part in parts])
        keep = in_window[ids]
        index = local[ids[keep]]
        counts = np.concatenate([part[2] for part in parts])[keep]
        group = np.repeat(np.arange(len(parts), dtype=np.int64) // 2, [len(part[3]) for part in parts])[keep]
        return exact_gathered_sums(each, index, counts, group, len(holders), minus)
    arrays = [(holder.interval_arrays(), holder.interval_arrays(segment.datasource)) for holder in holders]
    parts = []
    for pair in arrays:
        for starts, ends, counts, _ in pair:
            window = (starts < hi) & (ends > lo)
            parts.append((starts[window], ends[window], counts[window]))
    starts, ends, counts = (np.concatenate(c) for c in zip(*parts))
    group = np.repeat(np.arange(len(parts), dtype=np.int64) // 2, [len(part[0]) for part in parts])
    terms = joint_cost_same(segment.start_ms, segment.end_ms, starts, ends, False)
    return exact_sums(terms, counts, group, len(holders), minus)


def heap_order(costs: Sequence[tuple[float, ServerHolder]]) -> list[ServerHolder]:
    """The array of Java's ``PriorityQueue`` after offering ``costs`` in order, cheapest at the root:
    ties go to the holders' order (more available bytes, then the larger host)."""
    heap: list[tuple[tuple, ServerHolder]] = []
    for cost, holder in costs:
        item = ((cost + 0.0, holder.natural_key()), holder)
        k = len(heap)
        heap.append(item)
        while k > 0:
            parent = (k - 1) >> 1
            if item[0] >= heap[parent][0]:
                break
            heap[k] = heap[parent]
            k = parent
        heap[k] = item
    return [holder for _, holder in heap]


class CostStrategy:
    """``cost``: servers ordered by placement cost."""

    name = "cost"

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random(0)

    def cost(self, segment: DataSegment, holder: ServerHolder) -> float:
        """The strategy's cost of ``segment`` on ``holder`` (lower is better)."""
        return self.costs(segment, [holder])[0]

    def costs(
        self, segment: DataSegment, holders: Sequence[ServerHolder], action: SegmentAction = SegmentAction.LOAD
    ) -> list[float]:
        """:meth:`cost` on each of ``holders``, the candidates of one ``action`` (``LOAD``,
        ``MOVE_TO``, ``DROP``: Druid 38's ``makePlacementCostFunction`` sees them all)."""
        return placement_costs(segment, holders)

    def order(
        self, segment: DataSegment, holders: Sequence[ServerHolder], action: SegmentAction = SegmentAction.LOAD
    ) -> list[ServerHolder]:
        """``holders`` in Druid's priority-queue order of their costs (:func:`heap_order`)."""
        return heap_order(list(zip(self.costs(segment, holders, action), holders)))

    def servers_to_load(self, segment: DataSegment, holders: Sequence[ServerHolder]) -> Iterator[ServerHolder]:
        """The heap order, each server checked for room as the caller reaches it."""
        return (h for h in self.order(segment, holders, SegmentAction.LOAD) if h.can_load(segment))

    def destination_to_move(
        self, segment: DataSegment, source: ServerHolder, holders: Sequence[ServerHolder]
    ) -> ServerHolder | None:
        """The cheapest of ``holders`` (the source among them when it may stay), None when that is
        the source."""
        ordered = self.order(segment, holders, SegmentAction.MOVE_TO)
        if not ordered or ordered[0] is source:
            return None
        return ordered[0]

    def servers_to_drop(self, segment: DataSegment, holders: Sequence[ServerHolder]) -> Iterator[ServerHolder]:
        """The heap order reversed."""
        return iter(self.order(segment, holders, SegmentAction.DROP)[::-1])


class DiskNormalizedStrategy(CostStrategy):
    """Druid 35.0.0 ``diskNormalized``: the cost divided by the segments the server serves (at least 1)
    and multiplied by the share of its disk in use (queued loads and drops counted)."""

    name = "diskNormalized"

    def costs(
        self, segment: DataSegment, holders: Sequence[ServerHolder], action: SegmentAction = SegmentAction.LOAD
    ) -> list[float]:
        out = []
        for cost, holder in zip(placement_costs(segment, holders), holders):
            if cost != float("inf"):
                cost = (cost / max(1, holder.server.segment_count)) * (holder.size_used / holder.max_size)
            out.append(cost)
        return out


def projected_usage(segment: DataSegment, holder: ServerHolder) -> float:
    """The share of ``holder``'s disk in use with ``segment`` on it (unless it projects it already):
    ``(size used + segment size) / max_size`` in Java doubles, infinite for a ``max_size`` of 0 or
    less (Druid 38.0.0 ``DiskNormalizedCostBalancerStrategy.computeProjectedUsageRatio``)."""
    if holder.max_size <= 0:
        return math.inf
    used = holder.size_used + (0 if holder.is_projected(segment) else segment.size)
    return float(used) / float(holder.max_size)


class DiskNormalized38Strategy(CostStrategy):
    """Druid 38.0.0 ``diskNormalized``: the plain cost on a server whose projected usage
    (:func:`projected_usage`) is within ``threshold`` (a fraction) of the least used candidate, else
    the cost times ``exp((gap - threshold) / threshold)``. The least used is taken among servers that
    can load the segment for a load, among all candidates for a move or a drop; servers of
    infinite usage are left out of it and keep their plain cost."""

    name = "diskNormalized"

    def __init__(self, rng: random.Random | None = None, threshold: float = DEFAULT_THRESHOLD):
        super().__init__(rng)
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"{THRESHOLD_KEY}: {threshold} must be in (0.0, 1.0)")
        self.threshold = threshold

    def costs(
        self, segment: DataSegment, holders: Sequence[ServerHolder], action: SegmentAction = SegmentAction.LOAD
    ) -> list[float]:
        usage = [projected_usage(segment, h) for h in holders]
        baseline = [
            u
            for h, u in zip(holders, usage)
            if math.isfinite(u) and (action is not SegmentAction.LOAD or h.can_load(segment))
        ]
        least = min(baseline, default=0.0)
        t = self.threshold
        out = []
        for cost, u in zip(placement_costs(segment, holders), usage):
            gap = u - least
            if cost != math.inf and math.isfinite(u) and gap > t:
                cost = cost * math.exp((gap - t) / t)
            out.append(cost)
        return out


class RandomStrategy:
    """``random``: loads and drops in a shuffled order (seeded here, where Druid's is not), no moves:
    every balancing pick is optimally placed."""

    name = "random"

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random(0)

    def servers_to_load(self, segment: DataSegment, holders: Sequence[ServerHolder]) -> Iterator[ServerHolder]:
        eligible = [h for h in holders if h.can_load(segment)]
        self.rng.shuffle(eligible)
        return iter(eligible)

    def destination_to_move(
        self, segment: DataSegment, source: ServerHolder, holders: Sequence[ServerHolder]
    ) -> ServerHolder | None:
        return None

    def servers_to_drop(self, segment: DataSegment, holders: Sequence[ServerHolder]) -> Iterator[ServerHolder]:
        shuffled = list(holders)
        self.rng.shuffle(shuffled)
        return iter(shuffled)


def make_strategy(
    name: str, rng: random.Random, release: str = REPRODUCED_RELEASES[0], threshold: float = DEFAULT_THRESHOLD
) -> CostStrategy | RandomStrategy:
    """The strategy ``druid.coordinator.balancer.strategy`` names, as Druid ``release`` has it
    (``diskNormalized`` of 38.0.0 with ``threshold``, its utilization threshold).

    Raises:
        ValueError: ``name`` is none of :data:`STRATEGIES`.
    """
    if name in ("cost", "cachingCost"):
        return CostStrategy(rng)
    if name == "diskNormalized":
        return (
            DiskNormalizedStrategy(rng)
            if release == REPRODUCED_RELEASES[0]
            else DiskNormalized38Strategy(rng, threshold)
        )
    if name == "random":
        return RandomStrategy(rng)
    raise ValueError(f"druid.coordinator.balancer.strategy: {name!r} is not one of {', '.join(STRATEGIES)}")
