"""The limits one Druid Coordinator run loads and balances under (Druid 35.0.0
``SegmentLoadingConfig.create``; docs/DRUID_COORDINATOR_NOTES.md §5.1).

With ``smartSegmentLoading`` on (Druid's default) the run computes them and ignores the dynamic
config's ``maxSegmentsInNodeLoadingQueue``, ``replicationThrottleLimit``, ``replicantLifetime``,
``useRoundRobinSegmentAssignment`` and ``balancerComputeThreads``, even when set; with it off it
takes them as configured.
"""

from __future__ import annotations

from dataclasses import dataclass

from segment_balancer.planner.druid_coordinator.segments_to_move import MAX_BALANCER_THREADS

SMART_THROTTLE_PERCENT = 5
"""Smart loading replicates at most this share of the used segments a run (at least 100)."""
SMART_MAX_LIFETIME_IN_LOAD_QUEUE = 60
"""Coordinator runs a queued load may wait before it is counted stuck, under smart loading."""


@dataclass(frozen=True)
class SegmentLoadingConfig:
    """``max_segments_in_load_queue`` (0 = unlimited), ``replication_throttle_limit`` (replicas a
    tier may start loading a run), ``max_lifetime_in_load_queue`` (runs),
    ``use_round_robin_assignment`` and ``balancer_compute_threads``."""

    max_segments_in_load_queue: int
    replication_throttle_limit: int
    max_lifetime_in_load_queue: int
    use_round_robin_assignment: bool
    balancer_compute_threads: int


def default_balancer_compute_threads(coordinator_cores: int) -> int:
    """Druid's default ``balancerComputeThreads``: half the Coordinator's cores, between 1 and 100.
    A snapshot does not tell the cores of the Coordinator's machine: the caller chooses them."""
    return min(max(1, coordinator_cores // 2), MAX_BALANCER_THREADS)


def segment_loading_config(
    *,
    smart_segment_loading: bool,
    used_segments: int,
    coordinator_cores: int,
    max_segments_in_node_loading_queue: int,
    replication_throttle_limit: int,
    replicant_lifetime: int,
    use_round_robin_segment_assignment: bool,
    balancer_compute_threads: int,
) -> SegmentLoadingConfig:
    """The run's limits from the dynamic config (the keyword arguments after ``coordinator_cores``)
    and ``used_segments`` (the used set, overshadowed segments included)."""
    if smart_segment_loading:
        return SegmentLoadingConfig(
            max_segments_in_load_queue=0,
            replication_throttle_limit=max(100, used_segments * SMART_THROTTLE_PERCENT // 100),
            max_lifetime_in_load_queue=SMART_MAX_LIFETIME_IN_LOAD_QUEUE,
            use_round_robin_assignment=True,
            balancer_compute_threads=default_balancer_compute_threads(coordinator_cores),
        )
    return SegmentLoadingConfig(
        max_segments_in_load_queue=max_segments_in_node_loading_queue,
        replication_throttle_limit=replication_throttle_limit,
        max_lifetime_in_load_queue=replicant_lifetime,
        use_round_robin_assignment=use_round_robin_segment_assignment,
        balancer_compute_threads=max(1, balancer_compute_threads),
    )
