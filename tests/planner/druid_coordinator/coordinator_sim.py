"""The fixtures of Druid's coordinator simulation tests (Druid 35.0.0
``server/src/test/java/org/apache/druid/server/coordinator/simulate/CoordinatorSimulationBaseTest``,
``CreateDataSegments``; docs/DRUID_COORDINATOR_NOTES.md §9.2) for the ``druid`` coordinator, and
Druid's ``MetricsVerifier`` checks on a run's metrics."""

from __future__ import annotations

from collections.abc import Iterable

from segment_balancer.druid.importer import segment_id
from segment_balancer.druid.rules import Rule, format_instant_ms
from segment_balancer.planner.druid_coordinator.model import DataSegment, DruidServer
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.simulation import CoordinatorSimulation

RELEASE = "38.0.0"
"""The Druid release the running test reproduces (set for each test by ``conftest.druid_release``)."""


def with_release(config: dict | None = None) -> dict:
    """``config`` with ``druidVersion`` the running test's :data:`RELEASE`."""
    return {"druidVersion": RELEASE, **(config or {})}


T1, T2 = "tier_t1", "tier_t2"
DAY = 86_400_000
JAN_1_2022 = 1_640_995_200_000
NOW = JAN_1_2022 + 365 * DAY
SIZE_1TB = 1_000_000  # MB


def historical(i: int, tier: str, size_mb: int, serving: Iterable[DataSegment] = ()) -> DruidServer:
    """``createHistorical(i, tier, size_mb)``: name and host ``<tier>__hist__<i>``, ``size_mb << 20``
    bytes; serving ``serving``."""
    name = f"{tier}__hist__{i}"
    server = DruidServer(name=name, tier=tier, max_size=size_mb << 20)
    for segment in serving:
        server.add(segment)
    return server


def segments(
    datasource: str, days: int, partitions: int, *, size_mb: int = 500, version: str = "1"
) -> list[DataSegment]:
    """``CreateDataSegments.ofDatasource(ds).forIntervals(days, DAY).startingAt("2022-01-01")
    .withNumPartitions(partitions).eachOfSizeInMb(size_mb)``: day by day, partition by partition,
    ``size_mb`` million bytes each, version "1", numbered shards."""
    out = []
    for d in range(days):
        start, end = JAN_1_2022 + d * DAY, JAN_1_2022 + (d + 1) * DAY
        for p in range(partitions):
            payload = {
                "dataSource": datasource,
                "interval": f"{format_instant_ms(start)}/{format_instant_ms(end)}",
                "version": version,
                "shardSpec": {"type": "numbered", "partitionNum": p},
            }
            out.append(
                DataSegment(
                    id=segment_id(payload),
                    datasource=datasource,
                    start_ms=start,
                    end_ms=end,
                    version=version,
                    partition=p,
                    size=size_mb * 1_000_000,
                    shard_type="numbered",
                    num_core_partitions=partitions,
                )
            )
    return out


WIKI_10X1D = segments("wiki", 1, 10)
WIKI_10X100D = segments("wiki", 100, 10)
KOALA_100X100D = segments("koala", 100, 100)

DEFAULT_RULES = {"_default": [Rule("loadForever", "load", {"_default_tier": 2})]}


def load(**tiers: int) -> list[Rule]:
    """``Load.on(T1, n).andOn(T2, m).forever()``: tier names as keyword arguments (``tier_t1=2``)."""
    return [Rule("loadForever", "load", dict(tiers))]


BROADCAST = [Rule("broadcastForever", "broadcast")]
DROP = [Rule("dropForever", "drop")]


def replication_throttle_limit(limit: int) -> dict:
    """``SegmentLoadingTest.withReplicationThrottleLimit``: smart loading off, balancing off, an
    unlimited load queue, ``limit`` replicas a tier a run; round robin stays on."""
    return {
        "smartSegmentLoading": False,
        "maxSegmentsToMove": 0,
        "maxSegmentsInNodeLoadingQueue": 0,
        "replicationThrottleLimit": limit,
    }


def simulation(
    servers: Iterable[DruidServer],
    used: Iterable[DataSegment],
    rules: dict[str, list[Rule]],
    config: dict | None = None,
    *,
    strategy: str = "cost",
    immediate: bool = False,
    seed: int = 0,
) -> CoordinatorSimulation:
    """``CoordinatorSimulation.builder()``: Druid's defaults (smart loading on, the ``cost`` strategy,
    the ``_default`` rule loading 2 replicas on ``_default_tier``, a one-minute period)."""
    config = with_release(
        {"druid.coordinator.balancer.strategy": strategy, "coordinatorPeriodMillis": 60_000, **(config or {})}
    )
    return CoordinatorSimulation(
        servers, used, {**DEFAULT_RULES, **rules}, config, now_ms=NOW, immediate=immediate, seed=seed
    )


def value(stats: RunStats, metric: str, **filter_: str) -> int:
    """``verifyValue``/``getValue``: exactly one emitted row of ``metric`` matches ``filter_``."""
    values = stats.matching(metric, **filter_)
    assert len(values) == 1, f"{metric} {filter_}: expected one row, got {values}"
    return values[0]


def not_emitted(stats: RunStats, metric: str) -> None:
    """``verifyNotEmitted``: no row of ``metric``, not even a 0."""
    assert stats.matching(metric) == [], f"{metric} emitted: {stats.matching(metric)}"


def serving(sim: CoordinatorSimulation, name: str) -> int:
    """How many segments the historical ``name`` serves now."""
    return len(sim.servers[name].segments)
