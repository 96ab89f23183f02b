"""One run of Druid's Coordinator over a cluster: the duties of ``HistoricalManagementDuties`` that
decide placement, in Druid 35.0.0's order (docs/DRUID_COORDINATOR_NOTES.md §1.2):

1. ``PrepareBalancerAndLoadQueues``: holders, the run's limits, loads on decommissioning servers
   cancelled;
2. ``RunRules``: every used, not overshadowed segment, newest first, by its first applying rule;
   segments of drop rules are marked unused afterwards (they are dropped by a later run);
3. ``CollectSegmentStats``: unavailable and under-replicated segments as the run began;
4. ``UnloadUnusedSegments``: loads of unused segments cancelled, served ones dropped;
5. ``MarkOvershadowedSegmentsAsUnused``: overshadowed segments that served or zero-replica segments
   overshadow are marked unused (metadata only);
6. ``BalanceSegments``; 7. ``CloneHistoricals``; 8. ``CollectLoadQueueStats``.

``MarkEternityTombstonesAsUnused`` (metadata only, about tombstones no snapshot marks) is not run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from segment_balancer.druid import metrics as m
from segment_balancer.druid.rules import Rule, rules_for
from segment_balancer.druid.timeline import STATUS_OVERSHADOWED, classify_datasource
from segment_balancer.planner.druid_coordinator.assigner import StrategicSegmentAssigner
from segment_balancer.planner.druid_coordinator.balancer import balance_segments
from segment_balancer.planner.druid_coordinator.dynamic_config import DruidConfig
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    DruidServer,
    LoadQueue,
    QueuedRequest,
    QueueEvent,
    SegmentAction,
    ServerHolder,
)
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.strategies import make_strategy


@dataclass
class ClusterState:
    """What a run starts from: the ``servers`` of the inventory, their load ``queues`` (by server
    name; kept across runs), the ``used`` segments (by id, overshadowed ones included), the ids of
    the ``overshadowed`` ones, the retention ``rules`` (datasource -> rules, ``_default`` included)."""

    servers: list[DruidServer]
    used: dict[str, DataSegment]
    rules: Mapping[str, list[Rule]]
    overshadowed: set[str] = field(default_factory=set)
    queues: dict[str, LoadQueue] = field(default_factory=dict)


DUTIES = ("prepare", "rules", "unload", "balance", "clone")
"""The duties that change load queues, in the order they run."""
DUTY_STAGES = {"prepare": 1, "rules": 2, "unload": 4, "balance": 6, "clone": 7}
"""A duty's number in the run (the plan's ``stage`` of its operations)."""
DUTY_NAMES = {
    1: "PrepareBalancerAndLoadQueues",
    2: "RunRules",
    4: "UnloadUnusedSegments",
    6: "BalanceSegments",
    7: "CloneHistoricals",
}
"""Druid's class of each duty that changes load queues, by its number."""


@dataclass(frozen=True)
class Operation:
    """A change the run made to a load queue: ``event`` ``ASSIGNED`` (a new request) or ``CANCELLED``
    (a queued one, of this run or earlier), on ``server``, of ``segment`` with ``action``
    (``LOAD``, ``REPLICATE``, ``MOVE_TO`` with its ``move_source``, ``DROP``), by ``duty`` (one of
    :data:`DUTIES`)."""

    server: str
    tier: str
    event: QueueEvent
    action: SegmentAction
    segment: DataSegment
    duty: str
    move_source: str | None = None


@dataclass
class RunResult:
    """What a run did: ``stats`` (Druid's metrics), ``operations`` in the order made, the segment ids
    it marks unused (``deleted`` by drop rules, ``overshadowed`` ones), the balancer's
    ``max_segments_to_move`` and the ``holders`` as the run left them."""

    stats: RunStats
    operations: list[Operation] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    overshadowed: set[str] = field(default_factory=set)
    max_segments_to_move: int = 0
    holders: list[ServerHolder] = field(default_factory=list)


def _broadcast_datasources(rules: Mapping[str, list[Rule]], datasources: Iterable[str]) -> set[str]:
    return {ds for ds in datasources if any(r.kind == "broadcast" for r in rules_for(dict(rules), ds))}


def _overshadowed_now(
    cluster: DruidCluster, zero_replica: Mapping[str, set[DataSegment]], candidates: Iterable[DataSegment]
) -> set[str]:
    """Which ``candidates`` the segments served by managed historicals and brokers, with the segments
    no rule wants replicas of, overshadow (``SegmentTimeline.isOvershadowed``)."""
    timelines: dict[str, dict[str, DataSegment]] = {}
    for holder in [h for hs in cluster.managed.values() for h in hs] + cluster.brokers:
        for segment in holder.served_segments():
            timelines.setdefault(segment.datasource, {})[segment.id] = segment
    for datasource, segments in zero_replica.items():
        for segment in segments:
            timelines.setdefault(datasource, {})[segment.id] = segment
    marked: set[str] = set()
    for candidate in candidates:
        timeline = timelines.get(candidate.datasource)
        if not timeline:
            continue
        rows = [s.timeline_row() for s in timeline.values() if s.id != candidate.id] + [candidate.timeline_row()]
        status = classify_datasource(pd.DataFrame(rows)).set_index("segment_id")["status"]
        if status[candidate.id] == STATUS_OVERSHADOWED:
            marked.add(candidate.id)
    return marked


def run_rules(state: ClusterState, assigner: StrategicSegmentAssigner, now_ms: int) -> set[str]:
    """Druid ``RunRules``: every used segment that is not overshadowed, newest first, by the first of
    its datasource's rules (then ``_default``'s) that applies at ``now_ms``; then the segments of
    drop rules counted as ``segment/deleted/count``. Returns their ids (marked unused)."""
    for segment in sorted(state.used.values(), key=DataSegment.newest_first):
        if segment.id in state.overshadowed:
            continue
        for rule in rules_for(dict(state.rules), segment.datasource):
            if rule.applies_to(segment.start_ms, segment.end_ms, now_ms):
                if rule.kind == "load":
                    assigner.replicate(segment, rule.tiered_replicants)
                elif rule.kind == "broadcast":
                    assigner.broadcast(segment)
                else:
                    assigner.delete(segment)
                break
    deleted: set[str] = set()
    for datasource, segments in assigner.segments_to_delete.items():
        assigner.stats.add(m.DELETED, len(segments), dataSource=datasource)
        deleted |= {s.id for s in segments}
    return deleted


def run_coordinator(
    state: ClusterState,
    config: DruidConfig,
    *,
    now_ms: int,
    rng: random.Random | None = None,
    uptime_ms: int | None = None,
    before_collect: Callable[[], None] | None = None,
) -> RunResult:
    """One Coordinator run on ``state`` at ``now_ms`` (period rules). The load queues of ``state``
    gain the run's requests and lose its cancellations; nothing else in ``state`` changes.

    ``rng`` draws what Druid draws at random (default: seeded by ``balancerRandomSeed`` and
    ``now_ms``, so that the same snapshot gives the same plan and runs one after another draw
    afresh, as Druid's do);
    ``uptime_ms`` is how long the Coordinator has been up (None: longer than
    ``millisToWaitBeforeDeleting``); ``before_collect`` runs before the load queues are counted (a
    simulation completing requests within the run).
    """
    rng = rng or random.Random(f"{config['balancerRandomSeed']}@{now_ms}")
    stats = RunStats()
    result = RunResult(stats)
    if config["pauseCoordination"]:
        return result
    names = {s.name for s in state.servers}
    for name in [n for n in state.queues if n not in names]:
        del state.queues[name]

    # 1. PrepareBalancerAndLoadQueues
    loading = config.loading(len(state.used))
    decommissioning = set(config["decommissioningNodes"])
    clones = config["cloneServers"]
    holders = [
        ServerHolder(
            server,
            state.queues.setdefault(server.name, LoadQueue(server.name)),
            decommissioning=server.host in decommissioning,
            unmanaged=server.host in clones,
            max_segments_in_load_queue=loading.max_segments_in_load_queue,
        )
        for server in state.servers
    ]
    result.holders = holders
    journal: list[tuple[QueueEvent, QueuedRequest, str]] = []
    for queue in state.queues.values():
        queue.journal = journal
    duty_starts: list[tuple[str, int]] = [("prepare", 0)]
    cluster = DruidCluster(holders)
    for holder in cluster.all_managed_servers():
        if holder.decommissioning:
            for segment, action in list(holder.actions.items()):
                if action.is_load:
                    holder.cancel(action, segment)
    assigner = StrategicSegmentAssigner(
        cluster,
        make_strategy(config["druid.coordinator.balancer.strategy"], rng),
        stats,
        replication_throttle_limit=loading.replication_throttle_limit,
        round_robin=loading.use_round_robin_assignment,
    )
    for tier, hs in cluster.historicals.items():
        stats.add(m.HISTORICAL_COUNT, len(hs), tier=tier)

    # 2. RunRules
    duty_starts.append(("rules", len(journal)))
    broadcast_datasources: set[str] = set()
    if holders:
        result.deleted = run_rules(state, assigner, now_ms)
        broadcast_datasources = _broadcast_datasources(state.rules, {s.datasource for s in state.used.values()})

    # 3. CollectSegmentStats: a used segment is unavailable unless some server has it or no rule
    # wants a replica of it (a row per datasource, 0 included)
    for segment in state.used.values():
        counts = assigner.replica_counts.counts.get(segment)
        total = assigner.replica_counts.total(segment)
        available = counts is not None and (total.total_loaded > 0 or total.required == 0)
        stats.add(m.UNAVAILABLE, 0 if available else 1, dataSource=segment.datasource)
        for tier, count in (counts or {}).items():
            missing = max(count.required_and_loadable - count.total_loaded, 0)
            stats.add(m.UNDER_REPLICATED, missing, tier=tier, dataSource=segment.datasource)

    # 4. UnloadUnusedSegments
    duty_starts.append(("unload", len(journal)))

    broadcast_status = dict.fromkeys(broadcast_datasources, True)

    def skip_unload(holder: ServerHolder, datasource: str) -> bool:
        """A realtime server keeps what it serves, but for a datasource with a broadcast rule."""
        if datasource not in broadcast_status:
            broadcast_status[datasource] = bool(_broadcast_datasources(state.rules, [datasource]))
        return holder.server.type.is_realtime and not broadcast_status[datasource]

    managed = cluster.all_managed_servers()
    for holder in managed:
        for segment, action in list(holder.actions.items()):
            if not skip_unload(holder, segment.datasource) and segment.id not in state.used and action.is_load:
                holder.cancel(action, segment)
    for holder in managed:
        unneeded: dict[str, int] = {}
        for segment in list(holder.served_segments()):
            if skip_unload(holder, segment.datasource) or segment.id in state.used:
                continue
            if assigner.queues.drop(segment, holder):
                unneeded[segment.datasource] = unneeded.get(segment.datasource, 0) + 1
        for datasource, n in unneeded.items():
            stats.add(m.UNNEEDED, n, tier=holder.tier, dataSource=datasource)

    # 5. MarkOvershadowedSegmentsAsUnused
    if state.overshadowed and (uptime_ms is None or uptime_ms >= config["millisToWaitBeforeDeleting"]):
        candidates = [state.used[i] for i in sorted(state.overshadowed) if i in state.used]
        result.overshadowed = _overshadowed_now(cluster, assigner.zero_replica_segments, candidates)
        per_datasource: dict[str, int] = {}
        for i in result.overshadowed:
            ds = state.used[i].datasource
            per_datasource[ds] = per_datasource.get(ds, 0) + 1
        for datasource, n in sorted(per_datasource.items()):
            stats.add(m.OVERSHADOWED, n, dataSource=datasource)

    # 6. BalanceSegments
    duty_starts.append(("balance", len(journal)))
    if state.used:
        result.max_segments_to_move = balance_segments(
            cluster,
            assigner,
            stats,
            smart=config["smartSegmentLoading"],
            max_segments_to_move=config["maxSegmentsToMove"],
            balancer_threads=loading.balancer_compute_threads,
            period_ms=config.period_ms,
            used=lambda s: state.used.get(s.id),
            broadcast_datasources=broadcast_datasources,
            rng=rng,
        )

    # 7. CloneHistoricals
    duty_starts.append(("clone", len(journal)))
    by_host = {h.server.host: h for h in cluster.all_historicals()}
    for target_host, source_host in clones.items():
        target, source = by_host.get(target_host), by_host.get(source_host)
        if target is None or source is None:
            continue
        on_source, on_target = source.projected_segments(), target.projected_segments()
        for segment in sorted(on_source - on_target, key=DataSegment.newest_first):
            used = state.used.get(segment.id)
            if used is None:
                stats.add(
                    m.ASSIGN_SKIPPED,
                    1,
                    server=target.name,
                    dataSource=segment.datasource,
                    description="Segment not found in metadata cache",
                )
            elif assigner.queues.load(used, target, SegmentAction.LOAD):
                stats.add(m.ASSIGNED_TO_CLONE, 1, server=target.name, dataSource=segment.datasource)
        for segment in sorted(on_target - on_source, key=DataSegment.newest_first):
            if target.is_loading(segment):
                target.cancel(SegmentAction.LOAD, segment)
            elif assigner.queues.drop(segment, target):
                stats.add(m.DROPPED_FROM_CLONE, 1, server=target.name)

    # 8. CollectLoadQueueStats
    tiers = {h.name: h.tier for h in holders}
    ends = [start for _, start in duty_starts[1:]] + [len(journal)]
    for (duty, start), end in zip(duty_starts, ends):
        for event, request, server in journal[start:end]:
            if event in (QueueEvent.ASSIGNED, QueueEvent.CANCELLED):
                result.operations.append(
                    Operation(server, tiers[server], event, request.action, request.segment, duty, request.move_source)
                )
    if before_collect is not None:
        before_collect()
    collect_load_queue_stats(holders, stats)
    for queue in state.queues.values():
        queue.journal = []
    return result


def collect_load_queue_stats(holders: Iterable[ServerHolder], stats: RunStats) -> None:
    """Per server: the queue's loads (count, bytes) and drops, then its request counts since they were
    last taken (``segment/loadQueue/assigned|success|failed|cancelled``)."""
    metric = {
        QueueEvent.ASSIGNED: m.QUEUE_ASSIGNED,
        QueueEvent.SUCCESS: m.QUEUE_SUCCESS,
        QueueEvent.FAILED: m.QUEUE_FAILED,
        QueueEvent.CANCELLED: m.QUEUE_CANCELLED,
    }
    for holder in holders:
        queue = holder.queue
        stats.add(m.LOAD_QUEUE_SIZE, queue.queued_load_bytes, server=holder.name)
        stats.add(m.LOAD_QUEUE_COUNT, len(queue.to_load), server=holder.name)
        stats.add(m.DROP_QUEUE_COUNT, len(queue.to_drop), server=holder.name)
        for (event, datasource, description), n in queue.take_stats().items():
            stats.add(metric[event], n, server=holder.name, dataSource=datasource, description=description)
