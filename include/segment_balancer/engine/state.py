"""Run state of one tier (or of the whole cluster) as a greedy stage sees it.

Druid's ``ServerHolder`` and ``SegmentLoadQueueManager`` in one small place: a server with its
projected size and its load queue counted per queue type, and the check a stage makes before it
schedules a load (ALGORITHM.md "Load-queue limits" and "Capacity"). Stages never recount queues
themselves; they call :meth:`ServerHolder.can_load` and :meth:`ServerHolder.add_load`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

QUEUE_TYPES = ("loading", "decommissioning", "balancing")


@dataclass(frozen=True)
class StageLimit:
    """The queue limit of one stage (ALGORITHM.md "Load-queue limits").

    ``queue_type``: the counted type (``None`` = all loads); ``limit``: cap on that count after a
    load (``None`` = no cap); ``total``: cap on all loads (``None`` when
    ``maxSegmentsInNodeLoadingQueue`` is 0, i.e. unlimited).
    """

    queue_type: str | None = None
    limit: int | None = None
    total: int | None = None

    @classmethod
    def from_meta(cls, entry: dict | None) -> "StageLimit":
        """Build from one ``meta.json`` ``stage_limits`` entry (missing entry = unlimited)."""
        entry = entry or {}
        return cls(entry.get("queue_type"), entry.get("limit"), entry.get("total"))


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
        """True when one more load of ``size_bytes`` keeps capacity and the stage's limits."""
        if self.projected_size + size_bytes > self.max_size:
            return False
        if limit.total is not None and self.total_loads + 1 > limit.total:
            return False
        if limit.limit is not None:
            counted = self.total_loads if limit.queue_type is None else self.loads[limit.queue_type]
            if counted + 1 > limit.limit:
                return False
        return True

    def add_load(self, size_bytes: int, queue_type: str) -> None:
        """Record a scheduled load of ``size_bytes`` of type ``queue_type``."""
        self.projected_size += size_bytes
        self.loads[queue_type] += 1


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
        self._seq = 0

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def drop(self, seg: dict, server: str, tier: str, reason: str, order: tuple,
             dep_server: str | None = None) -> Op:
        op = Op("DROP", int(seg["idx"]) if seg.get("idx") is not None else -1, seg["segment_id"],
                seg["datasource"], tier, server, int(seg["size_bytes"]), reason, order,
                dep_server=dep_server)
        self.ops.append(op)
        return op

    def member(self, idx: int, group: str) -> None:
        self.members.append((int(idx), group))

    def defer(self, seg: dict, drops: int) -> None:
        """Record that ``drops`` drops of ``seg`` wait for a later run (the availability rule)."""
        if drops > 0:
            self.deferred.append((int(seg["idx"]), seg["segment_id"], int(drops)))


def group_name(kind: str, tier: str | None = None) -> str:
    """``Kind[tier]`` for per-tier groups, ``Kind`` for global ones."""
    return f"{kind}[{tier}]" if tier is not None else kind


def split_group_name(name: str) -> tuple[str, str | None]:
    """Inverse of :func:`group_name`."""
    if name.endswith("]") and "[" in name:
        kind, tier = name[:-1].split("[", 1)
        return kind, tier
    return name, None
