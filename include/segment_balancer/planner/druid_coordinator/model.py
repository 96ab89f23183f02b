"""What one Druid Coordinator run sees: segments, servers, their load queues, and the per-run holders
(Druid 35.0.0 ``DataSegment``, ``SegmentAction``, ``HttpLoadQueuePeon``, ``ServerHolder``,
``DruidCluster``; docs/DRUID_COORDINATOR_NOTES.md §2).

Sizes are bytes, instants epoch milliseconds (UTC). Orders that Druid takes from Java's hash maps are
reproduced where they decide something (:func:`java_hash_order`, the order tiers spend a segment's
drop budget in) and replaced by a stated order where they only sequence work (the loading segments
of a server are visited in load-queue order, its served segments newest first).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from segment_balancer.druid.partial_load import PartialLoadProfile, SegmentShape
from segment_balancer.planner.cost import Descending
from segment_balancer.planner.druid_coordinator.unheld import UnheldShare

_EMPTY = np.zeros(0, dtype=np.int64)


def _add_interval(arrays: tuple | None, start: int, end: int, delta: int, number: int) -> tuple:
    """``(starts, ends, counts, ids)`` int64 arrays with ``delta`` added to the count of
    ``[start, end)`` (a new row, its id ``number``, when absent). New arrays: ones handed out before
    stay as they were."""
    if arrays is None:
        arrays = (_EMPTY, _EMPTY, _EMPTY, _EMPTY)
    starts, ends, counts, ids = arrays
    at = np.flatnonzero((starts == start) & (ends == end))
    if len(at):
        counts = counts.copy()
        counts[at[0]] += delta
        return starts, ends, counts, ids
    return np.append(starts, start), np.append(ends, end), np.append(counts, delta), np.append(ids, number)


class IntervalIds:
    """The intervals a run's servers project, each numbered once (0, 1, … in the order first seen),
    with their bounds: :attr:`starts`, :attr:`ends` (int64 (n,), epoch ms). Shared by the servers
    of one :class:`DruidCluster`, so that the cost strategy computes an interval's joint cost with
    a segment once per decision however many servers project it."""

    def __init__(self):
        self._ids: dict[tuple[int, int], int] = {}
        self._bounds = np.zeros((64, 2), dtype=np.int64)
        self.stacks: dict[str, tuple[np.ndarray, list[int], np.ndarray]] = {}
        """:func:`stacked_dense_counts`' matrices by datasource, and each row's holder version."""
        self.rows: dict[int, int] = {}
        """:func:`stacked_dense_counts`' row of each holder (by ``id``)."""

    def __len__(self) -> int:
        return len(self._ids)

    def of(self, start: int, end: int) -> int:
        """The id of ``[start, end)``, numbered now if it is new."""
        number = self._ids.get((start, end))
        if number is None:
            number = self._ids[(start, end)] = len(self._ids)
            if number == len(self._bounds):
                self._bounds = np.concatenate([self._bounds, np.zeros_like(self._bounds)])
            self._bounds[number] = (start, end)
        return number

    @property
    def starts(self) -> np.ndarray:
        return self._bounds[: len(self._ids), 0]

    @property
    def ends(self) -> np.ndarray:
        return self._bounds[: len(self._ids), 1]


INT_MAX = 2**31 - 1
"""Java's ``Integer.MAX_VALUE``: a load queue without a limit."""


class _AssumedProfile:
    """The profile of a replica whose part no snapshot tells (served, or queued before the snapshot):
    taken to be what its rule asks, so it matches every fingerprint (docs/DRUID_COORDINATOR.md "What a
    snapshot cannot tell")."""

    fingerprint = "assumed"
    wrapped_load_spec: dict = {}
    load_spec_type = None
    parts = ()
    loaded_bytes = None

    def matches(self, fingerprint: str) -> bool:
        return True

    def __repr__(self) -> str:
        return "ASSUMED_PROFILE"


ASSUMED_PROFILE = _AssumedProfile()
"""The profile of a replica the snapshot says nothing about (:class:`_AssumedProfile`)."""


class SegmentAction(enum.Enum):
    """What a server is asked to do with a segment (Druid ``SegmentAction``): ``LOAD`` a first replica
    on a tier (never throttled), ``REPLICATE`` one more (throttled), ``MOVE_TO`` the destination of a
    move, ``MOVE_FROM`` its source (a pending drop, never sent), ``DROP``."""

    DROP = "DROP"
    LOAD = "LOAD"
    REPLICATE = "REPLICATE"
    MOVE_TO = "MOVE_TO"
    MOVE_FROM = "MOVE_FROM"

    @property
    def is_load(self) -> bool:
        return self in (SegmentAction.LOAD, SegmentAction.REPLICATE, SegmentAction.MOVE_TO)

    def simplified(self) -> SegmentAction:
        """``REPLICATE`` as ``LOAD``, as a ``ServerHolder`` records it; others unchanged."""
        return SegmentAction.LOAD if self is SegmentAction.REPLICATE else self


_QUEUE_ORDER = {SegmentAction.DROP: 0, SegmentAction.LOAD: 1, SegmentAction.REPLICATE: 2, SegmentAction.MOVE_TO: 3}
"""The order a load queue sends its requests in (``SegmentHolder.COMPARE_ACTION_THEN_INTERVAL``)."""


class ServerType(enum.Enum):
    """Druid ``ServerType``, in its declaration order (the last tie-break of the holders' order)."""

    HISTORICAL = "historical"
    BRIDGE = "bridge"
    INDEXER_EXECUTOR = "indexer-executor"
    REALTIME = "realtime"
    BROKER = "broker"

    @property
    def ordinal(self) -> int:
        return _ORDINALS[self]

    @property
    def is_historical(self) -> bool:
        return self in (ServerType.HISTORICAL, ServerType.BRIDGE)

    @property
    def is_realtime(self) -> bool:
        return self in (ServerType.REALTIME, ServerType.INDEXER_EXECUTOR)


_ORDINALS = {kind: i for i, kind in enumerate(ServerType)}


@dataclass(eq=False, slots=True)
class DataSegment:
    """One segment: ``id`` (Druid's segment id, its identity), ``datasource``, interval
    ``[start_ms, end_ms)``, ``version``, ``partition`` (the shard's partition number), ``size`` bytes;
    for the timeline, ``shard_type`` and ``num_core_partitions`` (``druid.timeline``'s columns) and,
    for ``numbered_overwrite`` shards, ``overwrite`` = (start root partition, end root partition,
    minor version, atomic update group size); for Druid 38's partial-load matchers, the payload's
    ``projections`` (names, None when it has none) and ``cluster_groups`` (its ``clusterGroups`` JSON
    text, None when not clustered). A value: never changed once made (not ``frozen``, which makes a
    million of them several times slower to make); equal and hashed by ``id``."""

    id: str
    datasource: str
    start_ms: int
    end_ms: int
    version: str
    partition: int
    size: int
    shard_type: str = "numbered"
    num_core_partitions: int | None = None
    overwrite: tuple[int, int, int, int] | None = None
    projections: tuple[str, ...] | None = None
    cluster_groups: str | None = None

    def shape(self) -> SegmentShape:
        """What a partial-load matcher sees of the segment (``druid.partial_load.SegmentShape``)."""
        return SegmentShape.from_columns(
            self.projections, self.cluster_groups, self.partition, self.num_core_partitions or 0
        )

    def timeline_row(self) -> dict:
        """The segment as a row of ``druid.timeline.classify_datasource``'s input."""
        start_root, end_root, minor, group = self.overwrite or (None, None, None, None)
        return {
            "segment_id": self.id,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "version": self.version,
            "shard_type": self.shard_type,
            "partition_num": self.partition,
            "num_core_partitions": self.num_core_partitions,
            "start_root_partition_id": start_root,
            "end_root_partition_id": end_root,
            "minor_version": minor,
            "atomic_update_group_size": group,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataSegment) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def interval(self) -> tuple[int, int]:
        return (self.start_ms, self.end_ms)

    def newest_first(self) -> tuple:
        """Sort key of ``SegmentHolder.NEWEST_SEGMENT_FIRST``: later end first, then later start, then
        Druid's segment-id order reversed (datasource, version, partition descending)."""
        return (-self.end_ms, -self.start_ms, Descending(self.datasource), Descending(self.version), -self.partition)


def newest_first(segments: Iterable[DataSegment]) -> list[DataSegment]:
    """``segments`` sorted by :meth:`DataSegment.newest_first` (stable: equal keys keep their
    order), the strings ranked once and the keys sorted by numpy instead of compared pair by pair."""
    segments = list(segments)
    if len(segments) < 2:
        return segments

    def ranks(values: list[str]) -> np.ndarray:
        distinct = sorted(set(values))
        rank = {value: i for i, value in enumerate(distinct)}
        return np.fromiter((rank[v] for v in values), np.int64, len(values))

    n = len(segments)
    order = np.lexsort(
        (
            -np.fromiter((s.partition for s in segments), np.int64, n),
            -ranks([s.version for s in segments]),
            -ranks([s.datasource for s in segments]),
            -np.fromiter((s.start_ms for s in segments), np.int64, n),
            -np.fromiter((s.end_ms for s in segments), np.int64, n),
        )
    )
    return [segments[i] for i in order.tolist()]


@dataclass(eq=False)
class DruidServer:
    """A server of the inventory: ``name`` (``host:port``), ``host`` (what ``decommissioningNodes``
    and ``cloneServers`` name; Druid's ``getHost()``), ``tier``, ``type``, ``max_size`` bytes, the
    ``segments`` it serves (id -> segment) and ``curr_size`` (bytes served, as the server reports them;
    their sum when not given). ``profiles``: the partial-load profile of each partial replica (Druid
    38.0.0 ``DruidServer.getPartialLoadProfile``; absent: a full replica, or, with
    ``profiles_unknown`` (a server built from a snapshot, which cannot tell), :data:`ASSUMED_PROFILE`).
    ``storage_size``: the bytes of disk the server reports
    (``sys.servers.storage_size``; Druid 38's ``tier/storage/capacity``), 0 when unknown. Change what it
    serves with :meth:`add` and :meth:`remove`, which keep ``curr_size`` in step (a partial replica
    counts the bytes it loaded, when known, as Druid 38 counts them)."""

    name: str
    tier: str
    max_size: int
    segments: dict[str, DataSegment] = field(default_factory=dict)
    type: ServerType = ServerType.HISTORICAL
    host: str = ""
    curr_size: int | None = None
    profiles: dict[str, PartialLoadProfile | _AssumedProfile | None] = field(default_factory=dict)
    storage_size: int = 0
    profiles_unknown: bool = False
    unheld: UnheldShare | None = None
    """What it serves beyond ``segments`` that its run does not hold (a run built for balancing:
    :mod:`~segment_balancer.planner.druid_coordinator.unheld`), None when ``segments`` is all."""

    def __post_init__(self):
        if not self.host:
            self.host = self.name
        if self.curr_size is None:
            self.curr_size = sum(s.size for s in self.segments.values())

    @property
    def current_size(self) -> int:
        return self.curr_size

    @property
    def segment_count(self) -> int:
        """The segments it serves, held or not."""
        return len(self.segments) + (0 if self.unheld is None else self.unheld.count)

    def add(self, segment: DataSegment, profile: PartialLoadProfile | None = None) -> None:
        """Serve ``segment`` (a partial replica when ``profile`` is given: its ``loaded_bytes``
        count, when known, else the segment's size)."""
        if segment.id not in self.segments:
            self.curr_size += _served_bytes(segment, profile)
            if profile is not None or self.profiles_unknown:
                self.profiles[segment.id] = profile
        self.segments[segment.id] = segment

    def remove(self, segment: DataSegment) -> None:
        """Stop serving ``segment``."""
        if self.segments.pop(segment.id, None) is not None:
            self.curr_size -= _served_bytes(segment, self.profiles.pop(segment.id, None))

    def update_profile(self, segment: DataSegment, profile: PartialLoadProfile | None) -> bool:
        """A served replica re-announced with another part (an additive reload done: Druid 38.0.0
        ``DruidServer.updateDataSegmentProfile``): its profile swapped, ``curr_size`` moved by the
        difference of the bytes counted. False, and nothing changed, when it does not serve it."""
        if segment.id not in self.segments:
            return False
        self.curr_size += _served_bytes(segment, profile) - _served_bytes(segment, self.profile_of(segment.id))
        if profile is not None or self.profiles_unknown:
            self.profiles[segment.id] = profile
        else:
            self.profiles.pop(segment.id, None)
        return True

    def profile_of(self, segment_id: str) -> PartialLoadProfile | _AssumedProfile | None:
        """The partial-load profile of the replica of ``segment_id``, None for a full one."""
        return self.profiles.get(segment_id, ASSUMED_PROFILE if self.profiles_unknown else None)


def _served_bytes(segment: DataSegment, profile) -> int:
    """The bytes a served replica counts in ``curr_size`` (Druid 38.0.0 ``DruidServer.addDataSegment``)."""
    loaded = getattr(profile, "loaded_bytes", None)
    return segment.size if loaded is None else int(loaded)


@dataclass(eq=False)
class QueuedRequest:
    """One request in a load queue (Druid ``SegmentHolder``): the ``segment``, its ``action``, the
    server a ``MOVE_TO`` moves from (``move_source``), the partial-load ``profile`` a load asks for
    (Druid 38), callbacks run with success when it ends."""

    segment: DataSegment
    action: SegmentAction
    move_source: str | None = None
    callbacks: list[Callable[[bool], None]] = field(default_factory=list)
    profile: PartialLoadProfile | _AssumedProfile | None = None

    def queue_order(self) -> tuple:
        return (_QUEUE_ORDER[self.action], *self.segment.newest_first())


class QueueEvent(enum.Enum):
    """What happened to a request, as ``segment/loadQueue/*`` counts it."""

    ASSIGNED = "assigned"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"


class LoadQueue:
    """A server's load queue across runs (Druid ``HttpLoadQueuePeon``): requests to load and to drop
    (at most one of each per segment), the segments marked to drop once a move away from the server
    completes, the requests already sent (``in_flight``: these cannot be cancelled), and the request
    counts per (event, datasource, action) since they were last taken. ``journal`` lists every
    event with the server's name (a run shares one list among its queues, to keep their order);
    ``created`` lists the requests queued since its reader last emptied it, in the order queued (one
    that gains a callback only is not new; a simulation's load completion reads it)."""

    def __init__(self, server_name: str):
        self.server_name = server_name
        self.to_load: dict[str, QueuedRequest] = {}
        self.to_drop: dict[str, QueuedRequest] = {}
        self.marked_to_drop: dict[str, DataSegment] = {}
        self.in_flight: set[str] = set()
        self.stats: Counter[tuple[QueueEvent, str, str]] = Counter()
        self.journal: list[tuple[QueueEvent, QueuedRequest, str]] = []
        self.created: list[QueuedRequest] = []

    def requests(self) -> list[QueuedRequest]:
        """Every queued request in the order they are sent: drops, loads, replicas, moves; newest
        segment first."""
        return sorted([*self.to_drop.values(), *self.to_load.values()], key=QueuedRequest.queue_order)

    @property
    def queued_load_bytes(self) -> int:
        return sum(r.segment.size for r in self.to_load.values())

    def _count(self, event: QueueEvent, request: QueuedRequest, description: str | None = None) -> None:
        self.stats[(event, request.segment.datasource, description or request.action.value)] += 1
        self.journal.append((event, request, self.server_name))

    def load(
        self,
        segment: DataSegment,
        action: SegmentAction,
        callback: Callable[[bool], None] | None = None,
        *,
        move_source: str | None = None,
        profile: PartialLoadProfile | _AssumedProfile | None = None,
    ) -> None:
        """Queue a load-type request (of a part: ``profile``); one already queued for the segment only
        gains the callback."""
        if not action.is_load:
            return
        request = self.to_load.get(segment.id)
        if request is None:
            request = QueuedRequest(segment, action, move_source, profile=profile)
            self.to_load[segment.id] = request
            self.created.append(request)
            self._count(QueueEvent.ASSIGNED, request)
        if callback is not None:
            request.callbacks.append(callback)

    def drop(self, segment: DataSegment, callback: Callable[[bool], None] | None = None) -> None:
        """Queue a drop; one already queued only gains the callback."""
        request = self.to_drop.get(segment.id)
        if request is None:
            request = QueuedRequest(segment, SegmentAction.DROP)
            self.to_drop[segment.id] = request
            self.created.append(request)
            self._count(QueueEvent.ASSIGNED, request)
        if callback is not None:
            request.callbacks.append(callback)

    def cancel(self, segment: DataSegment) -> bool:
        """Cancel the queued load (else the queued drop) of ``segment``; False when it was already
        sent or nothing is queued. The request's callbacks run with failure."""
        if segment.id in self.in_flight:
            return False
        request = self.to_load.pop(segment.id, None) or self.to_drop.pop(segment.id, None)
        if request is None:
            return False
        self.complete(request, QueueEvent.CANCELLED)
        return True

    def complete(self, request: QueuedRequest, event: QueueEvent, description: str | None = None) -> None:
        """End a request (already removed from the queue) with ``event``, then run its callbacks."""
        self._count(event, request, description)
        for callback in request.callbacks:
            callback(event is QueueEvent.SUCCESS)

    def mark_to_drop(self, segment: DataSegment) -> None:
        self.marked_to_drop[segment.id] = segment

    def unmark_to_drop(self, segment: DataSegment) -> None:
        self.marked_to_drop.pop(segment.id, None)

    def take_stats(self) -> Counter[tuple[QueueEvent, str, str]]:
        """The request counts since the last call, reset (``getAndResetStats``)."""
        stats, self.stats = self.stats, Counter()
        return stats


class ServerHolder:
    """One server for one run (Druid ``ServerHolder``): what it serves and has queued, what the run
    queues on it, and its projection (served + queued loads - queued drops and move sources).

    ``max_segments_in_load_queue`` 0 means no limit; otherwise the run may queue that many loads less
    those already queued. Sizes are bytes."""

    def __init__(
        self,
        server: DruidServer,
        queue: LoadQueue,
        *,
        decommissioning: bool = False,
        unmanaged: bool = False,
        max_segments_in_load_queue: int = 0,
    ):
        self.server = server
        self.queue = queue
        self.decommissioning = decommissioning
        self.unmanaged = unmanaged
        self.max_assignments_in_run = (
            INT_MAX if max_segments_in_load_queue == 0 else max_segments_in_load_queue - len(queue.to_load)
        )
        self.assignments_in_run = 0
        self.actions: dict[DataSegment, SegmentAction] = {}
        self.in_flight_profiles: dict[DataSegment, PartialLoadProfile | _AssumedProfile] = {}
        self.loading_bytes = 0
        self.dropping_bytes = 0
        self.projected_per_interval: Counter[tuple[int, int]] = Counter()
        self.projected: Counter[tuple[str, int, int]] = Counter()
        self._interval_ids: IntervalIds | None = None
        self._interval_arrays: dict | None = None
        self._pending_projections: list[tuple[str, int, int, int]] = []
        self._arrays_version = 0
        self._dense: dict[str | None, tuple[int, np.ndarray]] = {}
        served = server.segments.values()  # each projected once (``_project``, counted in bulk)
        self.projected_per_interval.update((s.start_ms, s.end_ms) for s in served)
        self.projected.update((s.datasource, s.start_ms, s.end_ms) for s in served)
        if server.unheld is not None:
            self.projected_per_interval.update(server.unheld.intervals)
            self.projected.update(server.unheld.datasource_intervals)
        self.moving_segments = 0
        self.loading_replicas = 0
        for request in queue.requests():
            self._queue(request.segment, request.action.simplified())
            if request.profile is not None:
                self.in_flight_profiles[request.segment] = request.profile
            if request.action is SegmentAction.MOVE_TO:
                self.moving_segments += 1
            elif request.action is SegmentAction.REPLICATE:
                self.loading_replicas += 1
        for segment in queue.marked_to_drop.values():
            self._queue(segment, SegmentAction.MOVE_FROM)

    # ---------------------------------------------------------------- what Druid's comparators read
    @property
    def name(self) -> str:
        return self.server.name

    @property
    def tier(self) -> str:
        return self.server.tier

    @property
    def max_size(self) -> int:
        return self.server.max_size

    @property
    def size_used(self) -> int:
        """Bytes served, plus queued loads, less queued drops (not move sources): Druid's ``getSizeUsed``."""
        return self.server.current_size + self.loading_bytes - self.dropping_bytes

    @property
    def available_size(self) -> int:
        """``max_size`` less :attr:`size_used`, bytes."""
        return self.max_size - self.size_used

    def natural_key(self) -> tuple:
        """Ascending sort key of Druid's ``ServerHolder`` order: more available bytes first, then the
        larger host, tier and server type. Reads the current sizes."""
        return (
            -self.available_size,
            Descending(self.server.host),
            Descending(self.tier),
            -self.server.type.ordinal,
        )

    def natural_key_reversed(self) -> tuple:
        """:meth:`natural_key` with every part reversed, so it sorts in Druid's reverse
        ``ServerHolder`` order (fewer available bytes first, then the smaller host, tier and server
        type: ``Comparator.reverseOrder()``). Reads the current sizes."""
        return (self.available_size, self.server.host, self.tier, self.server.type.ordinal)

    # ------------------------------------------------------------------------------ projections
    def _project(self, segment: DataSegment, delta: int) -> None:
        self.projected_per_interval[segment.interval] += delta
        self.projected[(segment.datasource, *segment.interval)] += delta
        if self._interval_arrays is not None:
            self._pending_projections.append((segment.datasource, *segment.interval, delta))

    @property
    def interval_ids(self) -> IntervalIds:
        """The numbering of intervals this server's :meth:`interval_arrays` use: its cluster's
        (:class:`DruidCluster` shares one among its servers), else its own."""
        if self._interval_ids is None:
            self._interval_ids = IntervalIds()
        return self._interval_ids

    @interval_ids.setter
    def interval_ids(self, ids: IntervalIds) -> None:
        if ids is not self._interval_ids:
            self._interval_ids = ids
            self._interval_arrays = None  # numbered by another: built again when next asked

    def interval_arrays(self, datasource: str | None = None) -> tuple:
        """The intervals the server projects, as int64 numpy arrays ``(starts, ends, counts, ids)``
        (epoch ms; counts >= 0, a zero count left where a projection ended; each interval's number
        in :attr:`interval_ids`): every segment's, or ``datasource``'s only. Built once (every
        datasource's in one pass); later projections are applied to the arrays in place of a
        rebuild (what the cost strategy scans, move after move)."""
        cache = self._interval_arrays
        if cache is None:
            number = self.interval_ids.of
            rows: dict[str | None, list[tuple[int, int, int, int]]] = {None: []}
            for (s, e), n in self.projected_per_interval.items():
                if n:
                    rows[None].append((s, e, n, number(s, e)))
            for (ds, s, e), n in self.projected.items():
                if n:
                    rows.setdefault(ds, []).append((s, e, n, number(s, e)))
            cache = self._interval_arrays = {
                key: tuple(np.array(c, dtype=np.int64) for c in zip(*r)) for key, r in rows.items() if r
            }
            self._pending_projections.clear()
            self._arrays_version += 1
        elif self._pending_projections:
            for ds, start, end, delta in self._pending_projections:
                number = self.interval_ids.of(start, end)
                for key in (None, ds):
                    cache[key] = _add_interval(cache.get(key), start, end, delta, number)
            self._pending_projections.clear()
            self._arrays_version += 1
        found = cache.get(datasource)
        return found if found is not None else (_EMPTY, _EMPTY, _EMPTY, _EMPTY)

    def dense_interval_counts(self, datasource: str | None = None) -> np.ndarray:
        """The segments the server projects per interval of :attr:`interval_ids`, by number: int64
        ``(len(interval_ids),)``, every segment's or ``datasource``'s only (what
        :meth:`interval_arrays` holds, scattered). Made again only after a projection changed; a
        numbering grown since is padded with zeros."""
        _, _, counts, ids = self.interval_arrays(datasource)
        n = len(self.interval_ids)
        made = self._dense.get(datasource)
        if made is None or made[0] != self._arrays_version:
            dense = np.zeros(n, dtype=np.int64)
            dense[ids] = counts
            made = self._dense[datasource] = (self._arrays_version, dense)
        elif len(made[1]) < n:
            made = self._dense[datasource] = (made[0], np.concatenate([made[1], np.zeros(n - len(made[1]), np.int64)]))
        return made[1]

    @property
    def arrays_version(self) -> int:
        """The version of :meth:`interval_arrays` once every projection so far is applied to them
        (built when not yet): a number that changes whenever what they hold changes."""
        if self._interval_arrays is None or self._pending_projections:
            self.interval_arrays()
        return self._arrays_version

    @property
    def datasources_projected(self) -> int:
        """How many datasources :meth:`interval_arrays` holds intervals of (built, every projection
        applied, when not yet)."""
        self.arrays_version  # noqa: B018 (builds the arrays)
        return len(self._interval_arrays) - (None in self._interval_arrays)

    @property
    def projected_segment_count(self) -> int:
        return sum(self.projected_per_interval.values())

    def projected_per_datasource(self) -> dict[str, int]:
        """Projected segments per datasource (those with at least one)."""
        counts: Counter[str] = Counter()
        for (datasource, _, _), n in self.projected.items():
            counts[datasource] += n
        return {ds: n for ds, n in counts.items() if n}

    @property
    def unheld_bytes(self) -> int:
        """The bytes of the served segments its run does not hold (:attr:`DruidServer.unheld`)."""
        return 0 if self.server.unheld is None else self.server.unheld.bytes

    def projected_segments(self) -> set[DataSegment]:
        """Served segments plus queued loads, less queued drops and move sources (of those its run
        holds: :attr:`DruidServer.unheld` are projected too)."""
        segments = set(self.server.segments.values())
        for segment, action in self.actions.items():
            if action.is_load:
                segments.add(segment)
            else:
                segments.discard(segment)
        return segments

    def is_projected(self, segment: DataSegment) -> bool:
        """Served with no action queued, or with a load-type action queued."""
        action = self.actions.get(segment)
        return self.serves(segment) if action is None else action.is_load

    # ------------------------------------------------------------------------------- predicates
    def serves(self, segment: DataSegment) -> bool:
        """The inventory has it (whatever is queued)."""
        return segment.id in self.server.segments

    def is_serving(self, segment: DataSegment) -> bool:
        """Serves it and nothing is queued for it."""
        return self.serves(segment) and segment not in self.actions

    def is_loading(self, segment: DataSegment) -> bool:
        return self.actions.get(segment) is SegmentAction.LOAD

    def is_dropping(self, segment: DataSegment) -> bool:
        return self.actions.get(segment) is SegmentAction.DROP

    def action_on(self, segment: DataSegment) -> SegmentAction | None:
        return self.actions.get(segment)

    @property
    def load_queue_full(self) -> bool:
        return self.assignments_in_run >= self.max_assignments_in_run

    def can_load(self, segment: DataSegment) -> bool:
        """Not decommissioning, neither serving nor queued for it, room in the run's load budget and
        at least the segment's bytes available (Druid ``canLoadSegment``)."""
        return (
            not self.decommissioning
            and not self.serves(segment)
            and segment not in self.actions
            and self.assignments_in_run < self.max_assignments_in_run
            and self.available_size >= segment.size
        )

    def loading_segments(self) -> list[DataSegment]:
        """Segments with a queued ``LOAD`` (or ``REPLICATE``), in load-queue order."""
        return [s for s, a in self.actions.items() if a is SegmentAction.LOAD]

    def served_segments(self) -> Iterator[DataSegment]:
        return iter(self.server.segments.values())

    # ------------------------------------------------------------------------------- operations
    def _queue(self, segment: DataSegment, action: SegmentAction) -> None:
        self.actions[segment] = action
        if action.is_load:
            self._project(segment, +1)
            self.loading_bytes += segment.size
        else:
            self._project(segment, -1)
            if action is SegmentAction.DROP:
                self.dropping_bytes += segment.size

    def start(self, action: SegmentAction, segment: DataSegment, profile: PartialLoadProfile | None = None) -> bool:
        """Record a new operation (a load of a part: ``profile``, Druid 38); False when one is already
        queued for the segment. Checks neither room nor the load budget: callers ask
        :meth:`can_load` first."""
        if segment in self.actions:
            return False
        if action.is_load:
            self.assignments_in_run += 1
        self._queue(segment, action.simplified())
        if profile is not None:
            self.in_flight_profiles[segment] = profile
        return True

    def cancel(self, action: SegmentAction, segment: DataSegment) -> bool:
        """Cancel the queued ``action`` on ``segment`` (a ``MOVE_FROM`` locally: no request, but an
        entry in the queue's journal, so that a duty run on its own can do it again; others in the
        load queue); False when another action is queued or the request was already sent."""
        queued = self.actions.get(segment)
        if queued is not action.simplified():
            return False
        if queued is SegmentAction.MOVE_FROM:
            self.queue.journal.append((QueueEvent.CANCELLED, QueuedRequest(segment, queued), self.name))
        elif not self.queue.cancel(segment):
            return False
        del self.actions[segment]
        self.in_flight_profiles.pop(segment, None)
        if queued.is_load:
            self._project(segment, -1)
            self.loading_bytes -= segment.size
        else:
            self._project(segment, +1)
            if queued is SegmentAction.DROP:
                self.dropping_bytes -= segment.size
        return True

    def __repr__(self) -> str:
        return f"ServerHolder({self.name!r}, tier={self.tier!r}, available={self.available_size})"


def stacked_dense_counts(holders: list[ServerHolder], datasource: str) -> tuple[np.ndarray, list[int], np.ndarray]:
    """Each of ``holders``' :meth:`~ServerHolder.dense_interval_counts` plus those of ``datasource``,
    as rows of one float64 matrix (exact integers): ``(matrix, rows, weights)``, holder ``k``'s
    counts being ``matrix[rows[k]]`` (at least as many columns as intervals numbered, zeros past
    them) and ``weights`` each row's sum. The holders share one :class:`IntervalIds` (their
    cluster's), which keeps the matrix per datasource with a row per holder ever asked: a row is
    made again only when its holder's projections changed, so a decision after a move remakes two
    rows, not one per holder."""
    numbering = holders[0].interval_ids
    n = len(numbering)
    matrix, versions, weights = numbering.stacks.get(datasource, (None, [], None))
    if matrix is None or matrix.shape[1] < n:
        width = max(n, 64) if matrix is None else max(n, 2 * matrix.shape[1])
        grown = np.zeros((0 if matrix is None else matrix.shape[0], width))
        if matrix is not None:
            grown[:, : matrix.shape[1]] = matrix
        matrix = grown
        weights = np.zeros(matrix.shape[0]) if weights is None else weights
    picked = []
    for holder in holders:
        row = numbering.rows.get(id(holder))
        if row is None:
            row = numbering.rows[id(holder)] = len(numbering.rows)
        if row >= matrix.shape[0]:
            more = max(row + 1, 2 * matrix.shape[0]) - matrix.shape[0]
            matrix = np.concatenate([matrix, np.zeros((more, matrix.shape[1]))])
            weights = np.concatenate([weights, np.zeros(more)])
        while len(versions) <= row:
            versions.append(-1)
        version = holder.arrays_version
        if versions[row] != version:
            every, own = holder.dense_interval_counts(), holder.dense_interval_counts(datasource)
            matrix[row] = 0.0
            matrix[row, : len(every)] = every
            matrix[row, : len(own)] += own
            weights[row] = matrix[row].sum()
            versions[row] = version
        picked.append(row)
    numbering.stacks[datasource] = (matrix, versions, weights)
    return matrix, picked, weights


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit signed)."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_map_capacity(size: int) -> int:
    """The table size of a Java ``HashMap`` after ``size`` puts: 16, doubled while more than three
    quarters full."""
    capacity = 16
    while size > capacity * 0.75:
        capacity *= 2
    return capacity


def java_concurrent_map_capacity(size: int) -> int:
    """The table size of a Java ``ConcurrentHashMap`` after ``size`` puts: 16, doubled once it holds
    three quarters of it."""
    capacity = 16
    while size >= capacity * 0.75:
        capacity *= 2
    return capacity


def java_hash_order(keys: Iterable[str], capacity: int | None = None) -> list[str]:
    """The iteration order of a Java ``HashSet``/``HashMap`` of strings, given the order they were
    added: by bucket (``(h ^ (h >>> 16)) & (capacity - 1)``), then the order added. ``capacity``
    defaults to what ``new HashSet<>(keys)`` sizes (``max(n / 0.75 + 1, 16)`` rounded up to a power
    of two); :func:`java_map_capacity` gives a map's, filled one key at a time."""
    keys = list(dict.fromkeys(keys))
    if capacity is None:
        wanted = max(int(len(keys) / 0.75) + 1, 16)
        capacity = 1 << (wanted - 1).bit_length()

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, k in sorted(((bucket(k), i), k) for i, k in enumerate(keys))]


def java_immutable_set_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of Java's ``Set.copyOf(keys)`` (``ImmutableCollections.Set12``/``SetN``, JDK
    17) in a JVM whose salt (``SALT32L``) is 1: Druid 38.0.0's order of the tiers whose replicas a
    segment's rule brings to their counts and among which it spends its drop budget
    (``StrategicSegmentAssigner.allTiersInCluster``, #19532). A real JVM draws its salt at start, so
    each Coordinator process has an order of its own; salt 1 (not reversed, starting at slot 0) is
    one of them, fixed here, and the one that keeps Druid 35's order for one or two tiers.

    The elements come in ``new HashSet<>(keys)`` order (:func:`java_hash_order`); one or two are kept
    in that order; three or more are placed in a table of twice their number at
    ``floorMod(hashCode, 2n)`` with linear probing, and come out from the last slot down to slot 0."""
    ordered = java_hash_order(keys)
    if len(ordered) <= 2:
        return ordered
    table: list[str | None] = [None] * (2 * len(ordered))
    for key in ordered:
        slot = java_string_hash(key) % len(table)
        while table[slot] is not None:
            slot = (slot + 1) % len(table)
        table[slot] = key
    return [k for k in reversed(table) if k is not None]


class DruidCluster:
    """The run's servers (Druid ``DruidCluster``): historicals by tier, each tier in the holders'
    order when the run began (later size changes do not re-sort it), managed ones (clone targets
    left out), brokers and realtime servers. Tiers iterate in Java's hash order."""

    def __init__(self, holders: Iterable[ServerHolder]):
        by_tier: dict[str, list[ServerHolder]] = {}
        self.brokers: list[ServerHolder] = []
        self.realtimes: list[ServerHolder] = []
        for holder in holders:
            kind = holder.server.type
            if kind.is_historical:
                by_tier.setdefault(holder.tier, []).append(holder)
            elif kind is ServerType.BROKER:
                self.brokers.append(holder)
            else:
                self.realtimes.append(holder)
        self.historicals = {
            tier: sorted(by_tier[tier], key=ServerHolder.natural_key)
            for tier in java_hash_order(by_tier, java_map_capacity(len(by_tier)))
        }
        self.managed = {tier: [h for h in hs if not h.unmanaged] for tier, hs in self.historicals.items()}
        self.interval_ids = IntervalIds()
        """One numbering of intervals for every server of the cluster (:meth:`ServerHolder.interval_arrays`)."""
        for holder in self.all_historicals() + self.brokers + self.realtimes:
            holder.interval_ids = self.interval_ids

    def tier_names(self) -> list[str]:
        """The historical tiers, clone targets' included, in Java's hash order."""
        return list(self.historicals)

    def all_managed_servers(self) -> list[ServerHolder]:
        """Managed historicals (tier by tier), then brokers, then realtime servers."""
        return [h for hs in self.managed.values() for h in hs] + self.brokers + self.realtimes

    def all_historicals(self) -> list[ServerHolder]:
        """Every historical, clone targets included."""
        return [h for hs in self.historicals.values() for h in hs]
