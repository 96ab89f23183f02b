"""Stage 0's join: per bucket of segment ids, the segments meet their index, replicas and queue entries.

Jobs 1 and 2 of ``prepare`` (:func:`run_join`), task functions of
:func:`~segment_balancer.spark.session.run_tasks` with pyarrow, numpy and pandas:

1. the join's inputs split per bucket (:mod:`segment_balancer.spark.join_inputs`): the timeline
   table's segments by one task per part, the replica file's rows by one task per byte range
   (a one-line or pretty-printed JSON array larger than
   :data:`~segment_balancer.spark.join_inputs.DOCUMENT_BYTES_AT_MOST`: Spark's multi-line JSON
   reader, :func:`_split_replicas_by_spark`); then the used-segment index by one task;
2. one task per group of buckets (:func:`_join_task`) joins the segments, their index, the replica
   rows and the load-queue entries (:func:`join_bucket`): the replicas (served and queued), the
   segments that only replicas or queue entries name (unused, parsed from their ids), each
   segment's applying rule (:func:`assign_rules`), what the waiting overshadowed segments are found
   from, and what ``meta.json`` reports (:class:`JoinSummary`); it writes its frames
   (:class:`JoinFrames`) under the scratch directory.

A bad replica row (malformed, missing a field, an unknown server, a repeat) makes a task's summary
``bad_replicas``: the reference reader names it (:func:`refuse_replicas`). An unlisted segment id
that is no Druid segment id is the summary's ``unlisted_problem``.

Source: ALGORITHM.md "Inputs", "Terms"; Druid ``sys.server_segments``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector
from pyspark import TaskContext
from pyspark.sql import functions as F

from segment_balancer.common.files import filesystem
from segment_balancer.common.spark_columns import parallelism
from segment_balancer.druid.partial_load import EMPTY_LOAD_FINGERPRINT, CannotMatch
from segment_balancer.druid.rules import Rule, rule_index_for
from segment_balancer.druid.snapshot.files import server_segments_path
from segment_balancer.druid.snapshot.segment_lines import REPLICA_SCHEMA, parse_replica_lines
from segment_balancer.druid.snapshot.segments import (
    _array_one_object_per_line,
    first_problems,
    gzip_refusal,
    read_server_segments,
    refuse,
    replica_lines,
)
from segment_balancer.druid.snapshot.unlisted import (
    QUEUES_NAME,
    SERVER_SEGMENTS_NAME,
    first_named,
    parse_unlisted,
    problem_key,
)
from segment_balancer.planner.small_inputs import replicants_total
from segment_balancer.spark import join_inputs
from segment_balancer.spark.join_inputs import PARTIAL_COLUMNS, rules_of
from segment_balancer.spark.session import collect_small, run_tasks
from segment_balancer.spark.used_segments import TABLE_FILE, byte_ranges

BUCKETS = 64
"""Buckets of segment ids (:func:`~segment_balancer.spark.join_inputs.buckets_of`): the rows of one
segment meet in one task, and the segments outside the used set are numbered by bucket then id, so their codes
do not depend on how many partitions ran."""
ROWS_PER_TASK = 250_000
"""Segments per task of the join, on average at most: a larger snapshot gets more tasks than cores
(whole rounds of them, at most :data:`BUCKETS`), so a Python task holds a bounded part (half a
million segments with their replicas and index weigh some 1.5 GiB in pandas). At 1M on 2 cores,
four tasks took the job as long as two (22.2 s against 23.2 s)."""
JOIN_SCHEMA = (
    "side byte, segment_id string, bucket int, datasource string, start_ms long, end_ms long, version string, "
    "partition_num int, size_bytes long, used boolean, overshadowed boolean, overshadowed_by array<string>, "
    "line long, shard_type string, idx long, row long, server string, bad boolean, queued_load boolean, "
    "queue_type string, requested_at_ms long, queued_drop boolean, place string, p_rule_idx int, "
    "partial_matcher string, partial_type string, partial_parts string, partial_fingerprint string"
)
"""The rows the join meets per bucket, by ``side``: 0 a segment of the timeline table (with its
partial-load outcome, :func:`~segment_balancer.spark.join_inputs.partial_frame`, when a rule is a
partial-load rule), 1 its used-segment index, 2 a replica row, 3 a load-queue entry."""
SEGMENT_FIELDS = [
    "segment_id",
    "bucket",
    "datasource",
    "start_ms",
    "end_ms",
    "version",
    "partition_num",
    "size_bytes",
    "used",
    "overshadowed",
]
"""A segment's own columns, first on the segment side and in the joined segments alike."""
SEGMENT_SIDE_COLUMNS = [*SEGMENT_FIELDS, "overshadowed_by", "line", "shard_type", "p_rule_idx", *PARTIAL_COLUMNS]
"""The columns of the segment side (0) the join reads."""
QUEUE_SIDE_COLUMNS = [
    "segment_id",
    "server",
    "queued_load",
    "queue_type",
    "requested_at_ms",
    "queued_drop",
    "place",
    "bucket",
]
"""The columns of the queue side (3) the join reads; the row of
:func:`~segment_balancer.planner.small_inputs.queue_rows` plus its bucket."""
JOINED_SEGMENT_COLUMNS = [
    *SEGMENT_FIELDS,
    "line",
    "shard_type",
    "idx",
    "listed",
    "rule_idx",
    "rule_kind",
    "required",
    *PARTIAL_COLUMNS,
]
"""The columns of :attr:`JoinFrames.segs`."""


@dataclass(frozen=True)
class JoinContext:
    """What every join task is handed besides its rows (pickled into each task)."""

    rules: dict[str, list[Rule]]
    """``{datasource or "_default": [rule, …]}``, tier aliases expanded."""
    now_ms: int
    """The snapshot time, epoch ms UTC: rules' periods end there."""
    datasources: list[str]
    """Every datasource of ``segments.jsonl``, sorted (an unlisted id is split at a known one first)."""
    tier_of: dict[str, str]
    """``{historical: tier}``: a replica of any other server is left out."""
    stale_before_ms: int
    """Epoch ms: a load requested before it is queued too long (an alert)."""
    segments: int
    """Rows of ``segments.jsonl``: how many join tasks run (:data:`ROWS_PER_TASK`)."""


@dataclass
class JoinSummary:
    """What one join task reports to the driver (small: counts and at most 5 examples of each)."""

    bad_replicas: bool = False
    """A replica row is bad (malformed, unknown server, a repeat): nothing was written, the reference
    reader names the row."""
    unlisted_problem: dict | None = None
    """The first unlisted id of the task that is no Druid segment id
    (:func:`~segment_balancer.druid.snapshot.unlisted.parse_unlisted`'s problem): nothing was written."""
    per_server: dict[str, tuple[int, int]] = field(default_factory=dict)
    """``{server: (queued load bytes, replicas served that are not of a used broadcast segment)}``
    per historical with a replica in the task's buckets."""
    stale_n: int = 0
    """Loads queued since before :attr:`JoinContext.stale_before_ms` (count)."""
    stale: list[dict] = field(default_factory=list)
    """The first 5 of them, oldest request first: ``{"segment_id", "server", "requested_at_ms"}``."""
    norule_n: int = 0
    """Used segments no rule matches (count)."""
    norule: list[dict] = field(default_factory=list)
    """The first 5 of them by index: ``{"idx": int, "segment_id": str}``."""
    nothing_n: int = 0
    """Used segments whose partial-load rule loads nothing of them (count)."""
    nothing: list[dict] = field(default_factory=list)
    """The first 5 of them by index: ``{"idx": int, "segment_id": str}``."""
    unlisted: dict[str, dict[str, int]] = field(default_factory=dict)
    """``{datasource: {"segments": int, "replicas": int (served)}}`` of the unlisted segments."""
    unlisted_ids: list[str] = field(default_factory=list)
    """The 5 least unlisted ids."""
    n_used: int = 0
    """Used segments (with an index) in the task's buckets."""
    datasources: list[str] = field(default_factory=list)
    """The datasources of the task's segments, listed or not, sorted."""
    others: dict[int, int] = field(default_factory=dict)
    """``{bucket: segments without an index}``: how the others' codes are numbered."""
    part: int | None = None
    """The task's part when it wrote its frames (``<frame>/part-<part>.parquet``); None otherwise."""


@dataclass(frozen=True)
class JoinFrames:
    """What one join task writes (pandas; :func:`_typed` gives each its Arrow types)."""

    segs: pd.DataFrame
    """Every segment of the buckets, listed or not (:data:`JOINED_SEGMENT_COLUMNS`): ``idx`` Int64
    (null when not used), ``rule_idx`` int32 (−1: no rule), ``rule_kind`` str or None,
    ``required`` Int32."""
    reps: pd.DataFrame
    """Every replica, served or queued, of a historical: ``segment_id``, ``idx`` Int64, ``server``,
    ``tier`` (str), ``served``, ``queued_load`` (bool), ``queue_type`` (str or None),
    ``requested_at_ms`` (Int64 epoch ms), ``queued_drop`` (bool)."""
    pairs: pd.DataFrame
    """``line`` (int64: an overshadowed segment's line in ``segments.jsonl``) and ``by`` (str: an id
    overshadowing it)."""
    unserved: pd.DataFrame
    """``by`` (str): the used, visible segments that need a replica and are served nowhere (no drop
    queued)."""

    def named(self) -> dict[str, pd.DataFrame]:
        """``{scratch directory name: frame}``."""
        return {"segs": self.segs, "reps": self.reps, "pairs": self.pairs, "unserved": self.unserved}


# ---- rules -----------------------------------------------------------------------------------------
def assign_rules(segs: pd.DataFrame, rules: dict, now_ms: int, given: pd.Series | None = None) -> pd.DataFrame:
    """``segs`` (``datasource``, ``start_ms``, ``end_ms``) plus ``rule_idx`` (int32, −1 when no
    rule applies: the first applying rule of the datasource's own rules then ``_default``), its
    ``rule_kind`` (str, None when none applies), ``replicants_total``
    (:func:`~segment_balancer.planner.small_inputs.replicants_total`) and ``required`` (min(2,
    that), for a load rule), vectorised per datasource. ``given``: the rule index already decided
    for some rows (a nullable int Series aligned with ``segs``: the partial-load outcomes of
    :func:`~segment_balancer.spark.join_inputs.partial_frame`, which need each segment's shape),
    taken as it is where not null."""
    of = rules_of(rules)
    n = len(segs)
    out = np.full(n, -1, dtype=np.int32)
    kind = np.full(n, None, dtype=object)
    total = np.zeros(n, dtype=np.int32)
    decided = None if given is None else given.notna().to_numpy()
    for ds, rows in segs.groupby("datasource", sort=False).indices.items():
        lst = of(ds)
        if decided is not None and decided[rows].all():
            out[rows] = given.to_numpy()[rows].astype(np.int32)
        else:
            out[rows] = rule_index_for(
                [r if r.is_interval_based else _interval_only(r) for r in lst],
                segs["start_ms"].to_numpy(np.int64)[rows],
                segs["end_ms"].to_numpy(np.int64)[rows],
                now_ms,
            )
            if decided is not None:
                mine = rows[decided[rows]]
                out[mine] = given.to_numpy()[mine].astype(np.int32)
        for i, rule in enumerate(lst):
            hit = rows[out[rows] == i]
            kind[hit], total[hit] = rule.kind, replicants_total(rule)
    required = pd.array(np.where(kind == "load", np.minimum(2, total), 0), dtype="Int32")
    required[kind != "load"] = pd.NA
    return segs.assign(rule_idx=out, rule_kind=kind, replicants_total=total, required=required)


def _interval_only(rule):
    """A partial-load rule as the interval test alone decides it: what every segment of the
    datasource would get if it had no shape (used only where
    :func:`~segment_balancer.spark.join_inputs.partial_frame` decided nothing: segments that are
    unused or overshadowed, and none is loaded by a rule)."""
    return dataclasses.replace(rule, on_cannot_match=CannotMatch.FULL_LOAD)


# ---- the join of one group of buckets, step by step -------------------------------------------------
def _index_in(ids: np.ndarray, values) -> np.ndarray:
    """Position of each of ``ids`` (object array of str) in ``values`` (a pyarrow string array),
    −1 where absent (int64); matched by hash (pyarrow's ``index_in``)."""
    return np.asarray(pc.index_in(pa.array(ids, pa.string()), value_set=values).fill_null(-1), np.int64)


def _sides(pdf: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``pdf`` (:data:`JOIN_SCHEMA`) apart by side: the segments (:data:`SEGMENT_SIDE_COLUMNS`,
    each with its ``idx`` from the index side matched by ``line``, Int64, and ``listed`` True), the
    replica rows (``segment_id``, ``row``, ``server``, ``bad``, ``bucket``) and the queue entries
    (:data:`QUEUE_SIDE_COLUMNS`), each numbered from 0."""
    side = pdf["side"].to_numpy()
    segs = pdf[side == 0][SEGMENT_SIDE_COLUMNS]
    index = pdf[side == 1]
    reps = pdf[side == 2][["segment_id", "row", "server", "bad", "bucket"]].reset_index(drop=True)
    queue = pdf[side == 3][QUEUE_SIDE_COLUMNS].reset_index(drop=True)
    idx_of_line = pd.Series(index["idx"].to_numpy(), index=index["line"].to_numpy())
    segs = segs.assign(idx=segs["line"].map(idx_of_line).astype("Int64"), listed=True).reset_index(drop=True)
    return segs, reps, queue


def _named_elsewhere(reps: pd.DataFrame, queue: pd.DataFrame, rep_pos: np.ndarray, q_pos: np.ndarray) -> pd.DataFrame:
    """The ids replica rows and queue entries name that are no listed segment (position −1), each
    with where it is named: ``segment_id``, ``file`` (:data:`SERVER_SEGMENTS_NAME` or
    :data:`QUEUES_NAME`), ``row`` (Int64, the replica row; null for a queue entry), ``place`` (the
    queue entry's; None for a replica row), ``bucket``."""
    rep_miss, q_miss = rep_pos < 0, q_pos < 0
    return pd.DataFrame(
        {
            "segment_id": np.concatenate(
                [reps["segment_id"].to_numpy(object)[rep_miss], queue["segment_id"].to_numpy(object)[q_miss]]
            ),
            "file": np.array(
                [SERVER_SEGMENTS_NAME] * int(rep_miss.sum()) + [QUEUES_NAME] * int(q_miss.sum()), dtype=object
            ),
            "row": pd.array(list(reps["row"][rep_miss]) + [None] * int(q_miss.sum()), dtype="Int64"),
            "place": np.concatenate(
                [np.full(int(rep_miss.sum()), None, object), queue["place"].to_numpy(object)[q_miss]]
            ),
            "bucket": np.concatenate(
                [reps["bucket"].to_numpy(np.int64)[rep_miss], queue["bucket"].to_numpy(np.int64)[q_miss]]
            ),
        }
    )


def _with_unlisted(
    segs: pd.DataFrame,
    unlisted: pd.DataFrame,
    reps: pd.DataFrame,
    queue: pd.DataFrame,
    rep_pos: np.ndarray,
    q_pos: np.ndarray,
) -> pd.DataFrame:
    """Every segment (the listed ones, then the unlisted); ``rep_pos`` and ``q_pos`` (each row's
    segment position, −1 where unlisted) are pointed at the unlisted rows in place."""
    if not len(unlisted):
        return segs

    every = pd.concat([segs, unlisted], ignore_index=True)
    extra = pa.array(unlisted["segment_id"].to_numpy(object), pa.string())
    for pos, ids in ((rep_pos, reps["segment_id"]), (q_pos, queue["segment_id"])):
        miss = pos < 0
        pos[miss] = len(segs) + _index_in(ids.to_numpy(object)[miss], extra)
    return every


class _Keys(NamedTuple):
    """Replica rows and queue entries keyed by (server, segment) as ``server code × n + position``."""

    names: list[str]
    """The servers the rows and entries name, sorted: a server's code is its position."""
    rep_key: np.ndarray
    """int64 key of each replica row."""
    q_key: np.ndarray
    """int64 key of each queue entry."""


def _keys(reps: pd.DataFrame, queue: pd.DataFrame, rep_pos: np.ndarray, q_pos: np.ndarray, n: int) -> _Keys:
    """:class:`_Keys` of the rows; ``n``: the segments."""
    names = sorted(set(reps["server"]) | set(queue["server"]))
    code = {s: i for i, s in enumerate(names)}
    rep_server = reps["server"].map(code).to_numpy(np.int64)
    q_server = queue["server"].map(code).to_numpy(np.int64)
    return _Keys(names, rep_server * n + rep_pos, q_server * n + q_pos)


class _Replicas(NamedTuple):
    """The replicas of historicals, served or queued, as rows of :attr:`JoinFrames.reps` and the
    arrays the summary counts from (one entry per replica)."""

    frame: pd.DataFrame
    pos: np.ndarray
    """int64: the replica's segment position."""
    server: np.ndarray
    """object: the server name."""
    served: np.ndarray
    """bool: served (a replica row)."""
    queued_load: np.ndarray
    """bool: a load queued."""


def _replicas(every: pd.DataFrame, queue: pd.DataFrame, keys: _Keys, tier_of: dict[str, str]) -> _Replicas:
    """Every served or queued (server, segment) of a historical: the queue entries joined to the
    served rows as a full outer join on (server, segment) would. A queued load's ``queue_type`` is
    ``loading`` when the entry names none."""
    n, n_q = len(every), len(queue)
    served = pd.DataFrame({"key": keys.rep_key, "served": True})
    queued = pd.DataFrame(
        {
            "key": keys.q_key,
            "queued_load": queue["queued_load"].astype(bool).to_numpy(),
            "queue_type": queue["queue_type"].to_numpy(object),
            "requested_at_ms": queue["requested_at_ms"].astype("Int64"),
            "queued_drop": queue["queued_drop"].astype(bool).to_numpy(),
        }
    )
    rep = (
        served.merge(queued, on="key", how="outer", sort=False)
        if n_q
        else served.assign(
            queued_load=False,
            queue_type=None,
            requested_at_ms=pd.array([None] * len(keys.rep_key), dtype="Int64"),
            queued_drop=False,
        )
    )
    key = rep["key"].to_numpy(np.int64)
    pos, srv = key % n, key // n
    server_names = np.array(keys.names, dtype=object)[srv] if len(keys.names) else np.zeros(0, object)
    tier = pd.Series(server_names).map(tier_of).to_numpy(object)
    mine = pd.notna(tier)
    pos, server_names, tier = pos[mine], server_names[mine], tier[mine]
    served_flag = rep["served"].eq(True).to_numpy(bool)[mine]
    queued_load = rep["queued_load"].eq(True).to_numpy(bool)[mine]
    queue_type = np.where(queued_load, rep["queue_type"].fillna("loading").to_numpy(object)[mine], None)
    requested = rep["requested_at_ms"].to_numpy(dtype=object, na_value=None)[mine]
    queued_drop = rep["queued_drop"].eq(True).to_numpy(bool)[mine]
    idx = every["idx"].to_numpy(dtype=np.float64, na_value=np.nan)
    ids = every["segment_id"].to_numpy(object)
    frame = pd.DataFrame(
        {
            "segment_id": ids[pos],
            "idx": pd.array(np.where(np.isnan(idx[pos]), None, idx[pos]), dtype="Int64"),
            "server": server_names,
            "tier": tier,
            "served": served_flag,
            "queued_load": queued_load,
            "queue_type": queue_type,
            "requested_at_ms": pd.array(requested, dtype="Int64"),
            "queued_drop": queued_drop,
        }
    )
    return _Replicas(frame, pos, server_names, served_flag, queued_load)


def _waiting_inputs(
    every: pd.DataFrame, queue: pd.DataFrame, rep_pos: np.ndarray, keys: _Keys
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:attr:`JoinFrames.pairs` and :attr:`JoinFrames.unserved`: what the waiting overshadowed
    segments are found from (``prepare``'s job 3)."""
    n = len(every)
    kind = every["rule_kind"].to_numpy(object)
    ids = every["segment_id"].to_numpy(object)
    drop_keys = set(keys.q_key[queue["queued_drop"].astype(bool).to_numpy()].tolist())
    serving = np.zeros(n, bool)
    serving[rep_pos[~np.isin(keys.rep_key, np.fromiter(drop_keys, np.int64, len(drop_keys)))]] = True
    needs = (
        every["used"].to_numpy(bool)
        & ~every["overshadowed"].to_numpy(bool)
        & ((kind == "broadcast") | ((kind == "load") & (every["replicants_total"].to_numpy() > 0)))
    )
    unserved = pd.DataFrame({"by": ids[needs & ~serving]})
    over = np.flatnonzero(every["overshadowed"].to_numpy(bool))
    lists = every["overshadowed_by"].to_numpy(object)[over]
    pairs = pd.DataFrame(
        {
            "line": np.repeat(
                every["line"].to_numpy(dtype=np.float64, na_value=np.nan)[over].astype(np.int64),
                [len(x) for x in lists],
            ),
            "by": [b for x in lists for b in x],
        }
    )
    return pairs, unserved


def _summarize(every: pd.DataFrame, replicas: _Replicas, stale_before_ms: int) -> JoinSummary:
    """The :class:`JoinSummary` of a join that wrote its frames."""
    idx = every["idx"].to_numpy(dtype=np.float64, na_value=np.nan)
    size = every["size_bytes"].to_numpy(np.int64)
    kind = every["rule_kind"].to_numpy(object)
    out_reps, pos = replicas.frame, replicas.pos
    has_idx = ~np.isnan(idx)
    broadcast_used = has_idx[pos] & (kind[pos] == "broadcast")
    per_server = (
        pd.DataFrame(
            {
                "server": replicas.server,
                "queued_bytes": np.where(replicas.queued_load, size[pos], 0),
                "non_broadcast": (replicas.served & ~broadcast_used).astype(np.int64),
            }
        )
        .groupby("server")
        .sum()
    )
    stale = out_reps[
        (out_reps["queued_load"] & (out_reps["requested_at_ms"] < stale_before_ms)).fillna(False).astype(bool)
    ].sort_values(["requested_at_ms", "server"], kind="stable")
    nothing = every["partial_fingerprint"].eq(EMPTY_LOAD_FINGERPRINT).fillna(False).to_numpy(bool)
    norule = every[has_idx & pd.isna(kind) & ~nothing].sort_values("idx")
    partial_nothing = every[has_idx & pd.isna(kind) & nothing].sort_values("idx")
    un = every[~every["listed"].to_numpy(bool)]
    un_reps = out_reps[out_reps["segment_id"].isin(un["segment_id"])].groupby("segment_id")["served"].sum()
    un_per_ds = {
        ds: {"segments": int(len(part)), "replicas": int(un_reps.reindex(part["segment_id"]).fillna(0).sum())}
        for ds, part in un.groupby("datasource")
    }
    return JoinSummary(
        per_server={s: (int(r["queued_bytes"]), int(r["non_broadcast"])) for s, r in per_server.iterrows()},
        stale_n=len(stale),
        stale=[
            {"segment_id": a, "server": b, "requested_at_ms": int(c)}
            for a, b, c in zip(stale["segment_id"][:5], stale["server"][:5], stale["requested_at_ms"][:5])
        ],
        norule_n=len(norule),
        norule=[{"idx": int(i), "segment_id": s} for i, s in zip(norule["idx"][:5], norule["segment_id"][:5])],
        nothing_n=len(partial_nothing),
        nothing=[
            {"idx": int(i), "segment_id": s}
            for i, s in zip(partial_nothing["idx"][:5], partial_nothing["segment_id"][:5])
        ],
        unlisted=un_per_ds,
        unlisted_ids=sorted(un["segment_id"])[:5],
        n_used=int(has_idx.sum()),
        datasources=sorted(set(every["datasource"])),
        others={int(b): int(c) for b, c in every.loc[~has_idx, "bucket"].value_counts().items()},
    )


def join_bucket(pdf: pd.DataFrame, ctx: JoinContext) -> tuple[JoinSummary, JoinFrames | None]:
    """The join of one partition's rows (:data:`JOIN_SCHEMA`, whole buckets): returns its summary
    and the frames to write, or None when a row is bad or an unlisted id is no segment id (the
    summary says which). Segment ids are matched once, by hash (pyarrow's ``index_in``);
    everything after works on row positions."""
    segs, reps, queue = _sides(pdf)
    if reps["bad"].eq(True).any():
        return JoinSummary(bad_replicas=True), None
    seg_ids = pa.array(segs["segment_id"].to_numpy(object), pa.string())
    rep_pos = _index_in(reps["segment_id"].to_numpy(object), seg_ids)
    q_pos = _index_in(queue["segment_id"].to_numpy(object), seg_ids)
    unlisted, problems = parse_unlisted(first_named(_named_elsewhere(reps, queue, rep_pos, q_pos)), ctx.datasources)
    if problems:
        return JoinSummary(unlisted_problem=min(problems, key=problem_key)), None
    every = _with_unlisted(segs, unlisted, reps, queue, rep_pos, q_pos)
    every = assign_rules(every, ctx.rules, ctx.now_ms, every.get("p_rule_idx"))
    keys = _keys(reps, queue, rep_pos, q_pos, len(every))
    if len(np.unique(keys.rep_key)) != len(reps):  # a (server, segment) repeats: the reference reader names it
        return JoinSummary(bad_replicas=True), None
    replicas = _replicas(every, queue, keys, ctx.tier_of)
    pairs, unserved = _waiting_inputs(every, queue, rep_pos, keys)
    summary = _summarize(every, replicas, ctx.stale_before_ms)
    frames = JoinFrames(every.reindex(columns=JOINED_SEGMENT_COLUMNS), replicas.frame, pairs, unserved)
    return summary, frames


# ---- the join's tasks and jobs ---------------------------------------------------------------------
def _to_pandas(table) -> pd.DataFrame:
    """The join's rows (pyarrow) as pandas with nullable integers and booleans: with pandas'
    defaults a null makes an int column float64, which rounds an instant such as Druid's eternity
    end, 2^62 − 1."""
    types = {
        pa.int8(): pd.Int8Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
    }
    return table.to_pandas(types_mapper=types.get)


def _typed(name: str, frame: pd.DataFrame):
    """``frame`` as the pyarrow Table of scratch file ``name`` (explicit types: a frame of one
    bucket may hold only nulls in a column)."""
    types = {
        "segs": {
            "segment_id": pa.string(),
            "bucket": pa.int32(),
            "datasource": pa.string(),
            "start_ms": pa.int64(),
            "end_ms": pa.int64(),
            "version": pa.string(),
            "partition_num": pa.int32(),
            "size_bytes": pa.int64(),
            "used": pa.bool_(),
            "overshadowed": pa.bool_(),
            "line": pa.int64(),
            "shard_type": pa.string(),
            "idx": pa.int64(),
            "listed": pa.bool_(),
            "rule_idx": pa.int32(),
            "rule_kind": pa.string(),
            "required": pa.int32(),
            **dict.fromkeys(PARTIAL_COLUMNS, pa.string()),
        },
        "reps": {
            "segment_id": pa.string(),
            "idx": pa.int64(),
            "server": pa.string(),
            "tier": pa.string(),
            "served": pa.bool_(),
            "queued_load": pa.bool_(),
            "queue_type": pa.string(),
            "requested_at_ms": pa.int64(),
            "queued_drop": pa.bool_(),
        },
        "pairs": {"line": pa.int64(), "by": pa.string()},
        "unserved": {"by": pa.string()},
    }[name]
    schema = pa.schema(list(types.items()))
    return pa.Table.from_pandas(frame.reindex(columns=list(types)), schema=schema, preserve_index=False)


def _join_schema():
    """:data:`JOIN_SCHEMA` as a pyarrow schema (Spark's ``byte``, ``int``, ``long``, ``boolean``,
    ``string``, ``array<string>`` as Arrow's)."""
    types = {
        "byte": pa.int8(),
        "int": pa.int32(),
        "long": pa.int64(),
        "boolean": pa.bool_(),
        "string": pa.string(),
        "array<string>": pa.list_(pa.string()),
    }
    return pa.schema([(f.split()[0], types[f.split()[1]]) for f in JOIN_SCHEMA.split(", ")])


def _join_task(item: dict) -> JoinSummary:
    """Join task of one group of buckets (``item``: ``part``, ``offsets`` (``{replica
    range index: rows before it}``), ``queue`` (the load-queue rows of these buckets, ``(row of
    :func:`~segment_balancer.planner.small_inputs.queue_rows`, bucket)``), ``inputs`` (the split
    passes' directory), ``out`` (the scratch directory of the frames), ``ctx`` (:class:`JoinContext`)):
    the buckets' rows of every side (:mod:`segment_balancer.spark.join_inputs`), the replica rows
    numbered as in the file, joined by :func:`join_bucket`; its frames written as
    ``out/<frame>/part-<part>.parquet``. Returns the summary (``part`` set when frames were written)."""
    schema = _join_schema()
    fs, inputs = filesystem(item["inputs"])

    def conformed(table, **constant):
        n = table.num_rows
        cols = []
        for field_ in schema:
            if field_.name in constant:
                cols.append(pa.array([constant[field_.name]] * n, field_.type))
            elif field_.name in table.column_names:
                cols.append(table.column(field_.name).cast(field_.type))
            else:
                cols.append(pa.nulls(n, field_.type))
        return pa.Table.from_arrays(cols, schema=schema)

    tables = []
    for side in (join_inputs.SEGS_DIR, join_inputs.INDEX_DIR, join_inputs.REPS_DIR):
        found = fs.get_file_info(FileSelector(join_inputs.part_dir(inputs, side, item["part"]), allow_not_found=True))
        for info in sorted(found, key=lambda i: i.path):
            table = pq.read_table(info.path, filesystem=fs)
            if side == join_inputs.REPS_DIR:
                name = info.base_name
                offset = item["offsets"].get(int(name[2:7]), 0) if name.startswith("r-") else 0
                table = table.set_column(table.column_names.index("row"), "row", pc.add(table.column("row"), offset))
                table = conformed(table, side=2, bad=False)
            tables.append(conformed(table))
    if tables:  # bucket by bucket, each bucket's sides and files in this order (the sort is stable)
        joined = pa.concat_tables(tables)
        tables = [joined.take(pc.sort_indices(joined, [("bucket", "ascending")]))]
    if item["queue"]:
        columns = ["server", "segment_id", "queued_load", "queue_type", "requested_at_ms", "queued_drop", "place"]
        queue = pa.Table.from_pylist([dict(zip(columns, row)) for row, _ in item["queue"]])
        tables.append(
            conformed(queue.append_column("bucket", pa.array([b for _, b in item["queue"]], pa.int32())), side=3)
        )
    if not tables:
        return JoinSummary()
    summary, frames = join_bucket(_to_pandas(pa.concat_tables(tables)), item["ctx"])
    if frames is not None:
        fs, out = filesystem(item["out"])
        summary.part = part = item["part"]
        for name, frame in frames.named().items():
            fs.create_dir(f"{out}/{name}", recursive=True)
            pq.write_table(_typed(name, frame), f"{out}/{name}/part-{part:05d}.parquet", filesystem=fs)
    return summary


def run_join(
    spark,
    snapshot: Path,
    work: Path,
    scratch: str,
    ctx: JoinContext,
    queues: list[tuple],
    historicals: set[str],
    all_names: set[str],
) -> list[JoinSummary]:
    """Jobs 1 and 2 (module docstring): the split passes
    (:func:`~segment_balancer.spark.join_inputs.split_task`, then
    :func:`~segment_balancer.spark.join_inputs.index_task`) and one :func:`_join_task` per group of
    buckets, each writing its frames under ``scratch`` (relative to ``work``); all through
    :func:`~segment_balancer.spark.session.run_tasks`. ``queues``: the rows of
    :func:`~segment_balancer.planner.small_inputs.queue_rows`. Returns the join tasks' summaries
    (one summary with ``bad_replicas`` when a replica row needs the reference reader)."""
    work = Path(work).absolute()
    work_uri = str(work)
    inputs = f"{work_uri}/{scratch}/inputs"
    cores = parallelism(spark)
    tasks = max(cores, min(BUCKETS, cores * -(-ctx.segments // (cores * ROWS_PER_TASK))))  # whole rounds
    partial = join_inputs.partial_datasources(ctx.rules)
    items = [
        {
            "kind": "timeline",
            "index": i,
            "file": str(f),
            "partial": partial,
            "rules": ctx.rules,
            "now_ms": ctx.now_ms,
            "scratch": inputs,
            "buckets": BUCKETS,
            "parts": tasks,
        }
        for i, f in enumerate(sorted((work / TABLE_FILE).glob("*.parquet")))
    ]
    path = server_segments_path(snapshot).absolute()
    gz = path.name.endswith(".gz")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        layout = "line"
    elif _array_one_object_per_line(path):
        layout = "array"
    else:
        layout = "document" if join_inputs.document_layout(path, gz) else None
    if layout is not None:
        found = byte_ranges(spark, path, work / scratch / "server_segments.plain", whole=layout == "document")
        if found is None:
            return [JoinSummary(bad_replicas=True)]
        path, gz, ranges = found
        known, hist = sorted(all_names), sorted(historicals)
        items += [
            {
                "kind": "replicas",
                "index": i,
                "path": str(path),
                "start": a,
                "end": b,
                "gzip": gz,
                "layout": layout,
                "historicals": hist,
                "known": known,
                "scratch": inputs,
                "buckets": BUCKETS,
                "parts": tasks,
            }
            for i, (a, b) in enumerate(ranges)
        ]
    split = run_tasks(spark, items, join_inputs.split_task)
    replicas = sorted((r for r in split if r["kind"] == "replicas"), key=lambda r: r["index"])
    if any(r["bad"] for r in replicas) or (
        layout is None and _split_replicas_by_spark(spark, snapshot, historicals, all_names, inputs, tasks)
    ):
        return [JoinSummary(bad_replicas=True)]
    offsets, at = {}, 0
    for r in replicas:
        offsets[r["index"]] = at
        at += r["lines"] if layout == "line" else r["rows"]
    run_tasks(spark, [{"scratch": inputs, "parts": tasks}], join_inputs.index_task)
    queue_buckets = join_inputs.buckets_of([q[1] for q in queues], BUCKETS)
    per_part: dict[int, list] = {}
    for row, b in zip(queues, queue_buckets.tolist()):
        per_part.setdefault(b % tasks, []).append((row, b))
    jobs = [
        {
            "part": p,
            "offsets": offsets,
            "queue": per_part.get(p, []),
            "inputs": inputs,
            "out": f"{work_uri}/{scratch}",
            "ctx": ctx,
        }
        for p in range(tasks)
    ]
    return run_tasks(spark, jobs, _join_task)


def _split_replicas_by_spark(
    spark, snapshot: Path, historicals: set[str], all_names: set[str], inputs: str, parts: int
) -> bool:
    """The rows of a replica file that is a one-line or pretty-printed JSON array (Spark's
    multi-line JSON reader, :func:`_replica_rows`), those of historicals written per join task (of
    ``parts``) as
    :func:`~segment_balancer.spark.join_inputs.split_task` writes the others' (numbered as in the
    file: no offset). One Spark job; returns whether a row is bad (the reference reader's turn)."""

    def write(batches):
        batches = list(batches)
        table = pa.Table.from_batches(batches) if batches else None
        bad = table is not None and table.num_rows > 0 and pc.any(table.column("bad")).as_py()
        if table is not None and not bad and table.num_rows:
            keep = table.select(["row", "server", "segment_id"])
            fs, base = filesystem(inputs)
            part = TaskContext.get().partitionId()
            join_inputs.write_per_part(
                fs,
                base,
                join_inputs.REPS_DIR,
                f"s-{part:05d}.parquet",
                keep,
                join_inputs.buckets_of(keep.column("segment_id"), BUCKETS),
                parts,
            )
        yield pa.RecordBatch.from_pydict({"bad": [bool(bad)]})

    rows = (
        _replica_rows(spark, snapshot, historicals, all_names)
        .filter("bad or historical")
        .select("row", "server", "segment_id", "bad")
    )
    return any(r["bad"] for r in rows.mapInArrow(write, "bad boolean").collect())


def _replica_rows(spark, snapshot: Path, historicals: set[str], all_names: set[str]):
    """The replica file's rows (:data:`~segment_balancer.druid.snapshot.segment_lines.REPLICA_FIELDS`):
    lines parsed with pyarrow per batch, or, for an array that is not one object per line, the
    reference reader's rows (``bad``: a problem)."""
    lines, _ = replica_lines(spark, server_segments_path(snapshot))
    if lines is None:
        rows, _, _ = read_server_segments(spark, snapshot, historicals, all_names, duplicates=False)
        return rows.select(
            "row",
            "server",
            "segment_id",
            F.coalesce("historical", F.lit(False)).alias("historical"),
            F.col("problem").isNotNull().alias("bad"),
        )
    hist, known = frozenset(historicals), frozenset(all_names)

    def parse(batches):
        for batch in batches:
            table = parse_replica_lines(
                np.asarray(batch.column(0).to_numpy(zero_copy_only=False), np.int64),
                batch.column(1).to_pylist(),
                hist,
                known,
            )
            yield from table.to_batches() or [pa.RecordBatch.from_pylist([], table.schema)]

    return lines.mapInArrow(parse, REPLICA_SCHEMA)


def refuse_replicas(spark, snapshot: Path, historicals: set[str], all_names: set[str]) -> None:
    """Raise the reference reader's refusal of the replica file (the first bad rows, repeats
    included; ``SnapshotError``), if it has one."""
    rows, replica_file, word = read_server_segments(spark, snapshot, historicals, all_names)
    with gzip_refusal(replica_file):
        found = collect_small({"replicas": first_problems(rows, key="row")})
    refuse(replica_file, found["replicas"], word, key="row")
