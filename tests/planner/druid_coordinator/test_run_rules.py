"""Druid's ``RunRulesTest`` (server/src/test/java/org/apache/druid/server/coordinator/duty/, Druid
35.0.0, commit 259e62e3): the rules duty alone, with Druid's values. The used segments are 24 hourly
segments of ``test`` from 2012-01-01 (1 MB each), the historicals 10 GB, the config Druid's default
(smart loading) unless a case says otherwise. ``testRunRuleDoesNotExist`` checks an alert, which this
port does not raise (segments without a rule are left alone, as Druid leaves them)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from coordinator_sim import with_release

from segment_balancer.druid import metrics as m
from segment_balancer.druid.rules import Rule, parse_interval
from segment_balancer.planner.druid_coordinator.assigner import DEFAULT_TIER, StrategicSegmentAssigner
from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    DruidServer,
    LoadQueue,
    ServerHolder,
)
from segment_balancer.planner.druid_coordinator.run import ClusterState, run_rules
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.simulation import overshadowed_ids
from segment_balancer.planner.druid_coordinator.strategies import make_strategy

HOUR = 3_600_000
JAN_1_2012 = int(datetime(2012, 1, 1, tzinfo=UTC).timestamp() * 1000)
SERVER_SIZE_10GB = 10 << 30
USED = [
    DataSegment(f"test_{h}", "test", JAN_1_2012 + h * HOUR, JAN_1_2012 + (h + 1) * HOUR, "1", 0, 1_000_000)
    for h in range(24)
]
SMART_OFF_THROTTLE_10 = {"smartSegmentLoading": False, "replicationThrottleLimit": 10}


def historical(name: str, tier: str, serving=(), max_size: int = SERVER_SIZE_10GB) -> ServerHolder:
    server = DruidServer(name=name, tier=tier, max_size=max_size)
    for s in serving:
        server.add(s)
    return ServerHolder(server, LoadQueue(name))


def interval_load(interval: str, tiers: dict[str, int]) -> Rule:
    start, end = parse_interval(interval)
    return Rule("loadByInterval", "load", tiers, start, end)


def interval_drop(interval: str) -> Rule:
    start, end = parse_interval(interval)
    return Rule("dropByInterval", "drop", {}, start, end)


def run(holders, rules, used=USED, config=None, strategy="cost", overshadowed=frozenset()):
    """``runDutyAndGetStats``: a run's assigner on ``holders`` (the config's loading limits for
    ``used``), then RunRules with ``rules`` for every datasource. Returns (stats, assigner)."""
    cfg = druid_config(with_release(config))
    loading = cfg.loading(len(used))
    stats = RunStats()
    assigner = StrategicSegmentAssigner(
        DruidCluster(holders),
        make_strategy(strategy, random.Random(0)),
        stats,
        loading.replication_throttle_limit,
        loading.use_round_robin_assignment,
        release=cfg.release,
    )
    state = ClusterState(servers=[h.server for h in holders], used={s.id: s for s in used}, rules={"test": rules})
    state.overshadowed = set(overshadowed)
    run_rules(state, assigner, now_ms=JAN_1_2012)
    return stats, assigner


def segment_stat(stats: RunStats, metric: str, tier: str) -> int:
    return stats.total(metric, tier=tier, dataSource="test")


def test_one_tier_two_replicants_with_strict_replicant_limit():
    """``testOneTierTwoReplicantsWithStrictReplicantLimit``: 24 under-replicated, 10 assigned."""
    holders = [historical("server1", "normal", USED), historical("server2", "normal")]
    stats, _ = run(holders, [interval_load("2012-01-01/2012-01-02", {"normal": 2})], config=SMART_OFF_THROTTLE_10)
    assert segment_stat(stats, m.ASSIGNED, "normal") == 10


def test_two_tiers_two_replicants_with_strict_replicant_limit():
    """``testTwoTiersTwoReplicantsWithStrictReplicantLimit``: replicas of a loaded tier are throttled
    (10); the first replicas of an empty tier are not (48)."""
    holders = [
        historical("serverHot", "hot", USED),
        historical("serverHot2", "hot"),
        historical("serverNorm", "normal"),
        historical("serverNorm2", "normal"),
    ]
    rule = interval_load("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z", {"hot": 2, "normal": 2})
    stats, _ = run(holders, [rule], config=SMART_OFF_THROTTLE_10)
    assert segment_stat(stats, m.ASSIGNED, "hot") == 10 and segment_stat(stats, m.ASSIGNED, "normal") == 48


def test_run_three_tiers_one_replicant():
    """``testRunThreeTiersOneReplicant``: the first rule that applies wins."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T06:00:00.000Z", {"hot": 1}),
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T12:00:00.000Z", {"normal": 1}),
        interval_load("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z", {"cold": 1}),
    ]
    holders = [historical("serverHot", "hot"), historical("serverNorm", "normal"), historical("serverCold", "cold")]
    stats, _ = run(holders, rules, config={"maxSegmentsToMove": 5})
    assert [segment_stat(stats, m.ASSIGNED, t) for t in ("hot", "normal", "cold")] == [6, 6, 12]
    assert stats.matching(m.DROPPED) == []


def test_run_two_tiers_two_replicants():
    """``testRunTwoTiersTwoReplicants``."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T06:00:00.000Z", {"hot": 2}),
        interval_load("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z", {"cold": 1}),
    ]
    holders = [historical("serverHot", "hot"), historical("serverHot2", "hot"), historical("serverCold", "cold")]
    stats, _ = run(holders, rules)
    assert segment_stat(stats, m.ASSIGNED, "hot") == 12 and segment_stat(stats, m.ASSIGNED, "cold") == 18
    assert stats.matching(m.DROPPED) == []


def test_run_two_tiers_with_existing_segments():
    """``testRunTwoTiersWithExistingSegments``: the replica in a tier the rule does not name stays
    (no replica beyond those required and loadable to drop)."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T12:00:00.000Z", {"hot": 1}),
        interval_load("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z", {"normal": 1}),
    ]
    holders = [historical("serverHot", "hot"), historical("serverNorm", "normal", USED)]
    stats, _ = run(holders, rules)
    assert segment_stat(stats, m.ASSIGNED, "hot") == 12 and segment_stat(stats, m.ASSIGNED, "normal") == 0
    assert stats.matching(m.DROPPED) == []


def test_run_two_tiers_tier_does_not_exist():
    """``testRunTwoTiersTierDoesNotExist``: a rule naming an absent tier is only noted."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T12:00:00.000Z", {"hot": 1}),
        interval_load("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z", {"normal": 1}),
    ]
    stats, assigner = run([historical("serverNorm", "normal")], rules)
    assert assigner.invalid_load_tiers == {"test": {"hot"}}
    assert segment_stat(stats, m.ASSIGNED, "normal") == 12


def test_drop_remove():
    """``testDropRemove``: a drop rule marks its segments to delete."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T12:00:00.000Z", {"normal": 1}),
        interval_drop("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z"),
    ]
    stats, _ = run([historical("serverNorm", "normal", USED)], rules)
    assert stats.matching(m.DELETED, dataSource="test") == [12]


def test_drop_too_many_in_same_tier():
    """``testDropTooManyInSameTier``."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T12:00:00.000Z", {"normal": 1}),
        interval_drop("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z"),
    ]
    holders = [historical("serverNorm", "normal", USED[:1]), historical("serverNorm2", "normal", USED)]
    stats, _ = run(holders, rules, config={"millisToWaitBeforeDeleting": 0})
    assert segment_stat(stats, m.DROPPED, "normal") == 1
    assert stats.matching(m.DELETED, dataSource="test") == [12]


def test_drop_too_many_in_different_tiers():
    """``testDropTooManyInDifferentTiers``."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T12:00:00.000Z", {"hot": 1}),
        interval_drop("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z"),
    ]
    holders = [historical("server1", "hot", USED[:1]), historical("serverNorm2", "normal", USED)]
    stats, _ = run(holders, rules)
    assert segment_stat(stats, m.DROPPED, "normal") == 1
    assert stats.matching(m.DELETED, dataSource="test") == [12]


def test_dont_drop_in_different_tiers():
    """``testDontDropInDifferentTiers``: until the hot replica has loaded, the normal one stays."""
    rules = [
        interval_load("2012-01-01T00:00:00.000Z/2012-01-01T12:00:00.000Z", {"hot": 1}),
        interval_drop("2012-01-01T00:00:00.000Z/2012-01-02T00:00:00.000Z"),
    ]
    holders = [historical("server1", "hot"), historical("serverNorm2", "normal", USED)]
    stats, _ = run(holders, rules)
    assert stats.matching(m.DROPPED) == []
    assert stats.matching(m.DELETED, dataSource="test") == [12]


def test_drop_server_actually_serves_segment():
    """``testDropServerActuallyServesSegment``: no replica wanted of the first hour: dropped from
    the one server that has it."""
    holders = [
        historical("server1", "normal", USED[:1]),
        historical("serverNorm2", "normal", USED[1:2]),
        historical("serverNorm3", "normal", USED[1:3]),
    ]
    stats, _ = run(holders, [interval_load("2012-01-01T00:00:00.000Z/2012-01-01T01:00:00.000Z", {"normal": 0})])
    assert segment_stat(stats, m.DROPPED, "normal") == 1


def test_no_throttle_when_segment_not_loaded_in_tier():
    """``testNoThrottleWhenSegmentNotLoadedInTier``: 24 segments x 2 replicas on an empty tier, all
    first replicas of the tier; a second run (the same historicals, their loads queued) with one
    more segment assigns its 2."""
    holders = [historical("serverHot", "hot"), historical("serverHot2", "hot")]
    rule = interval_load("2012-01-01T00:00:00.000Z/2013-01-01T00:00:00.000Z", {"hot": 2})
    stats, _ = run(holders, [rule])
    assert segment_stat(stats, m.ASSIGNED, "hot") == 48 and stats.matching(m.DROPPED) == []
    start, end = parse_interval("2012-02-01/2012-02-02")
    overflow = DataSegment("test_overflow", "test", start, end, "now", 0, 0)
    stats, _ = run(holders, [rule], used=[overflow])
    assert segment_stat(stats, m.ASSIGNED, "hot") == 2


def test_replicant_throttle_across_tiers():
    """``testReplicantThrottleAcrossTiers``: the first replica of each tier is never throttled."""
    holders = [historical("serverHot", "hot"), historical("serverNorm", DEFAULT_TIER)]
    stats, _ = run(holders, [interval_load("2012-01-01/2013-01-01", {"hot": 1, DEFAULT_TIER: 1})])
    assert segment_stat(stats, m.ASSIGNED, "hot") == 24 and segment_stat(stats, m.ASSIGNED, DEFAULT_TIER) == 24
    assert stats.matching(m.DROPPED) == []


def test_drop_replicant_throttle():
    """``testDropReplicantThrottle``: drops are not throttled: 25 of 25."""
    start, end = parse_interval("2012-02-01/2012-02-02")
    longer = [*USED, DataSegment("test_overflow", "test", start, end, "now", 0, 0)]
    holders = [historical("serverNorm1", "normal", longer), historical("serverNorm2", "normal", longer)]
    stats, _ = run(holders, [interval_load("2012-01-01/2013-01-02", {"normal": 1})], used=longer)
    assert segment_stat(stats, m.DROPPED, "normal") == 25


def test_rules_run_on_non_overshadowed_segments_only():
    """``testRulesRunOnNonOvershadowedSegmentsOnly``: of versions 1 and 2 of one day, only 2 is
    loaded."""
    start, end = parse_interval("2012-01-01/2012-01-02")
    v1, v2 = (DataSegment(f"test_v{v}", "test", start, end, str(v), 0, 1, shard_type="none") for v in (1, 2))
    assert overshadowed_ids([v1, v2]) == {v1.id}
    stats, _ = run(
        [historical("serverHot", DEFAULT_TIER)],
        [Rule("loadForever", "load", {DEFAULT_TIER: 1})],
        used=[v1, v2],
        overshadowed={v1.id},
    )
    assert segment_stat(stats, m.ASSIGNED, DEFAULT_TIER) == 1 and stats.matching(m.DROPPED) == []


def _utc_0_1() -> DataSegment:
    return DataSegment("test_0_1", "test", 0, 1, "now", 0, 1)


def test_two_nodes_one_tier_three_replicants_random_strategy_not_enough_nodes():
    """``testTwoNodesOneTierThreeReplicantsRandomStrategyNotEnoughNodes``: 3 wanted, both historicals
    have it: nothing to assign, no loop."""
    seg = _utc_0_1()
    holders = [historical("server1", DEFAULT_TIER, [seg]), historical("server2", DEFAULT_TIER, [seg])]
    stats, _ = run(holders, [Rule("loadForever", "load", {DEFAULT_TIER: 3})], used=[seg], strategy="random")
    assert segment_stat(stats, m.ASSIGNED, DEFAULT_TIER) == 0 and stats.matching(m.DROPPED) == []


def test_one_node_one_tier_one_replicant_random_strategy_enough_space():
    """``testOneNodesOneTierOneReplicantRandomStrategyEnoughSpace``."""
    seg = _utc_0_1()
    stats, _ = run(
        [historical("server1", DEFAULT_TIER)],
        [Rule("loadForever", "load", {DEFAULT_TIER: 1})],
        [seg],
        strategy="random",
    )
    assert segment_stat(stats, m.ASSIGNED, DEFAULT_TIER) == 1 and stats.matching(m.DROPPED) == []


def test_one_node_one_tier_one_replicant_not_enough_space():
    """``testOneNodesOneTierOneReplicantRandomStrategyNotEnoughSpace`` and its ``CostBalancerStrategy``
    twin: an 11-byte segment, a 10-byte historical: the required capacity is counted, nothing
    assigned."""
    seg = DataSegment("test_0_1", "test", 0, 1, "now", 0, 11)
    for strategy in ("random", "cost"):
        stats, _ = run(
            [historical("server1", DEFAULT_TIER, max_size=10)],
            [Rule("loadForever", "load", {DEFAULT_TIER: 1})],
            [seg],
            strategy=strategy,
        )
        assert stats.matching(m.REQUIRED_CAPACITY, tier=DEFAULT_TIER) == [11]
        assert segment_stat(stats, m.ASSIGNED, DEFAULT_TIER) == 0 and stats.matching(m.DROPPED) == []


def test_segment_with_zero_required_replicas_has_zero_replication_factor():
    """``testSegmentWithZeroRequiredReplicasHasZeroReplicationFactor``: a load rule with no tiers."""
    _, assigner = run(
        [historical("server", "normal")], [Rule("loadForever", "load", {})], used=USED[:1], strategy="random"
    )
    total = assigner.replica_counts.total(USED[0])
    assert USED[0].id in assigner.replica_counts.counts
    assert (total.required, total.total_loaded, total.required_and_loadable) == (0, 0, 0)
