"""Druid's ``RoundRobinAssignmentTest`` (server/src/test/java/org/apache/druid/server/coordinator/
simulate/, Druid 35.0.0, commit 259e62e3), with Druid's expected values, on the ``druid``
coordinator. The config turns balancing and the queue limit off but leaves smart loading on, so
Druid's computed values apply, as they do here; the ``random`` strategy moves nothing."""

from __future__ import annotations

from coordinator_sim import KOALA_100X100D, T1, WIKI_10X100D, historical, load, serving, simulation, value

from segment_balancer.druid import metrics as m

CONFIG = {
    "maxSegmentsToMove": 0,
    "maxSegmentsInNodeLoadingQueue": 0,
    "replicationThrottleLimit": 20_000,
    "useRoundRobinSegmentAssignment": True,
}


def historicals():
    return [historical(i, T1, 1_000_000) for i in range(10)]


def test_segments_are_assigned_uniformly():
    """``testSegmentsAreAssignedUniformly``."""
    sim = simulation(historicals(), WIKI_10X100D, {"wiki": load(tier_t1=2)}, CONFIG, strategy="random")
    assert value(sim.run_cycle(), m.ASSIGNED) == 2000
    sim.load_queued_segments()
    assert [serving(sim, n) for n in sim.servers] == [200] * 10


def test_multiple_datasource_segments_are_assigned_uniformly():
    """``testMultipleDatasourceSegmentsAreAssignedUniformly``."""
    sim = simulation(
        historicals(),
        [*WIKI_10X100D, *KOALA_100X100D],
        {"wiki": load(tier_t1=3), "koala": load(tier_t1=1)},
        CONFIG,
        strategy="random",
    )
    stats = sim.run_cycle()
    assert value(stats, m.ASSIGNED, dataSource="koala") == 10_000
    assert value(stats, m.ASSIGNED, dataSource="wiki") == 3000
    sim.load_queued_segments()
    assert [serving(sim, n) for n in sim.servers] == [1300] * 10
