"""Stage 12 in Spark: what no rule wants any more, over the whole run state (ALGORITHM.md stage 12
and "Availability"; seed 000 stage 12). This module only moves data: every decision is a function
of :mod:`segment_balancer.planner.stages.s12_unload` (``s12``), called in the tasks.

Task functions through :func:`~segment_balancer.spark.session.run_tasks` (each call one Spark job,
or none on the driver of a small run), reading and writing with pyarrow; the driver passes paths and
gets bitmaps and tier names back, never rows:

1. one task per tier (``first``) reads the tier's state, writes the tier's everywhere-drops
   (``s12.everywhere_drops``) and the served replicas of the overshadowed segments that still
   wait (``s12.waiting_replicas``), and returns the segments over their target in the tier
   (``s12.tally``, ``s12.over_in_tier``: a bitmap);
2. when some segment is, one task per tier writes the replica tally of those segments only
   (``s12.tally_of``), and one task (:func:`_over`) reads every tier's tally and writes the
   overreplicated pairs (``s12.overreplicated``: ``over.parquet``, partitioned by tier), and
   returns the tiers with excess and the groups of tiers that some segment's drops couple
   (usually none);
3. one task per tier, or per group of tiers decided together (``s12.task_groups``), reads its
   tiers' overreplicated pairs (``s12.excess_items``) and decides the excess drops against the
   stage's own running projection (:func:`segment_balancer.planner.kernels.unload.unload_tiers`);
4. one task (:func:`_output`) writes the stage's output once (``out.parquet``: the excess drops,
   the everywhere-drops, the ``waiting`` decisions, ``s12.waiting_decisions``), which the driver
   numbers into the op log: the drops count from there on; the driver reports the deferred drops
   (``s12.deferred_facts``).

Each file a task writes whole is written aside and moved into place by the driver.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyroaring import BitMap

from segment_balancer.common.files import filesystem, replace_path, sibling_tmp
from segment_balancer.planner.kernels import unload
from segment_balancer.planner.operations import Action
from segment_balancer.planner.runstate import OpSink
from segment_balancer.planner.stages import s12_unload as s12
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.state_store import arrow_schema, conform_arrow, read_segment_table, read_tier, tier_dir_name
from segment_balancer.spark.tierpass import _clear, kernel_pass, pass_dir, write_out
from segment_balancer.spark.workdir import OUT_FIELDS, Run, out_frame, output_rel, read_output

log = logging.getLogger(__name__)

STAGE = 12
OVER_FIELDS = [
    ("idx", "long"),
    ("target", "int"),
    ("count", "long"),
    ("cap", "long"),
    ("excess", "long"),
    ("loaded", "long"),
    ("required", "int"),
    ("counts", "string"),
    ("tier", "string"),
]
"""The overreplicated (segment, tier) pairs stage 12 decides on (``passes/12_unload/over.parquet``,
partitioned by tier): ``idx`` (the segment's code), ``cap`` = min(count − target, holders serving
it with no drop); ``excess``, ``loaded``, ``required`` of the segment; ``counts``: JSON
``{tier: [target, count]}`` of every tier of the segment, by tier."""
_TALLY_FIELDS = [
    ("idx", "long"),
    ("tier", "string"),
    ("target", "int"),
    ("count", "long"),
    ("loaded", "long"),
    ("droppable", "long"),
    ("required", "int"),
]
"""A tier's replica tally of a segment (ALGORITHM.md "Terms", "Availability"): ``count`` (servers
holding it: serving with no drop, or loading), ``loaded`` (serving it with no drop or only a
dependent one, where the target is above 0), ``droppable`` (serving it with no drop)."""
_WAITING_FIELDS = [("idx", "long"), ("segment_id", "string"), ("server", "string")]
"""A served replica (no drop) of an overshadowed segment that waits (``FATES`` ``waiting``)."""


def unload_pass(run: Run) -> None:
    """Stage 12 on the current run state of ``run``, committed as its step ``unload``."""
    pdir = pass_dir(STAGE, "unload")
    _clear(run, pdir)
    spec, work, names = run.state_spec(), run.work_uri, run.server_names
    tiers = sorted(spec["start"])

    def first(tier):
        fs, base = filesystem(work)
        table, state = read_segment_table(work), read_tier(work, spec, tier, names)
        over = BitMap(s12.over_in_tier(s12.tally(state, table)).astype(np.uint32))
        drops = {name: values.tolist() for name, values in s12.everywhere_drops(state, table).items()}
        rows = [
            {"kind": "op", "action": Action.DROP, "tier": tier, "order_seq": 0, **dict(zip(drops, values))}
            for values in zip(*drops.values())
        ]
        write_out(fs, f"{base}/{pdir}/everywhere/{_name(tier)}.parquet", out_frame(OpSink(), rows))
        wait_codes, wait_servers = s12.waiting_replicas(state, table)
        pa_rows = pa.table(
            {
                "idx": pa.array(table.idx_of(wait_codes), pa.int64()),
                "segment_id": pa.array(table.segment_ids(wait_codes), pa.string()),
                "server": pa.array([names[s] for s in wait_servers], pa.string()),
            }
        )
        _write_table(fs, f"{base}/{pdir}/waiting/{_name(tier)}.parquet", pa_rows, arrow_schema(_WAITING_FIELDS))
        return over.serialize()

    candidates = BitMap()
    for packed in run_tasks(run.spark, tiers, first):
        candidates |= BitMap.deserialize(packed)
    over_tiers: list[str] = []
    over_rel = f"{pdir}/over.parquet"
    if candidates:
        data = candidates.serialize()

        def second(tier):
            fs, base = filesystem(work)
            table, state = read_segment_table(work), read_tier(work, spec, tier, names)
            tal = s12.tally_of(state, table, np.array(BitMap.deserialize(data), dtype=np.int64))
            required = tal["required"]
            rows = pa.table(
                {
                    "idx": pa.array(tal["code"], pa.int64()),
                    "tier": pa.array([tier] * len(tal["code"]), pa.string()),
                    "target": pa.array(tal["target"].astype(np.int32)),
                    "count": pa.array(tal["count"]),
                    "loaded": pa.array(tal["loaded"]),
                    "droppable": pa.array(tal["droppable"]),
                    "required": pa.array(required.astype(np.int32), mask=required < 0),
                }
            )
            _write_table(fs, f"{base}/{pdir}/tally/{_name(tier)}.parquet", rows, arrow_schema(_TALLY_FIELDS))
            return None

        run_tasks(run.spark, tiers, second)
        over_path = run.work / over_rel
        aside = str(sibling_tmp(over_path).relative_to(run.work))
        ((over_tiers, coupled),) = run_tasks(run.spark, [aside], lambda rel: _over(work, pdir, rel))
        replace_path(run.work / aside, over_path)
        if over_tiers:
            _excess(run, over_rel, over_tiers, coupled)
    rel = output_rel(STAGE, "unload")
    aside = str(sibling_tmp(run.work / rel).relative_to(run.work))
    run_tasks(run.spark, [aside], lambda out: _output(work, pdir, out, bool(tiers), bool(over_tiers)))
    replace_path(run.work / aside, run.work / rel)
    facts = _deferred_facts(run, rel)
    run.write_ops(STAGE, "unload", rel, facts)
    if facts["deferred_drops"]:
        log.info(
            "stage %d: %d drops of %d segments deferred by the availability rule",
            STAGE,
            facts["deferred_drops"],
            facts["deferred_segments"],
        )


def _name(tier: str) -> str:
    return tier_dir_name(tier)


def _write_table(fs, path: str, table, schema) -> None:
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table.cast(schema), path, filesystem=fs)


def _deferred_facts(run: Run, output: str) -> dict:
    """:func:`~segment_balancer.planner.stages.s12_unload.deferred_facts` of the ``deferred`` rows
    of the stage's output (one per segment whose excess drops the availability rule held back;
    ``deferred_drops``: how many), read with pyarrow."""
    rows = read_output(run.work_uri, output, ["segment_id", "deferred_drops"], "deferred")
    return s12.deferred_facts(rows.column("segment_id").to_pylist(), rows.column("deferred_drops").to_pylist())


def _over(work: str, pdir: str, out_rel: str) -> tuple[list[str], list[list[str]]]:
    """Stage 12's overreplicated (segment, tier) pairs
    (:func:`~segment_balancer.planner.stages.s12_unload.overreplicated`) from the replica tallies
    the tier tasks wrote (``pdir/tally``), one :data:`OVER_FIELDS` row each, written with pyarrow
    under ``out_rel`` (relative to the work directory ``work``), partitioned by tier (``tier=<T>``
    directories, as :func:`~segment_balancer.spark.state_store.tier_dir_name` names them). A task
    function (one task sees every tier's rows of a segment). Returns the tiers with such rows
    (sorted) and the distinct sorted tier lists some segment's drops couple."""
    fs, base = filesystem(work)
    tally = ds.dataset(
        f"{base}/{pdir}/tally", format="parquet", filesystem=fs, schema=arrow_schema(_TALLY_FIELDS)
    ).to_table()
    over, coupled = s12.overreplicated(tally)
    table = pa.table(over, schema=arrow_schema(OVER_FIELDS))
    fs.create_dir(f"{base}/{out_rel}", recursive=True)
    for tier in sorted(set(over["tier"])):
        _write_table(
            fs,
            f"{base}/{out_rel}/{_name(tier)}/part-00000.parquet",
            table.filter(pc.equal(table["tier"], tier)).drop_columns(["tier"]),
            arrow_schema(OVER_FIELDS[:-1]),
        )
    return sorted(set(over["tier"])), coupled


def _excess(run: Run, over_rel: str, tiers: list[str], coupled: list[list[str]]) -> None:
    """Excess drops (and ``deferred`` and ``decision`` rows) of the overreplicated segments, written
    to the kernel pass's task files (``passes/12_unload/tasks``):
    :func:`~segment_balancer.planner.kernels.unload.unload_tiers` in one task per tier or coupled
    group of tiers (:func:`~segment_balancer.planner.stages.s12_unload.task_groups`), each reading
    its tiers' rows of ``over_rel`` with pyarrow and handing them to the kernel as
    :func:`~segment_balancer.planner.stages.s12_unload.excess_items`."""
    work = run.work_uri
    groups = s12.task_groups(tiers, coupled)
    if any(len(g) > 1 for g in groups):
        log.info(
            "stage %d: tiers decided together (a segment's drops depend on the order across them): %s",
            STAGE,
            [g for g in groups if len(g) > 1],
        )

    def body(runs, sink):
        fs, base = filesystem(work)
        part = ds.partitioning(pa.schema([("tier", pa.string())]), flavor="hive")
        table = ds.dataset(f"{base}/{over_rel}", format="parquet", filesystem=fs, partitioning=part).to_table(
            filter=ds.field("tier").isin(list(runs)), columns=["idx", "excess", "loaded", "required", "counts"]
        )
        unload.unload_tiers(runs, s12.excess_items(table.to_pydict()), sink)
        return []

    kernel_pass(run, STAGE, "unload", tiers, body, keep_state=False, groups=groups)


def _output(work: str, pdir: str, out_rel: str, tiers: bool, excess: bool) -> None:
    """Stage 12's output (:data:`~segment_balancer.spark.workdir.OUT_FIELDS` rows), one parquet
    file written with pyarrow at ``out_rel`` (relative to the work directory ``work``): the
    excess pass's ``op``, ``deferred`` and ``decision`` rows (``excess``), then the tier tasks'
    everywhere-drops, then :func:`_waiting`'s decisions (both when there were ``tiers``). A task
    function: the driver holds none of these rows."""
    fs, base = filesystem(work)
    schema = arrow_schema(OUT_FIELDS)

    def read(rel, fields_schema, **kwargs):
        return ds.dataset(f"{base}/{pdir}/{rel}", format="parquet", filesystem=fs, schema=fields_schema).to_table(
            **kwargs
        )

    parts = []
    if excess:
        parts.append(read("tasks", schema, filter=ds.field("kind").isin(["op", "deferred", "decision"])))
    if tiers:
        parts.append(read("everywhere", schema))
        parts.append(_waiting(read("waiting", arrow_schema(_WAITING_FIELDS))))
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    fs.create_dir(f"{base}/{out_rel}".rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, f"{base}/{out_rel}", filesystem=fs)


def _waiting(rows):
    """``decision`` rows (outcome ``waiting``, the servers in ``detail``) of the overshadowed
    segments stage 12 keeps (:func:`~segment_balancer.planner.stages.s12_unload.waiting_decisions`),
    a pyarrow Table of :data:`~segment_balancer.spark.workdir.OUT_FIELDS`, from their served
    replicas (``rows``: the :data:`_WAITING_FIELDS` rows the tier tasks wrote)."""
    idx, ids, servers = s12.waiting_decisions(*(rows.column(c).to_pylist() for c in ("idx", "segment_id", "server")))
    table = pa.table(
        {
            "kind": ["decision"] * len(ids),
            "idx": pa.array(idx, pa.int64()),
            "segment_id": pa.array(ids, pa.string()),
            "reason": ["waiting"] * len(ids),
            "detail": [json.dumps({"servers": s}, separators=(",", ":"), ensure_ascii=False) for s in servers],
        }
    )
    return conform_arrow(table, OUT_FIELDS)
