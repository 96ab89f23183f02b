"""Druid's ``SegmentLoadingTest`` (server/src/test/java/org/apache/druid/server/coordinator/simulate/,
Druid 35.0.0, commit 259e62e3): every case, with Druid's expected values, on the ``druid``
coordinator."""

from __future__ import annotations

from coordinator_sim import (
    BROADCAST,
    DROP,
    KOALA_100X100D,
    T1,
    T2,
    WIKI_10X1D,
    historical,
    load,
    not_emitted,
    replication_throttle_limit,
    serving,
    simulation,
    value,
)

from segment_balancer.druid import metrics as m

SIZE_10GB = 10_000  # MB, the historicals of SegmentLoadingTest.setUp


def h(i: int, tier: str = T1, size_mb: int = SIZE_10GB, serving=()):
    return historical(i, tier, size_mb, serving)


T11, T12, T13, T21, T22 = (
    "tier_t1__hist__1",
    "tier_t1__hist__2",
    "tier_t1__hist__3",
    "tier_t2__hist__1",
    "tier_t2__hist__2",
)


def test_second_replica_on_any_tier_is_throttled():
    """``testSecondReplicaOnAnyTierIsThrottled``."""
    sim = simulation(
        [h(1, serving=WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=2)}, replication_throttle_limit(2)
    )
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 2
    sim.load_queued_segments()
    assert serving(sim, T11) == 10 and serving(sim, T12) == 2


def test_loading_does_not_overassign_historical():
    """``testLoadingDoesNotOverassignHistorical``: 1000 MB hold two segments of 500 million bytes."""
    sim = simulation([h(1, size_mb=1000)], WIKI_10X1D, {"wiki": load(tier_t1=1)}, replication_throttle_limit(10))
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 2
    sim.load_queued_segments()
    assert serving(sim, T11) == 2


def test_tier_shift_does_not_cause_under_replication():
    """``testTierShiftDoesNotCauseUnderReplication``."""
    segment = WIKI_10X1D[0]
    sim = simulation(
        [h(1, serving=[segment]), h(2, serving=[segment]), h(1, T2), h(2, T2)],
        [segment],
        {"wiki": load(tier_t2=3)},
        replication_throttle_limit(10),
    )
    stats = sim.run_cycle()
    not_emitted(stats, m.DROPPED)
    assert value(stats, m.ASSIGNED, tier=T2) == 2

    stats = sim.run_cycle()
    not_emitted(stats, m.DROPPED)
    assert value(stats, m.ASSIGNED, tier=T2) == 0
    sim.load_queued_segments()
    assert serving(sim, T21) + serving(sim, T22) == 2
    assert serving(sim, T11) + serving(sim, T12) == 2

    stats = sim.run_cycle()
    assert value(stats, m.DROPPED, tier=T1) == 2
    assert value(stats, m.ASSIGNED, tier=T2) == 0
    sim.load_queued_segments()
    assert serving(sim, T21) + serving(sim, T22) == 2
    assert serving(sim, T11) + serving(sim, T12) == 0

    sim.add_server(h(3, T2))
    sim.add_server(h(3, serving=[segment]))
    stats = sim.run_cycle()
    not_emitted(stats, m.DROPPED)
    assert value(stats, m.ASSIGNED, tier=T2) == 1
    sim.load_queued_segments()
    assert serving(sim, T21) + serving(sim, T22) + serving(sim, "tier_t2__hist__3") == 3
    assert serving(sim, T13) == 1

    stats = sim.run_cycle()
    assert value(stats, m.DROPPED, tier=T1) == 1
    not_emitted(stats, m.ASSIGNED)
    sim.load_queued_segments()
    assert serving(sim, T21) + serving(sim, T22) + serving(sim, "tier_t2__hist__3") == 3
    assert serving(sim, T11) + serving(sim, T12) + serving(sim, T13) == 0


def test_tier_add_does_not_cause_under_replication():
    """``testTierAddDoesNotCauseUnderReplication``."""
    segment = WIKI_10X1D[0]
    sim = simulation(
        [h(1, serving=[segment]), h(2, serving=[segment]), h(1, T2)],
        [segment],
        {"wiki": load(tier_t1=1, tier_t2=1)},
        replication_throttle_limit(10),
    )
    stats = sim.run_cycle()
    not_emitted(stats, m.DROPPED)
    assert value(stats, m.ASSIGNED, tier=T2) == 1

    stats = sim.run_cycle()
    not_emitted(stats, m.DROPPED)
    not_emitted(stats, m.ASSIGNED)
    sim.load_queued_segments()
    assert serving(sim, T21) == 1
    assert serving(sim, T11) + serving(sim, T12) == 2

    stats = sim.run_cycle()
    assert value(stats, m.DROPPED, tier=T1) == 1
    sim.load_queued_segments()
    assert serving(sim, T21) == 1
    assert serving(sim, T11) + serving(sim, T12) == 1


def test_immediate_loading_does_not_overassign_historical():
    """``testImmediateLoadingDoesNotOverassignHistorical``."""
    sim = simulation(
        [h(1, size_mb=1000)], WIKI_10X1D, {"wiki": load(tier_t1=1)}, replication_throttle_limit(10), immediate=True
    )
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 2
    assert serving(sim, T11) == 2


def test_max_segments_in_node_loading_queue():
    """``testMaxSegmentsInNodeLoadingQueue``."""
    config = {
        "smartSegmentLoading": False,
        "maxSegmentsToMove": 0,
        "replicationThrottleLimit": 10,
        "maxSegmentsInNodeLoadingQueue": 5,
        "useRoundRobinSegmentAssignment": False,
    }
    sim = simulation([h(1)], WIKI_10X1D, {"wiki": load(tier_t1=1)}, config)
    assert value(sim.run_cycle(), m.ASSIGNED) == 5
    assert value(sim.run_cycle(), m.ASSIGNED) == 0
    # Two of the queued segments reach the historical outside its load queue.
    sim.servers[T11].add(WIKI_10X1D[9])
    sim.servers[T11].add(WIKI_10X1D[8])
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 0
    assert value(stats, m.QUEUE_CANCELLED) == 2
    assert value(sim.run_cycle(), m.ASSIGNED) == 2


def test_first_replica_on_tier_is_not_throttled():
    """``testFirstReplicaOnTierIsNotThrottled``."""
    sim = simulation(
        [h(1, serving=WIKI_10X1D), h(1, T2)],
        WIKI_10X1D,
        {"wiki": load(tier_t1=1, tier_t2=1)},
        replication_throttle_limit(2),
    )
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED, tier=T2) == 10
    sim.load_queued_segments()
    assert serving(sim, T11) == 10 and serving(sim, T21) == 10


def test_immediate_loading_does_not_violate_throttle_limit():
    """``testImmediateLoadingDoesNotViolateThrottleLimit``."""
    sim = simulation(
        [h(1, serving=WIKI_10X1D), h(2)],
        WIKI_10X1D,
        {"wiki": load(tier_t1=2)},
        replication_throttle_limit(2),
        immediate=True,
    )
    assert value(sim.run_cycle(), m.ASSIGNED) == 2
    assert serving(sim, T11) == 10 and serving(sim, T12) == 2


def test_load_of_fully_replicated_segment_gets_cancelled():
    """``testLoadOfFullyReplicatedSegmentGetsCancelled``."""
    sim = simulation(
        [h(1, serving=WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=2)}, replication_throttle_limit(10)
    )
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 10
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T12) == 10
    sim.add_server(h(3, serving=WIKI_10X1D))
    stats = sim.run_cycle()
    assert value(stats, m.QUEUE_CANCELLED) == 10
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T12) == 0


def test_broadcast_replicas_are_not_throttled():
    """``testBroadcastReplicasAreNotThrottled``."""
    sim = simulation([h(1), h(2), h(3)], WIKI_10X1D, {"wiki": BROADCAST}, replication_throttle_limit(0))
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED, dataSource="wiki") == 30
    not_emitted(stats, m.DROPPED)


def test_replicas_are_not_assigned_if_tier_is_busy():
    """``testReplicasAreNotAssignedIfTierIsBusy``."""
    sim = simulation(
        [h(1, serving=WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=2)}, replication_throttle_limit(5)
    )
    assert value(sim.run_cycle(), m.ASSIGNED) == 5
    assert value(sim.run_cycle(), m.ASSIGNED) == 0
    sim.load_queued_segments()
    assert value(sim.run_cycle(), m.ASSIGNED) == 5
    assert serving(sim, T11) == 10 and serving(sim, T12) == 5


def test_all_loads_on_decommissioning_server_are_cancelled():
    """``testAllLoadsOnDecommissioningServerAreCancelled``."""
    sim = simulation(
        [h(1, serving=WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=2)}, replication_throttle_limit(100)
    )
    assert value(sim.run_cycle(), m.ASSIGNED) == 10
    sim.set_config(decommissioningNodes=[T12])
    assert value(sim.run_cycle(), m.QUEUE_CANCELLED) == 10
    sim.load_queued_segments()
    assert serving(sim, T11) == 10 and serving(sim, T12) == 0


def test_load_of_unused_segment_is_cancelled():
    """``testLoadOfUnusedSegmentIsCancelled``: a drop rule marks the segments unused; the next run
    cancels their loads."""
    sim = simulation([h(1)], WIKI_10X1D, {"wiki": load(tier_t1=1)})
    assert value(sim.run_cycle(), m.ASSIGNED) == 10
    sim.rules["wiki"] = DROP
    assert value(sim.run_cycle(), m.DELETED) == 10
    stats = sim.run_cycle()
    assert value(stats, m.LOAD_QUEUE_COUNT) == 0
    assert value(stats, m.QUEUE_CANCELLED) == 10


def test_segments_are_dropped_from_full_servers_first():
    """``testSegmentsAreDroppedFromFullServersFirst``."""
    koala = KOALA_100X100D[:2]
    sim = simulation(
        [h(1, serving=[*WIKI_10X1D, *koala]), h(2, serving=WIKI_10X1D)],
        [*WIKI_10X1D, *koala],
        {"wiki": load(tier_t1=1), "koala": load(tier_t1=1)},
        replication_throttle_limit(100),
    )
    stats = sim.run_cycle()
    assert value(stats, m.DROP_QUEUE_COUNT, server=T11) == 6
    assert value(stats, m.DROP_QUEUE_COUNT, server=T12) == 4
    sim.load_queued_segments()
    assert sim.servers[T11].current_size == sim.servers[T12].current_size


def test_segment_loading_modes():
    """``testSegmentLoadingModes``: turbo loading changes how a historical loads, not what."""
    sim = simulation([h(1), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=1)}, {"turboLoadingNodes": [T11]})
    assert value(sim.run_cycle(), m.ASSIGNED) == 10
    sim.load_queued_segments()
    assert serving(sim, T11) == 5 and serving(sim, T12) == 5
    stats = sim.run_cycle()
    assert value(stats, m.QUEUE_SUCCESS, server=T11, description="LOAD: TURBO") == 5
    assert value(stats, m.QUEUE_SUCCESS, server=T12, description="LOAD: NORMAL") == 5
