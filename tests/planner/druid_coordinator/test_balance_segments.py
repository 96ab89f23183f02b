"""Druid's ``BalanceSegmentsTest`` (server/src/test/java/org/apache/druid/server/coordinator/duty/,
Druid 35.0.0, commit 259e62e3): the balancing duty alone, every case with Druid's values. Segments:
hourly ones of ``datasource1`` and ``datasource2`` on 2012-01-01 and 2012-02-01 and one of
``datasourceBroadcast`` (broadcast: never moved), 8 bytes each; historicals of 100 bytes in tier
``normal``; the config Druid's default (smart loading) unless a case says otherwise.

``testMoveMaxLoadQueueServerBalancer`` expects the one move to be of ``datasource1``: Druid walks a
server's segments datasource by datasource in Java's hash order of their names
(``balancer.served_in_druid_order``), where ``datasource1`` comes first."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from coordinator_sim import with_release

from segment_balancer.druid import metrics as m
from segment_balancer.planner.druid_coordinator.assigner import StrategicSegmentAssigner
from segment_balancer.planner.druid_coordinator.balancer import balance_segments
from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    DruidServer,
    LoadQueue,
    ServerHolder,
)
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.strategies import CostStrategy

HOUR = 3_600_000
JAN, FEB = (int(datetime(2012, mo, 1, tzinfo=UTC).timestamp() * 1000) for mo in (1, 2))


def hourly(datasource: str, start: int) -> DataSegment:
    return DataSegment(f"{datasource}_{start}", datasource, start, start + HOUR, "2012-03-01", 0, 8)


SEGMENT1, SEGMENT2 = hourly("datasource1", JAN), hourly("datasource1", FEB)
SEGMENT3, SEGMENT4 = hourly("datasource2", JAN), hourly("datasource2", FEB)
SEGMENT5 = hourly("datasourceBroadcast", FEB)
ALL = [SEGMENT1, SEGMENT2, SEGMENT3, SEGMENT4, SEGMENT5]
BROADCAST = {"datasourceBroadcast"}


def holder(name: str, *segments: DataSegment, decommissioning: bool = False, queue_limit: int = 0) -> ServerHolder:
    """``createHolder``: a 100-byte historical of tier ``normal`` serving ``segments``."""
    server = DruidServer(name=name, tier="normal", max_size=100)
    for s in segments:
        server.add(s)
    return ServerHolder(
        server, LoadQueue(name), decommissioning=decommissioning, max_segments_in_load_queue=queue_limit
    )


def run_balancer(holders: list[ServerHolder], config: dict | None = None) -> RunStats:
    """``runBalancer``: ``BalanceSegments`` with a one-minute period on the cluster of ``holders``."""
    cfg = druid_config(with_release({**(config or {}), "coordinatorPeriodMillis": 60_000}))
    loading = cfg.loading(len(ALL))
    stats = RunStats()
    cluster = DruidCluster(holders)
    rng = random.Random(0)
    assigner = StrategicSegmentAssigner(
        cluster,
        CostStrategy(rng),
        stats,
        loading.replication_throttle_limit,
        loading.use_round_robin_assignment,
        release=cfg.release,
    )
    used = {s.id: s for s in ALL}
    balance_segments(
        cluster,
        assigner,
        stats,
        smart=cfg["smartSegmentLoading"],
        max_segments_to_move=cfg["maxSegmentsToMove"],
        balancer_threads=loading.balancer_compute_threads,
        period_ms=cfg.period_ms,
        used=lambda s: used.get(s.id),
        broadcast_datasources=BROADCAST,
        rng=rng,
    )
    return stats


def moved(stats: RunStats, datasource: str) -> int:
    return stats.total(m.MOVED, tier="normal", dataSource=datasource)


def test_move_to_empty_server_balancer():
    """``testMoveToEmptyServerBalancer``."""
    stats = run_balancer([holder("server1", SEGMENT1, SEGMENT2, SEGMENT3, SEGMENT4), holder("server2")])
    assert moved(stats, "datasource1") + moved(stats, "datasource2") == 2


def test_max_decommissioning_max_percent_of_max_segments_to_move():
    """``testMaxDecommissioningMaxPercentOfMaxSegmentsToMove``: one move, off the decommissioning
    server, to the empty one."""
    holder3 = holder("server3")
    stats = run_balancer(
        [holder("server1", SEGMENT1, SEGMENT2), holder("server2", SEGMENT3, SEGMENT4, decommissioning=True), holder3],
        {"smartSegmentLoading": False, "maxSegmentsToMove": 1},
    )
    assert moved(stats, "datasource2") == 1
    assert [r.segment.datasource for r in holder3.queue.to_load.values()] == ["datasource2"]


def test_move_with_no_decommissioning():
    """``testMoveWithNoDecommissioning``."""
    server2 = holder("server2")
    stats = run_balancer(
        [holder("server1", SEGMENT1, SEGMENT2, SEGMENT3, SEGMENT4), server2],
        {"smartSegmentLoading": False, "maxSegmentsToMove": 4},
    )
    assert moved(stats, "datasource1") + moved(stats, "datasource2") == 2
    assert len(server2.queue.to_load) == 2


def test_move_to_decommissioning_server():
    """``testMoveToDecommissioningServer``: nothing goes to a decommissioning server."""
    stats = run_balancer([holder("server1", *ALL), holder("server2", decommissioning=True)])
    assert stats.matching(m.MOVED) == []


def test_move_from_decommissioning_server():
    """``testMoveFromDecommissioningServer``: three of its four movable segments leave it."""
    decommissioning, active = holder("server1", *ALL, decommissioning=True), holder("server2")
    run_balancer([decommissioning, active], {"smartSegmentLoading": False, "maxSegmentsToMove": 3})
    assert len(decommissioning.queue.to_load) == 0 and len(active.queue.to_load) == 3


def test_move_max_load_queue_server_balancer():
    """``testMoveMaxLoadQueueServerBalancer``: a load queue of 1: one move."""
    stats = run_balancer(
        [holder("server1", *ALL, queue_limit=1), holder("server2", queue_limit=1)],
        {"smartSegmentLoading": False, "maxSegmentsInNodeLoadingQueue": 1},
    )
    assert moved(stats, "datasource1") == 1


def test_run1():
    """``testRun1``."""
    assert moved(run_balancer([holder("server1", *ALL), holder("server2")]), "datasource1") > 0


def test_run2():
    """``testRun2``."""
    holders = [holder("server1", *ALL), holder("server2"), holder("server3"), holder("server4")]
    assert moved(run_balancer(holders), "datasource1") > 0


def test_max_segments_to_move_is_honored():
    """``testMaxSegmentsToMoveIsHonored``."""
    holder3 = holder("server3")
    stats = run_balancer(
        [holder("server1", SEGMENT1, SEGMENT2), holder("server2", SEGMENT3, SEGMENT4), holder3],
        {"smartSegmentLoading": False, "maxSegmentsToMove": 1},
    )
    assert moved(stats, "datasource1") + moved(stats, "datasource2") == 1
    assert len(holder3.queue.to_load) == 1


def test_move_for_multiple_datasources():
    """``testMoveForMultipleDatasources``."""
    holders = [holder("server1", *ALL), holder("server2"), holder("server3"), holder("server4")]
    stats = run_balancer(holders, {"smartSegmentLoading": False, "maxSegmentsToMove": 2})
    assert moved(stats, "datasource1") + moved(stats, "datasource2") == 2
