"""How a Druid Coordinator run loads, replicates, drops and moves one segment (Druid 35.0.0 and
38.0.0 ``StrategicSegmentAssigner``, ``SegmentReplicaCount(Map)``, ``ReplicationThrottler``,
``RoundRobinServerSelector``, ``SegmentStatusInTier``, ``PartialSegmentStatusInTier``,
``SegmentLoadQueueManager``; docs/DRUID_COORDINATOR_NOTES.md §2.4, §3).

Replica counts are taken once, when the run begins; nothing the run queues changes them.

What Druid 38.0.0 changed here (``release`` "38.0.0"): a rule's tier aliases are expanded before
anything else (#19204, #19595) and the tier metrics of an aliased tier carry a ``tierAlias``
dimension; partial-load rules reconcile replicas by fingerprint (:meth:`StrategicSegmentAssigner.
replicate_partially`, #19374 and after); the tiers a segment's drop budget is spent in come in a JDK
immutable set's order (#19532; :func:`~.model.java_immutable_set_order`) instead of a ``HashSet``'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from segment_balancer.druid import metrics as m
from segment_balancer.druid import tier_aliases
from segment_balancer.druid.releases import REPRODUCED_RELEASES
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    PartialLoadProfile,
    SegmentAction,
    ServerHolder,
    java_hash_order,
    java_immutable_set_order,
)
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.strategies import CostStrategy, RandomStrategy

_UNPLANNED = object()

DEFAULT_TIER = "_default_tier"
"""Druid's ``DruidServer.DEFAULT_TIER``: where a segment with no required replicas is counted."""


@dataclass(slots=True)
class ReplicaCount:
    """One segment's replicas in one tier (Druid ``SegmentReplicaCount``): ``required`` by its rule
    (``required_and_loadable``: no more than the tier's managed historicals), ``loaded`` on managed
    historicals, ``loaded_elsewhere`` on brokers and realtime servers, and the queued ``loading``,
    ``dropping``, ``moving_to``, ``moving_from``."""

    required: int = 0
    required_and_loadable: int = 0
    loaded: int = 0
    loaded_elsewhere: int = 0
    loading: int = 0
    dropping: int = 0
    moving_to: int = 0
    moving_from: int = 0

    def queued(self, action: SegmentAction) -> None:
        """Count one queued ``action`` (a ``REPLICATE`` as loading)."""
        if action in (SegmentAction.LOAD, SegmentAction.REPLICATE):
            self.loading += 1
        elif action is SegmentAction.MOVE_TO:
            self.moving_to += 1
        elif action is SegmentAction.MOVE_FROM:
            self.moving_from += 1
        elif action is SegmentAction.DROP:
            self.dropping += 1

    def set_required(self, required: int, servers: int) -> None:
        """``required`` by the rule; loadable: at most one per historical of the tier (``servers``)."""
        self.required = required
        self.required_and_loadable = min(required, servers)

    @property
    def loaded_not_dropping(self) -> int:
        return self.loaded - self.dropping

    @property
    def move_completed_pending_drop(self) -> int:
        return self.moving_from - self.moving_to

    @property
    def total_loaded(self) -> int:
        return self.loaded + self.loaded_elsewhere

    @property
    def projected(self) -> int:
        """Replicas once the queue is done: loaded and not dropping, plus loading, less moves done
        but not yet dropped at their source (``SegmentReplicaCount`` as ``updateReplicasInTier``
        reads it)."""
        return self.loaded_not_dropping + self.loading - max(0, self.move_completed_pending_drop)

    def accumulate(self, other: ReplicaCount) -> None:
        """Add ``other``'s counts (a segment's tiers summed)."""
        self.required += other.required
        self.required_and_loadable += other.required_and_loadable
        self.loaded += other.loaded
        self.loaded_elsewhere += other.loaded_elsewhere
        self.loading += other.loading
        self.dropping += other.dropping
        self.moving_to += other.moving_to
        self.moving_from += other.moving_from


class ReplicaCounts:
    """Every segment's :class:`ReplicaCount` per tier, counted when the run begins. ``counts`` is
    keyed by segment id: a str hashes once and compares in C, where a ``DataSegment`` key calls
    its Python ``__hash__`` at every lookup (some ten million of them in a 1M run's rules)."""

    def __init__(self, cluster: DruidCluster):
        self.counts: dict[str, dict[str, ReplicaCount]] = {}
        for tier, holders in cluster.managed.items():
            for holder in holders:
                for segment_id in holder.server.segments:
                    self._setdefault(segment_id, tier).loaded += 1
                for segment, action in holder.actions.items():
                    self._setdefault(segment.id, tier).queued(action)
        for holder in cluster.brokers + cluster.realtimes:
            for segment_id in holder.server.segments:
                self._setdefault(segment_id, holder.tier).loaded_elsewhere += 1

    def _setdefault(self, segment_id: str, tier: str) -> ReplicaCount:
        tiers = self.counts.get(segment_id)
        if tiers is None:
            tiers = self.counts[segment_id] = {}
        count = tiers.get(tier)
        if count is None:
            count = tiers[tier] = ReplicaCount()
        return count

    def setdefault(self, segment: DataSegment, tier: str) -> ReplicaCount:
        """The segment's count in ``tier``, created empty when absent."""
        return self._setdefault(segment.id, tier)

    def get(self, segment: DataSegment, tier: str) -> ReplicaCount:
        """The segment's count in ``tier`` (an empty one when absent, not stored)."""
        return self.counts.get(segment.id, {}).get(tier) or ReplicaCount()

    def total(self, segment: DataSegment) -> ReplicaCount:
        """The segment's counts summed over its tiers."""
        total = ReplicaCount()
        for count in self.counts.get(segment.id, {}).values():
            total.accumulate(count)
        return total


class ReplicationThrottler:
    """How many replicas (``REPLICATE``) each tier may start this run: ``limit`` less those its
    historicals had queued when the run began (Druid ``ReplicationThrottler``)."""

    def __init__(self, loading_replicas: Mapping[str, int], limit: int):
        self.limit = limit
        self.max_assignments = {tier: max(0, limit - n) for tier, n in loading_replicas.items()}
        self.assigned: dict[str, int] = {}

    def throttled(self, tier: str) -> bool:
        """Whether ``tier`` has started as many replicas as it may this run."""
        return self.assigned.get(tier, 0) >= self.max_assignments.get(tier, self.limit)

    def assigned_replica(self, tier: str) -> None:
        """Count one replica started on ``tier``."""
        self.assigned[tier] = self.assigned.get(tier, 0) + 1


class RoundRobinSelector:
    """Round-robin assignment (Druid ``RoundRobinServerSelector``): one circular list per tier of its
    managed historicals in the holders' order; the cursor persists across the run's segments and
    rests on the next server that can load the segment without consuming it."""

    def __init__(self, cluster: DruidCluster):
        self.servers = {tier: list(holders) for tier, holders in cluster.managed.items()}
        self.cursor = dict.fromkeys(self.servers, 0)

    def servers_to_load(self, tier: str, segment: DataSegment) -> Iterator[ServerHolder]:
        """The tier's servers that can load ``segment``, from the cursor on, each at most once. As in
        Druid, taking a server moves the cursor past it and on to the next eligible one at once."""
        servers = self.servers.get(tier)
        if not servers:
            return iter(())
        return _EligibleServers(self, tier, segment, len(servers))

    def _advance(self, tier: str) -> None:
        self.cursor[tier] += 1
        if self.cursor[tier] >= len(self.servers[tier]):
            self.cursor[tier] = 0


class _EligibleServers:
    """Druid's ``EligibleServerIterator``: at most one lap of the circular list."""

    def __init__(self, selector: RoundRobinSelector, tier: str, segment: DataSegment, steps: int):
        self.selector, self.tier, self.segment, self.remaining = selector, tier, segment, steps
        self.following = self._search()

    def _search(self) -> ServerHolder | None:
        servers = self.selector.servers[self.tier]
        while self.remaining > 0:
            self.remaining -= 1
            cursor = self.selector.cursor[self.tier]
            candidate = servers[cursor if cursor < len(servers) else 0]
            if candidate.can_load(self.segment):
                return candidate
            self.selector._advance(self.tier)
        return None

    def __iter__(self) -> _EligibleServers:
        return self

    def __next__(self) -> ServerHolder:
        if self.following is None:
            raise StopIteration
        taken = self.following
        self.selector._advance(self.tier)
        self.following = self._search()
        return taken


class LoadQueueManager:
    """Starts operations on holders and queues them (Druid ``SegmentLoadQueueManager``)."""

    def load(
        self,
        segment: DataSegment,
        holder: ServerHolder,
        action: SegmentAction,
        profile: PartialLoadProfile | None = None,
    ) -> bool:
        """Queue a load-type ``action`` (of a part: ``profile``); False when the holder has an action
        on the segment."""
        if not holder.start(action, segment, profile):
            return False
        holder.queue.load(segment, action, profile=profile)
        return True

    def drop(self, segment: DataSegment, holder: ServerHolder) -> bool:
        """Queue a drop; False when the holder has an action on the segment."""
        if not holder.start(SegmentAction.DROP, segment):
            return False
        holder.queue.drop(segment)
        return True

    def move(self, segment: DataSegment, source: ServerHolder, destination: ServerHolder) -> bool:
        """A ``MOVE_FROM`` on the source, a ``MOVE_TO`` on the destination; once the destination has
        loaded it, the source drops it (unless a drop is queued there already)."""
        if not source.start(SegmentAction.MOVE_FROM, segment):
            return False
        if not destination.start(SegmentAction.MOVE_TO, segment):
            source.cancel(SegmentAction.MOVE_FROM, segment)
            return False
        source_queue = source.queue
        source_queue.mark_to_drop(segment)

        def finished(success: bool) -> None:
            if success and segment.id not in source_queue.to_drop:
                source_queue.unmark_to_drop(segment)
                source_queue.drop(segment, lambda _ok: source_queue.unmark_to_drop(segment))
            else:
                source_queue.unmark_to_drop(segment)

        destination.queue.load(segment, SegmentAction.MOVE_TO, finished, move_source=source.name)
        return True


class PartialStatusInTier:
    """One segment against one tier's managed historicals for a partial-load request of
    ``fingerprint`` (Druid 38.0.0 ``PartialSegmentStatusInTier``), each server in at most one list, in
    the tier's order: serving it with the requested part (``matching_loaded``) or another or none
    (``stale_loaded``; those not decommissioning with room in their run's load budget also
    ``additive``: a partial load may fill in the missing parts in place, no disk check), loading it
    with the requested part (``matching_in_flight``) or another (``stale_in_flight``), able to load
    it (``fresh``). A server with a drop or move of it queued is in none."""

    def __init__(self, segment: DataSegment, fingerprint: str, holders: list[ServerHolder]):
        self.matching_loaded: list[ServerHolder] = []
        self.stale_loaded: list[ServerHolder] = []
        self.matching_in_flight: list[ServerHolder] = []
        self.stale_in_flight: list[ServerHolder] = []
        self.fresh: list[ServerHolder] = []
        self.additive: list[ServerHolder] = []
        for holder in holders:
            action = holder.action_on(segment)
            if holder.is_serving(segment):
                loaded = holder.server.profile_of(segment.id)
                if loaded is not None and loaded.matches(fingerprint):
                    self.matching_loaded.append(holder)
                else:
                    self.stale_loaded.append(holder)
                    if not holder.decommissioning and not holder.load_queue_full:
                        self.additive.append(holder)
            elif action is SegmentAction.LOAD:
                in_flight = holder.in_flight_profiles.get(segment)
                if in_flight is not None and in_flight.matches(fingerprint):
                    self.matching_in_flight.append(holder)
                else:
                    self.stale_in_flight.append(holder)
            elif action is None and holder.can_load(segment):
                self.fresh.append(holder)


class SegmentStatusInTier:
    """One segment against one tier's managed historicals, in the tier's order (Druid
    ``SegmentStatusInTier``): servers that serve it (may drop), servers that can load it, and
    servers with an action queued on it, by action."""

    def __init__(self, segment: DataSegment, holders: list[ServerHolder]):
        self.eligible_drop: list[ServerHolder] = []
        self.eligible_load: list[ServerHolder] = []
        self.performing: dict[SegmentAction, list[ServerHolder]] = {}
        segment_id = segment.id
        for holder in holders:
            action = holder.actions.get(segment)
            if action is not None:  # neither serving (nothing queued) nor able to load
                self.performing.setdefault(action, []).append(holder)
            elif segment_id in holder.server.segments:
                self.eligible_drop.append(holder)
            elif holder.can_load(segment):
                self.eligible_load.append(holder)


@dataclass
class StrategicSegmentAssigner:
    """One run's segment assigner (Druid ``StrategicSegmentAssigner``): ``replicate`` (load rules),
    ``broadcast`` (broadcast rules), ``delete`` (drop rules: marked unused after the rules),
    ``move`` (balancing); Druid 38's ``replicate_partially`` (partial-load rules).
    ``replication_throttle_limit`` and ``round_robin`` come from the run's ``SegmentLoadingConfig``;
    ``release`` is the Druid release reproduced, ``aliases`` its ``historicalTierAliases`` (38 only)."""

    cluster: DruidCluster
    strategy: CostStrategy | RandomStrategy
    stats: RunStats
    replication_throttle_limit: int
    round_robin: bool
    queues: LoadQueueManager = field(default_factory=LoadQueueManager)
    release: str = REPRODUCED_RELEASES[0]
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self):
        self.replica_counts = ReplicaCounts(self.cluster)
        self.throttler = ReplicationThrottler(
            {tier: sum(h.loading_replicas for h in hs) for tier, hs in self.cluster.managed.items()},
            self.replication_throttle_limit,
        )
        self.selector = RoundRobinSelector(self.cluster) if self.round_robin else None
        self.historicals_per_tier = {tier: len(hs) for tier, hs in self.cluster.managed.items()}
        if self.release == REPRODUCED_RELEASES[0]:
            # Druid 35's Sets.newHashSet(cluster.getTierNames()), per segment: the same order every time
            self.tiers_in_cluster = java_hash_order(self.cluster.tier_names())
        else:
            self.tiers_in_cluster = java_immutable_set_order(self.cluster.tier_names())
        self.tier_alias = tier_aliases.tier_to_alias(self.aliases)
        self.invalid_load_tiers: dict[str, set[str]] = {}
        self.segments_to_delete: dict[str, set[DataSegment]] = {}
        self.zero_replica_segments: dict[str, set[DataSegment]] = {}
        self.broadcast_segments: set[DataSegment] = set()
        self._settled_plans: dict[tuple, tuple | None] = {}

    # ------------------------------------------------------------------------------------ moves
    def move(self, segment: DataSegment, source: ServerHolder, destinations: list[ServerHolder]) -> bool:
        """Move ``segment`` off ``source`` to the strategy's choice among ``destinations`` of its tier
        that can load it (the source stays a candidate unless it is decommissioning)."""
        tier = source.tier
        eligible = [h for h in destinations if h.tier == tier and h.can_load(segment)]
        if not eligible:
            self._skip(m.MOVE_SKIPPED, "No eligible server", segment, source)
            return False
        if not source.decommissioning:
            eligible.append(source)
        destination = self.strategy.destination_to_move(segment, source, eligible)
        if destination is None or destination.server is source.server:
            self._skip(m.MOVE_SKIPPED, "Optimally placed", segment, source)
            return False
        if self._move(segment, source, destination):
            self.stats.add(m.MOVED, 1, tier=tier, dataSource=segment.datasource)
            return True
        self._skip(m.MOVE_SKIPPED, "Encountered error", segment, source)
        return False

    def _move(self, segment: DataSegment, source: ServerHolder, destination: ServerHolder) -> bool:
        if source.is_loading(segment):
            if not source.cancel(SegmentAction.LOAD, segment):
                return False
            if self.replica_counts.get(segment, source.tier).loaded_not_dropping >= 1:
                return self._replicate_on(segment, destination)
            return self._load_on(segment, destination)
        if source.is_serving(segment):
            return self.queues.move(segment, source, destination)
        return False

    # ------------------------------------------------------------------------------- load rules
    def replicate(self, segment: DataSegment, tier_replicants: Mapping[str, int]) -> None:
        """Bring ``segment`` to ``tier_replicants`` (tier or alias -> replicas) on every tier of the
        cluster: drops only as far as the replicas loaded beyond those required (and loadable) allow."""
        if self._settled(segment, tier_replicants):
            return
        required = self._required(segment, tier_replicants)
        surplus = self._surplus(segment)
        drops = 0
        for tier in self.tiers_in_cluster:
            drops += self._update_replicas_in_tier(segment, tier, required.get(tier, 0), surplus - drops)

    def _settled(self, segment: DataSegment, tier_replicants: Mapping[str, int]) -> bool:
        """Whether ``segment``'s replicas already are what ``tier_replicants`` asks in every tier of
        the cluster (projected replicas equal to those required, no move to call off), with at least
        one replica required, and every tier it names one of historicals. If so, what :meth:`replicate`
        would do for it is done here, in its order: the rule's metrics and the required counts taken,
        nothing queued, cancelled or dropped (``_update_replicas_in_tier`` returns at once in every
        tier, and ``_surplus`` notes no zero-replica segment)."""
        plan = self.settled_plan(tier_replicants)
        if plan is None:
            return False
        checks, entries = plan
        tiers = self.replica_counts.counts.get(segment.id)
        if tiers is None:
            return False
        for tier, required in checks:
            count = tiers.get(tier)
            if count is None:
                if required:
                    return False
                continue
            if count.projected != required or (required == 0 and count.moving_to > 0):
                return False
        self._take_metrics(entries, segment.size)
        for tier, n, loadable, _, _ in entries:
            count = self.replica_counts.setdefault(segment, tier)
            count.required, count.required_and_loadable = n, loadable
        return True

    def take_settled(self, tier_replicants: Mapping[str, int], size: int) -> None:
        """The metrics :meth:`_settled` takes for settled segments of a rule's ``tier_replicants``
        whose bytes sum to ``size``, taken at once (a run that does not hold them:
        :mod:`~segment_balancer.planner.druid_coordinator.settled`). Their replica counts are not
        kept. Raises ``ValueError`` for ``tier_replicants`` that cannot be settled."""
        plan = self.settled_plan(tier_replicants)
        if plan is None:
            raise ValueError(f"no segment of a rule of {dict(tier_replicants)} is settled")
        self._take_metrics(plan[1], size)

    def _take_metrics(self, entries: list, size: int) -> None:
        values = self.stats.values
        for _, n, _, factor_key, capacity_key in entries:
            values[factor_key] = max(values.get(factor_key, n), n)
            values[capacity_key] = values.get(capacity_key, 0) + size * n

    def settled_plan(self, tier_replicants: Mapping[str, int]) -> tuple | None:
        """What :meth:`_settled` checks and takes for a rule's ``tier_replicants`` (made once per
        distinct one): per tier of the cluster the replicas required; per tier required (aliases
        expanded) its count, the count loadable, and the keys of its two metrics. None when the rule
        requires no replica, or names a tier without historicals (those go through
        :meth:`replicate`'s steps)."""
        key = tuple(tier_replicants.items())
        plan = self._settled_plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._settled_plans[key] = self._settled_plan(tier_replicants)
        return plan

    def _settled_plan(self, tier_replicants: Mapping[str, int]) -> tuple | None:
        required = tier_aliases.expand(tier_replicants, self.aliases)
        if sum(required.values()) <= 0 or any(tier not in self.cluster.historicals for tier in required):
            return None
        entries = []
        for tier, n in required.items():
            dims = {"tier": tier, "tierAlias": self.tier_alias.get(tier)}
            entries.append(
                (
                    tier,
                    n,
                    min(n, self.historicals_per_tier.get(tier, 0)),
                    RunStats._key(m.REPLICATION_FACTOR, dims),
                    RunStats._key(m.REQUIRED_CAPACITY, dims),
                )
            )
        return [(tier, required.get(tier, 0)) for tier in self.tiers_in_cluster], entries

    def replicate_partially(
        self, segment: DataSegment, profile: PartialLoadProfile, tier_replicants: Mapping[str, int]
    ) -> None:
        """Druid 38.0.0 ``replicateSegmentPartially``: as :meth:`replicate`, but in each tier replicas
        are told apart by ``profile``'s fingerprint (:meth:`_update_partial_in_tier`)."""
        required = self._required(segment, tier_replicants)
        surplus = self._surplus(segment)
        drops = 0
        for tier in self.tiers_in_cluster:
            drops += self._update_partial_in_tier(segment, profile, tier, required.get(tier, 0), surplus - drops)

    def _required(self, segment: DataSegment, tier_replicants: Mapping[str, int]) -> dict[str, int]:
        """The rule's replicas per tier, aliases expanded (Druid 38), each tier's required count set,
        its capacity metrics counted and a tier without historicals noted as invalid."""
        required = tier_aliases.expand(tier_replicants, self.aliases)
        if not required:
            self.replica_counts.setdefault(segment, DEFAULT_TIER)
        for tier, n in required.items():
            alias = self.tier_alias.get(tier)
            self.stats.update_max(m.REPLICATION_FACTOR, n, tier=tier, tierAlias=alias)
            self.stats.add(m.REQUIRED_CAPACITY, segment.size * n, tier=tier, tierAlias=alias)
            self.replica_counts.setdefault(segment, tier).set_required(n, self.historicals_per_tier.get(tier, 0))
            if tier not in self.cluster.historicals:
                self.invalid_load_tiers.setdefault(segment.datasource, set()).add(tier)
        return required

    def _surplus(self, segment: DataSegment) -> int:
        """Replicas loaded (not dropping) beyond those required and loadable, over every tier; a
        segment required nowhere noted as one of zero replicas."""
        total = self.replica_counts.total(segment)
        if total.required <= 0:
            self.zero_replica_segments.setdefault(segment.datasource, set()).add(segment)
        return total.loaded_not_dropping - total.required_and_loadable

    def _update_partial_in_tier(
        self, segment: DataSegment, profile: PartialLoadProfile, tier: str, required: int, max_drops: int
    ) -> int:
        """Druid 38.0.0 ``updateReplicasInTierPartial``: the replicas of the requested part (loaded and
        loading, less moves done but not yet dropped at their source) brought to ``required``: loads
        of another part cancelled to make room (all of them when none is required), new partial
        loads queued (servers without the segment, then those whose load was just cancelled, then
        those serving another part, which fill in the missing parts in place; no strategy), a
        surplus of the requested part cancelled or dropped, and replicas of another part dropped
        once enough of the requested part are *loaded* (load, then drop). Returns the drops queued."""
        count = self.replica_counts.get(segment, tier)
        moving = count.moving_to
        done_pending_drop = max(0, count.move_completed_pending_drop)
        status = PartialStatusInTier(segment, profile.fingerprint, self.cluster.managed.get(tier, []))
        projected = len(status.matching_loaded) + len(status.matching_in_flight) - done_pending_drop
        cancel_moves = required == 0 and moving > 0
        if (
            projected == required
            and not cancel_moves
            and not status.stale_in_flight
            and (not status.stale_loaded or len(status.matching_loaded) < required)
        ):
            return 0
        if cancel_moves:
            plain = SegmentStatusInTier(segment, self.cluster.managed.get(tier, []))
            self._cancel(SegmentAction.MOVE_TO, moving, segment, plain)
            self._cancel(SegmentAction.MOVE_FROM, moving, segment, plain)
        deficit = required - projected
        cancelled_stale: list[ServerHolder] = []
        if deficit > 0 or required == 0:
            most = len(status.stale_in_flight) if required == 0 else deficit
            cancelled_stale = self._cancel_loads(segment, status.stale_in_flight, most)
            if cancelled_stale:
                self.stats.add(
                    m.PARTIAL_STALE_CANCELLED, len(cancelled_stale), tier=tier, dataSource=segment.datasource
                )
        if deficit > 0:
            loaded = len(status.matching_loaded) + len(status.stale_loaded)
            queued = self._load_partial_replicas(deficit, loaded, segment, tier, status, cancelled_stale, profile)
            if queued > 0:
                self.stats.add(m.PARTIAL_ASSIGNED, queued, tier=tier, dataSource=segment.datasource)
        drops, budget = 0, max_drops
        if projected > required:
            surplus = projected - required
            cancelled = self._cancel_loads(segment, status.matching_in_flight, surplus)
            to_drop = min(surplus - len(cancelled), budget)
            if to_drop > 0:
                dropped = self._drop_decommissioning_first(to_drop, segment, status.matching_loaded)
                self.stats.add(m.DROPPED, dropped, tier=tier, dataSource=segment.datasource)
                drops += dropped
                budget -= dropped
        if len(status.matching_loaded) >= required and status.stale_loaded and budget > 0:
            dropped = self._drop_decommissioning_first(
                min(len(status.stale_loaded), budget), segment, status.stale_loaded
            )
            if dropped > 0:
                self.stats.add(m.PARTIAL_STALE_DROPPED, dropped, tier=tier, dataSource=segment.datasource)
                drops += dropped
        return drops

    def _load_partial_replicas(
        self,
        to_load: int,
        loaded: int,
        segment: DataSegment,
        tier: str,
        status: PartialStatusInTier,
        cancelled_stale: list[ServerHolder],
        profile: PartialLoadProfile,
    ) -> int:
        """Druid 38.0.0 ``loadPartialReplicas``: up to ``to_load`` partial loads, a ``REPLICATE`` (throttled)
        when the tier already serves the segment, else a ``LOAD``."""
        on_tier = loaded >= 1
        if on_tier and self.throttler.throttled(tier):
            return 0
        destinations = status.fresh + cancelled_stale + status.additive
        if not destinations:
            self._skip_tier(m.ASSIGN_SKIPPED, "No eligible server", segment, tier)
            return 0
        queued = 0
        for holder in destinations:
            if queued >= to_load:
                break
            queued += (
                self._replicate_on(segment, holder, profile) if on_tier else self._load_on(segment, holder, profile)
            )
        return queued

    def _cancel_loads(self, segment: DataSegment, holders: list[ServerHolder], most: int) -> list[ServerHolder]:
        """Druid 38.0.0 ``cancelLoadsOnServers``: cancel up to ``most`` queued loads of ``segment`` on
        ``holders``, in order; the holders whose load was cancelled."""
        cancelled: list[ServerHolder] = []
        for holder in holders:
            if len(cancelled) >= most:
                break
            if holder.cancel(SegmentAction.LOAD, segment):
                cancelled.append(holder)
        return cancelled

    def _drop_decommissioning_first(self, to_drop: int, segment: DataSegment, holders: list[ServerHolder]) -> int:
        """Druid 38.0.0 ``dropFromList``: up to ``to_drop`` drops, decommissioning holders first (else in
        the given order)."""
        if to_drop <= 0 or not holders:
            return 0
        dropped = 0
        for holder in sorted(holders, key=lambda h: not h.decommissioning):
            if dropped >= to_drop:
                break
            if self.queues.drop(segment, holder):
                dropped += 1
        return dropped

    def _update_replicas_in_tier(self, segment: DataSegment, tier: str, required: int, max_drops: int) -> int:
        count = self.replica_counts.get(segment, tier)
        projected = count.projected
        moving = count.moving_to
        cancel_moves = required == 0 and moving > 0
        if projected == required and not cancel_moves:
            return 0
        status = SegmentStatusInTier(segment, self.cluster.managed.get(tier, []))
        if cancel_moves:
            self._cancel(SegmentAction.MOVE_TO, moving, segment, status)
            self._cancel(SegmentAction.MOVE_FROM, moving, segment, status)
        if projected < required:
            deficit = required - projected
            cancelled_drops = self._cancel(SegmentAction.DROP, deficit, segment, status)
            to_load = deficit - cancelled_drops
            if to_load > 0:
                loaded = count.loaded_not_dropping + cancelled_drops
                queued = self._load_replicas(to_load, loaded, segment, tier, status)
                self.stats.add(m.ASSIGNED, queued, tier=tier, dataSource=segment.datasource)
        if projected > required:
            surplus = projected - required
            cancelled_loads = self._cancel(SegmentAction.LOAD, surplus, segment, status)
            to_drop = min(surplus - cancelled_loads, max_drops)
            if to_drop > 0:
                dropped = self._drop_replicas(to_drop, segment, tier, status)
                self.stats.add(m.DROPPED, dropped, tier=tier, dataSource=segment.datasource)
                return dropped
        return 0

    def _cancel(self, action: SegmentAction, most: int, segment: DataSegment, status: SegmentStatusInTier) -> int:
        cancelled = 0
        for holder in status.performing.get(action, []):
            if most <= 0 or cancelled >= most:
                break
            cancelled += holder.cancel(action, segment)
        return cancelled

    def _load_replicas(
        self, to_load: int, loaded: int, segment: DataSegment, tier: str, status: SegmentStatusInTier
    ) -> int:
        on_tier = loaded >= 1
        if on_tier and self.throttler.throttled(tier):
            return 0
        if not status.eligible_load:
            self._skip_tier(m.ASSIGN_SKIPPED, "No eligible server", segment, tier)
            return 0
        servers = (
            self.selector.servers_to_load(tier, segment)
            if self.selector is not None
            else self.strategy.servers_to_load(segment, status.eligible_load)
        )
        queued = 0
        first = True
        for holder in servers:
            first = False
            queued += self._replicate_on(segment, holder) if on_tier else self._load_on(segment, holder)
            if queued >= to_load:
                break
        if first:
            self._skip_tier(m.ASSIGN_SKIPPED, "No strategic server", segment, tier)
        return queued

    def _load_on(self, segment: DataSegment, holder: ServerHolder, profile: PartialLoadProfile | None = None) -> bool:
        if self.queues.load(segment, holder, SegmentAction.LOAD, profile):
            return True
        self._skip(m.ASSIGN_SKIPPED, "Encountered error", segment, holder)
        return False

    def _replicate_on(
        self, segment: DataSegment, holder: ServerHolder, profile: PartialLoadProfile | None = None
    ) -> bool:
        if self.throttler.throttled(holder.tier):
            self._skip(m.ASSIGN_SKIPPED, "Throttled replication", segment, holder)
            return False
        if not self.queues.load(segment, holder, SegmentAction.REPLICATE, profile):
            self._skip(m.ASSIGN_SKIPPED, "Encountered error", segment, holder)
            return False
        self.throttler.assigned_replica(holder.tier)
        return True

    def _drop_replicas(self, to_drop: int, segment: DataSegment, tier: str, status: SegmentStatusInTier) -> int:
        if not status.eligible_drop:
            self._skip_tier(m.DROP_SKIPPED, "No eligible server", segment, tier)
            return 0

        fullest_first = ServerHolder.natural_key_reversed
        dying = sorted((h for h in status.eligible_drop if h.decommissioning), key=fullest_first)
        live = sorted((h for h in status.eligible_drop if not h.decommissioning), key=fullest_first)
        dropped = self._drop_from(to_drop, segment, iter(dying))
        if to_drop > dropped:
            remaining = to_drop - dropped
            servers = (
                iter(live)
                if self.round_robin or len(live) <= remaining
                else self.strategy.servers_to_drop(segment, live)
            )
            dropped += self._drop_from(remaining, segment, servers)
        return dropped

    def _drop_from(self, to_drop: int, segment: DataSegment, servers: Iterator[ServerHolder]) -> int:
        dropped = 0
        for holder in servers:
            if dropped >= to_drop:
                break
            if self.queues.drop(segment, holder):
                dropped += 1
            else:
                self._skip(m.DROP_SKIPPED, "Encountered error", segment, holder)
        return dropped

    # -------------------------------------------------------------------- broadcast, drop rules
    def broadcast(self, segment: DataSegment) -> None:
        """Load ``segment`` on every managed server that is not decommissioning (never throttled,
        never dropped elsewhere); drop it from the decommissioning ones."""
        required_per_tier: dict[str, int] = {}
        for holder in self.cluster.all_managed_servers():
            tier = holder.tier
            if holder.decommissioning:
                if self._drop_broadcast(segment, holder):
                    self.stats.add(m.DROPPED, 1, tier=tier, dataSource=segment.datasource)
            else:
                required_per_tier[tier] = required_per_tier.get(tier, 0) + 1
                if self._load_broadcast(segment, holder):
                    self.stats.add(m.ASSIGNED, 1, tier=tier, dataSource=segment.datasource)
        for tier, n in required_per_tier.items():
            self.replica_counts.setdefault(segment, tier).set_required(n, n)
        self.broadcast_segments.add(segment)

    def _load_broadcast(self, segment: DataSegment, holder: ServerHolder) -> bool:
        if holder.is_serving(segment) or holder.is_loading(segment):
            return False
        if holder.is_dropping(segment):
            return holder.cancel(SegmentAction.DROP, segment)
        if holder.can_load(segment):
            return self._load_on(segment, holder)
        if holder.available_size < segment.size:
            reason = "Not enough disk space"
        elif holder.load_queue_full:
            reason = "Load queue is full"
        else:
            reason = "Unknown error"
        self._skip(m.ASSIGN_SKIPPED, reason, segment, holder)
        return False

    def _drop_broadcast(self, segment: DataSegment, holder: ServerHolder) -> bool:
        if holder.is_loading(segment):
            return holder.cancel(SegmentAction.LOAD, segment)
        if holder.is_serving(segment):
            return self.queues.drop(segment, holder)
        return False

    def delete(self, segment: DataSegment) -> None:
        """A drop rule: the segment is marked unused once the rules have run."""
        self.segments_to_delete.setdefault(segment.datasource, set()).add(segment)

    # ---------------------------------------------------------------------------------- stats
    def _skip(self, metric: str, reason: str, segment: DataSegment, holder: ServerHolder) -> None:
        self.stats.add(
            metric, 1, tier=holder.tier, dataSource=segment.datasource, server=holder.name, description=reason
        )

    def _skip_tier(self, metric: str, reason: str, segment: DataSegment, tier: str) -> None:
        self.stats.add(metric, 1, tier=tier, dataSource=segment.datasource, description=reason)
