"""Druid's ``SegmentBalancingTest`` (server/src/test/java/org/apache/druid/server/coordinator/simulate/,
Druid 35.0.0, commit 259e62e3): every case, with Druid's expected values, on the ``druid``
coordinator.

``testBalancingWithStaleViewDoesNotOverReplicate`` differs from ``testBalancingDoesNotOverReplicate``
only in when the Coordinator's inventory view syncs; a snapshot is one view, so both are the one case
here.
"""

from __future__ import annotations

from coordinator_sim import (
    KOALA_100X100D,
    SIZE_1TB,
    T1,
    WIKI_10X1D,
    historical,
    load,
    not_emitted,
    serving,
    simulation,
    value,
)

from segment_balancer.druid import metrics as m

T11, T12 = "tier_t1__hist__1", "tier_t1__hist__2"


def h(i: int, serving=(), size_mb: int = 10_000):
    return historical(i, T1, size_mb, serving)


def fully_loaded(sim, datasource: str = "wiki") -> bool:
    """``verifyDatasourceIsFullyLoaded``: every used segment is served somewhere."""
    served = {i for s in sim.servers.values() for i in s.segments}
    return all(i in served for i, s in sim.used.items() if s.datasource == datasource)


def test_balancing_does_not_over_replicate():
    """``testBalancingDoesNotOverReplicate`` (and ``testBalancingWithStaleViewDoesNotOverReplicate``)."""
    sim = simulation([h(1, WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=1)})
    assert value(sim.run_cycle(), m.MOVED) == 5
    sim.load_queued_segments()
    assert serving(sim, T11) == 5 and serving(sim, T12) == 5
    assert fully_loaded(sim)


def test_balancing_does_not_under_replicate_segment():
    """``testBalancingDoesNotUnderReplicateSegment``: a move whose source has not dropped yet counts
    once."""
    sim = simulation([h(1, WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=1)})
    assert value(sim.run_cycle(), m.MOVED) == 5
    sim.load_queued_segments(run_callbacks=False)
    assert serving(sim, T11) == 10 and serving(sim, T12) == 5

    stats = sim.run_cycle()
    sim.load_queued_segments(run_callbacks=False)
    assert serving(sim, T11) == 10 and serving(sim, T12) == 5
    not_emitted(stats, m.DROPPED)
    not_emitted(stats, m.MOVED)


def test_drop_does_not_happen_when_load_fails():
    """``testDropDoesNotHappenWhenLoadFails``: the destination leaves before it loads."""
    sim = simulation([h(1, WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=1)})
    assert value(sim.run_cycle(), m.MOVED) == 5
    sim.remove_server(T12)
    sim.load_queued_segments()
    assert serving(sim, T11) == 10
    assert fully_loaded(sim)


def test_balancing_of_fully_replicated_segment():
    """``testBalancingOfFullyReplicatedSegment``: a queued move is not a second replica."""
    sim = simulation([h(1, WIKI_10X1D), h(2)], WIKI_10X1D, {"wiki": load(tier_t1=1)})
    stats = sim.run_cycle()
    assert value(stats, m.MOVED) == 5
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T12) == 5
    stats = sim.run_cycle()
    not_emitted(stats, m.DROPPED)
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T12) == 5
    sim.load_queued_segments()
    assert serving(sim, T11) == 5 and serving(sim, T12) == 5
    assert fully_loaded(sim)


def test_balancing_moves_segments_in_load_queue():
    """``testBalancingMovesSegmentsInLoadQueue``: a queued load is cancelled and queued elsewhere."""
    sim = simulation([h(1)], WIKI_10X1D, {"wiki": load(tier_t1=1)})
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 10
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T11) == 10
    sim.add_server(h(2))
    stats = sim.run_cycle()
    not_emitted(stats, m.ASSIGNED)
    assert value(stats, m.QUEUE_CANCELLED) == 5
    assert value(stats, m.MOVED) == 5
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T11) == 5
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T12) == 5
    sim.load_queued_segments()
    assert serving(sim, T11) == 5 and serving(sim, T12) == 5


def test_balancing_does_not_move_loaded_segments_when_tier_is_busy():
    """``testBalancingDoesNotMoveLoadedSegmentsWhenTierIsBusy``."""
    config = {"smartSegmentLoading": False, "maxSegmentsToMove": 3, "maxSegmentsInNodeLoadingQueue": 0}
    sim = simulation([h(1, WIKI_10X1D[2:])], WIKI_10X1D, {"wiki": load(tier_t1=1)}, config)
    assert value(sim.run_cycle(), m.ASSIGNED) == 2
    sim.add_server(h(2))
    stats = sim.run_cycle()
    assert value(stats, m.MOVED) == 3
    assert value(stats, m.QUEUE_CANCELLED) == 2
    assert value(stats, m.LOAD_QUEUE_COUNT, server=T12) == 3
    not_emitted(sim.run_cycle(), m.MOVED)
    sim.load_queued_segments()
    assert sum(sim.run_cycle().matching(m.MOVED)) > 0


def test_max_segments_are_moved_when_cluster_is_skewed():
    """``testMaxSegmentsAreMovedWhenClusterIsSkewed``: 10 new historicals beside 10 full ones."""
    servers = [historical(i, T1, SIZE_1TB) for i in range(1, 11)]
    sim = simulation(servers, KOALA_100X100D, {"koala": load(tier_t1=1)})
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED) == 10_000
    not_emitted(stats, m.MOVED)
    assert stats.total(m.MOVE_SKIPPED) == 100
    for i in range(11, 21):
        sim.add_server(historical(i, T1, SIZE_1TB))
    stats = sim.run_cycle()
    assert value(stats, m.MOVED) == 500
    not_emitted(stats, m.MOVE_SKIPPED)
