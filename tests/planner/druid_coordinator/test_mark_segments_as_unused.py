"""Druid's ``MarkSegmentsAsUnusedTest`` (server/src/test/java/org/apache/druid/server/coordinator/
simulate/, Druid 35.0.0, commit 259e62e3), with Druid's expected values, on the ``druid``
coordinator."""

from __future__ import annotations

from coordinator_sim import T1, WIKI_10X1D, historical, load, not_emitted, segments, simulation, value

from segment_balancer.druid import metrics as m


def test_segments_overshadowed_by_zero_replica_segments_are_marked_as_unused():
    """``testSegmentsOvershadowedByZeroReplicaSegmentsAreMarkedAsUnused``."""
    servers = [historical(i, T1, 1_000_000) for i in range(2)]
    sim = simulation(servers, WIKI_10X1D, {"wiki": load(tier_t1=0)}, {"millisToWaitBeforeDeleting": 0})
    not_emitted(sim.run_cycle(), m.ASSIGNED)
    newer = segments("wiki", 1, 10, version="1__new")
    sim.add_segments(newer)
    stats = sim.run_cycle()
    not_emitted(stats, m.ASSIGNED)
    assert value(stats, m.OVERSHADOWED) == 10
    assert set(sim.used) == {s.id for s in newer}


def test_overshadowed_segments_wait_for_the_coordinator_to_be_up_long_enough():
    """The same cluster with Druid's default ``millisToWaitBeforeDeleting`` (15 minutes) and a
    Coordinator just started: nothing is marked unused."""
    servers = [historical(i, T1, 1_000_000) for i in range(2)]
    sim = simulation(servers, WIKI_10X1D, {"wiki": load(tier_t1=0)})
    sim.run_cycle()
    sim.add_segments(segments("wiki", 1, 10, version="1__new"))
    not_emitted(sim.run_cycle(), m.OVERSHADOWED)
    assert len(sim.used) == 20
