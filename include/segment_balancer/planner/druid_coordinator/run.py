"""One run of Druid's Coordinator over a cluster: the duties of ``HistoricalManagementDuties`` that
decide placement, in Druid 35.0.0's and 38.0.0's order (docs/DRUID_COORDINATOR_NOTES.md §1.2):

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

import functools
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from segment_balancer.druid import metrics as m
from segment_balancer.druid.partial_load import EMPTY_LOAD_FINGERPRINT, PartialLoadProfile
from segment_balancer.druid.rules import Rule, rule_index_for, rules_for
from segment_balancer.druid.timeline import STATUS_OVERSHADOWED, classify_datasource
from segment_balancer.planner.druid_coordinator.assigner import ReplicaCounts, StrategicSegmentAssigner
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
    newest_first,
)
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.settled import SettledApart
from segment_balancer.planner.druid_coordinator.strategies import STRATEGY_KEY, THRESHOLD_KEY, make_strategy
from segment_balancer.planner.druid_coordinator.unheld import UnheldServed


@dataclass
class ClusterState:
    """What a run starts from: the ``servers`` of the inventory, their load ``queues`` (by server
    name; kept across runs), the ``used`` segments (by id, overshadowed ones included), the ids of
    the ``overshadowed`` ones, the retention ``rules`` (datasource -> rules, ``_default`` included).
    ``only``: None when the state holds every segment; else the ids of the only segments it holds
    (served, queued and used), every other one served as the inventory says with nothing queued: a
    state for a duty that decides nothing about the others."""

    servers: list[DruidServer]
    used: dict[str, DataSegment]
    rules: Mapping[str, list[Rule]]
    overshadowed: set[str] = field(default_factory=set)
    queues: dict[str, LoadQueue] = field(default_factory=dict)
    only: frozenset[str] | None = None
    unheld: UnheldServed | None = None
    """The served segments ``servers`` hold as rows, not objects (a state built for balancing:
    :mod:`~segment_balancer.planner.druid_coordinator.unheld`); each server's share is its
    :attr:`DruidServer.unheld`."""


@dataclass(frozen=True)
class Operation:
    """A change the run made to a load queue: ``event`` ``ASSIGNED`` (a new request) or ``CANCELLED``
    (a queued one, of this run or earlier), on ``server``, of ``segment`` with ``action``
    (``LOAD``, ``REPLICATE``, ``MOVE_TO`` with its ``move_source``, ``DROP``), by ``duty`` (one of
    :data:`~segment_balancer.planner.coordinators.DUTIES`); a load of a part (Druid 38)
    carries its ``profile``."""

    server: str
    tier: str
    event: QueueEvent
    action: SegmentAction
    segment: DataSegment
    duty: str
    move_source: str | None = None
    profile: PartialLoadProfile | None = None


@dataclass
class RunResult:
    """What a run did: ``stats`` (Druid's metrics), ``operations`` in the order made, the moves away
    it called off on their source (``unmarked``: ``MOVE_FROM`` cancelled, no request: (how many
    operations came before it, server, segment id)), the segment ids
    it marks unused (``deleted`` by drop rules, ``overshadowed`` ones), the balancer's
    ``max_segments_to_move`` and the ``holders`` as the run left them."""

    stats: RunStats
    operations: list[Operation] = field(default_factory=list)
    unmarked: list[tuple[int, str, str]] = field(default_factory=list)
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
    candidates = list(candidates)
    wanted = {c.datasource for c in candidates}
    timelines: dict[str, dict[str, DataSegment]] = {}
    for holder in [h for hs in cluster.managed.values() for h in hs] + cluster.brokers:
        for segment in holder.served_segments():
            if segment.datasource in wanted:
                timelines.setdefault(segment.datasource, {})[segment.id] = segment
    for datasource, segments in zero_replica.items():
        if datasource in wanted:
            for segment in segments:
                timelines.setdefault(datasource, {})[segment.id] = segment
    bounds: dict[str, tuple[list[DataSegment], np.ndarray, np.ndarray]] = {}
    marked: set[str] = set()
    for candidate in candidates:
        timeline = timelines.get(candidate.datasource)
        if not timeline:
            continue
        if candidate.datasource not in bounds:
            segments = list(timeline.values())
            starts = np.fromiter((s.start_ms for s in segments), np.int64, len(segments))
            ends = np.fromiter((s.end_ms for s in segments), np.int64, len(segments))
            bounds[candidate.datasource] = (segments, starts, ends)
        segments, starts, ends = bounds[candidate.datasource]
        # only segments overlapping its interval decide whether it is covered
        overlapping = np.flatnonzero((starts < candidate.end_ms) & (ends > candidate.start_ms)).tolist()
        near = [segments[i] for i in overlapping if segments[i].id != candidate.id]
        rows = [s.timeline_row() for s in near] + [candidate.timeline_row()]
        status = classify_datasource(pd.DataFrame(rows)).set_index("segment_id")["status"]
        if status[candidate.id] == STATUS_OVERSHADOWED:
            marked.add(candidate.id)
    return marked


def segment_stats(
    used: Iterable[DataSegment],
    counts: ReplicaCounts,
    *,
    ignore_missing_servers: bool,
    apart: SettledApart | None = None,
) -> tuple[dict[str, int], dict[str, dict[str, int]], dict[str, int]]:
    """What ``CollectSegmentStats`` counts of the ``used`` segments from the run's replica ``counts``
    (Druid 38.0.0 ``SegmentReplicationStatus.computeSegmentStats``, 35.0.0 its three passes): per
    datasource the unavailable segments (no replica loaded anywhere though one is required, or no
    counts at all; every datasource a row, 0 included); per tier and datasource the replicas
    missing, of those required when ``ignore_missing_servers`` (what the Coordinator's own count asks,
    in 35.0.0 and 38.0.0), else of those required and loadable (no more than the tier's
    historicals: the cluster view of the web console's API); per datasource the segments required
    nowhere and loaded nowhere (served from deep storage only).

    ``apart``: the settled segments ``used`` leaves out (:class:`SettledApart`: nothing unavailable
    or missing of them, but their rows, 0, made where the whole run would first make them)."""
    unavailable: dict[str, int] = {} if apart is None else dict.fromkeys(apart.datasources, 0)
    under: dict[str, dict[str, int]] = {}
    deep_only: dict[str, int] = {}
    firsts: list[tuple[int, int, str, str]] = []
    by_id = counts.counts
    for segment in used:
        tiers = by_id.get(segment.id)
        ds = segment.datasource
        if tiers is None:
            unavailable[ds] = unavailable.get(ds, 0) + 1
            continue
        loaded = required = 0
        for count in tiers.values():
            loaded += count.total_loaded
            required += count.required
        unavailable[ds] = unavailable.get(ds, 0) + (loaded <= 0 and required != 0)
        if loaded == 0 and required == 0:
            deep_only[ds] = deep_only.get(ds, 0) + 1
        for place, (tier, count) in enumerate(tiers.items()):
            wanted = count.required if ignore_missing_servers else count.required_and_loadable
            row = under.get(tier)
            if row is None:
                row = under[tier] = {}
            if apart is not None and ds not in row:
                firsts.append((apart.used_positions[segment.id], place, tier, ds))
            missing = wanted - count.total_loaded
            row[ds] = row.get(ds, 0) + (missing if missing > 0 else 0)
    if apart is not None:
        # the rows in the order the whole run makes them: first by the used segment, then by its tiers
        ordered: dict[str, dict[str, int]] = {}
        for _, _, tier, ds in sorted([*firsts, *apart.under_first], key=lambda e: (e[0], e[1])):
            ordered.setdefault(tier, {}).setdefault(ds, under.get(tier, {}).get(ds, 0))
        under = ordered
    return unavailable, under, deep_only


def run_rules(
    state: ClusterState, assigner: StrategicSegmentAssigner, now_ms: int, apart: SettledApart | None = None
) -> set[str]:
    """Druid ``RunRules``: every used segment that is not overshadowed, newest first, by the first of
    its datasource's rules (then ``_default``'s) that applies at ``now_ms``; then the segments of
    drop rules counted as ``segment/deleted/count``. Returns their ids (marked unused).

    Druid 38.0.0's partial-load rules (#19374 and after): a rule whose matcher applies loads the part
    it resolves (``replicate_partially``), one whose matcher does not applies only with
    ``onCannotMatch`` ``fullLoad`` and loads the whole segment; an empty part (a cluster-group
    matcher that matched none of a core partition's groups) is held back until the segment's shard
    group (datasource, interval, version) ends, and dispatched only if a sibling matched something
    (``RunRules.EmptyDeferringHandler``).

    ``apart``: the settled segments the state does not hold (:class:`SettledApart`), their metrics
    taken where the first of each rule's would be visited."""
    rules = dict(state.rules)
    order = newest_first(s for s in state.used.values() if s.id not in state.overshadowed)
    applying = _applying_rules(order, rules, now_ms)
    partial = any(not rule.is_interval_based for rule_list in rules.values() for rule in rule_list)
    empties = EmptyDeferring(assigner)
    group = None
    touches = [] if apart is None else list(reversed(apart.touches))

    def touch_before(position: int | None) -> None:
        while touches and (position is None or touches[-1][0] < position):
            _, tier_replicants, size = touches.pop()
            assigner.take_settled(tier_replicants, size)

    for segment, rule in zip(order, applying):
        if apart is not None:
            touch_before(apart.visit_positions[segment.id])
        if partial and (segment.datasource, segment.interval, segment.version) != group:
            empties.flush()
            group = (segment.datasource, segment.interval, segment.version)
        if rule is None:
            continue
        if rule.kind == "broadcast":
            assigner.broadcast(segment)
        elif rule.kind == "drop":
            assigner.delete(segment)
        elif not rule.is_interval_based and (match := rule.partial_match(segment.shape())) is not None:
            profile = PartialLoadProfile.of_match(match, rule.matcher.TYPE)
            empties.replicate_partially(segment, profile, rule.tiered_replicants)
        else:
            assigner.replicate(segment, rule.tiered_replicants)
    touch_before(None)
    empties.flush()
    deleted: set[str] = set()
    for datasource, segments in assigner.segments_to_delete.items():
        assigner.stats.add(m.DELETED, len(segments), dataSource=datasource)
        deleted |= {s.id for s in segments}
    return deleted


def _applying_rules(segments: list[DataSegment], rules: dict[str, list[Rule]], now_ms: int) -> list[Rule | None]:
    """Each of ``segments``' first applying rule (its datasource's rules, then ``_default``'s), None
    where none applies: :func:`~segment_balancer.druid.rules.rule_index_for` over each datasource's
    intervals at once, a segment's shape asked only where a ``fallThrough`` partial-load rule's
    interval test holds."""
    positions: dict[str, list[int]] = {}
    for i, segment in enumerate(segments):
        positions.setdefault(segment.datasource, []).append(i)
    applying: list[Rule | None] = [None] * len(segments)
    for datasource, rows in positions.items():
        rule_list = rules_for(rules, datasource)
        if not rule_list:
            continue
        starts = np.fromiter((segments[i].start_ms for i in rows), np.int64, len(rows))
        ends = np.fromiter((segments[i].end_ms for i in rows), np.int64, len(rows))
        index = rule_index_for(rule_list, starts, ends, now_ms, lambda j, rows=rows: segments[rows[j]].shape())
        for i, k in zip(rows, index.tolist()):
            if k >= 0:
                applying[i] = rule_list[k]
    return applying


class EmptyDeferring:
    """Druid 38.0.0 ``RunRules.EmptyDeferringHandler`` for one shard group at a time: partial loads of
    the empty part wait for :meth:`flush`, which dispatches them if a load of a positive part of the
    same group went through, and forgets them otherwise."""

    def __init__(self, assigner: StrategicSegmentAssigner):
        self.assigner = assigner
        self.pending: list[tuple[DataSegment, PartialLoadProfile, Mapping[str, int]]] = []
        self.positive = False

    def replicate_partially(self, segment: DataSegment, profile: PartialLoadProfile, tiers: Mapping[str, int]) -> None:
        if profile.fingerprint == EMPTY_LOAD_FINGERPRINT:
            self.pending.append((segment, profile, tiers))
        else:
            self.positive = True
            self.assigner.replicate_partially(segment, profile, tiers)

    def flush(self) -> None:
        if self.positive:
            for segment, profile, tiers in self.pending:
                self.assigner.replicate_partially(segment, profile, tiers)
        self.pending.clear()
        self.positive = False


@dataclass(frozen=True)
class QueuedOperation:
    """A request an earlier duty of the run queued or cancelled, to apply again
    (:meth:`CoordinatorRun.replay`): ``event`` ``ASSIGNED`` or ``CANCELLED`` of Druid's ``action``
    on ``server``, of the segment ``segment_id``; a ``MOVE_TO`` names its ``move_source``."""

    event: QueueEvent
    action: SegmentAction
    server: str
    segment_id: str
    move_source: str | None = None


class CoordinatorRun:
    """One Coordinator run on ``state`` at ``now_ms``, duty by duty (module docstring), so that each
    duty can run on its own (a Spark application each: ``segment_balancer.spark.druid_plan``): a
    duty's application builds the run, replays (:meth:`replay`) what the earlier duties queued and runs its
    duty; run together (:func:`run_coordinator`), the duties give the same operations.

    ``seed``: what the run's draws are seeded by (``balancerRandomSeed@now_ms``: the same snapshot
    gives the same plan); the rules draw from ``seed/rules``, each tier's balancing from
    ``seed/balance/<tier>``, so a tier balanced on its own draws what it draws in the whole run.
    ``used_count``: the used segments of the whole cluster, when ``state`` holds only some of them
    (one tier's), as the run's limits depend on it (``SegmentLoadingConfig``). The load queues of
    ``state`` gain the run's requests and lose its cancellations.
    """

    def __init__(
        self,
        state: ClusterState,
        config: DruidConfig,
        *,
        now_ms: int,
        seed: str | None = None,
        uptime_ms: int | None = None,
        used_count: int | None = None,
    ):
        self.state, self.config, self.now_ms, self.uptime_ms = state, config, now_ms, uptime_ms
        self.seed = seed if seed is not None else f"{config['balancerRandomSeed']}@{now_ms}"
        self.stats = RunStats()
        self.result = RunResult(self.stats)
        names = {s.name for s in state.servers}
        for name in [n for n in state.queues if n not in names]:
            del state.queues[name]
        self.used_count = len(state.used) if used_count is None else used_count
        """The used segments of the cluster (overshadowed ones included), held or not."""
        self.loading = config.loading(self.used_count)
        self.apart: SettledApart | None = None
        """The settled used segments ``state`` does not hold (its ``only`` leaves them out), which
        :meth:`rules` counts from here: :mod:`~segment_balancer.planner.druid_coordinator.settled`."""
        decommissioning = set(config["decommissioningNodes"])
        clones = config["cloneServers"]
        self.holders = [
            ServerHolder(
                server,
                state.queues.setdefault(server.name, LoadQueue(server.name)),
                decommissioning=server.host in decommissioning,
                unmanaged=server.host in clones,
                max_segments_in_load_queue=self.loading.max_segments_in_load_queue,
            )
            for server in state.servers
        ]
        self.result.holders = self.holders
        self.journal: list[tuple[QueueEvent, QueuedRequest, str]] = []
        for queue in state.queues.values():
            queue.journal = self.journal
        self.cluster = DruidCluster(self.holders)
        self.make_strategy = functools.partial(
            make_strategy,
            config[STRATEGY_KEY],
            release=config.release,
            threshold=config[THRESHOLD_KEY],
        )
        """The run's strategy drawing from a given generator (``druid.coordinator.balancer.strategy``
        as the release has it)."""
        self.assigner: StrategicSegmentAssigner | None = None
        self._duty_starts: list[tuple[str, int]] = []
        self._broadcast: set[str] | None = None

    @property
    def broadcast_datasources(self) -> set[str]:
        """The used segments' datasources (of ``state.unheld`` too) whose rules include a broadcast rule."""
        if self._broadcast is None:
            datasources = {s.datasource for s in self.state.used.values()}
            if self.state.unheld is not None:
                datasources |= self.state.unheld.used_datasources
            self._broadcast = _broadcast_datasources(self.state.rules, datasources)
        return self._broadcast

    def _begin(self, duty: str) -> None:
        self._duty_starts.append((duty, len(self.journal)))

    def replay(self, operations: Iterable[QueuedOperation], unmarked: Iterable[tuple[int, str, str]] = ()) -> None:
        """After :meth:`prepare`: queue and cancel again, in order, what the duties after it did
        (their operations, as the op log keeps them); their queue counts stay (the load queue stats
        of the run), their journal entries go (they are not this duty's operations). An operation
        on a server or segment the run does not hold is left out (a duty of one tier replays that
        tier's). ``unmarked``: the moves away called off on their source, each after as many of
        ``operations`` as it says (a result's ``unmarked``). Raises ``RuntimeError`` before
        :meth:`prepare`."""
        if self.assigner is None:
            raise RuntimeError("replay after prepare: the run's replica counts are those prepare leaves")
        by_name = {h.name: h for h in self.holders}
        segments = {**{s.id: s for h in self.holders for s in h.served_segments()}, **self.state.used}
        queues = self.assigner.queues
        pending = sorted(unmarked)

        def unmark_up_to(position: int | None) -> None:
            """Call off the moves away that came before operation ``position`` (None: all left)."""
            while pending and (position is None or pending[0][0] <= position):
                _, server, segment_id = pending.pop(0)
                if (holder := by_name.get(server)) is not None and (segment := segments.get(segment_id)) is not None:
                    holder.cancel(SegmentAction.MOVE_FROM, segment)

        for position, op in enumerate(operations):
            unmark_up_to(position)
            holder, segment = by_name.get(op.server), segments.get(op.segment_id)
            if holder is None or segment is None:
                continue
            if op.event is QueueEvent.CANCELLED:
                holder.cancel(op.action, segment)
            elif op.action is SegmentAction.DROP:
                queues.drop(segment, holder)
            elif op.action is SegmentAction.MOVE_TO and op.move_source in by_name:
                queues.move(segment, by_name[op.move_source], holder)
            else:
                queues.load(segment, holder, op.action)
        unmark_up_to(None)
        self.journal.clear()

    def resume(self) -> None:
        """After :meth:`finish`: go on with the next duties on the run as it stands, instead of a
        run built again and :meth:`replay`-ed to the same point. The next :meth:`finish` reports
        only what comes after this call: fresh metrics (the assigner's too), operations and moves
        called off counted from here, the load queues' journals attached again. The replica
        counts, the replication throttle and the queues' request counts carry on, as in one run.
        Raises ``RuntimeError`` before :meth:`prepare`."""
        if self.assigner is None:
            raise RuntimeError("resume after prepare: a run goes on from its duties")
        self.stats = RunStats()
        self.assigner.stats = self.stats
        self.result = RunResult(self.stats, holders=self.holders)
        self.journal = []
        for queue in self.state.queues.values():
            queue.journal = self.journal
        self._duty_starts = []

    # ------------------------------------------------------------------------------------ duties
    def prepare(self, emit: bool = True) -> None:
        """1. ``PrepareBalancerAndLoadQueues``: loads queued on decommissioning servers cancelled,
        then the run's segment assigner made (its replica counts are the run's from then on), the
        historicals counted per tier: their number, the clone targets among them, the managed ones'
        ``max_size`` and (Druid 38) ``storage_size`` (``emit``: False in a later duty's application,
        which runs it again rather than replaying it: its metrics are the first duty's)."""
        self._begin("prepare")
        for holder in self.cluster.all_managed_servers():
            if holder.decommissioning:
                for segment, action in list(holder.actions.items()):
                    if action.is_load:
                        holder.cancel(action, segment)
        self.assigner = StrategicSegmentAssigner(
            self.cluster,
            self.make_strategy(random.Random(f"{self.seed}/rules")),
            self.stats,
            replication_throttle_limit=self.loading.replication_throttle_limit,
            round_robin=self.loading.use_round_robin_assignment,
            release=self.config.release,
            aliases=self.config.aliases,
        )
        if emit:
            alias_of = self.assigner.tier_alias
            for tier, hs in self.cluster.historicals.items():
                dims = {"tier": tier, "tierAlias": alias_of.get(tier)}
                managed = [h for h in hs if not h.unmanaged]
                self.stats.add(m.HISTORICAL_COUNT, len(hs), **dims)
                self.stats.add(m.CLONE_COUNT, len(hs) - len(managed), **dims)
                self.stats.add(m.TOTAL_CAPACITY, sum(h.max_size for h in managed), **dims)
                if self.config.is_38:
                    self.stats.add(m.STORAGE_CAPACITY, sum(h.server.storage_size for h in managed), **dims)

    def rules(self) -> None:
        """2. ``RunRules`` (the segments of drop rules are the result's ``deleted``), then 3.
        ``CollectSegmentStats`` (:func:`segment_stats`): unavailable segments per datasource (0
        included), under-replicated ones per tier and datasource, those served from deep storage
        only per datasource."""
        self._begin("rules")
        if self.holders:
            self.result.deleted = run_rules(self.state, self.assigner, self.now_ms, self.apart)
        # both releases ask for the replicas missing of those required (DruidCoordinator
        # .CollectSegmentStats: computeUnderReplicated(useClusterView=false) -> ignoreMissingServers)
        unavailable, under, deep_only = segment_stats(
            self.state.used.values(), self.assigner.replica_counts, ignore_missing_servers=True, apart=self.apart
        )
        for datasource, n in unavailable.items():
            self.stats.add(m.UNAVAILABLE, n, dataSource=datasource)
        for tier, per_datasource in under.items():
            for datasource, n in per_datasource.items():
                self.stats.add(m.UNDER_REPLICATED, n, tier=tier, dataSource=datasource)
        for datasource, n in deep_only.items():
            self.stats.add(m.DEEP_STORAGE_ONLY, n, dataSource=datasource)

    def zero_replica_ids(self) -> set[str]:
        """After :meth:`rules`: the used segments no rule wants a replica of (what
        :meth:`unload` needs of the rules when it runs on its own)."""
        return {s.id for segments in self.assigner.zero_replica_segments.values() for s in segments}

    def unload(self, zero_replica_ids: Iterable[str] | None = None) -> None:
        """4. ``UnloadUnusedSegments``: loads of unused segments cancelled, served ones dropped (a
        realtime server keeps what it serves, but for a datasource with a broadcast rule); then 5.
        ``MarkOvershadowedSegmentsAsUnused`` (the result's ``overshadowed``), with the segments no
        rule wants replicas of (``zero_replica_ids``; None: this run's :meth:`rules` found them)."""
        self._begin("unload")
        state = self.state
        broadcast_status = dict.fromkeys(self.broadcast_datasources, True)

        def skip_unload(holder: ServerHolder, datasource: str) -> bool:
            if datasource not in broadcast_status:
                broadcast_status[datasource] = bool(_broadcast_datasources(state.rules, [datasource]))
            return holder.server.type.is_realtime and not broadcast_status[datasource]

        managed = self.cluster.all_managed_servers()
        for holder in managed:
            for segment, action in list(holder.actions.items()):
                if segment.id not in state.used and action.is_load and not skip_unload(holder, segment.datasource):
                    holder.cancel(action, segment)
        for holder in managed:
            unneeded: dict[str, int] = {}
            for segment in list(holder.served_segments()):
                if segment.id in state.used or skip_unload(holder, segment.datasource):
                    continue
                if self.assigner.queues.drop(segment, holder):
                    unneeded[segment.datasource] = unneeded.get(segment.datasource, 0) + 1
            for datasource, n in unneeded.items():
                self.stats.add(m.UNNEEDED, n, tier=holder.tier, dataSource=datasource)

        up_long_enough = self.uptime_ms is None or self.uptime_ms >= self.config["millisToWaitBeforeDeleting"]
        if state.overshadowed and up_long_enough:
            if zero_replica_ids is None:
                zero_replica = self.assigner.zero_replica_segments
            else:
                zero_replica = {}
                for i in zero_replica_ids:
                    if (segment := state.used.get(i)) is not None:
                        zero_replica.setdefault(segment.datasource, set()).add(segment)
            candidates = [state.used[i] for i in sorted(state.overshadowed) if i in state.used]
            self.result.overshadowed = _overshadowed_now(self.cluster, zero_replica, candidates)
            per_datasource: dict[str, int] = {}
            for i in self.result.overshadowed:
                ds = state.used[i].datasource
                per_datasource[ds] = per_datasource.get(ds, 0) + 1
            for datasource, n in sorted(per_datasource.items()):
                self.stats.add(m.OVERSHADOWED, n, dataSource=datasource)

    def balance(self, tiers: Iterable[str] | None = None, segments_and_actions: int | None = None) -> int:
        """6. ``BalanceSegments`` (:func:`balance_segments`) of ``tiers`` (None: every tier), its
        maximum of moves from ``segments_and_actions`` (None: this run's ``served_and_queued``,
        counted after :meth:`unload`), each tier drawing from ``seed/balance/<tier>``. Returns the
        maximum (also the result's ``max_segments_to_move``)."""
        self._begin("balance")
        unheld = self.state.unheld
        if not self.state.used and (unheld is None or not unheld.used.any()):
            return 0
        if unheld is not None:
            unheld.on_segment = self._hold
        config = self.config
        most = balance_segments(
            self.cluster,
            self.assigner,
            self.stats,
            smart=config["smartSegmentLoading"],
            max_segments_to_move=config["maxSegmentsToMove"],
            balancer_threads=self.loading.balancer_compute_threads,
            period_ms=config.period_ms,
            used=lambda s: self.state.used.get(s.id),
            broadcast_datasources=self.broadcast_datasources,
            seed=self.seed,
            strategy=self.make_strategy,
            segments_and_actions=segments_and_actions,
            tiers=tiers,
            unheld=unheld,
        )
        self.result.max_segments_to_move = most
        return most

    def _hold(self, segment: DataSegment, row: int, servers: list[str]) -> None:
        """A segment of ``state.unheld`` made an object (``row``): served by ``servers`` from now on
        as the run's own (their shares less it, their replica counts more), used if its row is."""
        by_name = {h.name: h for h in self.holders}
        managed = {h.name for hs in self.cluster.managed.values() for h in hs}
        for name in servers:
            holder = by_name.get(name)
            if holder is None:
                continue
            share = holder.server.unheld
            holder.server.segments[segment.id] = segment
            share.count -= 1
            share.bytes -= segment.size
            if name in managed and self.assigner is not None:
                self.assigner.replica_counts.setdefault(segment, holder.tier).loaded += 1
        if self.state.unheld.used[row]:
            self.state.used[segment.id] = segment

    def clone(self) -> None:
        """7. ``CloneHistoricals``: each clone target (``cloneServers``) loads what its source has
        and it lacks, and drops (or cancels) what its source lacks."""
        self._begin("clone")
        stats, state = self.stats, self.state
        if state.only is not None and self.config["cloneServers"]:
            raise RuntimeError("CloneHistoricals copies whole servers: a state of some segments only cannot clone")
        by_host = {h.server.host: h for h in self.cluster.all_historicals()}
        for target_host, source_host in self.config["cloneServers"].items():
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
                elif self.assigner.queues.load(used, target, SegmentAction.LOAD):
                    stats.add(m.ASSIGNED_TO_CLONE, 1, server=target.name, dataSource=segment.datasource)
            for segment in sorted(on_target - on_source, key=DataSegment.newest_first):
                if target.is_loading(segment):
                    target.cancel(SegmentAction.LOAD, segment)
                elif self.assigner.queues.drop(segment, target):
                    stats.add(m.DROPPED_FROM_CLONE, 1, server=target.name)

    def operations(self) -> tuple[list[Operation], list[tuple[int, str, str]]]:
        """The requests and cancellations of the duties run so far (since :meth:`replay`), in order,
        each with its duty; and the moves away called off on their source (a ``MOVE_FROM``
        cancelled: no request), each as (the operations before it, server, segment id)."""
        tiers = {h.name: h.tier for h in self.holders}
        ends = [start for _, start in self._duty_starts[1:]] + [len(self.journal)]
        out: list[Operation] = []
        unmarked: list[tuple[int, str, str]] = []
        for (duty, start), end in zip(self._duty_starts, ends):
            for event, request, server in self.journal[start:end]:
                if request.action is SegmentAction.MOVE_FROM:
                    unmarked.append((len(out), server, request.segment.id))
                elif event in (QueueEvent.ASSIGNED, QueueEvent.CANCELLED):
                    action, segment, source = request.action, request.segment, request.move_source
                    profile = request.profile if isinstance(request.profile, PartialLoadProfile) else None
                    out.append(Operation(server, tiers[server], event, action, segment, duty, source, profile))
        return out, unmarked

    def finish(self, before_collect: Callable[[], None] | None = None, collect: bool = True) -> RunResult:
        """The result: the operations (:meth:`operations`); with ``collect``, 8.
        ``CollectLoadQueueStats`` first runs ``before_collect`` (a simulation completing requests
        within the run) and counts every load queue. The queues' journals are let go."""
        self.result.operations, self.result.unmarked = self.operations()
        if collect:
            if before_collect is not None:
                before_collect()
            collect_load_queue_stats(self.holders, self.stats)
        for queue in self.state.queues.values():
            queue.journal = []
        return self.result


def run_coordinator(
    state: ClusterState,
    config: DruidConfig,
    *,
    now_ms: int,
    rng: random.Random | None = None,
    uptime_ms: int | None = None,
    before_collect: Callable[[], None] | None = None,
) -> RunResult:
    """One Coordinator run on ``state`` at ``now_ms`` (period rules): every duty of
    :class:`CoordinatorRun` in order. The load queues of ``state`` gain the run's requests and lose
    its cancellations; nothing else in ``state`` changes.

    ``rng``: None, the run's draws seeded by ``balancerRandomSeed`` and ``now_ms`` (so that the same
    snapshot gives the same plan and runs one after another draw afresh, as Druid's do); else the
    run's seed is drawn from it (a simulation of many runs). ``uptime_ms`` is how long the
    Coordinator has been up (None: longer than ``millisToWaitBeforeDeleting``); ``before_collect``
    runs before the load queues are counted (a simulation completing requests within the run).
    """
    seed = None if rng is None else f"{rng.getrandbits(64)}"
    if config["pauseCoordination"]:
        return RunResult(RunStats())
    run = CoordinatorRun(state, config, now_ms=now_ms, seed=seed, uptime_ms=uptime_ms)
    run.prepare()
    run.rules()
    run.unload()
    run.balance()
    run.clone()
    return run.finish(before_collect)


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
