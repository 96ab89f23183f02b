"""Druid's ``SegmentToMoveCalculatorTest`` (server/src/test/java/org/apache/druid/server/coordinator/
balancer/, Druid 35.0.0, commit 259e62e3), its cases with its expected values; and what the
calculator reads of a historical whose segments are moving away, worked by hand from Druid's source."""

from __future__ import annotations

import pytest

from segment_balancer.planner.druid_coordinator.balancer import projected_server
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidServer,
    LoadQueue,
    SegmentAction,
    ServerHolder,
)
from segment_balancer.planner.druid_coordinator.segments_to_move import (
    ProjectedServer,
    max_segments_to_move_per_tier,
    min_segments_to_move_in_tier,
    segments_to_balance_counts,
    segments_to_balance_disk,
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


def test_segments_moving_away_leave_the_disk_term_as_they_leave_the_counts():
    """``SegmentToMoveCalculator.computeSegmentsToMoveToBalanceDiskUsage`` (Druid 35.0.0 lines
    185-199 and 264-297, the same in 38.0.0) reads ``getProjectedSegmentCounts().getTotalSegmentBytes()``:
    the sizes of the segments ``ServerHolder.addToQueuedSegments`` projects, which removes a
    ``MOVE_FROM`` (a segment marked to drop once its move is done) as it removes a drop.

    Historical A serves 1,000 segments of 1 MB (one datasource), 400 of them marked to drop for a
    move to B, which has those 400 queued as ``MOVE_TO``. Projected: A 600 segments, 600 MB; B 400,
    400 MB. Counts: gap 600 - 400 = 200, half 100. Disk: average size 1,000 MB / 1,000 = 1 MB, gap
    200 MB, 200 / 1 / 2 = 100. Minimum for 1,000 segments: 100. So Druid moves
    max(100, 100, 100) = 100. Reading A's bytes as its size used (``getSizeUsed``: 1,000 MB, a
    move's source keeps its bytes) would make the gap 600 MB over an average of 1,400 MB / 1,000:
    int(600 / 1.4) // 2 = 214."""
    mb = 1_000_000
    segments = [
        DataSegment(id=f"wiki_{i}", datasource="wiki", start_ms=i, end_ms=i + 1, version="1", partition=0, size=mb)
        for i in range(1_000)
    ]
    a_queue, b_queue = LoadQueue("A"), LoadQueue("B")
    for segment in segments[:400]:
        a_queue.mark_to_drop(segment)
        b_queue.load(segment, SegmentAction.MOVE_TO, move_source="A")
    a = ServerHolder(
        DruidServer(name="A", tier="tier1", max_size=10 << 30, segments={s.id: s for s in segments}), a_queue
    )
    b = ServerHolder(DruidServer(name="B", tier="tier1", max_size=10 << 30), b_queue)
    projected = [projected_server(a), projected_server(b)]
    assert [(p.segments, p.bytes) for p in projected] == [(600, 600 * mb), (400, 400 * mb)]
    assert segments_to_balance_counts(projected) == 100
    assert segments_to_balance_disk(projected) == 100
    assert segments_to_move_in_tier(projected, INT_MAX) == 100
    assert a.size_used == 1_000 * mb  # what the disk term must not read: it would give 214
    assert segments_to_balance_disk([ProjectedServer({"wiki": 600}, 1_000 * mb), projected[1]]) == 214
