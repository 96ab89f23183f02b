"""Druid 35.0.0's ``SegmentLoadingConfig.create``, worked by hand from its source
(loading/SegmentLoadingConfig.java:46-76, CoordinatorDynamicConfig.java:447-453)."""

from __future__ import annotations

import pytest

from segment_balancer.planner.druid_coordinator.loading_config import (
    SegmentLoadingConfig,
    default_balancer_compute_threads,
    segment_loading_config,
)

CONFIGURED = dict(
    max_segments_in_node_loading_queue=500,
    replication_throttle_limit=2,  # HistoricalCloningTest's, ignored under smart loading
    replicant_lifetime=15,
    use_round_robin_segment_assignment=False,
    balancer_compute_threads=7,
)


@pytest.mark.parametrize("used, throttle", [(0, 100), (1_000, 100), (2_000, 100), (2_020, 101), (1_000_000, 50_000)])
def test_smart_loading_computes_its_limits_and_ignores_the_configured_ones(used, throttle):
    """5 % of the used segments, at least 100 (2,020 x 5 // 100 = 101); no queue limit, 60 runs in a
    queue, round robin on, half of the Coordinator's 16 cores."""
    got = segment_loading_config(smart_segment_loading=True, used_segments=used, coordinator_cores=16, **CONFIGURED)
    assert got == SegmentLoadingConfig(0, throttle, 60, True, 8)


def test_without_smart_loading_the_configured_values_are_used():
    got = segment_loading_config(smart_segment_loading=False, used_segments=10, coordinator_cores=16, **CONFIGURED)
    assert got == SegmentLoadingConfig(500, 2, 15, False, 7)
    zero = segment_loading_config(
        smart_segment_loading=False,
        used_segments=10,
        coordinator_cores=16,
        **{**CONFIGURED, "balancer_compute_threads": 0},
    )
    assert zero.balancer_compute_threads == 1  # Druid's constructor clamps it to at least 1


@pytest.mark.parametrize("cores, threads", [(1, 1), (2, 1), (3, 1), (16, 8), (200, 100), (256, 100)])
def test_default_balancer_threads_are_half_the_cores_between_1_and_100(cores, threads):
    assert default_balancer_compute_threads(cores) == threads
