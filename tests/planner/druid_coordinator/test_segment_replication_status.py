"""Druid 38.0.0's ``SegmentReplicationStatusTest`` (server/src/test/java/org/apache/druid/server/
coordinator/loading/, commit aedca20599, #19532), with Druid's values, on ``segment_stats`` (what
``CollectSegmentStats`` counts; the same in Druid 35.0.0, which counted in three passes).
``testConstructorSnapshotsInputAndIsUnaffectedByLaterMutation`` is about Java objects shared
between duties: ``segment_stats`` returns new dicts from counts it only reads."""

from __future__ import annotations

from segment_balancer.planner.druid_coordinator.assigner import ReplicaCount, ReplicaCounts
from segment_balancer.planner.druid_coordinator.model import DataSegment, DruidCluster
from segment_balancer.planner.druid_coordinator.run import segment_stats

TIER_1, TIER_2 = "tier1", "tier2"
DAY = 86_400_000
SEGMENTS = [DataSegment(f"wiki_{d}", "wiki", d * DAY, (d + 1) * DAY, "1", 0, 100) for d in range(5)]


def count_of(required: int, loadable: int, loaded: int) -> ReplicaCount:
    """``countOf``: ``setRequired(required, loadable)`` and ``loaded`` replicas loaded."""
    return ReplicaCount(required=required, required_and_loadable=loadable, loaded=loaded)


def replica_counts(per_segment: dict[int, dict[str, ReplicaCount]]) -> ReplicaCounts:
    counts = ReplicaCounts(DruidCluster([]))
    counts.counts = {SEGMENTS[i].id: tiers for i, tiers in per_segment.items()}
    return counts


def test_compute_segment_stats_matches_independent_computation():
    """``testComputeSegmentStatsMatchesIndependentComputation``: segment 0 fully loaded, 1 unavailable,
    2 deep storage only, 3 under-replicated by one in tier1 and full in tier2, 4 absent from the
    counts (a metadata race: unavailable). Worked by hand: unavailable 2 (segments 1 and 4), deep
    storage only 1, under-replicated tier1 0 + 2 + 0 + 1 = 3, tier2 0; the same either way of
    counting (every required count here is loadable)."""
    counts = replica_counts(
        {
            0: {TIER_1: count_of(2, 2, 2)},
            1: {TIER_1: count_of(2, 2, 0)},
            2: {TIER_1: count_of(0, 0, 0)},
            3: {TIER_1: count_of(2, 2, 1), TIER_2: count_of(1, 1, 1)},
        }
    )
    for ignore_missing_servers in (True, False):
        unavailable, under, deep_only = segment_stats(SEGMENTS, counts, ignore_missing_servers=ignore_missing_servers)
        assert unavailable == {"wiki": 2}
        assert deep_only == {"wiki": 1}
        assert under == {TIER_1: {"wiki": 3}, TIER_2: {"wiki": 0}}


def test_ignore_missing_servers_uses_missing_not_missing_and_loadable():
    """``testIgnoreMissingServersUsesMissingNotMissingAndLoadable``: 3 required, 1 loadable (one
    server), none loaded: 3 missing when servers are ignored, 1 otherwise."""
    counts = replica_counts({0: {TIER_1: count_of(3, 1, 0)}})
    assert segment_stats(SEGMENTS[:1], counts, ignore_missing_servers=True)[1] == {TIER_1: {"wiki": 3}}
    assert segment_stats(SEGMENTS[:1], counts, ignore_missing_servers=False)[1] == {TIER_1: {"wiki": 1}}
