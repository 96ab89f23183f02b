"""Stage 0 ``prepare``: the snapshot as tables, the used-segment index, targets, replication status,
the initial segment groups and the run state (``WORK/state/00_prepare``).

Task functions of :func:`~segment_balancer.spark.session.run_tasks` (Spark tasks, or calls on the
driver for a small run), with pyarrow, numpy and pandas; no Spark DataFrame job unless the replica
file is a one-line or pretty-printed JSON array, or a row is bad:

1. the join's inputs split per bucket of segment ids (:data:`BUCKETS`,
   :mod:`segment_balancer.spark.join_inputs`): the timeline table's segments (with the partial-load
   outcomes of their shard groups) by one task per part, the replica file's rows by one task per
   byte range; then one task numbers the used, visible segments newest first (end, start, id, all
   descending): the used-segment index;
2. one task per group of buckets joins the segments, their index, the replica rows and the
   load-queue entries: the replicas (served and queued), the segments that only replicas or queue
   entries name (unused, parsed from their ids), each segment's applying rule, the facts the
   summaries need (:func:`join_bucket`); each task writes its buckets' rows;
3. when some segment is overshadowed, one task finds those that wait for a segment overshadowing
   them to be served (``waiting``);
4. one task per partition numbers the other segments (their code: after the used ones, by bucket
   then id) and writes the prepared tables, the start state's rows and its part of the segment
   table; one task writes the segment table in code order;
5. one task per tier writes the tier's start state and measures its groups
   (:func:`segment_balancer.spark.status.write_start_state`).

A bad replica row (malformed, missing a field, an unknown server, a repeat) is refused by the
reference reader (``read_server_segments`` with its repeat check), which names the file, the row
and the value; an unlisted segment id that is no Druid segment id is refused naming where it is
first named. Nothing under ``prepared/`` is written before those checks pass.

Source: ALGORITHM.md "Inputs", "Terms", "Best servers"; seed 000 "Terminology".
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

from segment_balancer.common.files import remove_path, replace_path, write_json_atomic, write_parquet_atomic
from segment_balancer.druid import tier_aliases
from segment_balancer.druid.partial_load import EMPTY_LOAD_FINGERPRINT
from segment_balancer.druid.rules import rule_index_for
from segment_balancer.druid.snapshot import loader
from segment_balancer.druid.snapshot.segments import gzip_refusal, segments_path, server_segments_path
from segment_balancer.planner import groups as G
from segment_balancer.planner.config import CONFIG_FILE, OVERRIDES, load_config, unknown_keys
from segment_balancer.planner.runstate import FATES, NO_LOAD, NO_RULE, QUEUE_CODES, RULE_CODES
from segment_balancer.spark import join_inputs
from segment_balancer.spark.join_inputs import PARTIAL_COLUMNS, rules_of
from segment_balancer.spark.used_segments import TABLE_FILE, read_summary, segment_count

log = logging.getLogger(__name__)
STAGE_NUMBERS = range(1, 14)
BUCKETS = 64
"""Buckets of segment ids (:func:`~segment_balancer.spark.join_inputs.buckets_of`): the rows of one
segment meet in one task, and the segments outside the used set are numbered by bucket then id, so their codes
do not depend on how many partitions ran."""
ROWS_PER_TASK = 250_000
"""Segments per task of the join, on average at most: a larger snapshot gets more tasks than cores
(whole rounds of them, at most :data:`BUCKETS`), so a Python task holds a bounded part (half a
million segments with their replicas and index weigh some 1.5 GiB in pandas). At 1M on 2 cores,
four tasks took the job as long as two (22.2 s against 23.2 s)."""
SERVER_SEGMENTS_NAME = "server_segments.json"
"""How an unlisted segment's first naming row is reported (whatever the replica file's layout)."""
QUEUES_NAME = "load_queues.json"
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
SEGMENT_COLUMNS = [
    "idx",
    "code",
    "segment_id",
    "datasource",
    "start_ms",
    "end_ms",
    "version",
    "partition_num",
    "size_bytes",
    "used",
    "overshadowed",
    "rule_kind",
    "rule_idx",
    "required",
    "waiting",
    "listed",
    "shard_type",
    "line",
    "targets",
    *PARTIAL_COLUMNS,
]
"""``prepared/segments.parquet`` (docs/ARCHITECTURE.md)."""
REPLICA_COLUMNS = [
    "segment_id",
    "idx",
    "code",
    "server",
    "tier",
    "served",
    "queued_load",
    "queue_type",
    "requested_at_ms",
    "queued_drop",
]
"""``prepared/replicas.parquet`` (docs/ARCHITECTURE.md)."""


def load_small_inputs(snapshot: Path, overrides: dict | None, overrides_source: str = OVERRIDES):
    """Servers, queue entries, rules, effective config and snapshot meta (the small files), read and
    checked whole without Spark; the segment and replica files are only found here (Spark reads and
    checks them: ``used_segments``, :func:`prepare`).

    The CLI and the DAG's ``resolve_snapshot`` call it to refuse a bad snapshot before any Spark
    job; ``overrides_source`` names where ``overrides`` came from in errors (``--config FILE``).
    Returns ``(servers, all server names, queue entries, rules, EffectiveConfig, SnapshotMeta)``; the
    rules with the config's tier aliases expanded (``druid.tier_aliases.expand_rules``).
    Raises ``SnapshotError`` naming the file, the row or key, the offending value and what was expected.
    """
    segments_path(snapshot), server_segments_path(snapshot)  # both present (SnapshotError if not)
    servers, all_names = loader.load_all_servers(snapshot)
    queues = loader.load_load_queues(snapshot, {s.server for s in servers})
    config = load_config(snapshot, overrides, overrides_source)
    rules = tier_aliases.expand_rules(loader.load_rules(snapshot), config.historical_tier_aliases)
    meta = loader.load_snapshot_meta(snapshot)
    return servers, all_names, queues, rules, config, meta


def stage_limits(config) -> dict[str, dict]:
    """``{"1": {"queue_type", "limit", "total"}, …}`` for stages 1–13 (ALGORITHM.md "Load-queue limits")."""
    return {str(stage): config.limit(stage).to_meta() for stage in STAGE_NUMBERS}


def _replicants_total(rule) -> int:
    """Σ of a load rule's ``tieredReplicants``, absent tiers included (what ``required(s)``
    counts, ALGORITHM.md "Availability"); 0 for any other rule."""
    total = sum(int(n) for n in (rule.tiered_replicants or {}).values()) if rule.kind == "load" else 0
    return min(total, 2**31 - 1)  # an int column: each count is a Java int, their sum need not be


def _load_rule_tiers(rules: dict, datasources: list[str]):
    """``(key, tier, replicants, tier_pos)`` of every tier a load rule asks replicas of
    (``tieredReplicants`` above 0), per (datasource, rule index) of the flattened rule list (its
    own rules, then ``_default``), keyed ``"<datasource>\x00<rule_idx>"``, in the rule's tier order."""
    for ds in datasources:
        for i, rule in enumerate(rules.get(ds, []) + rules.get("_default", [])):
            if rule.kind != "load":
                continue
            for pos, (tier, n) in enumerate((rule.tiered_replicants or {}).items()):
                if int(n) > 0:
                    yield f"{ds}\x00{i}", tier, int(n), pos


def _rule_targets(rules: dict, datasources: list[str], tiers: set[str]) -> dict[str, list[tuple]]:
    """Per (datasource, rule index), keyed as :func:`_load_rule_tiers`: the load rule's ``(tier,
    target, tier_pos)`` for every tier of the snapshot it asks replicas of, in the rule's tier order."""
    out: dict[str, list[tuple]] = {}
    for key, tier, n, pos in _load_rule_tiers(rules, datasources):
        if tier in tiers:
            out.setdefault(key, []).append((tier, n, pos))
    return out


def _rule_absent_tiers(rules: dict, datasources: list[str], tiers: set[str]) -> dict[str, list[tuple]]:
    """Per (datasource, rule index), keyed as :func:`_load_rule_tiers`: the load rule's ``(tier,
    replicants)`` for every tier it asks replicas of that has no historical in the snapshot."""
    out: dict[str, list[tuple]] = {}
    for key, tier, n, _ in _load_rule_tiers(rules, datasources):
        if tier not in tiers:
            out.setdefault(key, []).append((tier, n))
    return out


def rule_facts(segs: pd.DataFrame, absent_per_rule: dict[str, list[tuple]]) -> dict:
    """What the summaries need of the rules of one partition's prepared segments (``segs``:
    :data:`SEGMENT_COLUMNS`): ``wanted`` (used segments whose load rule asks for some replica,
    tiers without historicals included: ``required`` > 0) and ``absent`` (``{tier: [segments,
    replicas]}``: per tier without historicals, the used segments whose rule asks replicas of it
    and how many; ``absent_per_rule`` as :func:`_rule_absent_tiers`)."""
    load = segs[segs["idx"].notna().to_numpy(bool) & (segs["rule_kind"] == "load").to_numpy(bool)]
    absent: dict[str, list[int]] = {}
    for (ds, rule_idx), n_segs in load.groupby(["datasource", "rule_idx"]).size().items():
        for tier, n in absent_per_rule.get(f"{ds}\x00{rule_idx}", ()):
            mine = absent.setdefault(tier, [0, 0])
            mine[0] += int(n_segs)
            mine[1] += int(n_segs) * n
    return {"wanted": int((load["required"].fillna(0).to_numpy(np.int64) > 0).sum()), "absent": absent}


def assign_rules(segs: pd.DataFrame, rules: dict, now_ms: int, given: pd.Series | None = None) -> pd.DataFrame:
    """``segs`` (``datasource``, ``start_ms``, ``end_ms``) plus ``rule_idx`` (int32, −1 when no
    rule applies: the first applying rule of the datasource's own rules then ``_default``), its
    ``rule_kind`` (str, None when none applies), ``replicants_total`` (:func:`_replicants_total`)
    and ``required`` (min(2, that), for a load rule), vectorised per datasource. ``given``: the rule
    index already decided for some rows (a nullable int Series aligned with ``segs``: the
    partial-load outcomes of :func:`~segment_balancer.spark.join_inputs.partial_frame`, which need
    each segment's shape), taken as it is where not null."""
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
            kind[hit], total[hit] = rule.kind, _replicants_total(rule)
    required = pd.array(np.where(kind == "load", np.minimum(2, total), 0), dtype="Int32")
    required[kind != "load"] = pd.NA
    return segs.assign(rule_idx=out, rule_kind=kind, replicants_total=total, required=required)


def _interval_only(rule):
    """A partial-load rule as the interval test alone decides it: what every segment of the
    datasource would get if it had no shape (used only where
    :func:`~segment_balancer.spark.join_inputs.partial_frame` decided nothing: segments that are
    unused or overshadowed, and none is loaded by a rule)."""
    import dataclasses

    from segment_balancer.druid.partial_load import CannotMatch

    return dataclasses.replace(rule, on_cannot_match=CannotMatch.FULL_LOAD)


def _queue_rows(queues) -> list[tuple]:
    """The queue entries of ``load_queues.json`` as rows (``server``, ``segment_id``,
    ``queued_load``, ``queue_type``, ``requested_at_ms``, ``queued_drop``, ``place``: where in the
    file, for error messages)."""
    rows, position = [], {}
    for q in queues:
        key = "segmentsToLoad" if q.action == "LOAD" else "segmentsToDrop"
        j = position[(q.server, key)] = position.get((q.server, key), -1) + 1
        rows.append(
            (
                q.server,
                q.segment_id,
                q.action == "LOAD",
                q.queue_type if q.action == "LOAD" else None,
                q.requested_at_ms,
                q.action == "DROP",
                f"server {q.server!r} {key}[{j}]",
            )
        )
    return rows


# ---- the join, per bucket of segment ids ---------------------------------------------------------
def _first_named(named: pd.DataFrame) -> pd.DataFrame:
    """Per segment id, where it is first named: the least (``file``, ``row``, ``place``), nulls first."""
    key = pd.DataFrame(
        {
            "f": named["file"],
            "rn": named["row"].notna(),
            "r": named["row"].fillna(0),
            "pn": named["place"].notna(),
            "p": named["place"].fillna(""),
        }
    )
    order = np.lexsort((key["p"], key["pn"], key["r"], key["rn"], key["f"]))
    return named.iloc[order].drop_duplicates("segment_id", keep="first")


def _unlisted(missing: pd.DataFrame, datasources: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    """The segments that only replicas or queue entries name, parsed from their ids
    (:func:`segment_balancer.druid.segment_id.parse_segment_id`), and the problems of the ids that
    are no Druid segment id (dicts for :func:`~segment_balancer.druid.snapshot.segments.refuse_unlisted`)."""
    from segment_balancer.druid.segment_id import parse_segment_id

    rows, problems = [], []
    for sid, file, row, place, bucket in zip(
        missing["segment_id"], missing["file"], missing["row"], missing["place"], missing["bucket"]
    ):
        parts = parse_segment_id(sid, datasources)
        if parts is None:
            problems.append(
                {
                    "file": file,
                    "row": None if pd.isna(row) else int(row),
                    "place": place,
                    "segment_id": sid,
                    "problem": f"segment {sid} is not in segments.jsonl and is not a Druid segment id "
                    "(dataSource_start_end_version[_partitionNum])",
                }
            )
            continue
        rows.append(
            {
                "segment_id": sid,
                "datasource": parts.datasource,
                "start_ms": parts.start_ms,
                "end_ms": parts.end_ms,
                "version": parts.version,
                "partition_num": parts.partition_num,
                "bucket": bucket,
            }
        )
    frame = pd.DataFrame(
        rows, columns=["segment_id", "datasource", "start_ms", "end_ms", "version", "partition_num", "bucket"]
    )
    return frame.assign(
        size_bytes=0,
        used=False,
        overshadowed=False,
        shard_type="unknown",
        listed=False,
        overshadowed_by=[[] for _ in range(len(frame))],
    ), problems


def _problem_key(p: dict) -> tuple:
    """The order Spark sorts unlisted problems in (file, row, place, id; nulls first)."""
    return (p["file"], p["row"] is not None, p["row"] or 0, p["place"] is not None, p["place"] or "", p["segment_id"])


def _summary() -> dict:
    """What a partition of the join reports, before it has seen a row."""
    return {
        "bad_replicas": False,
        "unlisted_problem": None,
        "per_server": {},
        "stale_n": 0,
        "stale": [],
        "norule_n": 0,
        "norule": [],
        "unlisted": {},
        "unlisted_ids": [],
        "n_used": 0,
        "datasources": [],
        "others": {},
    }


def join_bucket(pdf: pd.DataFrame, ctx: dict) -> tuple[dict, dict | None]:
    """The join of one partition's rows (:data:`JOIN_SCHEMA`, whole buckets): returns its summary
    and the frames to write (``segs``, ``reps``, ``pairs``, ``unserved``), or None when a row is bad
    or an unlisted id is no segment id (the summary says which). Segment ids are matched once, by
    hash (pyarrow's ``index_in``); everything after works on row positions.

    ``ctx``: ``rules``, ``now_ms``, ``datasources`` (of ``segments.jsonl``), ``tier_of``
    (``{historical: tier}``), ``stale_before_ms``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    side = pdf["side"].to_numpy()
    segs = pdf[side == 0][
        [
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
            "overshadowed_by",
            "line",
            "shard_type",
            "p_rule_idx",
            *PARTIAL_COLUMNS,
        ]
    ]
    index = pdf[side == 1]
    reps = pdf[side == 2][["segment_id", "row", "server", "bad", "bucket"]].reset_index(drop=True)
    queue = pdf[side == 3][
        ["segment_id", "server", "queued_load", "queue_type", "requested_at_ms", "queued_drop", "place", "bucket"]
    ].reset_index(drop=True)
    summary = _summary()
    if reps["bad"].eq(True).any():
        summary["bad_replicas"] = True
        return summary, None
    idx_of_line = pd.Series(index["idx"].to_numpy(), index=index["line"].to_numpy())
    segs = segs.assign(idx=segs["line"].map(idx_of_line).astype("Int64"), listed=True).reset_index(drop=True)
    seg_ids = pa.array(segs["segment_id"].to_numpy(object), pa.string())

    def positions(ids) -> np.ndarray:
        """Row of ``every`` of each id (-1: not among the listed segments)."""
        return np.asarray(pc.index_in(pa.array(ids, pa.string()), value_set=seg_ids).fill_null(-1), np.int64)

    rep_pos, q_pos = positions(reps["segment_id"].to_numpy(object)), positions(queue["segment_id"].to_numpy(object))
    n_rep, n_q = len(reps), len(queue)
    named = pd.DataFrame(
        {
            "segment_id": np.concatenate(
                [reps["segment_id"].to_numpy(object)[rep_pos < 0], queue["segment_id"].to_numpy(object)[q_pos < 0]]
            ),
            "file": np.array(
                [SERVER_SEGMENTS_NAME] * int((rep_pos < 0).sum()) + [QUEUES_NAME] * int((q_pos < 0).sum()), dtype=object
            ),
            "row": pd.array(list(reps["row"][rep_pos < 0]) + [None] * int((q_pos < 0).sum()), dtype="Int64"),
            "place": np.concatenate(
                [np.full(int((rep_pos < 0).sum()), None, object), queue["place"].to_numpy(object)[q_pos < 0]]
            ),
            "bucket": np.concatenate(
                [reps["bucket"].to_numpy(np.int64)[rep_pos < 0], queue["bucket"].to_numpy(np.int64)[q_pos < 0]]
            ),
        }
    )
    unlisted, problems = _unlisted(_first_named(named), ctx["datasources"])
    if problems:
        summary["unlisted_problem"] = min(problems, key=_problem_key)
        return summary, None
    every = pd.concat([segs, unlisted], ignore_index=True) if len(unlisted) else segs
    if len(unlisted):
        extra = pa.array(unlisted["segment_id"].to_numpy(object), pa.string())
        for pos, ids in ((rep_pos, reps["segment_id"]), (q_pos, queue["segment_id"])):
            miss = pos < 0
            pos[miss] = len(segs) + np.asarray(
                pc.index_in(pa.array(ids.to_numpy(object)[miss], pa.string()), value_set=extra).fill_null(-1), np.int64
            )
    every = assign_rules(every, ctx["rules"], ctx["now_ms"], every.get("p_rule_idx"))
    n = len(every)
    # a replica row repeats when its (server, segment) does: the reference reader names the repeat
    names = sorted(set(reps["server"]) | set(queue["server"]))
    code = {s: i for i, s in enumerate(names)}
    rep_server = reps["server"].map(code).to_numpy(np.int64)
    q_server = queue["server"].map(code).to_numpy(np.int64)
    rep_key, q_key = rep_server * n + rep_pos, q_server * n + q_pos
    if len(np.unique(rep_key)) != n_rep:
        summary["bad_replicas"] = True
        return summary, None
    # replicas: every served or queued (server, segment) of a historical, the queue entries joined
    # to the served rows as a full outer join on (server, segment) would
    served = pd.DataFrame({"key": rep_key, "served": True})
    queued = pd.DataFrame(
        {
            "key": q_key,
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
            requested_at_ms=pd.array([None] * n_rep, dtype="Int64"),
            queued_drop=False,
        )
    )
    key = rep["key"].to_numpy(np.int64)
    pos, srv = key % n, key // n
    server_names = np.array(names, dtype=object)[srv] if len(names) else np.zeros(0, object)
    tier = pd.Series(server_names).map(ctx["tier_of"]).to_numpy(object)
    mine = pd.notna(tier)
    pos, server_names, tier = pos[mine], server_names[mine], tier[mine]
    served_flag = rep["served"].eq(True).to_numpy(bool)[mine]
    queued_load = rep["queued_load"].eq(True).to_numpy(bool)[mine]
    queue_type = np.where(queued_load, rep["queue_type"].fillna("loading").to_numpy(object)[mine], None)
    requested = rep["requested_at_ms"].to_numpy(dtype=object, na_value=None)[mine]
    queued_drop = rep["queued_drop"].eq(True).to_numpy(bool)[mine]
    idx = every["idx"].to_numpy(dtype=np.float64, na_value=np.nan)
    size = every["size_bytes"].to_numpy(np.int64)
    kind = every["rule_kind"].to_numpy(object)
    ids = every["segment_id"].to_numpy(object)
    out_reps = pd.DataFrame(
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
    # waiting's inputs: the segments that need a replica and have none served (no drop queued)
    drop_keys = set(q_key[queue["queued_drop"].astype(bool).to_numpy()].tolist())
    serving = np.zeros(n, bool)
    serving[rep_pos[~np.isin(rep_key, np.fromiter(drop_keys, np.int64, len(drop_keys)))]] = True
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
    # the summaries' facts
    has_idx = ~np.isnan(idx)
    broadcast_used = has_idx[pos] & (kind[pos] == "broadcast")
    per_server = (
        pd.DataFrame(
            {
                "server": server_names,
                "queued_bytes": np.where(queued_load, size[pos], 0),
                "non_broadcast": (served_flag & ~broadcast_used).astype(np.int64),
            }
        )
        .groupby("server")
        .sum()
    )
    stale = out_reps[
        (out_reps["queued_load"] & (out_reps["requested_at_ms"] < ctx["stale_before_ms"])).fillna(False).astype(bool)
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
    summary.update(
        {
            "per_server": {s: (int(r["queued_bytes"]), int(r["non_broadcast"])) for s, r in per_server.iterrows()},
            "stale_n": len(stale),
            "stale": [
                {"segment_id": a, "server": b, "requested_at_ms": int(c)}
                for a, b, c in zip(stale["segment_id"][:5], stale["server"][:5], stale["requested_at_ms"][:5])
            ],
            "norule_n": len(norule),
            "norule": [{"idx": int(i), "segment_id": s} for i, s in zip(norule["idx"][:5], norule["segment_id"][:5])],
            "nothing_n": len(partial_nothing),
            "nothing": [
                {"idx": int(i), "segment_id": s}
                for i, s in zip(partial_nothing["idx"][:5], partial_nothing["segment_id"][:5])
            ],
            "unlisted": un_per_ds,
            "unlisted_ids": sorted(un["segment_id"])[:5],
            "n_used": int(has_idx.sum()),
            "datasources": sorted(set(every["datasource"])),
            "others": {int(b): int(c) for b, c in every.loc[~has_idx, "bucket"].value_counts().items()},
        }
    )
    keep = [
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
        "line",
        "shard_type",
        "idx",
        "listed",
        "rule_idx",
        "rule_kind",
        "required",
        *PARTIAL_COLUMNS,
    ]
    return summary, {"segs": every.reindex(columns=keep), "reps": out_reps, "pairs": pairs, "unserved": unserved}


def _to_pandas(table) -> pd.DataFrame:
    """The join's rows (pyarrow) as pandas with nullable integers and booleans: with pandas'
    defaults a null makes an int column float64, which rounds an instant such as Druid's eternity
    end, 2^62 − 1."""
    import pyarrow as pa

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
    import pyarrow as pa

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
    import pyarrow as pa

    types = {
        "byte": pa.int8(),
        "int": pa.int32(),
        "long": pa.int64(),
        "boolean": pa.bool_(),
        "string": pa.string(),
        "array<string>": pa.list_(pa.string()),
    }
    return pa.schema([(f.split()[0], types[f.split()[1]]) for f in JOIN_SCHEMA.split(", ")])


def _join_task(item: dict) -> dict:
    """Join task of one group of buckets (``item``: ``part``, ``offsets`` (``{replica
    range index: rows before it}``), ``queue`` (the load-queue rows of these buckets, tuples of
    :func:`_queue_rows`), ``inputs`` (the split passes' directory), ``out`` (the scratch directory of
    the frames), ``ctx``): the buckets' rows of every side (:mod:`segment_balancer.spark.join_inputs`),
    the replica rows numbered as in the file, joined by :func:`join_bucket`; its frames written as
    ``out/<frame>/part-<part>.parquet``. Returns the summary (``part`` set when frames were written)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyarrow.fs import FileSelector

    from segment_balancer.common.files import filesystem

    schema = _join_schema()
    fs, inputs = filesystem(item["inputs"])

    def conformed(table, **constant):
        n = table.num_rows
        cols = []
        for field in schema:
            if field.name in constant:
                cols.append(pa.array([constant[field.name]] * n, field.type))
            elif field.name in table.column_names:
                cols.append(table.column(field.name).cast(field.type))
            else:
                cols.append(pa.nulls(n, field.type))
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
    summary = _summary()
    if not tables:
        return summary
    summary, frames = join_bucket(_to_pandas(pa.concat_tables(tables)), item["ctx"])
    if frames is not None:
        fs, out = filesystem(item["out"])
        summary["part"] = part = item["part"]
        for name, frame in frames.items():
            fs.create_dir(f"{out}/{name}", recursive=True)
            pq.write_table(_typed(name, frame), f"{out}/{name}/part-{part:05d}.parquet", filesystem=fs)
    return summary


def _join_job(
    spark,
    snapshot: Path,
    work: Path,
    scratch: str,
    ctx: dict,
    queues: list[tuple],
    historicals: set[str],
    all_names: set[str],
) -> list[dict]:
    """Jobs 1 and 2 (module docstring): the split passes
    (:func:`~segment_balancer.spark.join_inputs.split_task`, then
    :func:`~segment_balancer.spark.join_inputs.index_task`) and one :func:`_join_task` per group of
    buckets, each writing its frames under ``scratch`` (relative to ``work``); all through
    :func:`~segment_balancer.spark.session.run_tasks`. Returns the join tasks' summaries (one
    summary with ``bad_replicas`` when a replica row needs the reference reader)."""
    from segment_balancer.common.spark_columns import parallelism
    from segment_balancer.druid.snapshot.segments import _array_one_object_per_line
    from segment_balancer.spark.session import run_tasks
    from segment_balancer.spark.used_segments import byte_ranges

    work = Path(work).absolute()
    work_uri = str(work)
    inputs = f"{work_uri}/{scratch}/inputs"
    cores = parallelism(spark)
    tasks = max(cores, min(BUCKETS, cores * -(-ctx["segments"] // (cores * ROWS_PER_TASK))))  # whole rounds
    partial = join_inputs.partial_datasources(ctx["rules"])
    items = [
        {
            "kind": "timeline",
            "index": i,
            "file": str(f),
            "partial": partial,
            "rules": ctx["rules"],
            "now_ms": ctx["now_ms"],
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
            return [{**_summary(), "bad_replicas": True}]
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
        return [{**_summary(), "bad_replicas": True}]
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
    import pyarrow as pa

    from segment_balancer.common.files import filesystem

    def write(batches):
        import pyarrow.compute as pc
        from pyspark import TaskContext

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
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import functions as F

    from segment_balancer.druid.snapshot.segment_lines import REPLICA_SCHEMA, parse_replica_lines
    from segment_balancer.druid.snapshot.segments import read_server_segments, replica_lines

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


def _refuse_replicas(spark, snapshot: Path, historicals: set[str], all_names: set[str]) -> None:
    """Raise the reference reader's refusal of the replica file (the first bad rows, repeats
    included), if it has one."""
    from segment_balancer.druid.snapshot.segments import first_problems, read_server_segments, refuse
    from segment_balancer.spark.session import collect_small

    rows, replica_file, word = read_server_segments(spark, snapshot, historicals, all_names)
    with gzip_refusal(replica_file):
        found = collect_small({"replicas": first_problems(rows, key="row")})
    refuse(replica_file, found["replicas"], word, key="row")


def _waiting_lines(spark, work: Path, scratch: str):
    """Job 3: the lines (of ``segments.jsonl``) of the overshadowed segments that wait: some
    segment overshadowing them needs a replica and is served nowhere (no drop queued). A BitMap;
    one task (:func:`~segment_balancer.spark.session.run_tasks`) reading the ``pairs`` and
    ``unserved`` frames of every bucket, only when some segment is overshadowed."""
    from pyroaring import BitMap

    from segment_balancer.common.files import filesystem
    from segment_balancer.spark.session import run_tasks

    if not any((work / scratch / "pairs").glob("*.parquet")):
        return BitMap()
    work_uri = str(Path(work).absolute())

    def task(_):
        import numpy as np
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        fs, base = filesystem(work_uri)
        pairs = pq.read_table(f"{base}/{scratch}/pairs", filesystem=fs, columns=["line", "by"])
        unserved = pq.read_table(f"{base}/{scratch}/unserved", filesystem=fs, columns=["by"]).column("by")
        lines = pairs.column("line").filter(pc.is_in(pairs.column("by"), value_set=pc.unique(unserved)))
        return BitMap(np.asarray(lines.to_numpy(), np.uint32)).serialize()

    return BitMap.deserialize(run_tasks(spark, [None], task)[0])


def finish_part(segs: pd.DataFrame, reps: pd.DataFrame, ctx: dict) -> dict[str, pd.DataFrame]:
    """One partition's prepared rows from its joined frames: every segment's ``code`` (used: its
    ``idx``; the others ``n_used`` + the bucket's offset + its rank by id in the bucket),
    ``waiting``, its ``fate``; the targets of the used load-rule segments; the start state's rows
    (:data:`~segment_balancer.spark.status.START_STATE_SCHEMA`) and the segment table's rows.

    ``ctx``: ``n_used``, ``offsets`` (``{bucket: first code}``), ``waiting`` (BitMap of lines),
    ``per_rule`` (``{"<datasource>\x00<rule_idx>": [(tier, target, tier_pos), …]}``), ``tiers``,
    ``server_code``, ``datasource_code``."""
    segs = segs.reset_index(drop=True)
    used = segs["idx"].notna().to_numpy()
    code = np.zeros(len(segs), np.int64)
    code[used] = segs.loc[used, "idx"].to_numpy(np.int64)
    others = segs.loc[~used, ["bucket", "segment_id"]].sort_values(["bucket", "segment_id"], kind="stable")
    rank = others.groupby("bucket").cumcount().to_numpy(np.int64)
    code[others.index.to_numpy()] = (
        ctx["n_used"] + np.array([ctx["offsets"][b] for b in others["bucket"]], np.int64) + rank
    )
    segs["code"] = code
    overshadowed = segs["overshadowed"].to_numpy(bool)
    waits = pd.array(
        np.isin(segs["line"].fillna(-1).to_numpy(np.int64), np.array(ctx["waiting"], dtype=np.int64)), dtype="boolean"
    )
    waits[~overshadowed] = pd.NA
    segs["waiting"] = waits
    kind = segs["rule_kind"].to_numpy(object)
    fate = np.where(
        used,
        np.where(kind == "drop", FATES.index("drop_rule"), 0),
        np.where(
            ~overshadowed,
            FATES.index("unused"),
            np.where(segs["waiting"].fillna(False).to_numpy(bool), FATES.index("waiting"), FATES.index("overshadowed")),
        ),
    )
    # targets: the used load-rule segments' tiers of the snapshot with a replicant count
    parts = []
    load = segs[used & (kind == "load")]
    targets_json = np.full(len(segs), None, dtype=object)
    load_rows = np.flatnonzero(used & (kind == "load"))
    for (ds, rule_idx), rows in load.groupby(["datasource", "rule_idx"]).indices.items():
        tiers_of = ctx["per_rule"].get(f"{ds}\x00{rule_idx}", ())
        if tiers_of:
            # {tier: target} in the rule's tier order, as explain shows it
            targets_json[load_rows[rows]] = json.dumps(
                {t: n for t, n, _ in sorted(tiers_of, key=lambda x: x[2])}, separators=(",", ":")
            )
            idx = load["idx"].to_numpy(np.int64)[rows]
            parts.append(
                pd.DataFrame(
                    {
                        "idx": np.repeat(idx, len(tiers_of)),
                        "tier": np.tile(np.array([t for t, _, _ in tiers_of], dtype=object), len(idx)),
                        "target": np.tile(np.array([n for _, n, _ in tiers_of]), len(idx)),
                        "tier_pos": np.tile(np.array([p for _, _, p in tiers_of]), len(idx)),
                    }
                )
            )
    targets = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame({"idx": [], "tier": pd.Series([], dtype=object), "target": [], "tier_pos": []})
    ).astype({"idx": "int64", "target": "int32", "tier_pos": "int32"})
    reps = reps.merge(segs[["segment_id", "code"]], on="segment_id")
    # the start state: a replica row per replica; a segment row per (used segment, tier) where it
    # has a target or a replica, and in every tier for a broadcast segment
    none = lambda n, dtype: pd.array([None] * n, dtype=dtype)  # noqa: E731
    rep_rows = pd.DataFrame(
        {
            "tier": reps["tier"],
            "kind": "replica",
            "code": reps["code"],
            "target": none(len(reps), "Int32"),
            "tier_pos": none(len(reps), "Int32"),
            "server": reps["server"].map(ctx["server_code"]).astype("Int32"),
            "load": pd.array(
                np.where(reps["queued_load"], reps["queue_type"].map(QUEUE_CODES).fillna(NO_LOAD), NO_LOAD),
                dtype="Int8",
            ),
            "served": reps["served"].astype("boolean"),
            "dropping": reps["queued_drop"].astype("boolean"),
        }
    )
    pairs = pd.concat(
        [f for f in (targets[["idx", "tier"]], reps.loc[reps["idx"].notna(), ["idx", "tier"]]) if len(f)]
        or [targets[["idx", "tier"]]],
        ignore_index=True,
    )
    broadcast = segs.loc[used & (kind == "broadcast"), "idx"].to_numpy(np.int64)
    if len(broadcast) and ctx["tiers"]:
        pairs = pd.concat(
            [
                pairs,
                pd.DataFrame(
                    {
                        "idx": np.repeat(broadcast, len(ctx["tiers"])),
                        "tier": np.tile(np.array(ctx["tiers"], dtype=object), len(broadcast)),
                    }
                ),
            ],
            ignore_index=True,
        )
    pairs = pairs.astype({"idx": "int64"}).drop_duplicates().merge(targets, on=["idx", "tier"], how="left")
    n = len(pairs)
    seg_rows = pd.DataFrame(
        {
            "tier": pairs["tier"],
            "kind": "segment",
            "code": pairs["idx"],
            "target": pairs["target"].fillna(0).astype("Int32"),
            "tier_pos": pairs["tier_pos"].fillna(0).astype("Int32"),
            "server": none(n, "Int32"),
            "served": none(n, "boolean"),
            "load": none(n, "Int8"),
            "dropping": none(n, "boolean"),
        }
    )
    table = pd.DataFrame(
        {
            "code": segs["code"],
            "segment_id": segs["segment_id"],
            "datasource": segs["datasource"].map(ctx["datasource_code"]),
            "start_ms": segs["start_ms"],
            "end_ms": segs["end_ms"],
            "size_bytes": segs["size_bytes"],
            "rule": segs["rule_kind"].map(RULE_CODES).fillna(NO_RULE),
            "required": segs["required"].fillna(-1),
            "fate": fate,
        }
    )
    segs["idx"] = segs["idx"].astype("Int64")
    segs["targets"] = targets_json
    reps["idx"] = reps["idx"].astype("Int64")
    return {
        "segments": segs[SEGMENT_COLUMNS],
        "replicas": reps[REPLICA_COLUMNS],
        "targets": targets,
        "state": pd.concat([f for f in (rep_rows, seg_rows) if len(f)] or [rep_rows], ignore_index=True),
        "table": table,
    }


def _part_schema(name: str):
    import pyarrow as pa

    from segment_balancer.spark.state_store import SEGMENT_TABLE_FIELDS, arrow_schema

    if name == "table":
        return arrow_schema(SEGMENT_TABLE_FIELDS + [("code", "long")])
    if name == "state":
        from segment_balancer.spark.status import START_STATE_SCHEMA

        return arrow_schema(START_STATE_SCHEMA)
    return pa.schema(
        list(
            {
                "segments": {
                    "idx": pa.int64(),
                    "code": pa.int64(),
                    "segment_id": pa.string(),
                    "datasource": pa.string(),
                    "start_ms": pa.int64(),
                    "end_ms": pa.int64(),
                    "version": pa.string(),
                    "partition_num": pa.int32(),
                    "size_bytes": pa.int64(),
                    "used": pa.bool_(),
                    "overshadowed": pa.bool_(),
                    "rule_kind": pa.string(),
                    "rule_idx": pa.int32(),
                    "required": pa.int32(),
                    "waiting": pa.bool_(),
                    "listed": pa.bool_(),
                    "shard_type": pa.string(),
                    "line": pa.int64(),
                    "targets": pa.string(),
                    **dict.fromkeys(PARTIAL_COLUMNS, pa.string()),
                },
                "replicas": {
                    "segment_id": pa.string(),
                    "idx": pa.int64(),
                    "code": pa.int64(),
                    "server": pa.string(),
                    "tier": pa.string(),
                    "served": pa.bool_(),
                    "queued_load": pa.bool_(),
                    "queue_type": pa.string(),
                    "requested_at_ms": pa.int64(),
                    "queued_drop": pa.bool_(),
                },
                "targets": {"idx": pa.int64(), "tier": pa.string(), "target": pa.int32(), "tier_pos": pa.int32()},
            }[name].items()
        )
    )


PART_DIRS = {
    "segments": "prepared/segments.parquet",
    "replicas": "prepared/replicas.parquet",
    "targets": "prepared/targets.parquet",
}
"""Where the prepared tables go (relative to the work directory): one part per partition."""


def _finish_job(spark, work: Path, scratch: str, parts: list[int], ctx: dict, aside: dict[str, str]) -> list[dict]:
    """Job 4: :func:`finish_part` on every partition's frames, one task each; the prepared tables'
    parts go under ``aside`` (``{table: directory relative to work}``, moved into place by the
    caller), the start state's rows and the segment table's rows under ``scratch``. Returns per
    task ``waiting``, the waiting segments' counts per datasource (segments, served replicas), and
    :func:`rule_facts` (``wanted``, ``absent``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from segment_balancer.common.files import filesystem
    from segment_balancer.spark.session import run_tasks
    from segment_balancer.spark.state_store import tier_dir_name

    work_uri = str(Path(work).absolute())

    def task(part):
        fs, base = filesystem(work_uri)
        read = lambda name: pq.read_table(f"{base}/{scratch}/{name}/part-{part:05d}.parquet", filesystem=fs).to_pandas()  # noqa: E731
        out = finish_part(read("segs"), read("reps"), ctx)
        state = out.pop("state")
        for name, frame in out.items():
            directory = aside[name] if name in aside else f"{scratch}/{name}-out"
            fs.create_dir(f"{base}/{directory}", recursive=True)
            pq.write_table(
                pa.Table.from_pandas(frame, schema=_part_schema(name), preserve_index=False),
                f"{base}/{directory}/part-{part:05d}.parquet",
                filesystem=fs,
            )
        for tier, rows in state.groupby("tier", sort=True):  # the start state's rows, by tier
            directory = f"{scratch}/state-out/{tier_dir_name(tier)}"
            fs.create_dir(f"{base}/{directory}", recursive=True)
            pq.write_table(
                pa.Table.from_pandas(rows, schema=_part_schema("state"), preserve_index=False),
                f"{base}/{directory}/part-{part:05d}.parquet",
                filesystem=fs,
            )
        segs, reps = out["segments"], out["replicas"]
        facts = rule_facts(segs, ctx["absent_per_rule"])
        waiting = segs[segs["waiting"].fillna(False).to_numpy(bool)]
        mine = reps[reps["served"] & reps["segment_id"].isin(waiting["segment_id"])]
        counts = {}
        for ds, part_segs in waiting.groupby("datasource"):
            hit = mine[mine["segment_id"].isin(part_segs["segment_id"])]
            if len(hit):
                counts[ds] = (int(hit["segment_id"].nunique()), int(len(hit)))
        return {"waiting": counts, **facts}

    return run_tasks(spark, parts, task)


def _write_segment_table(spark, work: Path, scratch: str, n_used: int, names: list[str]) -> None:
    """The run's segment table (:data:`~segment_balancer.spark.state_store.SEGMENT_TABLE_FILE`):
    the partitions' rows in code order, one Arrow IPC file written by one task
    (:func:`~segment_balancer.spark.session.run_tasks`)."""
    from segment_balancer.common.files import filesystem
    from segment_balancer.spark.session import run_tasks
    from segment_balancer.spark.state_store import SEGMENT_TABLE_FIELDS, SEGMENT_TABLE_FILE, arrow_schema, write_ipc

    schema = arrow_schema(SEGMENT_TABLE_FIELDS).with_metadata({"n_used": str(n_used), "datasources": json.dumps(names)})
    work_uri = str(Path(work).absolute())
    rows_dir = f"{scratch}/table-out"
    parts = any((work / rows_dir).glob("*.parquet"))

    def write(_):
        import pyarrow as pa
        import pyarrow.parquet as pq

        fs, base = filesystem(work_uri)
        if not parts:
            write_ipc(fs, f"{base}/{SEGMENT_TABLE_FILE}", schema.empty_table())
            return 0
        rows = pq.read_table(f"{base}/{rows_dir}", filesystem=fs).sort_by("code")
        write_ipc(
            fs,
            f"{base}/{SEGMENT_TABLE_FILE}",
            pa.Table.from_arrays([rows.column(n).cast(schema.field(n).type) for n in schema.names], schema=schema),
        )
        return rows.num_rows

    run_tasks(spark, [None], write)


def prepare(spark, snapshot: Path, work: Path, overrides: dict | None = None) -> dict:
    """Run stage 0: write ``WORK/prepared/*`` (see docs/ARCHITECTURE.md) and return the initial
    groups as the XCom dict ``{"stage": 0, "groups": {name: base64 roaring}}``.

    Six Spark jobs at most, whatever the size (module docstring). Raises :class:`SnapshotError` for
    any invalid input, before any prepared table is written.
    """
    import pyarrow.parquet as pq

    from segment_balancer.spark.state_store import INITIAL_STATE_DIR
    from segment_balancer.spark.status import write_start_state

    snapshot, work = Path(snapshot), Path(work)
    servers, all_names, queues, rules, config, smeta = load_small_inputs(snapshot, overrides)
    now_ms = smeta.snapshot_time_ms
    cfg = config.as_dict()
    decommissioning = set(config.decommissioning_nodes)
    historicals = {s.server for s in servers}
    tiers = sorted({s.tier for s in servers})
    log.info("snapshot %s: %d historical servers in %d tiers", smeta.snapshot_id, len(servers), len(tiers))

    if not (work / TABLE_FILE).exists():
        raise FileNotFoundError(f"{work / TABLE_FILE} is missing: run the used_segments application first")
    timeline_summary = read_summary(work)
    datasources = sorted(timeline_summary["per_datasource"])
    servers_pdf = _servers_frame(servers, decommissioning)
    limit_ms = config.segment_loading_max_ms
    ctx = {
        "rules": rules,
        "now_ms": now_ms,
        "datasources": datasources,
        "stale_before_ms": now_ms - limit_ms,
        "tier_of": dict(zip(servers_pdf["server"], servers_pdf["tier"])),
        "segments": segment_count(timeline_summary),
    }
    replica_file = server_segments_path(snapshot).name
    scratch = f"prepared.scratch-{uuid.uuid4().hex[:8]}"
    aside = {name: f"{path}.tmp-{uuid.uuid4().hex[:8]}" for name, path in PART_DIRS.items()}
    try:
        with gzip_refusal(replica_file):
            summaries = _join_job(spark, snapshot, work, scratch, ctx, _queue_rows(queues), historicals, set(all_names))
        if any(s["bad_replicas"] for s in summaries):
            _refuse_replicas(spark, snapshot, historicals, set(all_names))
            raise RuntimeError("the replica file has a bad row that its reference reader accepts")  # never: one check
        problems = [s["unlisted_problem"] for s in summaries if s["unlisted_problem"]]
        if problems:
            from segment_balancer.druid.snapshot.segments import refuse_unlisted

            refuse_unlisted([min(problems, key=_problem_key)])
        waiting = _waiting_lines(spark, work, scratch)
        n_used = sum(s["n_used"] for s in summaries)
        names = sorted(set().union(*(s["datasources"] for s in summaries)))
        offsets, at = {}, 0
        counts = {}
        for s in summaries:
            for b, n in s["others"].items():
                counts[b] = counts.get(b, 0) + n
        for b in range(BUCKETS):
            offsets[b], at = at, at + counts.get(b, 0)
        fctx = {
            "n_used": n_used,
            "offsets": offsets,
            "waiting": waiting,
            "tiers": tiers,
            "per_rule": _rule_targets(rules, datasources, set(tiers)),
            "absent_per_rule": _rule_absent_tiers(rules, datasources, set(tiers)),
            "server_code": {name: i for i, name in enumerate(servers_pdf["server"])},
            "datasource_code": {n: i for i, n in enumerate(names)},
        }
        finished = _finish_job(spark, work, scratch, sorted(s["part"] for s in summaries if "part" in s), fctx, aside)
        for name, path in PART_DIRS.items():
            (work / aside[name]).mkdir(parents=True, exist_ok=True)
            if not any((work / aside[name]).glob("*.parquet")):  # no segment, replica or queue entry
                pq.write_table(_part_schema(name).empty_table(), work / aside[name] / "part-00000.parquet")
            replace_path(work / aside[name], work / path)
        _write_segment_table(spark, work, scratch, n_used, names)
        sums: dict[str, list[int]] = {}
        for s in summaries:
            for srv, (q, nb) in s.get("per_server", {}).items():
                mine = sums.setdefault(srv, [0, 0])
                mine[0], mine[1] = mine[0] + q, mine[1] + nb
        per_server = [{"server": srv, "queued_bytes": q, "non_broadcast": nb} for srv, (q, nb) in sums.items()]
        servers_pdf = _mark_broadcast_only(servers_pdf, per_server)
        write_parquet_atomic(servers_pdf, work / "prepared" / "servers.parquet")
        # The run state every stage starts from (no start-of-run ranking: a segment is ranked in a
        # tier when a stage first considers it there, ALGORITHM.md "Best servers"), and its groups.
        wanted = sum(f["wanted"] for f in finished)
        status = write_start_state(spark, work, INITIAL_STATE_DIR, f"{scratch}/state-out", servers_pdf, wanted)
    except BaseException:
        for path in aside.values():
            remove_path(work / path)
        raise
    finally:
        remove_path(work / scratch)
    groups, counts = status.groups, status.counts
    found = {
        "stale_n": [{"n": sum(s["stale_n"] for s in summaries)}],
        "stale": sorted((r for s in summaries for r in s["stale"]), key=lambda r: (r["requested_at_ms"], r["server"]))[
            :5
        ],
        "norule_n": [{"n": sum(s["norule_n"] for s in summaries)}],
        "norule": sorted((r for s in summaries for r in s["norule"]), key=lambda r: r["idx"])[:5],
        "nothing_n": [{"n": sum(s.get("nothing_n", 0) for s in summaries)}],
        "nothing": sorted((r for s in summaries for r in s.get("nothing", [])), key=lambda r: r["idx"])[:5],
    }
    unlisted: dict = {}
    for s in summaries:
        for ds, v in s["unlisted"].items():
            mine = unlisted.setdefault(ds, {"datasource": ds, "segments": 0, "replicas": 0})
            mine["segments"] += v["segments"]
            mine["replicas"] += v["replicas"]
    found["unlisted"] = list(unlisted.values())
    found["unlisted_ids"] = [{"segment_id": sid} for sid in sorted(x for s in summaries for x in s["unlisted_ids"])[:5]]
    waiting_per: dict = {}
    absent: dict[str, list[int]] = {}
    for part in finished:
        for tier, (n_seg, n_rep) in part["absent"].items():
            mine = absent.setdefault(tier, [0, 0])
            mine[0], mine[1] = mine[0] + n_seg, mine[1] + n_rep
        for ds, (n_seg, n_rep) in part["waiting"].items():
            a, b = waiting_per.get(ds, (0, 0))
            waiting_per[ds] = (a + n_seg, b + n_rep)
    found["waiting"] = [{"datasource": ds, "segments": a, "replicas": b} for ds, (a, b) in waiting_per.items()]

    meta = {
        "snapshot_id": smeta.snapshot_id,
        "cluster": smeta.cluster,
        "now_ms": now_ms,
        "config": cfg,
        "ignored_config": list(getattr(config, "ignored", [])),
        "stage_limits": stage_limits(config),
        "tiers": _tiers_meta(servers_pdf),
        "alerts": _alerts(rules, set(tiers), decommissioning, historicals, found, limit_ms),
        "status_counts": counts,
        "held": {server: list(n) for server, n in sorted(status.held.items())},
        "missing_replicas": dict(sorted(status.missing.items())),
        "wanted": wanted,
        "unavailable": status.unavailable,
        "absent_tiers": {t: {"segments": a, "replicas": b} for t, (a, b) in sorted(absent.items())},
        "timeline": timeline_summary,
        "unlisted": _unlisted_counts(found),
        "overshadowed_waiting": _waiting_counts(found),
    }
    meta["balancer_state"] = previous_balancer_state(work, config, smeta)
    if meta["balancer_state"]["warning"]:
        meta["alerts"].append({"kind": "balancer_state", "message": meta["balancer_state"]["warning"]})
    for entry in unknown_keys(config):
        meta["alerts"].append(
            {
                "kind": "unknown_config_key",
                "key": entry["key"],
                "message": f"{CONFIG_FILE} has key {entry['key']!r}: {entry['note']}",
            }
        )
    if meta["timeline"]["flag_disagreements"]:
        n = meta["timeline"]["flag_disagreements"]
        meta["alerts"].append(
            {
                "kind": "overshadowed_flag_disagrees",
                "count": n,
                "examples": meta["timeline"]["flag_examples"],
                "message": f"the input's overshadowed flag disagrees with the computed timeline for {n} segments; "
                "the timeline wins",
            }
        )
    write_json_atomic(meta, work / "prepared" / "meta.json")
    return {"stage": 0, "groups": G.encode_all(groups)}


def previous_balancer_state(work: Path, config, smeta) -> dict:
    """What the run starts from of the previous plan's balancer state (``WORK/`` +
    :data:`~segment_balancer.planner.balancer_state.PREVIOUS_FILE`, when the run was given one),
    for ``meta.json``: ``counts`` (``{tier: [[server, server, hit_count], …]}``) and ``warning`` (why
    a state given was not used, for the report; None). Read
    only for the ``avgShedder`` strategy, the one that uses it; never raises."""
    from segment_balancer.planner.balancer_state import counts_to_json, read_previous

    if config.balancer_strategy != "avgShedder":
        return {"counts": {}, "warning": None}
    counts, warning = read_previous(work, smeta.cluster, smeta.snapshot_time_ms)
    if warning:
        log.warning("balancer state: %s", warning)
    return {"counts": counts_to_json(counts), "warning": warning}


SERVER_DTYPES = {
    "server": "object",
    "host": "object",
    "tier": "object",
    "max_size": "int64",
    "current_size": "int64",
    "priority": "int32",
    "storage_size": "int64",
    "decommissioning": "bool",
}
"""The columns of ``prepared/servers.parquet`` that the snapshot gives (``_mark_broadcast_only``
adds the others) and their dtypes, whether or not the snapshot has a historical."""


def _servers_frame(servers, decommissioning: set[str]):
    import pandas as pd

    rows = [
        (
            s.server,
            s.host,
            s.tier,
            int(s.max_size),
            int(s.current_size),
            int(s.priority),
            int(s.storage_size or 0),
            s.server in decommissioning,
        )
        for s in sorted(servers, key=lambda s: s.server)
    ]
    return pd.DataFrame(rows, columns=list(SERVER_DTYPES)).astype(SERVER_DTYPES)


def _mark_broadcast_only(servers_pdf, per_server: list[dict]):
    """Adds ``projected_size`` (current + queued loads, bytes) and ``broadcast_only``."""
    import pandas as pd

    per = pd.DataFrame(per_server, columns=["server", "queued_bytes", "non_broadcast"]).astype(
        {"queued_bytes": "int64", "non_broadcast": "int64"}
    )  # typed even when empty: no object-dtype fillna
    out = servers_pdf.merge(per, on="server", how="left").fillna({"queued_bytes": 0, "non_broadcast": 0})
    out["projected_size"] = (out["current_size"] + out["queued_bytes"]).astype("int64")
    out["broadcast_only"] = out["decommissioning"] & (out["non_broadcast"] == 0)
    return out.drop(columns=["queued_bytes", "non_broadcast"])


def _tiers_meta(servers_pdf) -> dict:
    out = {}
    for tier, part in servers_pdf.groupby("tier"):
        out[tier] = {
            "priority": int(part.priority.max()),
            "servers": int(len(part)),
            "candidates": int((~part.decommissioning).sum()),
        }
    return out


def _alerts(rules, tiers, decommissioning, historicals, found: dict, limit_ms: int) -> list[dict]:
    """No historical at all, unknown tiers, unknown decommissioning nodes, loads queued too long,
    segments no rule matches (``found``: the answers of :func:`_alert_queries`)."""
    alerts = []
    if not historicals:
        alerts.append(
            {
                "kind": "no_historical",
                "message": "servers.json lists no historical server: nothing can be loaded, and every used "
                "segment a load rule asks replicas of is unavailable",
            }
        )
    named = {t for lst in rules.values() for r in lst for t in (r.tiered_replicants or {})}
    for tier in sorted(named - tiers):
        alerts.append(
            {
                "kind": "unknown_tier",
                "message": f"tier {tier} is named by a rule but has no historical server; left out of every sum",
            }
        )
    for name in sorted(decommissioning - historicals):
        alerts.append(
            {
                "kind": "unknown_decommissioning_node",
                "message": f"decommissioningNodes names {name}, which is not a historical server",
            }
        )
    n_stale = found["stale_n"][0]["n"]
    if n_stale:
        ex = [
            f"{r['segment_id']} on {r['server']}"
            for r in sorted(found["stale"], key=lambda r: (r["requested_at_ms"], r["server"]))
        ]
        alerts.append(
            {
                "kind": "load_queued_too_long",
                "count": n_stale,
                "message": f"{n_stale} loads queued longer than {limit_ms // 1000} s",
                "examples": ex,
            }
        )
    n_norule = found["norule_n"][0]["n"]
    if n_norule:
        ex = [r["segment_id"] for r in sorted(found["norule"], key=lambda r: r["idx"])]
        alerts.append(
            {
                "kind": "no_rule_matches",
                "count": n_norule,
                "message": f"{n_norule} used segments match no rule; left where they are",
                "examples": ex,
            }
        )
    n_nothing = found.get("nothing_n", [{"n": 0}])[0]["n"]
    if n_nothing:
        alerts.append(
            {
                "kind": "partial_load_of_nothing",
                "count": n_nothing,
                "message": (
                    f"{n_nothing} used segments' partial-load rule loads none of their cluster groups, and "
                    "none of their shard group's; left where they are, as Druid 38 leaves them"
                ),
                "examples": [r["segment_id"] for r in found["nothing"]],
            }
        )
    return alerts


def _unlisted_counts(found: dict) -> dict:
    """Unused segments still served or queued (stage 12 drops their replicas): how many, how many
    replicas, per datasource, a few examples (from :func:`_unlisted_queries`)."""
    per = {
        r["datasource"]: {"segments": int(r["segments"]), "served_replicas": int(r.get("replicas") or 0)}
        for r in sorted(found["unlisted"], key=lambda r: r["datasource"])
    }
    return {
        "segments": sum(v["segments"] for v in per.values()),
        "served_replicas": sum(v["served_replicas"] for v in per.values()),
        "per_datasource": per,
        "examples": sorted(r["segment_id"] for r in found["unlisted_ids"]),
    }


def _waiting_counts(found: dict) -> dict:
    """Overshadowed segments that stage 12 keeps (from :func:`_waiting_queries`)."""
    per = {
        r["datasource"]: {"segments": int(r["segments"]), "served_replicas": int(r["replicas"])}
        for r in sorted(found["waiting"], key=lambda r: r["datasource"])
    }
    return {
        "segments": sum(v["segments"] for v in per.values()),
        "served_replicas": sum(v["served_replicas"] for v in per.values()),
        "per_datasource": per,
    }
