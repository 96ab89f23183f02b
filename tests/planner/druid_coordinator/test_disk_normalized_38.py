"""Druid 38.0.0's ``DiskNormalizedCostBalancerStrategyTest`` (server/src/test/java/org/apache/druid/
server/coordinator/balancer/, commit aedca20599), with Druid's values, on the ``diskNormalized`` of
Druid 38 (``DiskNormalized38Strategy``, #19303, #19422, #19663): every case, the plain ``cost``
strategy's choice beside it as Druid checks it. Druid's segments are ``DUMMY`` segments of the hour
2015-01-01T00/01, version ``i`` and ``i * 100`` bytes; a server reports the bytes it uses
(``sizeUsed``) whatever its segments weigh. ``testConfigUsesUtilizationThreshold`` and
``testRejectsInvalidUtilizationThreshold`` are about the runtime property
``druid.coordinator.balancer.diskNormalized.utilizationThreshold``: its default and its refusals."""

from __future__ import annotations

import random

import pytest

from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
from segment_balancer.planner.druid_coordinator.model import DataSegment, DruidServer, LoadQueue, ServerHolder
from segment_balancer.planner.druid_coordinator.strategies import (
    THRESHOLD_KEY,
    CostStrategy,
    DiskNormalized38Strategy,
    make_strategy,
)

pytestmark = pytest.mark.druid_release("38.0.0")

HOUR_START = 1_420_070_400_000  # 2015-01-01T00:00Z
HOUR_END = HOUR_START + 3_600_000


def dummy(i: int, size: int | None = None) -> DataSegment:
    """``getSegment(i)``: datasource DUMMY, the hour, version ``i``, ``i * 100`` bytes (or ``size``)."""
    return DataSegment(f"DUMMY_{i}", "DUMMY", HOUR_START, HOUR_END, str(i), 0, i * 100 if size is None else size)


def server(name: str, max_size: int, size_used: int, segments) -> ServerHolder:
    """``buildServer``: a historical of tier hot reporting ``size_used`` bytes, serving ``segments``."""
    druid = DruidServer(name=name, tier="hot", max_size=max_size)
    for s in segments:
        druid.add(s)
    druid.curr_size = size_used
    return ServerHolder(druid, LoadQueue(name))


def indexed(name: str, max_size: int, size_used: int, base: int, count: int) -> ServerHolder:
    return server(name, max_size, size_used, [dummy(i) for i in range(base, base + count)])


def first_to_load(strategy, segment: DataSegment, servers) -> str:
    return next(strategy.servers_to_load(segment, servers)).name


def destination(strategy, segment: DataSegment, source: ServerHolder, servers) -> str | None:
    found = strategy.destination_to_move(segment, source, servers)
    return None if found is None else found.name


def test_normalized_cost_balancer_single_and_multi_threaded():
    """``testNormalizedCostBalancerSingleThreadStrategy`` (and the multi-threaded one): ten servers of
    10 million bytes and BEST_SERVER of 100 million, each serving the same 20 segments, 3000 bytes
    used. Every projected usage is within the threshold of the least, so the plain costs (equal)
    decide and the tie goes to the most available bytes: BEST_SERVER."""
    same = [dummy(j) for j in range(20)]
    servers = [server(f"DruidServer_Name_{i}", 10_000_000, 3000, same) for i in range(10)]
    servers.append(server("BEST_SERVER", 100_000_000, 3000, same))
    assert first_to_load(DiskNormalized38Strategy(), dummy(1000), servers) == "BEST_SERVER"


def test_disk_weighting_beats_raw_cost():
    """``testDiskWeightingBeatsRawCost``: A at 90 % with 5 segments, B at 10 % with 30."""
    servers = [indexed("A", 10_000_000, 9_000_000, 0, 5), indexed("B", 10_000_000, 1_000_000, 100, 30)]
    assert first_to_load(CostStrategy(), dummy(1000), servers) == "A"
    assert first_to_load(DiskNormalized38Strategy(), dummy(1000), servers) == "B"


def test_disk_normalized_fixes_skew_that_cost_cannot_correct():
    """``testDiskNormalizedFixesSkewThatCostCannotCorrect``: A at 80 %, B at 20 %, 20 segments each;
    moving one of A's: cost keeps it (A 38 K against B 40 K), diskNormalized moves it to B."""
    heavy, light = indexed("A", 10_000_000, 8_000_000, 0, 20), indexed("B", 10_000_000, 2_000_000, 100, 20)
    assert destination(CostStrategy(), dummy(0), heavy, [heavy, light]) is None
    assert destination(DiskNormalized38Strategy(), dummy(0), heavy, [heavy, light]) == "B"


def test_threshold_blocks_marginal_move():
    """``testThresholdBlocksMarginalMove``: SOURCE at 80 %, DEST at 78.3 %: within the default 5 %
    the segment stays; with a threshold of 1 % it moves to DEST."""
    source, dest = indexed("SOURCE", 10_000_000, 8_000_000, 0, 20), indexed("DEST", 10_000_000, 7_830_000, 100, 20)
    assert destination(DiskNormalized38Strategy(), dummy(0), source, [source, dest]) is None
    assert destination(DiskNormalized38Strategy(threshold=0.01), dummy(0), source, [source, dest]) == "DEST"


def test_near_full_server_is_not_chosen_for_new_segment_load():
    """``testNearFullServerIsNotChosenForNewSegmentLoad``: A at 95 % with 5 segments, B at 70 % with 20."""
    servers = [indexed("A", 10_000_000, 9_500_000, 0, 5), indexed("B", 10_000_000, 7_000_000, 100, 20)]
    assert first_to_load(CostStrategy(), dummy(1000), servers) == "A"
    assert first_to_load(DiskNormalized38Strategy(), dummy(1000), servers) == "B"


def test_projected_segment_size_is_used_for_new_segment_load():
    """``testProjectedSegmentSizeIsUsedForNewSegmentLoad``: a 250 KB segment would leave A (70 % of
    1 MB, 5 segments) at 95 % and B (50 %, 20 segments) at 75 %."""
    servers = [indexed("A", 1_000_000, 700_000, 0, 5), indexed("B", 1_000_000, 500_000, 100, 20)]
    large = dummy(1000, size=250_000)
    assert first_to_load(CostStrategy(), large, servers) == "A"
    assert first_to_load(DiskNormalized38Strategy(), large, servers) == "B"


def test_near_full_server_is_not_chosen_as_move_destination():
    """``testNearFullServerIsNotChosenAsMoveDestination``: SOURCE at 70 % with 20, DEST at 95 % with 5."""
    source, dest = indexed("SOURCE", 10_000_000, 7_000_000, 0, 20), indexed("DEST", 10_000_000, 9_500_000, 100, 5)
    assert destination(CostStrategy(), dummy(0), source, [source, dest]) == "DEST"
    assert destination(DiskNormalized38Strategy(), dummy(0), source, [source, dest]) is None


def test_projected_segment_size_prevents_move_that_would_fill_destination():
    """``testProjectedSegmentSizePreventsMoveThatWouldFillDestination``: a 2.5 MB segment of SOURCE
    (80 %, already projecting it) would leave DEST (70 %, 5 segments) at 95 %."""
    large = dummy(0, size=2_500_000)
    source = server("SOURCE", 10_000_000, 8_000_000, [large, *(dummy(i) for i in range(1, 20))])
    dest = indexed("DEST", 10_000_000, 7_000_000, 100, 5)
    assert destination(CostStrategy(), large, source, [source, dest]) == "DEST"
    assert destination(DiskNormalized38Strategy(), large, source, [source, dest]) is None


def test_config_uses_utilization_threshold():
    """``testConfigUsesUtilizationThreshold``: 0.05 by default, 0.01 when set; the strategy the run
    makes carries it."""
    assert druid_config({})[THRESHOLD_KEY] == 0.05
    assert druid_config({THRESHOLD_KEY: 0.01})[THRESHOLD_KEY] == 0.01
    made = make_strategy("diskNormalized", random.Random(0), release="38.0.0", threshold=0.01)
    assert isinstance(made, DiskNormalized38Strategy) and made.threshold == 0.01


@pytest.mark.parametrize("threshold", [0.0, 1.0, -0.01])
def test_rejects_invalid_utilization_threshold(threshold):
    """``testRejectsInvalidUtilizationThreshold``: 0, 1 and -0.01 are refused, by the config and by
    the strategy."""
    with pytest.raises(ValueError, match=THRESHOLD_KEY.replace(".", r"\.")):
        druid_config({THRESHOLD_KEY: threshold})
    with pytest.raises(ValueError):
        DiskNormalized38Strategy(threshold=threshold)
