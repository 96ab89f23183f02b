"""Druid's ``HistoricalTierAliasTest`` (server/src/test/java/org/apache/druid/server/coordinator/
simulate/, Druid 38.0.0, commit aedca20599), with Druid's expected values, on the ``druid``
coordinator: tier capacity metrics of tiers grouped under an alias carry the ``tierAlias``
dimension; without an alias they carry the tier alone. The segments' placement under the alias is
checked too (``WIKI_10X1D``, one replica on each tier of the alias: ten loads on each)."""

from __future__ import annotations

import pytest
from coordinator_sim import SIZE_1TB, T1, T2, WIKI_10X1D, historical, load, serving, simulation, value

from segment_balancer.druid import metrics as m

ALIAS = "hot"
CAPACITY = SIZE_1TB << 20


@pytest.mark.druid_release("38.0.0")
def test_capacity_metrics_are_tagged_with_alias():
    """``testCapacityMetricsAreTaggedWithAlias``: {hot: 1}, hot = [T1, T2], smart loading, immediate loading."""
    sim = simulation(
        [historical(1, T1, SIZE_1TB), historical(1, T2, SIZE_1TB)],
        WIKI_10X1D,
        {"wiki": load(hot=1)},
        {"historicalTierAliases": {ALIAS: [T1, T2]}, "smartSegmentLoading": True},
        immediate=True,
    )
    stats = sim.run_cycle()
    for tier in (T1, T2):
        assert value(stats, m.TOTAL_CAPACITY, tier=tier, tierAlias=ALIAS) == CAPACITY
        assert value(stats, m.HISTORICAL_COUNT, tier=tier, tierAlias=ALIAS) == 1
        assert stats.get(m.TOTAL_CAPACITY, tier=tier) is None
        assert value(stats, m.ASSIGNED, tier=tier, dataSource="wiki") == 10
    assert [serving(sim, n) for n in sim.servers] == [10, 10]


def test_capacity_metrics_have_no_alias_when_not_configured():
    """``testCapacityMetricsHaveNoAliasWhenNotConfigured``: {T1: 1, T2: 1} without aliases: the rows
    carry the tier alone (for Druid 35.0.0 too, which has the same metric)."""
    sim = simulation(
        [historical(1, T1, SIZE_1TB), historical(1, T2, SIZE_1TB)],
        WIKI_10X1D,
        {"wiki": load(tier_t1=1, tier_t2=1)},
        {"smartSegmentLoading": True},
        immediate=True,
    )
    stats = sim.run_cycle()
    for tier in (T1, T2):
        assert stats.get(m.TOTAL_CAPACITY, tier=tier) == CAPACITY
        assert value(stats, m.TOTAL_CAPACITY, tier=tier) == CAPACITY
