"""The run state: what every tier projects after the operations scheduled so far, in one place.

Druid's ``ServerHolder`` + ``SegmentReplicaCount`` + ``SegmentStatusInTier`` for this run, in one
module: the load-queue limits of a stage (:class:`StageLimit`), servers with their projected size
and load queue per queue type (:class:`ServerHolder`), the segments of a tier with their replicas
and per-(segment, tier) counts (:class:`SegmentInTier`), the one ``load`` and ``drop``
(:class:`TierRun`: ``load``, ``drop``, ``move``), the drop order (:class:`DropCandidate`) and what a stage records
(:class:`Op`, :class:`OpSink`). On disk
(``WORK/state/<step>/tier=T/``, one parquet directory per tier; the op-log manifest maps every
tier to its current directory) it is one table of two kinds of rows,
``STATE_COLUMNS``:

- ``kind = "segment"``: one per (used segment, tier) where the segment has a target, a replica, or
  is broadcast: ``idx``, the segment's attributes, ``target`` (int, 0 when the rule does not name
  the tier), ``tier_pos`` (position of the tier in the rule's ``tieredReplicants``), ``rule_kind``,
  ``required`` and ``topb`` (string: the top ``B`` servers cached when a loading stage first
  ranked it here, comma-separated, best first; null until then, ALGORITHM.md "Best servers"; a
  string, not an array, because Spark hands array columns to Python row by row).
- ``kind = "replica"``: one per (segment, server of the tier) served, loading or dropping:
  ``served`` (bool, the snapshot's), ``load_type`` (queue type of a queued or scheduled load, null
  for none), ``dropping`` (bool: a queued or scheduled drop), ``drop_dependent`` (bool: that drop
  waits for a load of this run, a move's source or a stage-3 callback; null as false). ``idx`` is -1 for segments outside
  the used set (unused, overshadowed: they still weigh on costs and sizes until dropped).

``prepare`` writes the first state (:func:`segment_balancer.spark.state_store.initial_state`); every stage application reads it, runs
its kernel per tier on a :class:`TierRun` built from the tier's rows inside a Spark task, and
writes the tier's rows back (``TierRun.rows``). :meth:`TierRun.load` and :meth:`TierRun.drop` are
the only mutators: they change the replica, the server's queue and projected size, and the live
placement costs (:mod:`.livecost`) at once, and record the operation. Drops that one stage
decides outside its tier tasks (the stage-3 callbacks, stages 12 and 13) are applied to the tiers'
rows before the stage commits (:func:`segment_balancer.spark.tierpass.apply_drops_pass`), so they count
there from the next stage on.

Source: ALGORITHM.md "Terms", "Best servers", "Load-queue limits", "Capacity".
"""


from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from segment_balancer.druid.snapshot.models import QUEUE_TYPES, QueueType
from segment_balancer.planner.cost import drop_key
from segment_balancer.planner.livecost import IntervalKeys, TierCosts

STATE_FIELDS = [
    ("tier", "string"), ("kind", "string"), ("idx", "long"), ("segment_id", "string"), ("datasource", "string"),
    ("start_ms", "long"), ("end_ms", "long"), ("size_bytes", "long"), ("server", "string"), ("served", "boolean"),
    ("load_type", "string"), ("dropping", "boolean"), ("drop_dependent", "boolean"), ("target", "int"), ("tier_pos", "int"),
    ("rule_kind", "string"), ("required", "int"), ("topb", "string"),
]
STATE_COLUMNS = [name for name, _ in STATE_FIELDS]


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


@dataclass(frozen=True)
class DropCandidate:
    """A server serving the segment with no drop: ``decommissioning``, ``cost`` (Druid's placement
    cost against the state at the start of the stage), ``available_bytes``, ``server``."""

    decommissioning: bool
    cost: float
    available_bytes: int
    server: str


@dataclass
class Replica:
    """One server's relation to a segment: ``served`` (the snapshot's), ``load_type`` (queued or
    scheduled load, or None), ``dropping`` (queued or scheduled drop), ``dependent`` (that drop
    waits for a load of this run: a move's source or a stage-3 callback)."""

    server: str
    served: bool = False
    load_type: str | None = None
    dropping: bool = False
    dependent: bool = False

    @property
    def holds(self) -> bool:
        """Counted in ``count(s, T)`` and in the projection: served or loading, not dropping."""
        return (self.served or self.load_type is not None) and not self.dropping

    @property
    def serving(self) -> bool:
        """Serves the segment now with no drop of it (ALGORITHM.md ``loaded``)."""
        return self.served and not self.dropping

    @property
    def present(self) -> bool:
        """Serves it or is loading it: never a destination for another load."""
        return self.served or self.load_type is not None


@dataclass
class SegmentInTier:
    """A used segment as one tier sees it (sizes in bytes, times epoch ms)."""

    idx: int
    segment_id: str
    datasource: str
    start_ms: int
    end_ms: int
    size_bytes: int
    target: int
    tier_pos: int
    rule_kind: str | None
    required: int | None
    topb: list[str] | None
    key: int
    replicas: dict[str, Replica] = field(default_factory=dict)

    def count(self) -> int:
        """``count(s, T)``: servers serving it with no drop, plus servers loading it."""
        return sum(r.holds for r in self.replicas.values())

    def present(self) -> set[str]:
        return {r.server for r in self.replicas.values() if r.present}

    def serving(self) -> list[str]:
        """Servers that serve it with no drop of it, by name."""
        return sorted(r.server for r in self.replicas.values() if r.serving)


def _none_if_nan(value):
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def replica_flags(reps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """bool arrays ``served``, ``loading`` (a queued or scheduled load) and ``dropping`` of replica
    state rows (nulls as false)."""
    return (reps["served"].astype("boolean").fillna(False).to_numpy(bool), reps["load_type"].notna().to_numpy(bool),
            reps["dropping"].astype("boolean").fillna(False).to_numpy(bool))


def holds_mask(reps: pd.DataFrame) -> np.ndarray:
    """bool array: which replica state rows count in ``count(s, T)`` and the projection (served
    or loading, not dropping; :attr:`Replica.holds` over rows)."""
    served, loading, dropping = replica_flags(reps)
    return (served | loading) & ~dropping


class TierRun:
    """The run state of one tier inside a Spark task.

    Args:
        tier: the tier's name.
        rows: the tier's state rows (pandas, ``STATE_COLUMNS``; ``tier`` may be absent).
        servers: the tier's historical servers (pandas rows of ``prepared/servers.parquet``:
            ``server``, ``max_size``, ``current_size`` (bytes), ``priority``, ``decommissioning``).
        num_best: ``B(numServersInTier, targetReplicants)`` (:func:`segment_balancer.spark.workdir.num_best_function`).
        ranked: build the live placement costs (stages that rank); stages that never rank
            (2, 13) skip that work.
        sink: where ops go (shared by the tiers of a cross-tier stage); a new one by default.
        reuse_top_b: reuse a segment's cached top ``B`` (config ``topBReuse``; :meth:`top_b`).

    Segments are materialised from the rows on first use (:meth:`segment`); only they are written
    back changed. Ops go to ``self.sink`` (an :class:`OpSink`).
    """

    def __init__(self, tier: str, rows: pd.DataFrame, servers: pd.DataFrame, num_best: Callable[[int, int], int],
                 ranked: bool = True, sink: OpSink | None = None, reuse_top_b: bool = True):
        self.tier = tier
        self.reuse_top_b = reuse_top_b
        self.num_best = num_best
        self.sink = sink if sink is not None else OpSink()
        servers = servers.sort_values("server")
        self.names: list[str] = list(servers["server"])
        self.pos = {n: i for i, n in enumerate(self.names)}
        self.candidate_mask = ~servers["decommissioning"].to_numpy(bool)
        self.candidates = [n for n, c in zip(self.names, self.candidate_mask) if c]
        self.decommissioning = frozenset(n for n, c in zip(self.names, self.candidate_mask) if not c)
        rows = rows.reset_index(drop=True)
        segs = rows[rows["kind"] == "segment"].sort_values("idx", kind="stable").reset_index(drop=True)
        reps = rows[rows["kind"] == "replica"].reset_index(drop=True)
        reps = reps[reps["server"].isin(self.pos)].reset_index(drop=True)
        self._segs, self._reps = segs, reps
        self._seg_idx = segs["idx"].to_numpy(np.int64)
        # Plain numpy columns: a segment is materialised from them without pandas row access.
        self._seg_cols = {c: segs[c].to_numpy(object) for c in ("segment_id", "datasource", "rule_kind", "topb", "required")}
        for c in ("start_ms", "end_ms", "size_bytes"):
            self._seg_cols[c] = segs[c].to_numpy(np.int64)
        for c in ("target", "tier_pos"):
            self._seg_cols[c] = segs[c].astype("Int64").fillna(0).to_numpy(np.int64)
        order = np.argsort(reps["idx"].to_numpy(np.int64), kind="stable")
        self._rep_idx_sorted = reps["idx"].to_numpy(np.int64)[order]
        self._rep_cols = {
            "server": reps["server"].to_numpy(object)[order],
            "served": reps["served"].astype("boolean").fillna(False).to_numpy(bool)[order],
            "load_type": reps["load_type"].to_numpy(object)[order],
            "dropping": reps["dropping"].astype("boolean").fillna(False).to_numpy(bool)[order],
            "drop_dependent": reps["drop_dependent"].astype("boolean").fillna(False).to_numpy(bool)[order],
            "size_bytes": reps["size_bytes"].to_numpy(np.int64)[order],
        }
        self._touched: dict[int, SegmentInTier] = {}
        self._dirty = False
        self.servers = self._holders(servers, reps)
        self.costs: TierCosts | None = None
        self.keys, key_of = None, np.full(len(segs) + len(reps), -1, dtype=np.int64)
        if ranked and len(key_of):
            ds = np.concatenate([segs["datasource"].to_numpy(object), reps["datasource"].to_numpy(object)])
            start = np.concatenate([segs["start_ms"].to_numpy(np.int64), reps["start_ms"].to_numpy(np.int64)])
            end = np.concatenate([segs["end_ms"].to_numpy(np.int64), reps["end_ms"].to_numpy(np.int64)])
            self.keys, key_of = IntervalKeys.build(ds, start, end)
        self._seg_key, self._rep_key = key_of[: len(segs)], key_of[len(segs):]
        if self.keys is not None:
            self.costs = TierCosts(self.keys, len(self.names))
            holds = holds_mask(reps)
            self.costs.add_many(reps["server"].map(self.pos).to_numpy(np.int64)[holds], self._rep_key[holds])

    # ---- construction -------------------------------------------------------------------------
    def _holders(self, servers: pd.DataFrame, reps: pd.DataFrame) -> dict[str, ServerHolder]:
        loads = reps[reps["load_type"].notna()]
        bytes_by = loads.groupby("server")["size_bytes"].sum().to_dict()
        counts = loads.groupby(["server", "load_type"]).size().to_dict()
        out = {}
        for r in servers.to_dict("records"):
            name = r["server"]
            out[name] = ServerHolder(
                server=name, tier=self.tier, max_size=int(r["max_size"]),
                projected_size=int(r["current_size"]) + int(bytes_by.get(name, 0)),
                decommissioning=bool(r["decommissioning"]), priority=int(r["priority"]),
                loads={t: int(counts.get((name, t), 0)) for t in QUEUE_TYPES})
        return out

    @property
    def changed(self) -> bool:
        """True once a mutator scheduled an operation or a top ``B`` was cached: the tier's rows
        must be written back (reading segments alone changes nothing)."""
        return self._dirty

    # ---- segments -----------------------------------------------------------------------------
    def has(self, idx: int) -> bool:
        """True when the tier has a segment row for ``idx``."""
        if idx in self._touched:
            return True
        i = np.searchsorted(self._seg_idx, idx)
        return bool(i < len(self._seg_idx) and self._seg_idx[i] == idx)

    def segment(self, idx: int) -> SegmentInTier:
        """The segment ``idx`` with its replicas in this tier (materialised once, then live).

        Raises ``KeyError`` if the tier has no row for it.
        """
        idx = int(idx)
        seg = self._touched.get(idx)
        if seg is not None:
            return seg
        i = int(np.searchsorted(self._seg_idx, idx))
        if i >= len(self._seg_idx) or self._seg_idx[i] != idx:
            raise KeyError(f"segment {idx} has no row in tier {self.tier}")
        c = self._seg_cols
        topb, required = c["topb"][i], _none_if_nan(c["required"][i])
        seg = SegmentInTier(idx, c["segment_id"][i], c["datasource"][i], int(c["start_ms"][i]), int(c["end_ms"][i]),
                            int(c["size_bytes"][i]), int(c["target"][i]), int(c["tier_pos"][i]), _none_if_nan(c["rule_kind"][i]),
                            None if required is None else int(required),
                            None if _none_if_nan(topb) is None else (topb.split(",") if topb else []),
                            int(self._seg_key[i]))
        lo, hi = np.searchsorted(self._rep_idx_sorted, [idx, idx + 1])
        r = self._rep_cols
        for j in range(lo, hi):
            load = r["load_type"][j]
            seg.replicas[r["server"][j]] = Replica(r["server"][j], bool(r["served"][j]), None if _none_if_nan(load) is None else load,
                                                   bool(r["dropping"][j]), bool(r["drop_dependent"][j]))
        self._touched[idx] = seg
        return seg

    def served_by(self, server: str) -> np.ndarray:
        """int64 (n,), ascending: the ``idx`` of the used segments that ``server`` serves with no
        drop of them (:attr:`Replica.serving`), against the live state."""
        r = self._rep_cols
        touched = np.fromiter(self._touched, dtype=np.int64, count=len(self._touched))
        rows = (r["server"] == server) & r["served"] & ~r["dropping"] & (self._rep_idx_sorted >= 0)
        rows &= ~np.isin(self._rep_idx_sorted, touched)
        live = [s.idx for s in self._touched.values() if server in s.replicas and s.replicas[server].serving]
        return np.unique(np.concatenate([self._rep_idx_sorted[rows], np.asarray(live, dtype=np.int64)]))

    def used_bytes(self) -> dict[str, int]:
        """Projected used bytes of every server of the tier: served + queued and scheduled loads −
        queued and scheduled drops (``projected_size`` less the replicas with a drop), against the
        live state (ALGORITHM.md "Balancing strategy ``avgShedder``", the score)."""
        r = self._rep_cols
        touched = np.fromiter(self._touched, dtype=np.int64, count=len(self._touched))
        gone = r["dropping"] & (r["served"] | pd.notna(r["load_type"])) & ~np.isin(self._rep_idx_sorted, touched)
        freed = pd.Series(r["size_bytes"][gone]).groupby(r["server"][gone]).sum().to_dict() if gone.any() else {}
        for s in self._touched.values():
            for rep in s.replicas.values():
                if rep.dropping and (rep.served or rep.load_type is not None):
                    freed[rep.server] = freed.get(rep.server, 0) + s.size_bytes
        return {name: holder.projected_size - int(freed.get(name, 0)) for name, holder in self.servers.items()}

    def segments_with_rule(self, kind: str) -> np.ndarray:
        """int64 (n,): the ``idx`` of the tier's segments whose applying rule is of ``kind``
        (``load``, ``drop``, ``broadcast``), ascending."""
        return self._seg_idx[self._seg_cols["rule_kind"] == kind]

    # ---- ranking ------------------------------------------------------------------------------
    def placement_costs(self, seg: SegmentInTier) -> np.ndarray:
        """float64 (S,), servers in name order: Druid's placement cost of ``seg`` on every server of
        the tier against the live projection (the segment itself left out where it is held)."""
        if self.costs is None:
            raise RuntimeError(f"tier {self.tier} was built without costs (ranked=False)")
        holders = np.zeros(len(self.names), dtype=bool)
        for r in seg.replicas.values():
            if r.holds:
                holders[self.pos[r.server]] = True
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
        """A :class:`~segment_balancer.planner.kernels.unload.DropCandidate` (decommissioning, cost,
        available bytes, server) for each of ``names``, costs against the live state."""
        costs = self.placement_costs(seg)
        return [DropCandidate(name in self.decommissioning, float(costs[self.pos[name]]),
                              int(self.servers[name].available_bytes), name) for name in names]

    def drop_order(self, seg: SegmentInTier, names: Iterable[str]) -> list[str]:
        """``names`` in the order to drop from: the ranking reversed (:func:`.cost.drop_key`)."""
        cands = self.drop_candidates(seg, names)
        return [c.server for c in sorted(cands, key=lambda c: drop_key(c.cost, c.available_bytes, c.server))]

    # ---- the mutators -------------------------------------------------------------------------
    def load(self, seg: SegmentInTier, server: str, queue_type: str, reason: str, order: tuple) -> Op:
        """Schedule a LOAD of ``seg`` on ``server``: the replica, the server's queue and size and
        the costs change at once. Raises ``ValueError`` if the server already serves or loads it."""
        rep = seg.replicas.get(server)
        if rep is not None and rep.present:
            raise ValueError(f"{server} already holds {seg.segment_id}")
        if rep is None:
            rep = seg.replicas[server] = Replica(server)
        rep.load_type = queue_type
        self._dirty = True
        holder = self.servers[server]
        holder.add_load(seg.size_bytes, queue_type)
        if self.costs is not None:
            self.costs.add(self.pos[server], seg.key, +1)
        op = Op("LOAD", seg.idx, seg.segment_id, seg.datasource, self.tier, server, seg.size_bytes, reason, order,
                queue_type=queue_type)
        self.sink.ops.append(op)
        return op

    def drop(self, seg: SegmentInTier, server: str, reason: str, order: tuple, dep_server: str | None = None) -> Op:
        """Schedule a DROP of ``seg`` from ``server`` (dependent on the LOAD on ``dep_server`` of
        the same step, if given). Raises ``ValueError`` if the server does not serve it."""
        self.count_drop(seg, server)
        seg.replicas[server].dependent = dep_server is not None
        self._dirty = True
        op = Op("DROP", seg.idx, seg.segment_id, seg.datasource, self.tier, server, seg.size_bytes, reason, order,
                dep_server=dep_server)
        self.sink.ops.append(op)
        return op

    def count_drop(self, seg: SegmentInTier, server: str) -> None:
        """Count in the live projection a DROP of ``seg`` from ``server`` that the stage emits
        elsewhere (stage 12's drops of drop-rule segments, listed by a join over the whole run
        state): the replica is marked dropping and leaves the server's costs; no op is recorded.
        Raises ``ValueError`` if the server does not serve it."""
        rep = seg.replicas.get(server)
        if rep is None or not rep.serving:
            raise ValueError(f"{server} does not serve {seg.segment_id} without a drop")
        held = rep.holds
        rep.dropping = True
        if self.costs is not None and held:
            self.costs.add(self.pos[server], seg.key, -1)

    def move(self, seg: SegmentInTier, source: str, dest: str, queue_type: str, reason: str, order: tuple
             ) -> tuple[Op, Op]:
        """Schedule a move of ``seg`` from ``source`` to ``dest`` (ALGORITHM.md "Moves and
        callbacks"): a LOAD on ``dest`` of ``queue_type`` (``decommissioning`` or ``balancing``)
        at ``order``, then a DROP from ``source`` that depends on it, ordered just after it (the
        last element of ``order`` plus 0.5). Raises ``ValueError`` as :meth:`load` and
        :meth:`drop` do."""
        load = self.load(seg, dest, queue_type, reason, order)
        drop = self.drop(seg, source, reason, order[:-1] + (order[-1] + 0.5,), dep_server=dest)
        return load, drop

    # ---- back to rows -------------------------------------------------------------------------
    def rows(self) -> pd.DataFrame:
        """The tier's state rows now (``STATE_COLUMNS``): the rows of untouched segments as read,
        touched segments rebuilt."""
        touched = np.fromiter(self._touched, dtype=np.int64, count=len(self._touched))
        keep_segs = ~np.isin(self._seg_idx, touched)
        keep_reps = ~np.isin(self._reps["idx"].to_numpy(np.int64), touched)
        new = []
        for s in self._touched.values():
            base = {"tier": self.tier, "idx": s.idx, "segment_id": s.segment_id, "datasource": s.datasource,
                    "start_ms": s.start_ms, "end_ms": s.end_ms, "size_bytes": s.size_bytes}
            new.append({**base, "kind": "segment", "target": s.target, "tier_pos": s.tier_pos, "rule_kind": s.rule_kind,
                        "required": s.required, "topb": None if s.topb is None else ",".join(s.topb)})
            for r in s.replicas.values():
                new.append({**base, "kind": "replica", "server": r.server, "served": r.served,
                            "load_type": r.load_type, "dropping": r.dropping, "drop_dependent": r.dependent})
        out = concat_columns([self._segs[keep_segs], self._reps[keep_reps], pd.DataFrame(new, columns=STATE_COLUMNS)],
                             STATE_COLUMNS)
        out["tier"] = self.tier
        return state_frame(out)


def concat_columns(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """``frames`` stacked into one frame of ``columns`` (object dtype; a column a frame lacks is
    null there), column by column with numpy: ``pandas.concat`` inspects every value of
    mostly-null object columns, seconds per 100k rows."""
    data = {}
    for col in columns:
        data[col] = np.concatenate([f[col].to_numpy(object) if col in f else np.full(len(f), None, dtype=object)
                                    for f in frames]) if frames else np.zeros(0, dtype=object)
    return pd.DataFrame(data, columns=columns)


def state_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with exactly ``STATE_COLUMNS`` and their pandas dtypes (nullable ints, object
    strings and arrays), as ``applyInPandas`` returns it to Spark."""
    out = frame.reindex(columns=STATE_COLUMNS)
    for col in ("idx", "start_ms", "end_ms", "size_bytes"):
        out[col] = out[col].astype("int64")
    for col in ("target", "tier_pos", "required"):
        out[col] = out[col].astype("Int32")
    for col in ("served", "dropping", "drop_dependent"):
        out[col] = out[col].astype("boolean")
    for col in ("tier", "kind", "segment_id", "datasource", "server", "load_type", "rule_kind", "topb"):
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out
