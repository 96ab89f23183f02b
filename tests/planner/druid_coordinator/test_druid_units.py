"""Druid 35.0.0's unit tests of the pieces of one Coordinator run, with Druid's values
(server/src/test/java/org/apache/druid/server/coordinator/, commit 259e62e3):
``RoundRobinServerSelectorTest``, ``ReplicationThrottlerTest``, ``CostBalancerStrategyTest``
(``testComputePlacementCost``), ``DiskNormalizedCostBalancerStrategyTest``; and the Java orders the
run reproduces, checked against OpenJDK 17 (``jshell``) on this machine."""

from __future__ import annotations

from datetime import UTC, datetime

import coordinator_sim
import pytest
from coordinator_sim import with_release
from java_random import JavaRandom

from segment_balancer.planner.cost import ETERNITY_END_MS, ETERNITY_START_MS
from segment_balancer.planner.druid_coordinator.assigner import ReplicationThrottler, RoundRobinSelector
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    DruidServer,
    LoadQueue,
    SegmentAction,
    ServerHolder,
    java_hash_order,
    java_map_capacity,
    java_string_hash,
)
from segment_balancer.planner.druid_coordinator.strategies import (
    CostStrategy,
    DiskNormalizedStrategy,
    heap_order,
    placement_cost,
)

DAY = 86_400_000


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def segment(i: int = 1, *, start: str = "2022-01-01", days: int = 1, size: int = 100, ds: str = "wiki", version="1"):
    s = ms(start)
    return DataSegment(f"{ds}_{start}_{i}_{version}", ds, s, s + days * DAY, version, i, size)


def holder(name: str, max_size: int, serving=(), tier: str = "normal", curr_size: int | None = None) -> ServerHolder:
    server = DruidServer(name=name, tier=tier, max_size=max_size)
    for s in serving:
        server.add(s)
    if curr_size is not None:  # the size the server reports, whatever it serves
        server.curr_size = curr_size
    return ServerHolder(server, LoadQueue(name))


# ----------------------------------------------------------------- RoundRobinServerSelectorTest
def round_robin_cluster():
    servers = [holder("serverXL", 1000), holder("serverM", 800), holder("serverXS", 10), holder("serverL", 900)]
    return {h.name: h for h in servers}, RoundRobinSelector(DruidCluster(servers))


def test_round_robin_single_iterator():
    """``testSingleIterator``: eligible servers only, most available bytes first."""
    by_name, selector = round_robin_cluster()
    picked = list(selector.servers_to_load("normal", segment()))
    assert picked == [by_name["serverXL"], by_name["serverL"], by_name["serverM"]]


def test_round_robin_next_iterator_continues_from_same_position():
    """``testNextIteratorContinuesFromSamePosition``."""
    by_name, selector = round_robin_cluster()
    assert next(selector.servers_to_load("normal", segment())) is by_name["serverXL"]
    picked = list(selector.servers_to_load("normal", segment()))
    assert picked == [by_name["serverL"], by_name["serverM"], by_name["serverXL"]]


def test_round_robin_no_servers_in_tier():
    """``testNoServersInTier``."""
    assert list(RoundRobinSelector(DruidCluster([])).servers_to_load("normal", segment())) == []


def test_round_robin_no_eligible_server_in_tier():
    """``testNoEligibleServerInTier``: every server smaller than the segment."""
    servers = [holder(f"server{i}", size) for i, size in ((1, 40), (2, 30), (3, 10), (4, 20))]
    assert list(RoundRobinSelector(DruidCluster(servers)).servers_to_load("normal", segment())) == []


# ----------------------------------------------------------------------- ReplicationThrottlerTest
def test_tier_does_not_violate_throttle_limit():
    """``testTierDoesNotViolateThrottleLimit``."""
    throttler = ReplicationThrottler({}, 10)
    for _ in range(10):
        assert not throttler.throttled("t1")
        throttler.assigned_replica("t1")
        assert not throttler.throttled("t2")
        throttler.assigned_replica("t2")
    assert throttler.throttled("t1") and throttler.throttled("t2")


def test_tier_with_loading_replicas_does_not_violate_throttle_limit():
    """``testTierWithLoadingReplicasDoesNotViolateThrottleLimit``."""
    throttler = ReplicationThrottler({"t1": 10, "t2": 7}, 10)
    assert throttler.throttled("t1")
    for _ in range(3):
        assert not throttler.throttled("t2")
        throttler.assigned_replica("t2")
    assert throttler.throttled("t2")


# ------------------------------------------------------------ CostBalancerStrategyTest, placement
def placement_cluster() -> tuple[list[DataSegment], list[ServerHolder]]:
    """``testComputePlacementCost``'s 230 segments of 100 MB dealt to 3 historicals by
    ``new Random(100).nextInt(3)``: 10 days x 10, 10 months x 10 from March 2022, 2023 x 30."""
    segments = []
    for d in range(10):
        start = ms("2022-01-01") + d * DAY
        segments += [DataSegment(f"day{d}_{p}", "wiki", start, start + DAY, "1", p, 100_000_000) for p in range(10)]
    for mth in range(10):
        start, end = ms(f"2022-{3 + mth:02d}-01"), ms(f"2022-{4 + mth:02d}-01" if mth < 9 else "2023-01-01")
        segments += [DataSegment(f"month{mth}_{p}", "wiki", start, end, "1", p, 100_000_000) for p in range(10)]
    y0, y1 = ms("2023-01-01"), ms("2024-01-01")
    segments += [DataSegment(f"year_{p}", "wiki", y0, y1, "1", p, 100_000_000) for p in range(30)]
    servers = [DruidServer(name=f"hist{i}", tier="t", max_size=10 << 30) for i in range(3)]
    rnd = JavaRandom(100)
    for s in segments:
        servers[rnd.next_int(3)].add(s)
    return segments, [ServerHolder(s, LoadQueue(s.name)) for s in servers]


ALL = DataSegment("wiki_all", "wiki", ETERNITY_START_MS, ETERNITY_END_MS, "1", 0, 100_000_000)


@pytest.mark.parametrize(
    "which, expected",
    [
        (0, [5191.500804, 8691.392080, 6418.467818]),
        (100, [301935.940609, 301935.940606, 304333.677669]),
        (200, [8468764.380437, 12098919.896931, 14501440.169452]),
        (None, [1.1534173737329768e7, 1.6340633534241956e7, 1.9026400521582970e7]),
    ],
)
def test_compute_placement_cost(which, expected):
    """``testComputePlacementCost``: the segment's cost on each server, itself subtracted where the
    server serves it (Druid's tolerance, 1e-6)."""
    segments, holders = placement_cluster()
    placed = ALL if which is None else segments[which]
    assert [placement_cost(placed, h) for h in holders] == pytest.approx(expected, abs=1e-6)
    if which is not None:
        assert sum(h.serves(placed) for h in holders) == 1


def test_interval_arrays_follow_loads_and_drops_as_a_rebuild_would():
    """The arrays the cost strategy scans, kept up to date as loads and drops are queued, hold the
    counts the server's projection has (zero rows where a projection ended)."""

    def counts_of(arrays):
        starts, ends, counts, ids = (a.tolist() for a in arrays)
        known = zip(h.interval_ids.starts.tolist(), h.interval_ids.ends.tolist())
        numbering = {pair: number for number, pair in enumerate(known)}
        assert all(numbering[(s, e)] == i for s, e, i in zip(starts, ends, ids))  # each row its interval's number
        return {(s, e): n for s, e, n in zip(starts, ends, counts) if n}

    served = [segment(i, start=f"2022-01-0{1 + i % 3}", ds="wiki" if i % 2 else "koala") for i in range(6)]
    h = holder("h", 10_000, served)
    h.interval_arrays()
    h.start(SegmentAction.DROP, served[0])
    h.start(SegmentAction.LOAD, segment(9, start="2022-02-01", ds="wiki"))
    h.start(SegmentAction.LOAD, segment(10, start="2022-01-02", ds="koala"))
    for datasource in (None, "wiki", "koala", "absent"):
        rebuilt = holder("r", 10_000)
        rebuilt.interval_ids = h.interval_ids
        rebuilt.projected_per_interval, rebuilt.projected = h.projected_per_interval, h.projected
        assert counts_of(h.interval_arrays(datasource)) == counts_of(rebuilt.interval_arrays(datasource))
    assert counts_of(h.interval_arrays("wiki"))[(ms("2022-02-01"), ms("2022-02-02"))] == 1
    assert (ms("2022-01-01"), ms("2022-01-02")) not in counts_of(h.interval_arrays("koala"))


def test_placement_costs_of_a_cluster_are_those_of_its_servers_one_by_one(monkeypatch):
    """Servers of one ``DruidCluster`` share one numbering of intervals, and the cost strategy
    computes each interval's joint cost once for all of them: every server's cost is, to the bit,
    the one computed per server and interval (servers numbered apart), before and after loads and
    drops; summed over the servers' dense counts by interval or over their gathered rows (past
    ``DENSE_CELLS_AT_MOST``) alike."""
    from segment_balancer.planner.druid_coordinator import strategies
    from segment_balancer.planner.druid_coordinator.model import DruidCluster, IntervalIds
    from segment_balancer.planner.druid_coordinator.strategies import placement_costs

    days = [f"2022-01-{d:02d}" for d in range(1, 29)]
    holders = [
        holder(
            f"h{k}",
            10**9,
            [segment(10 * k + i, start=days[(3 * k + 5 * i) % 28], ds="wiki" if i % 3 else "koala") for i in range(9)],
        )
        for k in range(5)
    ]
    cluster = DruidCluster(holders)
    assert all(h.interval_ids is cluster.interval_ids for h in holders)
    probes = [segment(100 + i, start=days[(7 * i) % 28], ds="wiki" if i % 2 else "koala") for i in range(6)]

    def apart(probe):
        for h in holders:
            h.interval_ids = IntervalIds()
        try:
            return placement_costs(probe, holders)
        finally:
            for h in holders:
                h.interval_ids = cluster.interval_ids

    for _ in range(2):
        for probe in probes:
            shared = placement_costs(probe, holders)
            assert len(set(shared)) > 1  # the servers' costs differ: a mix-up would show
            assert shared == apart(probe)
            with monkeypatch.context() as m:
                m.setattr(strategies, "DENSE_CELLS_AT_MOST", 0)
                assert placement_costs(probe, holders) == shared
        holders[0].start(SegmentAction.LOAD, probes[1])
        holders[2].start(SegmentAction.DROP, next(iter(holders[2].server.segments.values())))


# ------------------------------------------------------------ DiskNormalizedCostBalancerStrategyTest
@pytest.mark.druid_release("35.0.0")
def test_disk_normalized_prefers_the_server_with_the_most_room():
    """``testNormalizedCostBalancerSingleThreadStrategy`` (and the multi-threaded one: threads do not
    change the order): ten historicals of 10 million bytes and one of 100 million, each serving the
    same 20 segments (3000 bytes in use); a new segment goes to the large one, BEST_SERVER."""

    def dummy(i: int) -> DataSegment:
        return DataSegment(f"DUMMY_{i}", "DUMMY", ms("2022-01-01"), ms("2022-01-02"), str(i), 0, i * 100)

    same = [dummy(j) for j in range(20)]
    servers = [holder(f"DruidServer_Name_{i}", 10_000_000, same, curr_size=3000) for i in range(10)]
    servers.append(holder("BEST_SERVER", 100_000_000, same, curr_size=3000))
    assert next(DiskNormalizedStrategy().servers_to_load(dummy(1000), servers)).name == "BEST_SERVER"


# ---------------------------------------------------------------------------- heap order, ties
def test_heap_order_is_the_priority_queue_array_not_a_sorted_list():
    """Java's ``PriorityQueue`` offered costs 5, 1, 4, 2, 3, worked by hand: 1 rises over 5; 4 stays
    under 1; 2 rises over 5 and stops under 1; 3 stops under 2. Its array is [1, 2, 4, 5, 3]: only
    the first is the cheapest, and Druid streams the array in that order."""
    servers = [holder(f"s{c}", 1000) for c in range(5)]
    costs = [5.0, 1.0, 4.0, 2.0, 3.0]
    order = heap_order(list(zip(costs, servers)))
    assert [costs[servers.index(h)] for h in order] == [1.0, 2.0, 4.0, 5.0, 3.0]


def test_equal_costs_go_to_more_available_bytes_then_the_larger_host():
    small, big, big_b = holder("a", 1000), holder("b", 2000), holder("c", 2000)
    assert heap_order([(1.0, small), (1.0, big), (1.0, big_b)])[0] is big_b
    assert CostStrategy().destination_to_move(segment(), small, [big, small]) is big


# ------------------------------------------------------------------------------ Java's orders
def test_java_string_hash():
    assert java_string_hash("hello") == 99162322  # OpenJDK 17
    assert java_string_hash("") == 0


def test_java_hash_set_order_of_tiers():
    """``new ArrayList<>(new HashSet<>(List.of(...)))`` printed by OpenJDK 17's jshell."""
    tiers = ["tier_t1", "tier_t2", "_default_tier", "hot", "cold", "warm"]
    assert java_hash_order(tiers) == ["_default_tier", "warm", "cold", "hot", "tier_t1", "tier_t2"]


def test_java_hash_map_order_after_a_resize():
    """A ``HashMap`` given 14 keys one at a time (32 buckets), its key set, from OpenJDK 17."""
    keys = ["hot", "_default_tier", "cold", "tier_t2", "tier_t1", "warm", "ssd", "hdd", "a", "b", "c", "d", "e", "f"]
    expected = [
        "a",
        "_default_tier",
        "b",
        "c",
        "d",
        "ssd",
        "e",
        "f",
        "hdd",
        "cold",
        "hot",
        "warm",
        "tier_t1",
        "tier_t2",
    ]
    assert java_map_capacity(len(keys)) == 32
    assert java_hash_order(keys, java_map_capacity(len(keys))) == expected
    assert java_hash_order(keys) == expected  # new HashSet<>(that key set)


# ------------------------------------------------------------------- CollectSegmentStats
def test_unavailable_and_under_replicated_as_druid_counts_them():
    """``DruidCoordinator.getDatasourceToUnavailableSegmentCount``: a used segment is unavailable
    unless a server has it or its rule wants no replica (an overshadowed one, which no rule visits,
    has no count: unavailable); ``getTierToDatasourceToUnderReplicated``: per tier, replicas
    required and loadable less those loaded, for every segment the rules visited."""
    from segment_balancer.druid.rules import Rule
    from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
    from segment_balancer.planner.druid_coordinator.run import ClusterState, run_coordinator

    a, b = segment(1, ds="wiki"), segment(2, ds="wiki")
    c, d = segment(3, ds="none"), segment(4, ds="wiki", version="0")
    h1 = holder("h1", 10_000, serving=[a], tier="t")
    h2 = holder("h2", 10_000, tier="t")
    state = ClusterState(
        servers=[h1.server, h2.server],
        used={s.id: s for s in (a, b, c, d)},
        rules={"none": [Rule("loadForever", "load", {"t": 0})], "_default": [Rule("loadForever", "load", {"t": 2})]},
        overshadowed={d.id},
    )
    stats = run_coordinator(
        state, druid_config(with_release({"smartSegmentLoading": False, "maxSegmentsToMove": 0})), now_ms=0
    ).stats
    assert stats.total("segment/unavailable/count", dataSource="wiki") == 2  # b and d
    assert stats.matching("segment/unavailable/count", dataSource="none") == [0]
    # a: 2 required and loadable, 1 loaded; b: 2 and 0
    assert stats.total("segment/underReplicated/count", tier="t", dataSource="wiki") == 3


# ------------------------------------------------------------------ ReservoirSegmentSamplerTest
def test_every_segment_gets_picked_at_least_once():
    """``testEverySegmentGetsPickedAtleastOnce``: four servers of one segment each, one pick, 50
    times: every segment is picked at some point."""
    import random

    from segment_balancer.planner.druid_coordinator.balancer import pick_movable_segments

    segments = [segment(i, start=f"2022-01-0{i}") for i in range(1, 5)]
    servers = [holder(f"server{i}", 100_000, [s], tier="normal") for i, s in enumerate(segments, 1)]
    rng = random.Random(0)
    picked = {pick_movable_segments(servers, 1, ServerHolder.served_segments, set(), rng)[0].segment for _ in range(50)}
    assert picked == set(segments)


def test_pick_loading_or_loaded_segments():
    """``testPickLoadingOrLoadedSegments``: the loading provider gives only the loading segments, the
    served one only the served."""
    import random

    from segment_balancer.planner.druid_coordinator.balancer import pick_movable_segments
    from segment_balancer.planner.druid_coordinator.model import SegmentAction

    s = [segment(i, start=f"2022-01-0{i}") for i in range(1, 5)]
    server1, server2 = (
        holder("server1", 100_000, [s[0]], tier="normal"),
        holder("server2", 100_000, [s[1]], tier="normal"),
    )
    server1.start(SegmentAction.LOAD, s[2])
    server2.start(SegmentAction.LOAD, s[3])
    rng = random.Random(0)
    loading = pick_movable_segments([server1, server2], 10, ServerHolder.loading_segments, set(), rng)
    served = pick_movable_segments([server1, server2], 10, ServerHolder.served_segments, set(), rng)
    assert {p.segment for p in loading} == {s[2], s[3]} and {p.segment for p in served} == {s[0], s[1]}


def test_broadcast_segments_are_ignored():
    """``testBroadcastSegmentsAreIgnored``: of four broadcast segments and two others, only the two
    are picked."""
    import random

    from segment_balancer.planner.druid_coordinator.balancer import pick_movable_segments

    broadcast = [segment(i, start=f"2022-01-0{i}", ds="ds_broadcast", size=100) for i in range(1, 5)]
    others = [segment(i, start=f"2022-01-0{i}") for i in range(1, 3)]
    servers = [holder("server1", 100_000, broadcast, tier="normal"), holder("server2", 100_000, others, tier="normal")]
    picked = pick_movable_segments(servers, 10, ServerHolder.served_segments, {"ds_broadcast"}, random.Random(0))
    assert sorted(p.segment.id for p in picked) == sorted(s.id for s in others)


# --------------------------------------------------------------------- UnloadUnusedSegmentsTest
def test_unload_unused_segments_from_all_servers():
    """``test_unloadUnusedSegmentsFromAllServers``: of datasource1's, datasource2's and a broadcast
    datasource's segments on two historicals (tiers ``_default_tier`` and tier2), a broker and an
    indexer (both ``_default_tier``), only segment2 is used: segment1 goes from the historicals and
    the broker, the broadcast segment from all four; the indexer keeps its realtime segment of
    datasource2 (a realtime server keeps what it serves, but broadcast segments)."""
    from segment_balancer.druid.rules import Rule
    from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
    from segment_balancer.planner.druid_coordinator.model import ServerType
    from segment_balancer.planner.druid_coordinator.run import ClusterState, run_coordinator

    hour = 3_600_000
    jan, feb = ms("2012-01-01"), ms("2012-02-01")
    seg1 = DataSegment("datasource1_1", "datasource1", jan, jan + hour, "2012-05-01", 0, 11)
    seg2 = DataSegment("datasource2_1", "datasource2", jan, jan + hour, "2012-05-01", 0, 7)
    realtime_only = DataSegment("datasource2_2", "datasource2", feb, feb + hour, "2012-05-01", 0, 7)
    broadcast = DataSegment("broadcastDatasource_1", "broadcastDatasource", jan, jan + hour, "2012-05-01", 0, 7)

    def server(name, tier, kind, segments):
        s = DruidServer(name=name, tier=tier, max_size=100, type=kind)
        for x in segments:
            s.add(x)
        s.curr_size = 30
        return s

    on_all = [seg1, seg2, broadcast]
    servers = [
        server("historical", "_default_tier", ServerType.HISTORICAL, on_all),
        server("historicalTier2", "tier2", ServerType.HISTORICAL, on_all),
        server("broker", "_default_tier", ServerType.BROKER, on_all),
        server("indexer", "_default_tier", ServerType.INDEXER_EXECUTOR, [realtime_only, broadcast]),
    ]
    load = [Rule("loadForever", "load", {"_default_tier": 1, "tier2": 1})]
    rules = {"datasource1": load, "datasource2": load, "broadcastDatasource": [Rule("broadcastForever", "broadcast")]}
    state = ClusterState(servers=servers, used={seg2.id: seg2}, rules={**rules, "_default": load})
    stats = run_coordinator(state, druid_config(with_release()), now_ms=0).stats
    assert stats.total("segment/unneeded/count", tier="_default_tier", dataSource="datasource1") == 2
    assert stats.total("segment/unneeded/count", tier="tier2", dataSource="datasource1") == 1
    assert stats.total("segment/unneeded/count", tier="_default_tier", dataSource="broadcastDatasource") == 3
    assert stats.total("segment/unneeded/count", tier="tier2", dataSource="broadcastDatasource") == 1
    assert stats.total("segment/unneeded/count", dataSource="datasource2") == 0


# ------------------------------------------------------------ MarkOvershadowedSegmentsAsUnusedTest
@pytest.mark.parametrize("kind", ["historical", "broker"])
def test_overshadowed_segments_served_over_are_marked_unused(kind):
    """``MarkOvershadowedSegmentsAsUnusedTest.testRun``: versions 0, 1 and 2 of one hour, a
    historical (or a broker) serving 1 and 2: 0 and 1 are marked unused
    (``segment/overshadowed/count`` 2)."""
    from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
    from segment_balancer.planner.druid_coordinator.model import ServerType
    from segment_balancer.planner.druid_coordinator.run import ClusterState, run_coordinator
    from segment_balancer.planner.druid_coordinator.simulation import overshadowed_ids

    start = ms("2012-01-01")
    v0, v1, v2 = (
        DataSegment(f"test_v{v}", "test", start, start + 3_600_000, str(v), 0, 0, shard_type="none") for v in range(3)
    )
    server = DruidServer(name="s", tier="", max_size=0, type=ServerType(kind))
    server.add(v1)
    server.add(v2)
    used = {s.id: s for s in (v0, v1, v2)}
    assert overshadowed_ids(used.values()) == {v0.id, v1.id}
    state = ClusterState(servers=[server], used=used, rules={}, overshadowed={v0.id, v1.id})
    result = run_coordinator(
        state, druid_config(with_release({"millisToWaitBeforeDeleting": 0})), now_ms=0, uptime_ms=0
    )
    assert result.overshadowed == {v0.id, v1.id}
    assert result.stats.matching("segment/overshadowed/count", dataSource="test") == [2]


# ------------------------------------------------------------------------- BalancerStrategyTest
@pytest.mark.parametrize("strategy", ["cost", "random"])
def test_balancer_strategy_finds_a_home_only_where_it_can_load(strategy):
    """``BalancerStrategyTest``, for ``cost`` and ``random``: no server for a segment a full server
    already holds (``findNewSegmentHomeReplicatorNotEnoughSpace``) or both servers hold
    (``…NotEnoughNodesForReplication``); the one server with room (``…EnoughSpace``)."""
    import random

    from segment_balancer.planner.druid_coordinator.strategies import make_strategy

    proposed = DataSegment("datasource1_0_1", "datasource1", 0, 1, "", 0, 11)
    chooser = make_strategy(strategy, random.Random(0), release=coordinator_sim.RELEASE)
    full = holder("server1", 10, [proposed], tier="_default_tier")
    assert list(chooser.servers_to_load(proposed, [full])) == []
    both = [holder(f"server{i}", 1000, [proposed], tier="_default_tier") for i in (1, 2)]
    assert list(chooser.servers_to_load(proposed, both)) == []
    room = holder("server1", 1000, tier="_default_tier")
    assert next(chooser.servers_to_load(proposed, [room])) is room


# ------------------------------------------------------------------------ HttpLoadQueuePeonTest
def _day(start: str, n: int = 4) -> list[DataSegment]:
    return [segment(p, start=start, ds="test") for p in range(n)]


def test_priority_of_segment_action_and_interval():
    """``testPriorityOfSegmentAction`` and ``testPriorityOfSegmentInterval``: a load queue sends drops,
    then loads, replicas and moves; within each, the newer interval first; whatever the order they
    were queued in."""
    import random

    from segment_balancer.planner.druid_coordinator.model import SegmentAction

    day1, day2 = _day("2022-01-01"), _day("2022-01-02")
    actions = [
        (day2[0], None),
        (day1[0], None),
        (day2[1], SegmentAction.LOAD),
        (day1[1], SegmentAction.LOAD),
        (day2[2], SegmentAction.REPLICATE),
        (day1[2], SegmentAction.REPLICATE),
        (day2[3], SegmentAction.MOVE_TO),
        (day1[3], SegmentAction.MOVE_TO),
    ]
    expected = [s for s, _ in actions]
    shuffled = actions[:]
    random.Random(7).shuffle(shuffled)
    queue = LoadQueue("server")
    for seg, action in shuffled:
        queue.drop(seg) if action is None else queue.load(seg, action)
    assert [r.segment for r in queue.requests()] == expected


def test_cancel_load_and_drop_and_not_twice_nor_once_sent():
    """``testCancelLoad``, ``testCancelDrop``, ``testCannotCancelOperationMultipleTimes``,
    ``testCannotCancelRequestSentToServer``."""
    from segment_balancer.planner.druid_coordinator.model import SegmentAction

    seg = _day("2022-01-01", 1)[0]
    outcomes: list[bool] = []
    queue = LoadQueue("server")
    queue.load(seg, SegmentAction.REPLICATE, outcomes.append)
    assert len(queue.to_load) == 1 and queue.cancel(seg) and not queue.to_load
    assert True not in outcomes  # never processed as a success
    assert not queue.cancel(seg)  # not twice
    queue.drop(seg)
    assert queue.cancel(seg) and not queue.to_drop
    queue.load(seg, SegmentAction.REPLICATE)
    queue.in_flight.add(seg.id)  # sent to the server
    assert not queue.cancel(seg) and seg.id in queue.to_load


def test_stacked_dense_counts_follow_every_projection():
    """The cluster's matrix of dense interval counts (each holder's, plus one datasource's): a row
    per holder asked, in the order asked, equal to the holder's own counts after loads, drops and
    drops on some holders, after intervals numbered since, and for another datasource."""
    import numpy as np

    from segment_balancer.planner.druid_coordinator.model import stacked_dense_counts

    a = [segment(i, start=f"2022-01-0{1 + i % 3}") for i in range(6)]
    b = [segment(i, start=f"2022-01-0{1 + i % 2}", ds="koala") for i in range(4)]
    h1, h2, h3 = holder("h1", 10_000, a[:3] + b[:2]), holder("h2", 10_000, a[3:]), holder("h3", 10_000, b[2:])
    DruidCluster([h1, h2, h3])

    def expected(holders, datasource):
        n = len(h1.interval_ids)
        rows = [
            np.zeros(n),
            *[h.dense_interval_counts() for h in holders],
            *[h.dense_interval_counts(datasource) for h in holders],
        ]
        return [
            np.pad(rows[1 + k], (0, n - len(rows[1 + k])))
            + np.pad(rows[1 + len(holders) + k], (0, n - len(rows[1 + len(holders) + k])))
            for k in range(len(holders))
        ]

    def check(holders, datasource):
        matrix, rows, weights = stacked_dense_counts(holders, datasource)
        want = expected(holders, datasource)
        n = len(h1.interval_ids)
        for k, row in enumerate(rows):
            assert matrix[row, :n].tolist() == want[k].tolist()
            assert not matrix[row, n:].any()
            assert weights[row] == want[k].sum()

    check([h2, h1], "wiki")
    check([h3, h1, h2], "koala")
    h2.start(SegmentAction.LOAD, b[0])  # koala's interval on h2
    h1.start(SegmentAction.DROP, a[0])
    check([h1, h2, h3], "wiki")
    check([h1, h2, h3], "koala")
    later = segment(9, start="2022-03-01", days=3)  # an interval numbered only now
    h3.start(SegmentAction.LOAD, later)
    check([h3, h2], "wiki")
    h2.start(SegmentAction.DROP, a[3])
    check([h2, h1, h3], "wiki")
    # by hand: every segment h1, h2, h3 project (4, 3, 3), plus their wiki ones again (2, 2, 1)
    matrix, rows, _ = stacked_dense_counts([h1, h2, h3], "wiki")
    assert matrix[rows].sum() == 4 + 3 + 3 + 2 + 2 + 1
