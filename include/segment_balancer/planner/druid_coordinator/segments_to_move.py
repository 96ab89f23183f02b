"""How many segments Druid's balancer moves in a run, with ``smartSegmentLoading`` on (Druid 35.0.0
``SegmentToMoveCalculator``; docs/DRUID_COORDINATOR_NOTES.md §4.1).

Druid computes in Java ``int``s; every value here stays within them, and divisions of non-negative
numbers truncate as Java's do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

MIN_SEGMENTS_TO_MOVE = 100
"""The fewest moves a run asks for, when the tier has that many segments."""
MAX_BALANCER_THREADS = 100
"""``balancerComputeThreads`` above this is refused, as Druid refuses it."""


@dataclass(frozen=True)
class ProjectedServer:
    """A historical's segments once its load queue is done (Druid's ``getProjectedSegmentCounts``):
    ``segments_per_datasource`` (datasource -> count), ``bytes`` (their size) and ``max_size``
    (bytes)."""

    segments_per_datasource: Mapping[str, int] = field(default_factory=dict)
    bytes: int = 0
    max_size: int = 0

    @property
    def segments(self) -> int:
        return sum(self.segments_per_datasource.values())


def max_segments_to_move_per_tier(total_segments: int, balancer_threads: int, period_ms: int) -> int:
    """The most segments a tier may move in a run: as many placement-cost computations as
    ``balancer_threads`` threads do in the coordinator period (about 2^20 thousand in 30 s, at most
    four 30-s spans) over ``total_segments`` (every segment served or queued on the cluster's
    managed historicals), between 100 and 100 per 512 segments, never more than the segments.

    Raises:
        ValueError: ``balancer_threads`` is not in (0, 100].
    """
    if not 0 < balancer_threads <= MAX_BALANCER_THREADS:
        raise ValueError(f"balancer threads must be in (0, {MAX_BALANCER_THREADS}], got {balancer_threads}")
    if total_segments <= 0:
        return 0
    upper = (total_segments >> 9) * 100
    spans = min(4, period_ms // 30_000)
    by_computations = (((balancer_threads * spans) << 20) // total_segments) * 1000
    if upper < MIN_SEGMENTS_TO_MOVE or by_computations < MIN_SEGMENTS_TO_MOVE:
        return min(MIN_SEGMENTS_TO_MOVE, total_segments)
    return min(by_computations, upper)


def min_segments_to_move_in_tier(segments_in_tier: int) -> int:
    """The fewest moves a tier asks for, balanced or not: 100 (or every segment, when fewer), or 100
    per 2^16 segments when that is more."""
    return max(min(MIN_SEGMENTS_TO_MOVE, segments_in_tier), (segments_in_tier >> 16) * 100)


def segments_to_balance_counts(servers: Sequence[ProjectedServer]) -> int:
    """Half the largest gap, over the datasources of the tier, between the servers with the most and
    the fewest segments of one datasource (a server without it counts 0)."""
    datasources = {ds for s in servers for ds in s.segments_per_datasource}
    if not datasources:
        return 0
    gaps = [
        max(s.segments_per_datasource.get(ds, 0) for s in servers)
        - min(s.segments_per_datasource.get(ds, 0) for s in servers)
        for ds in datasources
    ]
    return max(gaps) // 2


def segments_to_balance_disk(servers: Sequence[ProjectedServer]) -> int:
    """Half the segments of average size that the gap between the fullest and the emptiest server
    (bytes) holds; 0 when the tier serves nothing."""
    if not servers:
        return 0
    count = sum(s.segments for s in servers)
    total = sum(s.bytes for s in servers)
    if count <= 0 or total <= 0:
        return 0
    gap = max(s.bytes for s in servers) - min(s.bytes for s in servers)
    return int(gap / (total / count)) // 2


def segments_to_balance_tier(servers: Sequence[ProjectedServer]) -> int:
    """What it takes to balance the tier: the larger of :func:`segments_to_balance_counts` and
    :func:`segments_to_balance_disk` (0 without servers)."""
    if not servers:
        return 0
    return max(segments_to_balance_counts(servers), segments_to_balance_disk(servers))


def segments_to_move_in_tier(servers: Sequence[ProjectedServer], max_in_tier: int) -> int:
    """The moves a tier's active historicals ask for: what balances it, at least
    :func:`min_segments_to_move_in_tier` of its segments, at most ``max_in_tier``."""
    wanted = max(min_segments_to_move_in_tier(sum(s.segments for s in servers)), segments_to_balance_tier(servers))
    return min(wanted, max_in_tier)
