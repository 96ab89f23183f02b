"""Druid's ``LoadRuleTest`` (server/src/test/java/org/apache/druid/server/coordinator/rules/, Druid
35.0.0, commit 259e62e3): ``StrategicSegmentAssigner`` driven by one load rule, with Druid's values,
with round-robin assignment on and off (Druid's parameter), smart loading off and the ``cost``
strategy. ``testEquals`` (Java's equality contract) and ``testLoadUsedSegmentsForAllSegmentGranularity
AndCachingCostBalancerStrategy`` (the deprecated caching strategy, which the Coordinator no longer
runs) have nothing to port; ``testOverAssignForTimedOutSegments`` is ignored in Druid."""

from __future__ import annotations

import itertools

import coordinator_sim
import pytest

from segment_balancer.druid import metrics as m
from segment_balancer.planner.druid_coordinator.assigner import StrategicSegmentAssigner
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    DruidServer,
    LoadQueue,
    ServerHolder,
)
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.strategies import CostStrategy

T1, T2 = "tier1", "tier2"
YEAR_0, YEAR_3000 = -62_167_219_200_000, 32_503_680_000_000  # Intervals.of("0/3000")

pytestmark = pytest.mark.parametrize("round_robin", [True, False], ids=["roundRobin", "cost"])


@pytest.fixture
def make():
    ids = itertools.count(1)

    def server(tier: str, *segments: DataSegment, decommissioning: bool = False, queue_limit: int = 0) -> ServerHolder:
        """``createServer``: a 10 GiB historical ``hist_<tier>_<n>`` serving ``segments``."""
        name = f"hist_{tier}_{next(ids)}"
        druid = DruidServer(name=name, tier=tier, max_size=10 << 30)
        for s in segments:
            druid.add(s)
        return ServerHolder(
            druid, LoadQueue(name), decommissioning=decommissioning, max_segments_in_load_queue=queue_limit
        )

    return server


def segment(datasource: str = "wiki") -> DataSegment:
    """``createDataSegment``: interval 0/3000, no shard, size 0."""
    return DataSegment(f"{datasource}_0_3000", datasource, YEAR_0, YEAR_3000, "v", 0, 0)


def run_rule(
    tiers: dict[str, int], seg: DataSegment, cluster: DruidCluster, round_robin: bool, aliases: dict | None = None
) -> RunStats:
    """``runRuleAndGetStats``: a new run's assigner (smart loading off: throttle 500) on ``cluster``
    (Druid 38: with ``historicalTierAliases`` ``aliases``)."""
    stats = RunStats()
    assigner = StrategicSegmentAssigner(
        cluster, CostStrategy(), stats, 500, round_robin, release=coordinator_sim.RELEASE, aliases=aliases or {}
    )
    assigner.replicate(seg, tiers)
    run_rule.assigner = assigner
    return stats


def stat(stats: RunStats, metric: str, tier: str, datasource: str = "wiki") -> int:
    """``getSegmentStat``: 0 when absent."""
    return stats.total(metric, tier=tier, dataSource=datasource)


def test_load_rule_assigns_segments(make, round_robin):
    """``testLoadRuleAssignsSegments``: one server per tier, {T1: 1, T2: 2}: one load in each tier."""
    cluster = DruidCluster([make(T1), make(T2)])
    stats = run_rule({T1: 1, T2: 2}, segment(), cluster, round_robin)
    assert stat(stats, m.ASSIGNED, T1) == 1 and stat(stats, m.ASSIGNED, T2) == 1


def test_load_primary_assign_does_not_over_assign(make, round_robin):
    """``testLoadPrimaryAssignDoesNotOverAssign`` (and ``testSkipReplicationForTimedOutSegments``):
    the second run sees the first's load queued and assigns nothing."""
    s1, s2 = make(T1), make(T1)
    cluster = DruidCluster([s1, s2])
    seg = segment()
    assert stat(run_rule({T1: 1}, seg, cluster, round_robin), m.ASSIGNED, T1) == 1
    assert len(s1.loading_segments()) + len(s2.loading_segments()) == 1
    assert run_rule({T1: 1}, seg, cluster, round_robin).matching(m.ASSIGNED) == []
    assert len(s1.loading_segments()) + len(s2.loading_segments()) == 1


def test_segments_are_dropped_if_load_rule_has_zero_replicas(make, round_robin):
    """``testSegmentsAreDroppedIfLoadRuleHasZeroReplicas``."""
    seg = segment()
    cluster = DruidCluster([make(T1, seg), make(T2, seg), make(T2, seg)])
    stats = run_rule({T1: 0, T2: 0}, seg, cluster, round_robin)
    assert stat(stats, m.DROPPED, T1) == 1 and stat(stats, m.DROPPED, T2) == 2


def test_load_ignores_invalid_tiers(make, round_robin):
    """``testLoadIgnoresInvalidTiers``."""
    stats = run_rule({"invalidTier": 1, T1: 1}, segment(), DruidCluster([make(T1)]), round_robin)
    assert stat(stats, m.ASSIGNED, T1) == 1 and stat(stats, m.ASSIGNED, "invalidTier") == 0


def test_drop_ignores_invalid_tiers(make, round_robin):
    """``testDropIgnoresInvalidTiers``: 2 loaded, 1 required (and loadable) in T1: one drop."""
    seg = segment()
    stats = run_rule({"invalidTier": 1, T1: 1}, seg, DruidCluster([make(T1, seg), make(T1, seg)]), round_robin)
    assert stat(stats, m.DROPPED, T1) == 1 and stat(stats, m.DROPPED, "invalidTier") == 0


def test_max_loading_queue_size(make, round_robin):
    """``testMaxLoadingQueueSize``: a queue of 2 takes two segments of one run and not a third."""
    cluster = DruidCluster([make(T1, queue_limit=2)])
    stats = RunStats()
    assigner = StrategicSegmentAssigner(
        cluster, CostStrategy(), stats, 500, round_robin, release=coordinator_sim.RELEASE
    )
    for ds in ("ds1", "ds2", "ds3"):
        assigner.replicate(segment(ds), {T1: 1})
    assert [stat(stats, m.ASSIGNED, T1, ds) for ds in ("ds1", "ds2", "ds3")] == [1, 1, 0]


def test_segment_is_assigned_only_to_active_server(make, round_robin):
    """``testSegmentIsAssignedOnlyToActiveServer``."""
    decommissioning, t2 = make(T1, decommissioning=True), make(T2)
    seg = segment()
    stats = run_rule({T1: 1, T2: 1}, seg, DruidCluster([decommissioning, t2]), round_robin)
    assert stat(stats, m.ASSIGNED, T2) == 1
    assert decommissioning.loading_segments() == [] and t2.loading_segments() == [seg]


def test_segment_is_assigned_only_to_active_servers(make, round_robin):
    """``testSegmentIsAssignedOnlyToActiveServers``: 2 replicas wanted in each tier."""
    decommissioning = make(T1, decommissioning=True)
    cluster = DruidCluster([decommissioning, make(T1), make(T2), make(T2)])
    stats = run_rule({T1: 2, T2: 2}, segment(), cluster, round_robin)
    assert stat(stats, m.ASSIGNED, T1) == 1 and stat(stats, m.ASSIGNED, T2) == 2
    assert decommissioning.loading_segments() == []


def test_drop_during_decommissioning(make, round_robin):
    """``testDropDuringDecommissioning``: no replica wanted: dropped from the decommissioning server
    and from the active one."""
    foo1, foo2 = segment("foo1"), segment("foo2")
    s1, s2 = make(T1, foo1, decommissioning=True), make(T1, foo2)
    cluster = DruidCluster([s1, s2])
    stats = RunStats()
    assigner = StrategicSegmentAssigner(
        cluster, CostStrategy(), stats, 500, round_robin, release=coordinator_sim.RELEASE
    )
    assigner.replicate(foo1, {T1: 0})
    assert stat(stats, m.DROPPED, T1, "foo1") == 1 and foo1.id in s1.queue.to_drop
    assigner.replicate(foo2, {T1: 0})
    assert stat(stats, m.DROPPED, T1, "foo2") == 1 and foo2.id in s2.queue.to_drop


def test_extra_replicas_are_dropped_from_decommissioning_server(make, round_robin):
    """``testExtraReplicasAreDroppedFromDecommissioningServer``: 3 replicas, 2 wanted: the one on
    the decommissioning server goes."""
    seg = segment()
    s1, s2, s3 = make(T1, seg), make(T1, seg, decommissioning=True), make(T1, seg)
    stats = run_rule({T1: 2}, seg, DruidCluster([s1, s2, s3]), round_robin)
    assert stat(stats, m.DROPPED, T1) == 1
    assert [len(s.queue.to_drop) for s in (s1, s2, s3)] == [0, 1, 0]


# --------------------------------------------------------------- Druid 38.0.0: historicalTierAliases
T3 = "tier3"


@pytest.mark.druid_release("38.0.0")
def test_historical_tier_aliases_applies_only_to_alias_tiers(make, round_robin):
    """``testHistoricalTierAliasesAppliesOnlyToAliasTiers`` (Druid 38.0.0): T1 is an alias of T2 and
    T3 (one server each, none in T1); {T1: 1} loads one replica on T2 and one on T3, none on T1."""
    cluster = DruidCluster([make(T2), make(T3)])
    stats = run_rule({T1: 1}, segment(), cluster, round_robin, aliases={T1: (T2, T3)})
    assert (stat(stats, m.ASSIGNED, T1), stat(stats, m.ASSIGNED, T2), stat(stats, m.ASSIGNED, T3)) == (0, 1, 1)


@pytest.mark.druid_release("38.0.0")
def test_historical_tier_aliases_tags_capacity_stats_with_alias(make, round_robin):
    """``testHistoricalTierAliasesTagsCapacityStatsWithAlias`` (Druid 38.0.0): the capacity rows of T2
    and T3 carry the dimension tierAlias T1, and no row of them lacks it. Druid's segment has size 0,
    so its values are 0 either way: the rows' presence is checked here too, and the replication
    factor (1) of the same rows."""
    stats = run_rule({T1: 1}, segment(), DruidCluster([make(T2), make(T3)]), round_robin, aliases={T1: (T2, T3)})
    for tier in (T2, T3):
        assert stats.get(m.REQUIRED_CAPACITY, tier=tier, tierAlias=T1) == segment().size
        assert stats.get(m.REQUIRED_CAPACITY, tier=tier) is None
        assert stats.get(m.REPLICATION_FACTOR, tier=tier, tierAlias=T1) == 1
    assert stats.matching(m.REQUIRED_CAPACITY, tier=T1) == []


@pytest.mark.druid_release("38.0.0")
def test_historical_tier_aliases_invalid_tier_alerts(make, round_robin):
    """``testHistoricalTierAliasesInvalidTierAlerts`` (Druid 38.0.0): with only T2 served, the alias
    key T1 raises no invalid-tier alert, its tier T3 without servers does."""
    run_rule({T1: 1}, segment(), DruidCluster([make(T2)]), round_robin, aliases={T1: (T2, T3)})
    invalid = run_rule.assigner.invalid_load_tiers.get("wiki", set())
    assert T1 not in invalid and T3 in invalid


@pytest.mark.druid_release("38.0.0")
def test_historical_tier_aliases_does_not_overwrite_explicit_count(make, round_robin):
    """``testHistoricalTierAliasesDoesNotOverwriteExplicitCount`` (Druid 38.0.0): {T1: 1, T2: 2} with
    T1 an alias of T2 (two servers): T2's own count, 2, wins."""
    stats = run_rule({T1: 1, T2: 2}, segment(), DruidCluster([make(T2), make(T2)]), round_robin, aliases={T1: (T2,)})
    assert (stat(stats, m.ASSIGNED, T1), stat(stats, m.ASSIGNED, T2)) == (0, 2)


@pytest.mark.druid_release("35.0.0")
def test_aliases_are_unknown_to_druid_35(make, round_robin):
    """Druid 35.0.0 has no tier aliases (its dynamic config ignores the key): the rule's T1 is a tier
    without servers, and nothing is loaded on T2 or T3."""
    from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config

    config = druid_config({"druidVersion": "35.0.0", "historicalTierAliases": {T1: [T2, T3]}})
    stats = run_rule({T1: 1}, segment(), DruidCluster([make(T2), make(T3)]), round_robin, aliases=config.aliases)
    assert stats.matching(m.ASSIGNED) == [] and run_rule.assigner.invalid_load_tiers["wiki"] == {T1}
