"""Stage 0 ``prepare``: the snapshot as tables, the used-segment index, targets, replication status,
the initial segment groups and the run state (``WORK/state/00_prepare``).

The application: which task functions of :func:`~segment_balancer.spark.session.run_tasks` (Spark
tasks, or calls on the driver for a small run) run in which job, and what they write. With pyarrow,
numpy and pandas; no Spark DataFrame job unless the replica file is a one-line or pretty-printed
JSON array, or a row is bad:

1. and 2. the join (:func:`segment_balancer.spark.join.run_join`): the join's inputs split per
   bucket of segment ids, the used-segment index (the used, visible segments numbered newest
   first: end, start, id, all descending), then one task per group of buckets joins the segments,
   their index, the replica rows and the load-queue entries and writes its buckets' rows under the
   scratch directory;
3. when some segment is overshadowed, one task finds those that wait for a segment overshadowing
   them to be served (``waiting``, :func:`_waiting_lines`);
4. one task per partition numbers the other segments (their code: after the used ones, by bucket
   then id, :func:`finish_part`) and writes the prepared tables, the start state's rows and its
   part of the segment table; one task writes the segment table in code order;
5. one task per tier writes the tier's start state and measures its groups
   (:func:`segment_balancer.spark.status.write_start_state`).

The small files are read and checked whole first, without Spark (``planner.small_inputs.read_small_inputs``;
:mod:`segment_balancer.planner.small_inputs`); ``meta.json``'s alerts and counts are
:mod:`segment_balancer.planner.snapshot_alerts`'.

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap

from segment_balancer.common.files import filesystem, remove_path, replace_path, write_json_atomic, write_parquet_atomic
from segment_balancer.druid.snapshot.files import server_segments_path
from segment_balancer.druid.snapshot.segments import gzip_refusal, refuse_unlisted
from segment_balancer.druid.snapshot.unlisted import problem_key
from segment_balancer.planner import groups as G
from segment_balancer.planner.config import CONFIG_FILE, unknown_keys
from segment_balancer.planner.runstate import FATES, NO_LOAD, NO_RULE, QUEUE_CODES, RULE_CODES
from segment_balancer.planner.small_inputs import (
    mark_broadcast_only,
    previous_balancer_state,
    queue_rows,
    read_small_inputs,
    rule_absent_tiers,
    rule_key,
    rule_targets,
    servers_frame,
    stage_limits,
    tiers_meta,
)
from segment_balancer.planner.snapshot_alerts import Findings, alerts, unlisted_counts, waiting_counts
from segment_balancer.spark.join import BUCKETS, JoinContext, JoinSummary, refuse_replicas, run_join
from segment_balancer.spark.join_inputs import PARTIAL_COLUMNS
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.state_store import (
    INITIAL_STATE_DIR,
    SEGMENT_TABLE_FIELDS,
    SEGMENT_TABLE_FILE,
    arrow_schema,
    tier_dir_name,
    write_ipc,
)
from segment_balancer.spark.status import START_STATE_SCHEMA, write_start_state
from segment_balancer.spark.used_segments import TABLE_FILE, read_summary, segment_count

if TYPE_CHECKING:
    from pyroaring import BitMap

log = logging.getLogger(__name__)
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


@dataclass(frozen=True)
class FinishContext:
    """What every numbering task (:func:`finish_part`) is handed besides its partition's frames."""

    n_used: int
    """Used segments in all: the others' codes start there."""
    offsets: dict[int, int]
    """``{bucket: codes of the other segments in the buckets before it}``, for every bucket."""
    waiting: BitMap
    """The lines (of ``segments.jsonl``) of the overshadowed segments that wait."""
    tiers: list[str]
    """The snapshot's tiers, sorted: a used broadcast segment has a row in each."""
    per_rule: dict[str, list[tuple]]
    """:func:`~segment_balancer.planner.small_inputs.rule_targets`: per (datasource, rule index)
    key, the load rule's ``(tier, target, tier_pos)`` in the snapshot's tiers."""
    absent_per_rule: dict[str, list[tuple]]
    """:func:`~segment_balancer.planner.small_inputs.rule_absent_tiers`: per key, the load rule's
    ``(tier, replicants)`` of the tiers without a historical."""
    server_code: dict[str, int]
    """``{historical: its row of prepared/servers.parquet}``."""
    datasource_code: dict[str, int]
    """``{datasource: its position among the run's datasources, sorted}``."""


@dataclass(frozen=True)
class PartFacts:
    """What one numbering task reports to the driver."""

    waiting: dict[str, tuple[int, int]]
    """``{datasource: (waiting segments, their served replicas)}`` of the partition."""
    wanted: int
    """Used segments whose load rule asks for some replica, tiers without historicals included
    (``required`` > 0)."""
    absent: dict[str, list[int]]
    """``{tier without historicals: [used segments whose rule asks replicas of it, replicas]}``."""


def rule_facts(segs: pd.DataFrame, absent_per_rule: dict[str, list[tuple]]) -> tuple[int, dict[str, list[int]]]:
    """What the summaries need of the rules of one partition's prepared segments (``segs``:
    :data:`SEGMENT_COLUMNS`): ``(wanted, absent)`` as :class:`PartFacts` names them;
    ``absent_per_rule`` as :attr:`FinishContext.absent_per_rule`."""
    load = segs[segs["idx"].notna().to_numpy(bool) & (segs["rule_kind"] == "load").to_numpy(bool)]
    absent: dict[str, list[int]] = {}
    for (ds, rule_idx), n_segs in load.groupby(["datasource", "rule_idx"]).size().items():
        for tier, n in absent_per_rule.get(rule_key(ds, rule_idx), ()):
            mine = absent.setdefault(tier, [0, 0])
            mine[0] += int(n_segs)
            mine[1] += int(n_segs) * n
    return int((load["required"].fillna(0).to_numpy(np.int64) > 0).sum()), absent


def _waiting_lines(spark, work: Path, scratch: str):
    """Job 3: the lines (of ``segments.jsonl``) of the overshadowed segments that wait: some
    segment overshadowing them needs a replica and is served nowhere (no drop queued). A BitMap;
    one task (:func:`~segment_balancer.spark.session.run_tasks`) reading the ``pairs`` and
    ``unserved`` frames of every bucket, only when some segment is overshadowed."""
    if not any((work / scratch / "pairs").glob("*.parquet")):
        return BitMap()
    work_uri = str(Path(work).absolute())

    def task(_):
        fs, base = filesystem(work_uri)
        pairs = pq.read_table(f"{base}/{scratch}/pairs", filesystem=fs, columns=["line", "by"])
        unserved = pq.read_table(f"{base}/{scratch}/unserved", filesystem=fs, columns=["by"]).column("by")
        lines = pairs.column("line").filter(pc.is_in(pairs.column("by"), value_set=pc.unique(unserved)))
        return BitMap(np.asarray(lines.to_numpy(), np.uint32)).serialize()

    return BitMap.deserialize(run_tasks(spark, [None], task)[0])


def finish_part(segs: pd.DataFrame, reps: pd.DataFrame, ctx: FinishContext) -> dict[str, pd.DataFrame]:
    """One partition's prepared rows from its joined frames: every segment's ``code`` (used: its
    ``idx``; the others ``n_used`` + the bucket's offset + its rank by id in the bucket),
    ``waiting``, its ``fate``; the targets of the used load-rule segments; the start state's rows
    (:data:`~segment_balancer.spark.status.START_STATE_SCHEMA`) and the segment table's rows.

    ``segs``, ``reps``: the partition's :class:`~segment_balancer.spark.join.JoinFrames` ``segs``
    and ``reps`` as read back. Returns ``{"segments": SEGMENT_COLUMNS, "replicas": REPLICA_COLUMNS,
    "targets": (idx int64, tier str, target int32, tier_pos int32), "state", "table"}`` frames."""
    segs = segs.reset_index(drop=True)
    used = segs["idx"].notna().to_numpy()
    code = np.zeros(len(segs), np.int64)
    code[used] = segs.loc[used, "idx"].to_numpy(np.int64)
    others = segs.loc[~used, ["bucket", "segment_id"]].sort_values(["bucket", "segment_id"], kind="stable")
    rank = others.groupby("bucket").cumcount().to_numpy(np.int64)
    code[others.index.to_numpy()] = ctx.n_used + np.array([ctx.offsets[b] for b in others["bucket"]], np.int64) + rank
    segs["code"] = code
    overshadowed = segs["overshadowed"].to_numpy(bool)
    waits = pd.array(
        np.isin(segs["line"].fillna(-1).to_numpy(np.int64), np.array(ctx.waiting, dtype=np.int64)), dtype="boolean"
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
        tiers_of = ctx.per_rule.get(rule_key(ds, rule_idx), ())
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
            "server": reps["server"].map(ctx.server_code).astype("Int32"),
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
    if len(broadcast) and ctx.tiers:
        pairs = pd.concat(
            [
                pairs,
                pd.DataFrame(
                    {
                        "idx": np.repeat(broadcast, len(ctx.tiers)),
                        "tier": np.tile(np.array(ctx.tiers, dtype=object), len(broadcast)),
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
            "datasource": segs["datasource"].map(ctx.datasource_code),
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
    if name == "table":
        return arrow_schema(SEGMENT_TABLE_FIELDS + [("code", "long")])
    if name == "state":
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


def _finish_job(
    spark, work: Path, scratch: str, parts: list[int], ctx: FinishContext, aside: dict[str, str]
) -> list[PartFacts]:
    """Job 4: :func:`finish_part` on every partition's frames, one task each; the prepared tables'
    parts go under ``aside`` (``{table: directory relative to work}``, moved into place by the
    caller), the start state's rows and the segment table's rows under ``scratch``. Returns each
    task's :class:`PartFacts`."""
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
        wanted, absent = rule_facts(segs, ctx.absent_per_rule)
        waiting = segs[segs["waiting"].fillna(False).to_numpy(bool)]
        mine = reps[reps["served"] & reps["segment_id"].isin(waiting["segment_id"])]
        counts = {}
        for ds, part_segs in waiting.groupby("datasource"):
            hit = mine[mine["segment_id"].isin(part_segs["segment_id"])]
            if len(hit):
                counts[ds] = (int(hit["segment_id"].nunique()), int(len(hit)))
        return PartFacts(waiting=counts, wanted=wanted, absent=absent)

    return run_tasks(spark, parts, task)


def _write_segment_table(spark, work: Path, scratch: str, n_used: int, names: list[str]) -> None:
    """The run's segment table (:data:`~segment_balancer.spark.state_store.SEGMENT_TABLE_FILE`):
    the partitions' rows in code order, one Arrow IPC file written by one task
    (:func:`~segment_balancer.spark.session.run_tasks`)."""
    schema = arrow_schema(SEGMENT_TABLE_FIELDS).with_metadata({"n_used": str(n_used), "datasources": json.dumps(names)})
    work_uri = str(Path(work).absolute())
    rows_dir = f"{scratch}/table-out"
    parts = any((work / rows_dir).glob("*.parquet"))

    def write(_):
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
    any invalid input, before any prepared table is written; ``FileNotFoundError`` when
    ``used_segments`` has not run.
    """
    snapshot, work = Path(snapshot), Path(work)
    servers, all_names, queues, rules, config, smeta = read_small_inputs(snapshot, overrides)
    now_ms = smeta.snapshot_time_ms
    decommissioning = set(config.decommissioning_nodes)
    historicals = {s.server for s in servers}
    tiers = sorted({s.tier for s in servers})
    log.info("snapshot %s: %d historical servers in %d tiers", smeta.snapshot_id, len(servers), len(tiers))

    if not (work / TABLE_FILE).exists():
        raise FileNotFoundError(f"{work / TABLE_FILE} is missing: run the used_segments application first")
    timeline_summary = read_summary(work)
    datasources = sorted(timeline_summary["per_datasource"])
    servers_pdf = servers_frame(servers, decommissioning)
    limit_ms = config.segment_loading_max_ms
    ctx = JoinContext(
        rules=rules,
        now_ms=now_ms,
        datasources=datasources,
        tier_of=dict(zip(servers_pdf["server"], servers_pdf["tier"])),
        stale_before_ms=now_ms - limit_ms,
        segments=segment_count(timeline_summary),
    )
    replica_file = server_segments_path(snapshot).name
    scratch = f"prepared.scratch-{uuid.uuid4().hex[:8]}"
    aside = {name: f"{path}.tmp-{uuid.uuid4().hex[:8]}" for name, path in PART_DIRS.items()}
    try:
        with gzip_refusal(replica_file):
            summaries = run_join(spark, snapshot, work, scratch, ctx, queue_rows(queues), historicals, set(all_names))
        if any(s.bad_replicas for s in summaries):
            refuse_replicas(spark, snapshot, historicals, set(all_names))
            raise RuntimeError("the replica file has a bad row that its reference reader accepts")  # never: one check
        problems = [s.unlisted_problem for s in summaries if s.unlisted_problem]
        if problems:
            refuse_unlisted([min(problems, key=problem_key)])
        n_used = sum(s.n_used for s in summaries)
        names = sorted(set().union(*(s.datasources for s in summaries)))
        fctx = FinishContext(
            n_used=n_used,
            offsets=_bucket_offsets(summaries),
            waiting=_waiting_lines(spark, work, scratch),
            tiers=tiers,
            per_rule=rule_targets(rules, datasources, set(tiers)),
            absent_per_rule=rule_absent_tiers(rules, datasources, set(tiers)),
            server_code={name: i for i, name in enumerate(servers_pdf["server"])},
            datasource_code={n: i for i, n in enumerate(names)},
        )
        parts = sorted(s.part for s in summaries if s.part is not None)
        finished = _finish_job(spark, work, scratch, parts, fctx, aside)
        for name, path in PART_DIRS.items():
            (work / aside[name]).mkdir(parents=True, exist_ok=True)
            if not any((work / aside[name]).glob("*.parquet")):  # no segment, replica or queue entry
                pq.write_table(_part_schema(name).empty_table(), work / aside[name] / "part-00000.parquet")
            replace_path(work / aside[name], work / path)
        _write_segment_table(spark, work, scratch, n_used, names)
        servers_pdf = mark_broadcast_only(servers_pdf, _per_server(summaries))
        write_parquet_atomic(servers_pdf, work / "prepared" / "servers.parquet")
        # The run state every stage starts from (no start-of-run ranking: a segment is ranked in a
        # tier when a stage first considers it there, ALGORITHM.md "Best servers"), and its groups.
        wanted = sum(f.wanted for f in finished)
        status = write_start_state(spark, work, INITIAL_STATE_DIR, f"{scratch}/state-out", servers_pdf, wanted)
    except BaseException:
        for path in aside.values():
            remove_path(work / path)
        raise
    finally:
        remove_path(work / scratch)
    found = _findings(summaries, finished)
    absent: dict[str, list[int]] = {}
    for part in finished:
        for tier, (n_seg, n_rep) in part.absent.items():
            mine = absent.setdefault(tier, [0, 0])
            mine[0], mine[1] = mine[0] + n_seg, mine[1] + n_rep

    meta = {
        "snapshot_id": smeta.snapshot_id,
        "cluster": smeta.cluster,
        "now_ms": now_ms,
        "config": config.as_dict(),
        "ignored_config": list(getattr(config, "ignored", [])),
        "stage_limits": stage_limits(config),
        "tiers": tiers_meta(servers_pdf),
        "alerts": alerts(rules, set(tiers), decommissioning, historicals, found, limit_ms),
        "status_counts": status.counts,
        "held": {server: list(n) for server, n in sorted(status.held.items())},
        "missing_replicas": dict(sorted(status.missing.items())),
        "wanted": wanted,
        "unavailable": status.unavailable,
        "absent_tiers": {t: {"segments": a, "replicas": b} for t, (a, b) in sorted(absent.items())},
        "timeline": timeline_summary,
        "unlisted": unlisted_counts(found),
        "overshadowed_waiting": waiting_counts(found),
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
    return {"stage": 0, "groups": G.encode_all(status.groups)}


def _bucket_offsets(summaries: list[JoinSummary]) -> dict[int, int]:
    """``{bucket: the segments without an index in the buckets before it}`` for every one of the
    :data:`~segment_balancer.spark.join.BUCKETS` buckets: where the others' codes start, after the
    used segments'."""
    counts: dict[int, int] = {}
    for s in summaries:
        for b, n in s.others.items():
            counts[b] = counts.get(b, 0) + n
    offsets, at = {}, 0
    for b in range(BUCKETS):
        offsets[b], at = at, at + counts.get(b, 0)
    return offsets


def _per_server(summaries: list[JoinSummary]) -> list[dict]:
    """The join tasks' per-server sums: ``{"server", "queued_bytes" (bytes), "non_broadcast"
    (replicas)}`` per historical with a replica, for
    :func:`~segment_balancer.planner.small_inputs.mark_broadcast_only`."""
    sums: dict[str, list[int]] = {}
    for s in summaries:
        for srv, (q, nb) in s.per_server.items():
            mine = sums.setdefault(srv, [0, 0])
            mine[0], mine[1] = mine[0] + q, mine[1] + nb
    return [{"server": srv, "queued_bytes": q, "non_broadcast": nb} for srv, (q, nb) in sums.items()]


def _findings(summaries: list[JoinSummary], finished: list[PartFacts]) -> Findings:
    """The join tasks' summaries and the numbering tasks' facts summed for ``meta.json``."""
    unlisted: dict[str, dict] = {}
    for s in summaries:
        for ds, v in s.unlisted.items():
            mine = unlisted.setdefault(ds, {"datasource": ds, "segments": 0, "replicas": 0})
            mine["segments"] += v["segments"]
            mine["replicas"] += v["replicas"]
    waiting_per: dict[str, tuple[int, int]] = {}
    for part in finished:
        for ds, (n_seg, n_rep) in part.waiting.items():
            a, b = waiting_per.get(ds, (0, 0))
            waiting_per[ds] = (a + n_seg, b + n_rep)
    return Findings(
        stale_n=sum(s.stale_n for s in summaries),
        stale=sorted((r for s in summaries for r in s.stale), key=lambda r: (r["requested_at_ms"], r["server"]))[:5],
        norule_n=sum(s.norule_n for s in summaries),
        norule=sorted((r for s in summaries for r in s.norule), key=lambda r: r["idx"])[:5],
        nothing_n=sum(s.nothing_n for s in summaries),
        nothing=sorted((r for s in summaries for r in s.nothing), key=lambda r: r["idx"])[:5],
        unlisted=list(unlisted.values()),
        unlisted_ids=sorted(x for s in summaries for x in s.unlisted_ids)[:5],
        waiting=[{"datasource": ds, "segments": a, "replicas": b} for ds, (a, b) in waiting_per.items()],
    )
