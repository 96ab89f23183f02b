"""Druid's ``HistoricalCloningTest`` (server/src/test/java/org/apache/druid/server/coordinator/simulate/,
Druid 35.0.0, commit 259e62e3): every case, with Druid's expected values, on the ``druid``
coordinator. ``cloneServers`` maps T12 (the clone, unmanaged) to T11 (its source)."""

from __future__ import annotations

from coordinator_sim import T1, WIKI_10X1D, WIKI_10X100D, historical, load, serving, simulation, value

from segment_balancer.druid import metrics as m

SIZE_1TB = 1_000_000
T11, T12, T13 = (f"{T1}__hist__{i}" for i in (1, 2, 3))
CLONE = {"cloneServers": {T12: T11}}


def h(i: int, serving=(), size_mb: int = SIZE_1TB):
    return historical(i, T1, size_mb, serving)


def holds_all(sim, name: str, segments) -> bool:
    return set(sim.servers[name].segments) == {s.id for s in segments}


def test_simple_cloning():
    """``testSimpleCloning``."""
    sim = simulation([h(1), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=1)}, CLONE, immediate=True)
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 10
    assert value(stats, m.ASSIGNED_TO_CLONE, server=T12) == 10
    assert value(stats, m.QUEUE_SUCCESS, server=T11, description="LOAD: NORMAL") == 10
    assert value(stats, m.QUEUE_SUCCESS, server=T12, description="LOAD: NORMAL") == 10
    assert holds_all(sim, T11, WIKI_10X1D) and holds_all(sim, T12, WIKI_10X1D)


def test_adding_new_historical():
    """``testAddingNewHistorical``: the balancer moves half to the new historical; the clone drops
    what its source no longer projects."""
    sim = simulation([h(1, WIKI_10X1D), h(2, WIKI_10X1D)], WIKI_10X1D, {"wiki": load(tier_t1=1)}, CLONE, immediate=True)
    sim.run_cycle()
    assert serving(sim, T11) == 10 and serving(sim, T12) == 10
    sim.add_server(h(3, size_mb=10_000))
    stats = sim.run_cycle()
    assert (serving(sim, T11), serving(sim, T12), serving(sim, T13)) == (5, 5, 5)
    assert value(stats, m.DROPPED_FROM_CLONE, server=T12) == 5


def test_cloning_server_disappears_and_relaunched():
    """``testCloningServerDisappearsAndRelaunched``."""
    sim = simulation([h(1), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=2)}, CLONE, immediate=True)
    sim.run_cycle()
    assert serving(sim, T11) == 10 and serving(sim, T12) == 10
    clone = sim.servers[T12]
    sim.remove_server(T12)
    for segment in WIKI_10X1D:
        clone.remove(segment)
    sim.run_cycle()
    assert serving(sim, T11) == 10 and len(clone.segments) == 0
    sim.add_server(clone)
    stats = sim.run_cycle()
    assert serving(sim, T11) == 10 and serving(sim, T12) == 10
    assert value(stats, m.ASSIGNED_TO_CLONE, server=T12) == 10
    assert value(stats, m.QUEUE_SUCCESS, server=T12, description="LOAD: NORMAL") == 10
    assert holds_all(sim, T11, WIKI_10X1D) and holds_all(sim, T12, WIKI_10X1D)


def test_cloned_server_does_not_follow_replication_limit():
    """``testClonedServerDoesNotFollowReplicationLimit``: smart loading ignores the configured limit,
    and clone loads are not replicas."""
    config = {**CLONE, "replicationThrottleLimit": 2}
    sim = simulation([h(1, WIKI_10X100D)], WIKI_10X100D, {"wiki": load(tier_t1=1)}, config, immediate=True)
    sim.run_cycle()
    assert serving(sim, T11) == 1000
    sim.add_server(h(2))
    stats = sim.run_cycle()
    assert serving(sim, T11) == 1000 and serving(sim, T12) == 1000
    assert value(stats, m.ASSIGNED_TO_CLONE, server=T12) == 1000
    assert value(stats, m.QUEUE_SUCCESS, server=T12, description="LOAD: NORMAL") == 1000


def test_cloning_historical_with_replication_limit():
    """``testCloningHistoricalWithReplicationLimit``: two replicas a run on T11, each cloned on T12."""
    config = {**CLONE, "smartSegmentLoading": False, "replicationThrottleLimit": 2, "maxSegmentsToMove": 0}
    sim = simulation([h(1), h(2), h(3, WIKI_10X1D)], WIKI_10X1D, {"wiki": load(tier_t1=2)}, config, immediate=True)
    runs = 0
    while serving(sim, T11) < len(WIKI_10X1D):
        stats = sim.run_cycle()
        runs += 1
        assert serving(sim, T11) == serving(sim, T12)
        assert value(stats, m.ASSIGNED) == 2
        assert value(stats, m.ASSIGNED_TO_CLONE, server=T12) == 2
    assert runs == 5
    assert all(holds_all(sim, n, WIKI_10X1D) for n in (T11, T12, T13))


def test_loads_are_cancelled_on_clone_if_segments_are_removed_from_source():
    """``test_loadsAreCancelledOnClone_ifSegmentsAreRemovedFromSource``."""
    sim = simulation([h(1, WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=1)}, CLONE)
    assert value(sim.run_cycle(), m.ASSIGNED_TO_CLONE, server=T12) == 10
    sim.mark_unused(s.id for s in WIKI_10X1D[:5])
    assert value(sim.run_cycle(), m.QUEUE_CANCELLED, server=T12) == 5
    sim.load_queued_segments()
    assert serving(sim, T11) == 5 and serving(sim, T12) == 5
