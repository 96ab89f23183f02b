"""Druid's ``SegmentToMoveCalculatorTest`` (server/src/test/java/org/apache/druid/server/coordinator/
balancer/, Druid 35.0.0, commit 259e62e3), its cases with its expected values."""

from __future__ import annotations

import pytest

from segment_balancer.planner.druid_coordinator.segments_to_move import (
    ProjectedServer,
    max_segments_to_move_per_tier,
    min_segments_to_move_in_tier,
    segments_to_balance_counts,
    segments_to_balance_tier,
    segments_to_move_in_tier,
)

MINUTE_MS = 60_000
MB = 1 << 20
INT_MAX = 2**31 - 1


def server(segments: dict[str, int]) -> ProjectedServer:
    """Druid's ``createServer``: a 10 GiB historical of tier1 serving ``segments`` of 500 MB each."""
    return ProjectedServer(segments, bytes=sum(segments.values()) * 500 * MB, max_size=10 << 30)


WIKI = {"wiki": 100 * 100}  # 100 days x 100 partitions
KOALA = {"koala": 10}  # 10 days x 1 partition


@pytest.mark.parametrize(
    "total, expected",
    [
        (0, 0),
        (50, 50),
        (100, 100),
        (512, 100),
        (1_024, 200),
        (1_536, 300),
        (10_000, 1_900),
        (50_000, 9_700),
        (100_000, 19_500),
        (200_000, 10_000),
        (500_000, 4_000),
        (1_000_000, 2_000),
    ],
)
def test_max_segments_to_move_1_thread(total, expected):
    assert max_segments_to_move_per_tier(total, 1, MINUTE_MS) == expected


@pytest.mark.parametrize(
    "total, period_ms, expected",
    [
        (200_000, 0, 100),
        (200_000, 10_000, 100),
        (200_000, 20_000, 100),
        (200_000, 30_000, 5_000),
        (200_000, 60_000, 10_000),
        (200_000, 90_000, 15_000),
        (200_000, 120_000, 20_000),
        (500_000, 30_000, 2_000),
        (500_000, 60_000, 4_000),
        (500_000, 90_000, 6_000),
        (500_000, 120_000, 8_000),
    ],
)
def test_max_segments_to_move_increases_with_coordinator_period(total, period_ms, expected):
    assert max_segments_to_move_per_tier(total, 1, period_ms) == expected


@pytest.mark.parametrize(
    "total, expected",
    [
        (0, 0),
        (50, 50),
        (100, 100),
        (512, 100),
        (1_024, 200),
        (1_536, 300),
        (500_000, 33_000),
        (1_000_000, 16_000),
        (2_000_000, 8_000),
        (5_000_000, 3_000),
        (10_000_000, 1_000),
    ],
)
def test_max_segments_to_move_8_threads(total, expected):
    assert max_segments_to_move_per_tier(total, 8, MINUTE_MS) == expected


@pytest.mark.parametrize(
    "segments, expected",
    [
        (0, 0),
        (50, 50),
        (100, 100),
        (1_000, 100),
        (20_000, 100),
        (50_000, 100),
        (100_000, 100),
        (200_000, 300),
        (500_000, 700),
        (1_000_000, 1_500),
        (10_000_000, 15_200),
    ],
)
def test_min_segments_to_move(segments, expected):
    assert min_segments_to_move_in_tier(segments) == expected


@pytest.mark.parametrize(
    "segments, expected",
    [
        (131_071, 100),
        (131_072, 200),
        (393_215, 500),
        (393_216, 600),
        (655_359, 900),
        (655_360, 1000),
        (6_553_599, 9_900),
        (6_553_600, 10_000),
    ],
)
def test_min_segments_to_move_increases_in_steps(segments, expected):
    assert min_segments_to_move_in_tier(segments) == expected


def test_min_segments_are_picked_for_move_when_no_skew():
    historicals = [server(WIKI), server(WIKI)]
    assert min_segments_to_move_in_tier(20_000) == 100
    assert segments_to_balance_tier(historicals) == 0
    assert segments_to_move_in_tier(historicals, INT_MAX) == 100


def test_half_segments_are_picked_for_move_when_full_skew():
    historicals = [server(WIKI), server({})]
    assert min_segments_to_move_in_tier(10_000) == 100
    assert segments_to_balance_tier(historicals) == 5_000
    assert segments_to_move_in_tier(historicals, INT_MAX) == 5_000


def test_datasource_with_largest_gap_determines_num_to_balance_counts():
    historicals = [server({**WIKI, **KOALA}), server(KOALA)]
    assert segments_to_balance_counts(historicals) == 10_000 // 2


def test_more_than_a_hundred_balancer_threads_is_refused_as_druid_refuses_it():
    with pytest.raises(ValueError, match="balancer threads"):
        max_segments_to_move_per_tier(1_000, 101, MINUTE_MS)
    with pytest.raises(ValueError, match="balancer threads"):
        max_segments_to_move_per_tier(1_000, 0, MINUTE_MS)
