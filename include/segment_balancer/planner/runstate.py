"""The run state: what every tier projects after the operations scheduled so far, as integer arrays.

Druid's ``ServerHolder`` + ``SegmentReplicaCount`` + ``SegmentStatusInTier`` for this run, in one
module:

- :class:`SegmentTable`: every segment of the snapshot by its *code*, a row number: the used
  segments first, in the used-segment order (code = ``idx``), then the others (unused,
  overshadowed, unlisted). Per code: datasource (an int32 code into ``datasources``, names in
  sorted order), ``start_ms``/``end_ms`` (epoch ms), ``size_bytes``, the applying rule's kind and
  ``required``; the segment ids are its only strings, read where an operation names them.
- :class:`TierState`: one tier's state as numpy arrays: its segments (``code``, ``target``,
  ``tier_pos``), its replicas (``code``, server code, ``served``, ``load`` type of a queued or
  scheduled load, ``dropping``, ``dependent``) and the top ``B`` cached so far. ``apply`` replays
  operations onto it with vectorised array operations.
- :class:`TierRun`: one tier live inside a Spark task: servers with their projected size and load
  queue per type (:class:`ServerState`), the replicas as growable arrays, the live placement
  costs (:mod:`.livecost`). :meth:`TierRun.load` and :meth:`TierRun.drop` (and :meth:`TierRun.move`,
  a load plus a dependent drop) are the only mutators: they change the replica, the server's queue
  and projected size, the bytes it will free and the costs at once, and record the operation. A
  segment is seen through a :class:`SegmentInTier`, a view of the arrays.

On disk (:mod:`segment_balancer.spark.state_store`), ``prepare`` writes the start state, one
:class:`TierState` per tier; a step writes only what it changed: its operations (the op log) and
the top ``B`` it cached. The state after a step is the start state with every operation so far
applied and the latest top ``B`` of each segment. :data:`STATE_FIELDS` is the state as rows (one
per segment of a tier and one per replica, strings resolved), the form Spark SQL reads over the
whole cluster (stage 12) and the tests write by hand.

Source: ALGORITHM.md "Terms", "Best servers", "Load-queue limits", "Capacity".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from segment_balancer.druid.snapshot.models import QUEUE_TYPES, QueueType
from segment_balancer.planner.cost import drop_key
from segment_balancer.planner.livecost import IntervalKeys, TierCosts
from segment_balancer.planner.operations import Action, OpOrder, Reason

STATE_FIELDS = [
    ("tier", "string"),
    ("kind", "string"),
    ("idx", "long"),
    ("code", "long"),
    ("segment_id", "string"),
    ("datasource", "string"),
    ("start_ms", "long"),
    ("end_ms", "long"),
    ("size_bytes", "long"),
    ("server", "string"),
    ("served", "boolean"),
    ("load_type", "string"),
    ("dropping", "boolean"),
    ("drop_dependent", "boolean"),
    ("target", "int"),
    ("tier_pos", "int"),
    ("rule_kind", "string"),
    ("required", "int"),
    ("topb", "string"),
]
"""The run state as rows (``kind`` ``segment`` or ``replica``; ``code`` the segment's row of the
:class:`SegmentTable`, ``idx`` -1 outside the used set; ``topb`` comma-separated)."""
STATE_COLUMNS = [name for name, _ in STATE_FIELDS]

QUEUE_CODES: dict[str, int] = {t: i for i, t in enumerate(QUEUE_TYPES)}
"""Queue type → its int8 code in :attr:`TierState.load` (:data:`NO_LOAD` for none)."""
NO_LOAD = -1
RULE_KINDS = ("load", "drop", "broadcast")
RULE_CODES: dict[str, int] = {k: i for i, k in enumerate(RULE_KINDS)}
"""Rule kind → its int8 code in :attr:`SegmentTable.rule` (:data:`NO_RULE`: no rule applies)."""
NO_RULE = -1
FATES = (None, Reason.DROP_RULE, Reason.UNUSED, Reason.OVERSHADOWED, "waiting")
"""What stage 12 does with every served replica of a segment, by :attr:`SegmentTable.fate` (int8):
0 nothing of its own (a used segment of a load or broadcast rule, or none), 1 drop (a used
segment of a drop rule), 2 drop (unused: not marked used, a tombstone, or unlisted), 3 drop
(overshadowed), 4 keep (overshadowed, waiting for a segment that overshadows it to be served).
The names of 1-3 are the drops' reasons (ALGORITHM.md stage 12)."""


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
        Capacity is :meth:`ServerState.can_load`'s."""
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
        return {
            "stage": self.stage,
            "load_type": self.queue_type,
            "queue_type": counted,
            "limit": self.cap,
            "total": self.total_cap,
        }

    @classmethod
    def from_meta(cls, entry: dict | None) -> StageLimit:
        """Inverse of :meth:`to_meta` (a missing entry = unlimited)."""
        entry = entry or {}
        cap = entry.get("limit")
        counted = entry.get("queue_type") or ("all" if cap is not None else None)
        return cls(entry.get("stage"), entry.get("load_type"), counted, cap, entry.get("total"))


@dataclass
class ServerState:
    """A historical server plus its load queue, as the run sees it (what Druid's ``ServerHolder`` is
    to Druid's Coordinator).

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
    ``segment_id``, ``datasource``, ``size_bytes`` (bytes) and ``code`` (its row of the run's
    :class:`SegmentTable`; None: ``idx``, as for every used segment)."""

    idx: int
    segment_id: str
    datasource: str
    size_bytes: int
    code: int | None = None


@dataclass
class Op:
    """One scheduled operation, before it gets its global ``op_id``.

    ``order``: where it sorts among the ops of one step, across parallel tasks;
    ``dep_server``: for a dependent DROP, the server of the LOAD (same segment, same step) it waits
    for; ``code``: the segment's row of the run's :class:`SegmentTable` (None: ``idx``).
    """

    action: Action
    idx: int
    segment_id: str
    datasource: str
    tier: str
    server: str
    size_bytes: int
    reason: str
    order: OpOrder
    queue_type: str | None = None
    dep_server: str | None = None
    code: int | None = None


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

    def drop(
        self, seg: SegmentRef, server: str, tier: str, reason: str, order: OpOrder, dep_server: str | None = None
    ) -> Op:
        """Record a DROP of ``seg`` from ``server`` of ``tier`` (dependent on the LOAD on
        ``dep_server`` of the same step, if given)."""
        op = Op(
            Action.DROP,
            seg.idx,
            seg.segment_id,
            seg.datasource,
            tier,
            server,
            seg.size_bytes,
            reason,
            order,
            dep_server=dep_server,
            code=seg.code,
        )
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


@dataclass(frozen=True)
class DropCandidate:
    """A server serving the segment with no drop: ``decommissioning``, ``cost`` (Druid's placement
    cost against the state at the start of the stage), ``available_bytes``, ``server``."""

    decommissioning: bool
    cost: float
    available_bytes: int
    server: str


@dataclass(frozen=True)
class SegmentTable:
    """Every segment of the snapshot by code (see the module docstring), read-only.

    Attributes (length N, by code): ``segment_id`` (str; a pyarrow ``StringArray``, memory-mapped,
    or a sequence), ``datasource`` (int32 code into ``datasources``, sorted names), ``start_ms``,
    ``end_ms`` (int64 epoch ms), ``size_bytes`` (int64), ``rule`` (int8 :data:`RULE_CODES`,
    :data:`NO_RULE`), ``required`` (int32, -1: not a load rule), ``fate`` (int8, :data:`FATES`);
    ``n_used``: codes below it are the used segments, code = ``idx``.
    """

    segment_id: Any
    datasource: np.ndarray
    start_ms: np.ndarray
    end_ms: np.ndarray
    size_bytes: np.ndarray
    rule: np.ndarray
    required: np.ndarray
    fate: np.ndarray
    datasources: tuple[str, ...]
    n_used: int

    def __len__(self) -> int:
        return len(self.size_bytes)

    def idx(self, code: int) -> int:
        """The used-segment index of ``code`` (-1 outside the used set)."""
        return int(code) if code < self.n_used else -1

    def idx_of(self, codes: np.ndarray) -> np.ndarray:
        """int64 (n,): :meth:`idx` of every code of ``codes``."""
        codes = np.asarray(codes, np.int64)
        return np.where(codes < self.n_used, codes, -1)

    def segment_id_of(self, code: int) -> str:
        value = self.segment_id[int(code)]
        return value.as_py() if hasattr(value, "as_py") else str(value)

    def segment_ids(self, codes: Sequence[int]) -> list[str]:
        """The segment ids of ``codes``, in order."""
        codes = np.asarray(codes, np.int64)
        if type(self.segment_id).__module__.startswith("pyarrow"):
            return self.segment_id.take(codes).to_pylist()
        return [str(self.segment_id[int(c)]) for c in codes]

    def datasource_of(self, code: int) -> str:
        return self.datasources[int(self.datasource[code])]

    def rule_kind(self, code: int) -> str | None:
        rule = int(self.rule[code])
        return None if rule == NO_RULE else RULE_KINDS[rule]

    def required_of(self, code: int) -> int | None:
        required = int(self.required[code])
        return None if required < 0 else required

    def ref(self, code: int) -> SegmentRef:
        """The :class:`SegmentRef` an operation on ``code`` names."""
        return SegmentRef(
            self.idx(code), self.segment_id_of(code), self.datasource_of(code), int(self.size_bytes[code]), int(code)
        )


@dataclass
class TierState:
    """One tier's run state as arrays (see the module docstring).

    ``servers``: the names the server codes stand for (the run's historicals, by name).
    Segments (length n, ``seg_code`` ascending): ``seg_code`` int64 (= ``idx``: used segments with
    a target, a replica or a broadcast rule here), ``target`` and ``tier_pos`` int32. Replicas
    (length m, one per (segment, server) served, loading or dropping): ``rep_code`` int64 (any
    segment), ``rep_server`` int32, ``served`` bool (the snapshot's), ``load`` int8 (queue code of
    a queued or scheduled load, :data:`NO_LOAD`), ``dropping`` bool (a queued or scheduled drop),
    ``dependent`` bool (that drop waits for a load of this run). ``topb``: ``{idx: [server, …]}``,
    the top ``B`` cached so far, best first.
    """

    tier: str
    servers: tuple[str, ...]
    seg_code: np.ndarray
    target: np.ndarray
    tier_pos: np.ndarray
    rep_code: np.ndarray
    rep_server: np.ndarray
    served: np.ndarray
    load: np.ndarray
    dropping: np.ndarray
    dependent: np.ndarray
    topb: dict[int, list[str]] = field(default_factory=dict)

    SEGMENT_ARRAYS = ("seg_code", "target", "tier_pos")
    REPLICA_ARRAYS = ("rep_code", "rep_server", "served", "load", "dropping", "dependent")

    def apply(
        self,
        code: np.ndarray,
        server: np.ndarray,
        is_load: np.ndarray,
        queue: np.ndarray,
        dependent: np.ndarray,
        cancel: np.ndarray | None = None,
    ) -> TierState:
        """The state after operations on this tier (arrays of length k, in op order: segment
        ``code`` int64, ``server`` code int32, ``is_load`` bool, ``queue`` int8 queue code of a
        LOAD, ``dependent`` bool of a DROP that waits for a load, ``cancel`` bool of a CANCEL,
        the ``druid`` coordinator's, whose ``queue`` is the cancelled load's or -1 for a cancelled
        drop). A LOAD marks its replica loading (a new replica row when the server had none of the
        segment); a DROP marks it dropping; a CANCEL undoes the queued load or drop. Without a
        CANCEL, loads apply before drops; with CANCELs, each replica's ops apply in op order.
        Raises ``ValueError`` for a DROP or a CANCEL of a replica the state does not have."""
        if cancel is None or not np.any(cancel):
            return self._apply_queued(code, server, is_load, queue, dependent)
        return self._apply_with_cancels(code, server, is_load, queue, dependent, np.asarray(cancel, bool))

    def _apply_with_cancels(
        self,
        code: np.ndarray,
        server: np.ndarray,
        is_load: np.ndarray,
        queue: np.ndarray,
        dependent: np.ndarray,
        cancel: np.ndarray,
    ) -> TierState:
        """:meth:`apply` with CANCELs, in one pass: replicas are independent, so each replica's queued
        load is set by its last LOAD or cancelled load, its queued drop by its last DROP or
        cancelled drop (op order); a LOAD of a replica the state lacks adds its row first."""
        code, server = np.asarray(code, np.int64), np.asarray(server, np.int64)
        is_load, queue = np.asarray(is_load, bool), np.asarray(queue, np.int8)
        dependent = np.asarray(dependent, bool)
        width = len(self.servers) + 1
        arrays = {name: getattr(self, name).copy() for name in self.REPLICA_ARRAYS}
        op_keys = code * width + server
        loads = is_load & ~cancel
        rows = self._replica_rows(code, server)
        new = loads & (rows < 0)
        if new.any():
            first = np.sort(np.unique(op_keys[new], return_index=True)[1])
            picks = np.flatnonzero(new)[first]
            k = len(picks)
            added = {
                "rep_code": code[picks],
                "rep_server": server[picks].astype(np.int32),
                "served": np.zeros(k, bool),
                "load": np.full(k, NO_LOAD, np.int8),
                "dropping": np.zeros(k, bool),
                "dependent": np.zeros(k, bool),
            }
            arrays = {name: np.concatenate([a, added[name].astype(a.dtype)]) for name, a in arrays.items()}
            widened = TierState(
                self.tier, self.servers, self.seg_code, self.target, self.tier_pos, topb=dict(self.topb), **arrays
            )
            rows = widened._replica_rows(code, server)
        if (rows < 0).any():
            j = int(np.flatnonzero(rows < 0)[0])
            what = "CANCEL on" if cancel[j] else "DROP of"
            raise ValueError(
                f"tier {self.tier}: a {what} segment code {code[j]} at server code {server[j]}, "
                "which holds no replica of it"
            )

        def last_per_row(mask: np.ndarray) -> np.ndarray:
            """The op index of the last op of ``mask`` on each replica row it touches."""
            ops = np.flatnonzero(mask)
            reversed_rows = rows[ops][::-1]
            _, at = np.unique(reversed_rows, return_index=True)
            return ops[::-1][at]

        cancel_load = cancel & (queue != NO_LOAD)
        last = last_per_row(loads | cancel_load)
        arrays["load"][rows[last]] = np.where(cancel[last], NO_LOAD, queue[last])
        drops = ~is_load & ~cancel
        last = last_per_row(drops | (cancel & ~cancel_load))
        arrays["dropping"][rows[last]] = ~cancel[last]
        arrays["dependent"][rows[last]] = dependent[last] & ~cancel[last]
        return TierState(
            self.tier, self.servers, self.seg_code, self.target, self.tier_pos, topb=dict(self.topb), **arrays
        )

    def _replica_rows(self, code: np.ndarray, server: np.ndarray) -> np.ndarray:
        """The replica row of every (code, server) pair, -1 for none."""
        width = len(self.servers) + 1
        keys = self.rep_code * width + self.rep_server
        want = np.asarray(code, np.int64) * width + np.asarray(server, np.int64)
        if not len(keys):
            return np.full(len(want), -1, np.int64)
        order = np.argsort(keys, kind="stable")
        pos = np.minimum(np.searchsorted(keys[order], want), len(keys) - 1)
        return np.where(keys[order][pos] == want, order[pos], -1)

    def _apply_queued(
        self, code: np.ndarray, server: np.ndarray, is_load: np.ndarray, queue: np.ndarray, dependent: np.ndarray
    ) -> TierState:
        code, server = np.asarray(code, np.int64), np.asarray(server, np.int64)
        is_load = np.asarray(is_load, bool)
        if not len(code):
            return self
        width = len(self.servers) + 1
        arrays = {name: getattr(self, name) for name in self.REPLICA_ARRAYS}

        def locate(keys: np.ndarray, codes, servers) -> np.ndarray:
            """The row of every (code, server) pair, -1 for none."""
            want = codes * width + servers
            if not len(keys):
                return np.full(len(want), -1, np.int64)
            order = np.argsort(keys, kind="stable")
            pos = np.minimum(np.searchsorted(keys[order], want), len(keys) - 1)
            return np.where(keys[order][pos] == want, order[pos], -1)

        keys = arrays["rep_code"] * width + arrays["rep_server"]
        lc, ls, lq = code[is_load], server[is_load], np.asarray(queue, np.int8)[is_load]
        rows = locate(keys, lc, ls)
        arrays = {name: a.copy() for name, a in arrays.items()}
        arrays["load"][rows[rows >= 0]] = lq[rows >= 0]
        new = rows < 0
        if new.any():
            k = int(new.sum())
            added = {
                "rep_code": lc[new],
                "rep_server": ls[new].astype(np.int32),
                "served": np.zeros(k, bool),
                "load": lq[new],
                "dropping": np.zeros(k, bool),
                "dependent": np.zeros(k, bool),
            }
            arrays = {name: np.concatenate([a, added[name].astype(a.dtype)]) for name, a in arrays.items()}
        dc, ds, dd = code[~is_load], server[~is_load], np.asarray(dependent, bool)[~is_load]
        if len(dc):
            rows = locate(arrays["rep_code"] * width + arrays["rep_server"], dc, ds)
            if (rows < 0).any():
                j = int(np.flatnonzero(rows < 0)[0])
                raise ValueError(
                    f"tier {self.tier}: a DROP of segment code {dc[j]} from server code {ds[j]}, "
                    "which holds no replica of it"
                )
            arrays["dropping"][rows] = True
            arrays["dependent"][rows] = dd
        return TierState(
            self.tier, self.servers, self.seg_code, self.target, self.tier_pos, topb=dict(self.topb), **arrays
        )

    def with_topb(self, topb: Mapping[int, list[str]]) -> TierState:
        """The state with ``topb`` cached (a later entry replaces an earlier one of the segment)."""
        if not topb:
            return self
        out = TierState(**{**self.__dict__, "topb": {**self.topb, **{int(k): list(v) for k, v in topb.items()}}})
        return out

    def arrow_rows(self, table: SegmentTable):
        """The state as rows: a pyarrow Table of :data:`STATE_FIELDS` (strings resolved from
        ``table``; a segment row per segment, then a replica row per replica), vectorised."""
        n, m = len(self.seg_code), len(self.rep_code)
        codes = np.concatenate([self.seg_code, self.rep_code]).astype(np.int64)
        is_seg = np.arange(n + m) < n

        def names(values: tuple[str, ...], index: np.ndarray, valid: np.ndarray):
            return (
                pc.take(
                    pa.array(list(values) or [""], pa.string()),
                    pa.array(np.where(valid, index, 0)),
                )
                .to_numpy(zero_copy_only=False)
                .astype(object)
                if len(index)
                else np.zeros(0, object)
            )

        def masked(values, valid):
            return pa.array(values, mask=~np.asarray(valid, bool))

        ids = (
            table.segment_id.take(pa.array(codes))
            if type(table.segment_id).__module__.startswith("pyarrow")
            else pa.array(table.segment_ids(codes), pa.string())
        )
        rule = table.rule[codes]
        required = table.required[codes]
        server = np.concatenate([np.zeros(n, np.int64), self.rep_server.astype(np.int64)])
        load = np.concatenate([np.full(n, NO_LOAD, np.int8), self.load])
        flags = {
            k: np.concatenate([np.zeros(n, bool), getattr(self, a)])
            for k, a in (("served", "served"), ("dropping", "dropping"), ("drop_dependent", "dependent"))
        }
        topb = [",".join(self.topb[int(c)]) if int(c) in self.topb else None for c in self.seg_code] + [None] * m
        columns = {
            "tier": pa.array([self.tier] * (n + m), pa.string()),
            "kind": pa.array(np.where(is_seg, "segment", "replica").astype(object), pa.string()),
            "idx": pa.array(table.idx_of(codes), pa.int64()),
            "code": pa.array(codes, pa.int64()),
            "segment_id": ids,
            "datasource": pa.array(
                names(table.datasources, table.datasource[codes], np.ones(n + m, bool)), pa.string()
            ),
            "start_ms": pa.array(table.start_ms[codes]),
            "end_ms": pa.array(table.end_ms[codes]),
            "size_bytes": pa.array(table.size_bytes[codes]),
            "server": masked(names(self.servers, server, ~is_seg), ~is_seg).cast(pa.string()),
            "served": masked(flags["served"], ~is_seg),
            "load_type": masked(names(QUEUE_TYPES, load.astype(np.int64), load >= 0), ~is_seg & (load >= 0)).cast(
                pa.string()
            ),
            "dropping": masked(flags["dropping"], ~is_seg),
            "drop_dependent": masked(flags["drop_dependent"], ~is_seg),
            "target": masked(np.concatenate([self.target, np.zeros(m, np.int32)]).astype(np.int32), is_seg),
            "tier_pos": masked(np.concatenate([self.tier_pos, np.zeros(m, np.int32)]).astype(np.int32), is_seg),
            "rule_kind": masked(names(RULE_KINDS, rule.astype(np.int64), rule >= 0), is_seg & (rule >= 0)).cast(
                pa.string()
            ),
            "required": masked(required.astype(np.int32), is_seg & (required >= 0)),
            "topb": pa.array(topb, pa.string()),
        }
        types = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "boolean": pa.bool_()}
        return pa.table({name: columns[name].cast(types[kind]) for name, kind in STATE_FIELDS})

    def rows(self, table: SegmentTable) -> pd.DataFrame:
        """The state as rows (pandas, :data:`STATE_COLUMNS`; :meth:`arrow_rows`)."""
        return state_frame(self.arrow_rows(table).to_pandas())


def tables_from_rows(
    rows: pd.DataFrame, servers: Sequence[str] | None = None
) -> tuple[SegmentTable, dict[str, TierState]]:
    """A :class:`SegmentTable` and one :class:`TierState` per tier from state rows
    (:data:`STATE_COLUMNS`; ``code`` may be absent): used segments keep their ``idx`` as code,
    the others (``idx`` -1: unused, :data:`FATES` 2) follow by segment id; server codes index ``servers`` (default: the
    replicas' servers by name). For hand-made states (the tests) and small tools; a run's state
    comes from ``prepare``."""
    rows = rows.reset_index(drop=True)
    idx = rows["idx"].to_numpy(np.int64)
    used = idx >= 0
    n_used = int(idx.max()) + 1 if used.any() else 0
    others = sorted(set(rows.loc[~used, "segment_id"]))
    code = idx.copy()
    other_code = {sid: n_used + j for j, sid in enumerate(others)}
    code[~used] = [other_code[s] for s in rows.loc[~used, "segment_id"]]
    n = n_used + len(others)
    names = tuple(sorted(set(rows["datasource"].dropna())))
    ds_code = {d: i for i, d in enumerate(names)}
    seg_id = np.array([""] * n, dtype=object)
    ds = np.zeros(n, np.int32)
    start, end, size = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    rule, required = np.full(n, NO_RULE, np.int8), np.full(n, -1, np.int32)
    seg_id[code] = rows["segment_id"].to_numpy(object)
    ds[code] = [ds_code[d] for d in rows["datasource"]]
    start[code], end[code] = rows["start_ms"].to_numpy(np.int64), rows["end_ms"].to_numpy(np.int64)
    size[code] = rows["size_bytes"].to_numpy(np.int64)
    is_seg = (rows["kind"] == "segment").to_numpy(bool)
    kinds = rows["rule_kind"].to_numpy(object)
    reqs = rows["required"].to_numpy(object)
    for i in np.flatnonzero(is_seg):
        if kinds[i] is not None and kinds[i] == kinds[i]:
            rule[code[i]] = RULE_CODES[kinds[i]]
        if reqs[i] is not None and not pd.isna(reqs[i]):
            required[code[i]] = int(reqs[i])
    fate = np.where(np.arange(n) < n_used, np.where(rule == RULE_CODES["drop"], 1, 0), 2).astype(np.int8)
    table = SegmentTable(seg_id, ds, start, end, size, rule, required, fate, names, n_used)
    servers = tuple(servers) if servers is not None else tuple(sorted(set(rows.loc[~is_seg, "server"].dropna())))
    server_code = {s: i for i, s in enumerate(servers)}
    tiers = rows["tier"] if "tier" in rows else pd.Series([""] * len(rows))
    states = {}
    for tier in sorted(set(tiers.dropna())):
        mine = (tiers == tier).to_numpy(bool)
        segs = rows[mine & is_seg].assign(code=code[mine & is_seg]).sort_values("code", kind="stable")
        reps = rows[mine & ~is_seg].assign(code=code[mine & ~is_seg])
        topb = {
            int(c): (t.split(",") if t else []) for c, t in zip(segs["code"], segs["topb"]) if t is not None and t == t
        }
        states[tier] = TierState(
            tier,
            servers,
            segs["code"].to_numpy(np.int64),
            segs["target"].astype("Int64").fillna(0).to_numpy(np.int32),
            segs["tier_pos"].astype("Int64").fillna(0).to_numpy(np.int32),
            reps["code"].to_numpy(np.int64),
            np.array([server_code[s] for s in reps["server"]], dtype=np.int32),
            reps["served"].astype("boolean").fillna(False).to_numpy(bool),
            np.array([NO_LOAD if t is None or t != t else QUEUE_CODES[t] for t in reps["load_type"]], dtype=np.int8),
            reps["dropping"].astype("boolean").fillna(False).to_numpy(bool),
            reps["drop_dependent"].astype("boolean").fillna(False).to_numpy(bool),
            topb,
        )
    return table, states


class SegmentInTier:
    """A used segment as one tier sees it: a view of the tier's arrays (sizes in bytes, times epoch
    ms), made by :meth:`TierRun.segment`. ``topb`` is the top ``B`` cached here (None before a
    loading stage ranked it); the replica methods read the live arrays."""

    __slots__ = (
        "_run",
        "_rows",
        "idx",
        "code",
        "segment_id",
        "datasource",
        "start_ms",
        "end_ms",
        "size_bytes",
        "target",
        "tier_pos",
        "rule_kind",
        "required",
        "key",
    )

    def __init__(self, run: TierRun, row: int):
        table, code = run.table, int(run._s_code[row])
        self._run = run
        self.code = code
        self.idx = table.idx(code)
        self.segment_id = table.segment_id_of(code)
        self.datasource = table.datasource_of(code)
        self.start_ms, self.end_ms = int(table.start_ms[code]), int(table.end_ms[code])
        self.size_bytes = int(table.size_bytes[code])
        self.target, self.tier_pos = int(run._s_target[row]), int(run._s_tier_pos[row])
        self.rule_kind, self.required = table.rule_kind(code), table.required_of(code)
        self.key = int(run._s_key[row])
        lo, hi = np.searchsorted(run._r.code[: run._base], [code, code + 1])
        self._rows: list[int] = list(range(int(lo), int(hi)))

    @property
    def topb(self) -> list[str] | None:
        return self._run._topb.get(self.code)

    @topb.setter
    def topb(self, value: list[str]) -> None:
        self._run._topb[self.code] = self._run._topb_new[self.code] = list(value)

    def _row(self, position: int) -> int | None:
        """The replica row of the tier's server at ``position``, or None."""
        servers = self._run._r.server
        return next((i for i in self._rows if servers[i] == position), None)

    def count(self) -> int:
        """``count(s, T)``: servers serving it with no drop, plus servers loading it."""
        r = self._run._r
        return sum(1 for i in self._rows if r.holds(i))

    def present(self) -> set[str]:
        """Servers that serve it or load it: never a destination for another load."""
        r, names = self._run._r, self._run.names
        return {names[r.server[i]] for i in self._rows if r.served[i] or r.load[i] != NO_LOAD}

    def serving(self) -> list[str]:
        """Servers that serve it with no drop of it, by name."""
        r, names = self._run._r, self._run.names
        return sorted(names[r.server[i]] for i in self._rows if r.served[i] and not r.dropping[i])


class _Replicas:
    """The replicas of a tier as growable arrays (row ``i`` of each), the live part of a
    :class:`TierRun`: ``code`` int64, ``server`` int32 (position in the tier's servers), ``served``,
    ``load`` int8, ``dropping``, ``dependent``, ``size`` int64 (bytes), ``key`` int64 (interval key)."""

    def __init__(self, **arrays: np.ndarray):
        self.n = len(arrays["code"])
        for name, a in arrays.items():
            setattr(self, name, np.array(a))

    NAMES = ("code", "server", "served", "load", "dropping", "dependent", "size", "key")

    def append(self, **values) -> int:
        if self.n == len(self.code):
            for name in self.NAMES:
                a = getattr(self, name)
                setattr(self, name, np.concatenate([a, np.zeros(max(16, len(a)), a.dtype)]))
        i = self.n
        for name in self.NAMES:
            getattr(self, name)[i] = values.get(name, 0)
        self.n += 1
        return i

    def holds(self, i: int) -> bool:
        """Counted in ``count(s, T)`` and the projection: served or loading, not dropping."""
        return bool((self.served[i] or self.load[i] != NO_LOAD) and not self.dropping[i])

    def live(self, name: str) -> np.ndarray:
        return getattr(self, name)[: self.n]


class TierRun:
    """The run state of one tier inside a Spark task.

    Args:
        state: the tier's :class:`TierState` (the start state with the operations so far applied).
        table: the run's :class:`SegmentTable`.
        servers: the tier's historical servers (pandas rows of ``prepared/servers.parquet``:
            ``server``, ``max_size``, ``current_size`` (bytes), ``priority``, ``decommissioning``).
        num_best: ``B(numServersInTier, targetReplicants)`` (:func:`segment_balancer.spark.workdir.num_best_function`).
        ranked: build the live placement costs (stages that rank); stages that never rank
            (2, 13) skip that work.
        sink: where ops go (shared by the tiers of a cross-tier stage); a new one by default.
        reuse_top_b: reuse a segment's cached top ``B`` (config ``topBReuse``; :meth:`top_b`).

    Replicas live in arrays; :meth:`segment` gives a view of one segment. What a step changed is
    its ops (``sink``) and :meth:`new_topb`; :meth:`state` is the live state as a :class:`TierState`.
    """

    def __init__(
        self,
        state: TierState,
        table: SegmentTable,
        servers: pd.DataFrame,
        num_best: Callable[[int, int], int],
        ranked: bool = True,
        sink: OpSink | None = None,
        reuse_top_b: bool = True,
    ):
        self.tier = state.tier
        self.table = table
        self._state_servers = state.servers
        self.reuse_top_b = reuse_top_b
        self.num_best = num_best
        self.sink = sink if sink is not None else OpSink()
        servers = servers.sort_values("server")
        self.names: list[str] = list(servers["server"])
        self.pos = {n: i for i, n in enumerate(self.names)}
        self.candidate_mask = ~servers["decommissioning"].to_numpy(bool)
        self.candidates = [n for n, c in zip(self.names, self.candidate_mask) if c]
        self.decommissioning = frozenset(n for n, c in zip(self.names, self.candidate_mask) if not c)
        local = np.array([self.pos.get(name, -1) for name in state.servers] + [-1], dtype=np.int32)
        mine = local[state.rep_server] >= 0
        order = np.argsort(state.rep_code[mine], kind="stable")
        code = state.rep_code[mine][order]
        self._s_code = np.asarray(state.seg_code, np.int64)
        self._s_target, self._s_tier_pos = np.asarray(state.target, np.int64), np.asarray(state.tier_pos, np.int64)
        self._r = _Replicas(
            code=code,
            server=local[state.rep_server[mine][order]],
            served=state.served[mine][order],
            load=state.load[mine][order],
            dropping=state.dropping[mine][order],
            dependent=state.dependent[mine][order],
            size=table.size_bytes[code],
            key=np.full(len(code), -1, np.int64),
        )
        self._base = self._r.n
        self._topb: dict[int, list[str]] = {int(k): list(v) for k, v in state.topb.items()}
        self._topb_new: dict[int, list[str]] = {}
        self._views: dict[int, SegmentInTier] = {}
        self._dirty = False
        self.servers = self._holders(servers)
        r = self._r
        gone = r.dropping & (r.served | (r.load != NO_LOAD))
        self._freed = np.bincount(r.server[gone], weights=r.size[gone], minlength=len(self.names)).astype(np.int64)
        self.costs: TierCosts | None = None
        self.keys = None
        self._s_key = np.full(len(self._s_code), -1, dtype=np.int64)
        codes = np.concatenate([self._s_code, r.code])
        if ranked and len(codes):
            self.keys, key_of = IntervalKeys.build_coded(
                table.datasource[codes], table.start_ms[codes], table.end_ms[codes], table.datasources
            )
            self._s_key, r.key[:] = key_of[: len(self._s_code)], key_of[len(self._s_code) :]
            self.costs = TierCosts(self.keys, len(self.names))
            holds = (r.served | (r.load != NO_LOAD)) & ~r.dropping
            self.costs.add_many(r.server[holds].astype(np.int64), r.key[holds])

    @classmethod
    def from_rows(
        cls,
        tier: str,
        rows: pd.DataFrame,
        servers: pd.DataFrame,
        num_best: Callable[[int, int], int],
        ranked: bool = True,
        sink: OpSink | None = None,
        reuse_top_b: bool = True,
    ) -> TierRun:
        """A TierRun of ``tier`` from hand-made state rows (:data:`STATE_COLUMNS`, ``tier`` and
        ``code`` may be absent; :func:`tables_from_rows`)."""
        rows = rows.assign(tier=tier)
        names = set(servers["server"]) | set(rows.loc[rows["kind"] == "replica", "server"].dropna())
        table, states = tables_from_rows(rows, sorted(names))
        state = states.get(tier) or TierState(
            tier,
            (),
            *(np.zeros(0, t) for t in (np.int64, np.int32, np.int32, np.int64, np.int32, bool, np.int8, bool, bool)),
        )
        return cls(state, table, servers, num_best, ranked, sink, reuse_top_b)

    # ---- construction -------------------------------------------------------------------------
    def _holders(self, servers: pd.DataFrame) -> dict[str, ServerState]:
        r = self._r
        loading = r.load != NO_LOAD
        n = len(self.names)
        queued = np.bincount(r.server[loading], weights=r.size[loading], minlength=n).astype(np.int64)
        counts = {t: np.bincount(r.server[r.load == q], minlength=n) for t, q in QUEUE_CODES.items()}
        out = {}
        for i, rec in enumerate(servers.to_dict("records")):
            name = rec["server"]
            out[name] = ServerState(
                server=name,
                tier=self.tier,
                max_size=int(rec["max_size"]),
                projected_size=int(rec["current_size"]) + int(queued[i]),
                decommissioning=bool(rec["decommissioning"]),
                priority=int(rec["priority"]),
                loads={t: int(counts[t][i]) for t in QUEUE_TYPES},
            )
        return out

    @property
    def changed(self) -> bool:
        """True once a mutator scheduled an operation or a top ``B`` was cached (reading
        segments alone changes nothing)."""
        return self._dirty

    def new_topb(self) -> dict[int, list[str]]:
        """``{idx: [server, …]}``: the top ``B`` this run cached or ranked again (what a step
        writes of the tier besides its ops)."""
        return dict(self._topb_new)

    def state(self) -> TierState:
        """The live state as a :class:`TierState` (server codes those of the state it was built from)."""
        r = self._r
        codes = {name: i for i, name in enumerate(self._state_servers)}
        to_state = np.array([codes[name] for name in self.names] + [-1], dtype=np.int32)
        return TierState(
            self.tier,
            self._state_servers,
            self._s_code,
            self._s_target.astype(np.int32),
            self._s_tier_pos.astype(np.int32),
            r.live("code").copy(),
            to_state[r.live("server")],
            r.live("served").copy(),
            r.live("load").copy(),
            r.live("dropping").copy(),
            r.live("dependent").copy(),
            dict(self._topb),
        )

    # ---- segments -----------------------------------------------------------------------------
    def _seg_row(self, idx: int) -> int:
        i = int(np.searchsorted(self._s_code, idx))
        return i if i < len(self._s_code) and self._s_code[i] == idx else -1

    def has(self, idx: int) -> bool:
        """True when the tier has a segment row for ``idx``."""
        return int(idx) in self._views or self._seg_row(int(idx)) >= 0

    def segment(self, idx: int) -> SegmentInTier:
        """The segment ``idx`` with its replicas in this tier (a live view, made once).

        Raises ``KeyError`` if the tier has no row for it.
        """
        idx = int(idx)
        seg = self._views.get(idx)
        if seg is None:
            row = self._seg_row(idx)
            if row < 0:
                raise KeyError(f"segment {idx} has no row in tier {self.tier}")
            seg = self._views[idx] = SegmentInTier(self, row)
        return seg

    def served_by(self, server: str) -> np.ndarray:
        """int64 (n,), ascending: the ``idx`` of the used segments that ``server`` serves with no
        drop of them, against the live state."""
        r = self._r
        rows = (r.live("server") == self.pos[server]) & r.live("served") & ~r.live("dropping")
        rows &= r.live("code") < self.table.n_used
        return np.unique(r.live("code")[rows])

    def used_bytes(self) -> dict[str, int]:
        """Projected used bytes of every server of the tier: served + queued and scheduled loads −
        queued and scheduled drops (``projected_size`` less the replicas with a drop), against the
        live state (ALGORITHM.md "Balancing strategy ``avgShedder``", the score)."""
        return {name: holder.projected_size - int(self._freed[self.pos[name]]) for name, holder in self.servers.items()}

    def segments_with_rule(self, kind: str) -> np.ndarray:
        """int64 (n,): the ``idx`` of the tier's segments whose applying rule is of ``kind``
        (``load``, ``drop``, ``broadcast``), ascending."""
        return self._s_code[self.table.rule[self._s_code] == RULE_CODES[kind]]

    # ---- ranking ------------------------------------------------------------------------------
    def placement_costs(self, seg: SegmentInTier) -> np.ndarray:
        """float64 (S,), servers in name order: Druid's placement cost of ``seg`` on every server of
        the tier against the live projection (the segment itself left out where it is held)."""
        if self.costs is None:
            raise RuntimeError(f"tier {self.tier} was built without costs (ranked=False)")
        holders = np.zeros(len(self.names), dtype=bool)
        for i in seg._rows:
            if self._r.holds(i):
                holders[self._r.server[i]] = True
        return self.costs.costs(seg.key, holders)

    def available(self) -> np.ndarray:
        """int64 (S,): available bytes of every server (``max_size`` − projected size)."""
        return np.array([self.servers[n].available_bytes for n in self.names], dtype=np.int64)

    def rank(self, seg: SegmentInTier) -> list[str]:
        """Candidate servers best first: cost ascending, then more available bytes, then the
        smaller name (ALGORITHM.md "Best servers")."""
        return self.ranked(seg)[0]

    def ranked(self, seg: SegmentInTier) -> tuple[list[str], np.ndarray]:
        """:meth:`rank` and the placement costs it ranked by (float64 (S,), servers in name order:
        :meth:`placement_costs`), for a stage that compares costs (balancing's margin test)."""
        costs = self.placement_costs(seg)
        cand = np.flatnonzero(self.candidate_mask)
        order = np.lexsort((cand, -self.available()[cand], costs[cand]))
        return [self.names[int(cand[i])] for i in order], costs

    def b(self, seg: SegmentInTier) -> int:
        """Top ``B`` for ``seg`` here: clamp(floor(f(candidates, target)), target, candidates);
        target 1 for a broadcast segment; 0 when the tier has no target for it."""
        target = 1 if seg.rule_kind == "broadcast" else seg.target
        return self.num_best(len(self.candidates), target) if target > 0 else 0

    def top_b(self, seg: SegmentInTier) -> list[str]:
        """The segment's top ``B`` here: ranked against the live state the first time a loading
        stage asks, then reused (ALGORITHM.md "When a segment is ranked"); ranked afresh at every
        call when ``reuse_top_b`` is False (config ``topBReuse``, for the experiment of
        docs/SIMULATION.md)."""
        if seg.topb is None or not self.reuse_top_b:
            seg.topb = self.rank(seg)[: self.b(seg)]
            self._dirty = True
        return seg.topb

    def rank_again_if_full(self, seg: SegmentInTier) -> bool:
        """ALGORITHM.md "Best servers" (a stale top ``B`` is ranked again): when every server of
        the segment's cached top ``B`` that does not hold it lacks the room for it (capacity, not
        a queue slot, which frees up only in a later run), rank it afresh against the live state
        and cache that top ``B`` instead. Returns True when it did, so the stage tries the tier
        once more; False when some such server has room (or top ``B`` is ranked afresh anyway,
        ``topBReuse`` false)."""
        if not self.reuse_top_b:
            return False
        present = seg.present()
        for name in self.top_b(seg):
            holder = self.servers[name]
            if name not in present and holder.available_bytes >= seg.size_bytes:
                return False
        seg.topb = self.rank(seg)[: self.b(seg)]
        self._dirty = True
        return True

    def drop_candidates(self, seg: SegmentInTier, names: Iterable[str]) -> list[DropCandidate]:
        """A :class:`DropCandidate` (decommissioning, cost, available bytes, server) for each of
        ``names``, costs against the live state."""
        costs = self.placement_costs(seg)
        return [
            DropCandidate(
                name in self.decommissioning,
                float(costs[self.pos[name]]),
                int(self.servers[name].available_bytes),
                name,
            )
            for name in names
        ]

    def drop_order(self, seg: SegmentInTier, names: Iterable[str]) -> list[str]:
        """``names`` in the order to drop from: the ranking reversed (:func:`.cost.drop_key`)."""
        cands = self.drop_candidates(seg, names)
        return [c.server for c in sorted(cands, key=lambda c: drop_key(c.cost, c.available_bytes, c.server))]

    # ---- the mutators -------------------------------------------------------------------------
    def load(self, seg: SegmentInTier, server: str, queue_type: str, reason: str, order: OpOrder) -> Op:
        """Schedule a LOAD of ``seg`` on ``server``: the replica, the server's queue and size and
        the costs change at once. Raises ``ValueError`` if the server already serves or loads it."""
        p, r = self.pos[server], self._r
        i = seg._row(p)
        if i is not None and (r.served[i] or r.load[i] != NO_LOAD):
            raise ValueError(f"{server} already holds {seg.segment_id}")
        if i is None:
            i = r.append(code=seg.code, server=p, load=NO_LOAD, size=seg.size_bytes, key=seg.key)
            seg._rows.append(i)
        if r.dropping[i]:  # a queued drop of a replica it did not serve: the bytes loaded go again
            self._freed[p] += seg.size_bytes
        r.load[i] = QUEUE_CODES[queue_type]
        self._dirty = True
        self.servers[server].add_load(seg.size_bytes, queue_type)
        if self.costs is not None:
            self.costs.add(p, seg.key, +1)
        op = Op(
            Action.LOAD,
            seg.idx,
            seg.segment_id,
            seg.datasource,
            self.tier,
            server,
            seg.size_bytes,
            reason,
            order,
            queue_type=queue_type,
            code=seg.code,
        )
        self.sink.ops.append(op)
        return op

    def drop(self, seg: SegmentInTier, server: str, reason: str, order: OpOrder, dep_server: str | None = None) -> Op:
        """Schedule a DROP of ``seg`` from ``server`` (dependent on the LOAD on ``dep_server`` of
        the same step, if given). Raises ``ValueError`` if the server does not serve it."""
        self.count_drop(seg, server)
        self._r.dependent[seg._row(self.pos[server])] = dep_server is not None
        self._dirty = True
        op = Op(
            Action.DROP,
            seg.idx,
            seg.segment_id,
            seg.datasource,
            self.tier,
            server,
            seg.size_bytes,
            reason,
            order,
            dep_server=dep_server,
            code=seg.code,
        )
        self.sink.ops.append(op)
        return op

    def count_drop(self, seg: SegmentInTier, server: str) -> None:
        """Count in the live projection a DROP of ``seg`` from ``server`` that the stage emits
        elsewhere (stage 12's drops of drop-rule segments, listed by a join over the whole run
        state): the replica is marked dropping, leaves the server's costs and frees its bytes; no
        op is recorded. Raises ``ValueError`` if the server does not serve it."""
        p, r = self.pos[server], self._r
        i = seg._row(p)
        if i is None or not r.served[i] or r.dropping[i]:
            raise ValueError(f"{server} does not serve {seg.segment_id} without a drop")
        held = r.holds(i)
        r.dropping[i] = True
        self._freed[p] += seg.size_bytes
        if self.costs is not None and held:
            self.costs.add(p, seg.key, -1)

    def move(
        self, seg: SegmentInTier, source: str, dest: str, queue_type: str, reason: str, order: OpOrder
    ) -> tuple[Op, Op]:
        """Schedule a move of ``seg`` from ``source`` to ``dest`` (ALGORITHM.md "Moves and
        callbacks"): a LOAD on ``dest`` of ``queue_type`` (``decommissioning`` or ``balancing``)
        at ``order``, then a DROP from ``source`` that depends on it, ordered right after it
        (:meth:`OpOrder.then`). Raises ``ValueError`` as :meth:`load` and
        :meth:`drop` do."""
        load = self.load(seg, dest, queue_type, reason, order)
        drop = self.drop(seg, source, reason, order.then(), dep_server=dest)
        return load, drop


def state_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with exactly ``STATE_COLUMNS`` and their pandas dtypes (nullable ints, object
    strings), as a Spark task returns it."""
    out = frame.reindex(columns=STATE_COLUMNS)
    for col in ("idx", "start_ms", "end_ms", "size_bytes"):
        out[col] = out[col].astype("int64")
    out["code"] = out["code"].astype("Int64")
    for col in ("target", "tier_pos", "required"):
        out[col] = out[col].astype("Int32")
    for col in ("served", "dropping", "drop_dependent"):
        out[col] = out[col].astype("boolean")
    for col in ("tier", "kind", "segment_id", "datasource", "server", "load_type", "rule_kind", "topb"):
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out
