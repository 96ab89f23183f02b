"""The run state: what every tier projects after the operations scheduled so far, in one place.

Druid's ``ServerHolder`` + ``SegmentReplicaCount`` + ``SegmentStatusInTier`` for this run. On disk
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
  for none), ``dropping`` (bool: a queued or scheduled drop). ``idx`` is -1 for segments outside
  the used set (unused, overshadowed: they still weigh on costs and sizes until dropped).

``prepare`` writes the first state (:func:`initial_state`); every stage application reads it, runs
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

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from segment_balancer.planner.kernels.state import QUEUE_TYPES, Op, OpSink, ServerHolder
from segment_balancer.planner.kernels.unload import DropCandidate
from segment_balancer.planner.cost import drop_key
from segment_balancer.planner.livecost import IntervalKeys, TierCosts

STATE_FIELDS = [
    ("tier", "string"), ("kind", "string"), ("idx", "long"), ("segment_id", "string"), ("datasource", "string"),
    ("start_ms", "long"), ("end_ms", "long"), ("size_bytes", "long"), ("server", "string"), ("served", "boolean"),
    ("load_type", "string"), ("dropping", "boolean"), ("target", "int"), ("tier_pos", "int"),
    ("rule_kind", "string"), ("required", "int"), ("topb", "string"),
]
STATE_COLUMNS = [name for name, _ in STATE_FIELDS]
INITIAL_STATE_DIR = "state/00_prepare"
"""Where ``prepare`` writes the state at the start of the run, relative to the work directory."""
STATE_SCHEMA = ", ".join(f"`{n}` {t}" for n, t in STATE_FIELDS)
TIER_FILE_SCHEMA = ", ".join(f"`{n}` {t}" for n, t in STATE_FIELDS if n != "tier")
"""Spark schema of one tier's state directory (``tier=T/``): the state's columns but ``tier``,
which the directory names."""


@dataclass
class Replica:
    """One server's relation to a segment: ``served`` (the snapshot's), ``load_type`` (queued or
    scheduled load, or None), ``dropping`` (queued or scheduled drop)."""

    server: str
    served: bool = False
    load_type: str | None = None
    dropping: bool = False

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
                                                   bool(r["dropping"][j]))
        self._touched[idx] = seg
        return seg

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
        costs = self.placement_costs(seg)
        cand = np.flatnonzero(self.candidate_mask)
        order = np.lexsort((cand, -self.available()[cand], costs[cand]))
        return [self.names[int(cand[i])] for i in order]

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
        rep = seg.replicas.get(server)
        if rep is None or not rep.serving:
            raise ValueError(f"{server} does not serve {seg.segment_id} without a drop")
        held = rep.holds
        rep.dropping = True
        self._dirty = True
        if self.costs is not None and held:
            self.costs.add(self.pos[server], seg.key, -1)
        op = Op("DROP", seg.idx, seg.segment_id, seg.datasource, self.tier, server, seg.size_bytes, reason, order,
                dep_server=dep_server)
        self.sink.ops.append(op)
        return op

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
                            "load_type": r.load_type, "dropping": r.dropping})
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
    for col in ("served", "dropping"):
        out[col] = out[col].astype("boolean")
    for col in ("tier", "kind", "segment_id", "datasource", "server", "load_type", "rule_kind", "topb"):
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


# ---- one tier's state directory, read and written inside a Spark task ------------------------
_ARROW_TYPES = {"string": "string", "long": "int64", "int": "int32", "boolean": "bool_", "double": "float64"}


def arrow_schema(fields):
    """The pyarrow schema of ``fields`` ((name, Spark type) pairs)."""
    import pyarrow as pa

    return pa.schema([(n, getattr(pa, _ARROW_TYPES[t])()) for n, t in fields])


def tier_dir_name(tier: str) -> str:
    """``tier=<T>`` with ``T`` percent-escaped, as Spark names a partition directory."""
    from urllib.parse import quote

    return "tier=" + quote(tier, safe="")


def tier_of_dir(name: str) -> str:
    """Inverse of :func:`tier_dir_name` (also reads Spark's escaping)."""
    from urllib.parse import unquote

    return unquote(name[len("tier="):])


def initial_state_dirs(work) -> dict[str, str]:
    """``{tier: directory}`` (relative to the work directory ``work``, a local path) of the state
    ``prepare`` wrote (:data:`INITIAL_STATE_DIR`)."""
    from pathlib import Path

    root = Path(work) / INITIAL_STATE_DIR
    return {tier_of_dir(p.name): f"{INITIAL_STATE_DIR}/{p.name}"
            for p in sorted(root.iterdir()) if p.is_dir() and p.name.startswith("tier=")}


def read_tier_state(fs, path: str) -> pd.DataFrame:
    """One tier's state rows (pandas, ``STATE_COLUMNS`` but ``tier``) from the directory ``path``
    of filesystem ``fs`` (pyarrow), whoever wrote it (Spark's parts or :func:`write_tier_state`)."""
    import pyarrow.dataset as ds

    schema = arrow_schema([f for f in STATE_FIELDS if f[0] != "tier"])
    return ds.dataset(path, format="parquet", filesystem=fs, schema=schema).to_table().to_pandas()


def write_tier_state(fs, path: str, rows: pd.DataFrame) -> None:
    """Write one tier's state rows as the directory ``path`` (one parquet file), replacing it:
    written aside, then moved into place."""
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyarrow.fs import FileType

    fields = [f for f in STATE_FIELDS if f[0] != "tier"]
    frame = state_frame(rows)[[n for n, _ in fields]]
    table = pa.Table.from_pandas(frame, schema=arrow_schema(fields), preserve_index=False)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    fs.create_dir(tmp, recursive=True)
    pq.write_table(table, f"{tmp}/part-00000.parquet", filesystem=fs)
    if fs.get_file_info(path).type != FileType.NotFound:
        fs.delete_dir(path)
    fs.move(tmp, path)


# ---- Spark side -------------------------------------------------------------------------------
def initial_state(segments, replicas, targets, servers_pdf):
    """The state at the start of the run (Spark DataFrame of ``STATE_COLUMNS``) from the prepared
    tables: replica rows for every served or queued replica, segment rows for every used segment
    in every tier where it has a target or a replica, and for broadcast segments in every tier."""
    from pyspark.sql import functions as F

    attrs = segments.select("segment_id", "idx", "datasource", "start_ms", "end_ms", "size_bytes", "rule_kind", "required")
    rep = replicas.select(
        "tier", F.lit("replica").alias("kind"), F.coalesce("idx", F.lit(-1).cast("long")).alias("idx"), "segment_id",
        "server", "served", F.when(F.col("queued_load"), F.col("queue_type")).alias("load_type"),
        F.col("queued_drop").alias("dropping")).join(attrs.drop("idx", "rule_kind", "required"), "segment_id")
    used = attrs.filter("idx is not null")
    tiers = F.array(*[F.lit(t) for t in sorted(set(servers_pdf["tier"]))]) if len(servers_pdf) else F.array().cast("array<string>")
    pairs = (targets.select("idx", "tier").unionByName(replicas.filter("idx is not null").select("idx", "tier"))
             .unionByName(used.filter("rule_kind = 'broadcast'").select("idx", F.explode(tiers).alias("tier")))
             .distinct())
    seg = (pairs.join(targets.select("idx", "tier", "target", "tier_pos"), ["idx", "tier"], "left")
           .join(used, "idx")
           .select("tier", F.lit("segment").alias("kind"), "idx", "segment_id", "datasource", "start_ms", "end_ms",
                   "size_bytes", F.coalesce("target", F.lit(0)).alias("target"), F.coalesce("tier_pos", F.lit(0)).alias("tier_pos"),
                   "rule_kind", "required"))
    return conform(rep).unionByName(conform(seg))


def conform(df, fields=STATE_FIELDS):
    """``df`` with exactly the columns of ``fields`` ((name, Spark type) pairs, default the state's;
    missing ones null), cast to their types."""
    from pyspark.sql import functions as F

    cols = []
    for name, dtype in fields:
        col = F.col(name) if name in df.columns else F.lit(None)
        cols.append(col.cast(dtype).alias(name))
    return df.select(*cols)


def replica_tally(state):
    """Per (``idx``, ``tier``) of used load-rule segments in ``state`` (Spark DataFrame of
    ``STATE_COLUMNS``): ``target``, ``count`` (servers holding it: serving with no drop, or
    loading), ``loaded`` (servers serving it with no drop, counted where the target is above 0) and
    ``required`` (ALGORITHM.md "Terms", "Availability"); a Spark DataFrame."""
    from pyspark.sql import functions as F

    rep = state.filter("kind = 'replica' and idx >= 0")
    holds = ((F.col("served") | F.col("load_type").isNotNull()) & ~F.col("dropping")).cast("int")
    serving = (F.col("served") & ~F.col("dropping")).cast("int")
    per = rep.groupBy("idx", "tier").agg(F.sum(holds).alias("count"), F.sum(serving).alias("serving"))
    seg = state.filter("kind = 'segment' and rule_kind = 'load'").select("idx", "tier", "target", "required")
    return (seg.join(per, ["idx", "tier"], "left").fillna({"count": 0, "serving": 0})
            .withColumn("loaded", F.when(F.col("target") > 0, F.col("serving")).otherwise(0)).drop("serving"))


__all__ = ["STATE_COLUMNS", "STATE_SCHEMA", "TIER_FILE_SCHEMA", "Replica", "SegmentInTier", "TierRun", "concat_columns",
           "conform", "initial_state", "initial_state_dirs", "read_tier_state", "replica_tally",
           "state_frame", "tier_dir_name", "tier_of_dir", "write_tier_state"]
