"""Run state of one tier (or of the whole cluster) as a greedy stage sees it.

Druid's ``ServerHolder`` and ``SegmentLoadQueueManager`` in one small place: a server with its
projected size and its load queue counted per queue type, and the check a stage makes before it
schedules a load (ALGORITHM.md "Load-queue limits" and "Capacity"). Stages never recount queues
themselves; they call :meth:`ServerHolder.can_load` and :meth:`ServerHolder.add_load`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

QueueType = Literal["loading", "decommissioning", "balancing"]
"""The three load-queue types of a load (Druid ``SegmentAction``: LOAD, MOVE_TO from
decommissioning servers, MOVE_TO by balancing); ALGORITHM.md "Load-queue limits"."""
QUEUE_TYPES: tuple[QueueType, ...] = get_args(QueueType)


@dataclass(frozen=True)
class StageLimit:
    """The load-queue limits of one stage (ALGORITHM.md "Load-queue limits"), in queued loads.

    Attributes:
        stage: 1-13 (None for an ad-hoc limit).
        queue_type: the type the stage's loads get (``None`` for stages 12-13, which only drop).
        counted: which queued loads the stage's cap counts: a queue type, ``all``, or ``None``
            when the stage has no cap of its own.
        cap: the stage's cap ``floor(M x percent / 100)``; ``None`` = none.
        total_cap: ``M`` (``maxSegmentsInNodeLoadingQueue``: all loads of any type); ``None`` =
            unlimited (``M = 0``).

    Built by :meth:`segment_balancer.planner.config.EffectiveConfig.limit`; kept in ``meta.json`` by
    :meth:`to_meta` and read back by :meth:`from_meta`.
    """

    stage: int | None = None
    queue_type: QueueType | None = None
    counted: Literal["loading", "decommissioning", "balancing", "all"] | None = None
    cap: int | None = None
    total_cap: int | None = None

    def admits(self, queued: Mapping[str, int]) -> bool:
        """Whether a server whose queue holds ``queued`` loads by type (``{"loading": n, …}``) may
        take one more load of this stage: after it, all loads ≤ ``total_cap`` and the counted
        loads ≤ ``cap``. Never for a stage without a load type (12, 13: they only drop).
        Capacity is :meth:`ServerHolder.can_load`'s."""
        return self.refusal(queued) is None

    def refusal(self, queued: Mapping[str, int]) -> str | None:
        """Why :meth:`admits` refuses one more load on a queue holding ``queued``, or None when it
        admits it: which limit (``maxSegmentsInNodeLoadingQueue`` over all loads, or this stage's
        cap over the loads it counts) and the queued count it reached."""
        if self.queue_type is None:
            return f"stage {self.stage} only drops"
        after = {t: int(queued.get(t, 0)) for t in QUEUE_TYPES}
        after[self.queue_type] += 1
        total = sum(after.values())
        if self.total_cap is not None and total > self.total_cap:
            return f"load queue full: {total - 1} loads queued, maxSegmentsInNodeLoadingQueue {self.total_cap}"
        if self.cap is not None and self.counted is not None:
            value = total if self.counted == "all" else after[self.counted]
            if value > self.cap:
                which = "loads" if self.counted == "all" else f"{self.counted} loads"
                return f"load queue full for stage {self.stage}: {value - 1} {which} queued, its limit {self.cap}"
        return None

    def to_meta(self) -> dict:
        """The ``meta.json`` entry of this limit: ``stage``, ``load_type`` (``queue_type`` here),
        ``queue_type`` (the counted type, null for all loads), ``limit`` (``cap``) and ``total``
        (``total_cap``), the shape validation reads."""
        counted = None if self.counted in (None, "all") else self.counted
        return {"stage": self.stage, "load_type": self.queue_type, "queue_type": counted, "limit": self.cap,
                "total": self.total_cap}

    @classmethod
    def from_meta(cls, entry: dict | None) -> "StageLimit":
        """Inverse of :meth:`to_meta` (a missing entry = unlimited)."""
        entry = entry or {}
        cap = entry.get("limit")
        counted = entry.get("queue_type") or ("all" if cap is not None else None)
        return cls(entry.get("stage"), entry.get("load_type"), counted, cap, entry.get("total"))


@dataclass
class ServerHolder:
    """A historical server plus its load queue, as the run sees it.

    Sizes in bytes. ``projected_size`` = ``current_size`` + sizes of all queued and scheduled loads,
    never minus drops (ALGORITHM.md "Capacity"). ``loads`` counts queued plus scheduled loads per
    queue type.
    """

    server: str
    tier: str
    max_size: int
    projected_size: int
    decommissioning: bool = False
    priority: int = 0
    loads: dict[str, int] = field(default_factory=lambda: {t: 0 for t in QUEUE_TYPES})

    @property
    def available_bytes(self) -> int:
        """``max_size`` − projected size, in bytes (may be negative on an overfull snapshot)."""
        return self.max_size - self.projected_size

    @property
    def total_loads(self) -> int:
        return sum(self.loads.values())

    def can_load(self, size_bytes: int, limit: StageLimit) -> bool:
        """True when one more load of ``size_bytes`` keeps capacity and the stage's limits
        (:meth:`StageLimit.admits`)."""
        return self.projected_size + size_bytes <= self.max_size and limit.admits(self.loads)

    def refusal(self, size_bytes: int, limit: StageLimit) -> str | None:
        """Why :meth:`can_load` refuses a load of ``size_bytes``, or None: capacity first, then
        the load queue (:meth:`StageLimit.refusal`)."""
        if self.projected_size + size_bytes > self.max_size:
            return f"capacity: {max(self.available_bytes, 0)} bytes available, the segment has {size_bytes}"
        return limit.refusal(self.loads)

    def add_load(self, size_bytes: int, queue_type: str) -> None:
        """Record a scheduled load of ``size_bytes`` of type ``queue_type``."""
        self.projected_size += size_bytes
        self.loads[queue_type] += 1


@dataclass(frozen=True)
class SegmentRef:
    """What an op names of a segment: ``idx`` (used-segment index, -1 outside the used set),
    ``segment_id``, ``datasource``, ``size_bytes`` (bytes)."""

    idx: int
    segment_id: str
    datasource: str
    size_bytes: int


@dataclass
class Op:
    """One scheduled operation, before it gets its global ``op_id``.

    ``order``: a key that sorts the ops of one step into scheduling order across parallel tasks;
    ``dep_server``: for a dependent DROP, the server of the LOAD (same segment, same step) it waits
    for.
    """

    action: str
    idx: int
    segment_id: str
    datasource: str
    tier: str
    server: str
    size_bytes: int
    reason: str
    order: tuple
    queue_type: str | None = None
    dep_server: str | None = None


class OpSink:
    """Collects the ops, group memberships and deferred drops a kernel produces, in scheduling
    order. Ops on a tier's state come from ``TierRun.load``/``TierRun.drop``; :meth:`drop` records
    a drop on a tier the kernel does not hold (stage-3 callbacks, stage 12), applied when the stage
    writes the state."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.members: list[tuple[int, str]] = []
        self.deferred: list[tuple[int, str, int]] = []
        self.decisions: list[tuple[int, str, str, str, dict]] = []
        self._seq = 0

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def drop(self, seg: SegmentRef, server: str, tier: str, reason: str, order: tuple,
             dep_server: str | None = None) -> Op:
        """Record a DROP of ``seg`` from ``server`` of ``tier`` (dependent on the LOAD on
        ``dep_server`` of the same step, if given)."""
        op = Op("DROP", seg.idx, seg.segment_id, seg.datasource, tier, server, seg.size_bytes, reason, order,
                dep_server=dep_server)
        self.ops.append(op)
        return op

    def member(self, idx: int, group: str) -> None:
        self.members.append((int(idx), group))

    def decide(self, idx: int, segment_id: str, tier: str | None, outcome: str, **detail) -> None:
        """Record why a stage that considered segment ``idx`` in ``tier`` (None: every tier) left
        something undone: ``outcome`` (a short code, e.g. ``not_loaded``, ``short``,
        ``no_destination``, ``deferred``) and ``detail`` (JSON-able: target, count, top ``B``,
        the servers tried and what stopped each). Only for segments a stage considered, so the
        record stays small; read back by :func:`segment_balancer.plan.explain.explain_plan`."""
        self.decisions.append((int(idx), segment_id, tier, outcome, detail))

    def defer(self, seg: SegmentRef, drops: int) -> None:
        """Record that ``drops`` drops of ``seg`` wait for a later run (the availability rule)."""
        if drops > 0:
            self.deferred.append((seg.idx, seg.segment_id, int(drops)))


def group_name(kind: str, tier: str | None = None) -> str:
    """``Kind[tier]`` for per-tier groups, ``Kind`` for global ones."""
    return f"{kind}[{tier}]" if tier is not None else kind


def split_group_name(name: str) -> tuple[str, str | None]:
    """Inverse of :func:`group_name`."""
    if name.endswith("]") and "[" in name:
        kind, tier = name[:-1].split("[", 1)
        return kind, tier
    return name, None
