"""Replication status of a run state in Spark: :func:`segment_balancer.planner.status.tier_status`
and the holdings of every tier, one Spark task per tier (:func:`status_pass`), or while ``prepare``
writes the start state (:func:`write_start_state`).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyroaring import BitMap
from pyspark.sql import functions as F

from segment_balancer.common.files import filesystem, remove_path, replace_path
from segment_balancer.planner.runstate import SegmentTable, TierState
from segment_balancer.planner.status import (
    Status,
    combine,
    held_per_server,
    missing_replicas,
    tier_status,
    unavailable,
)
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.state_store import (
    read_segment_table,
    read_tier,
    server_names,
    tier_dir_name,
    tier_of_dir,
    write_tier_start,
)

START_STATE_SCHEMA = [
    ("tier", "string"),
    ("kind", "string"),
    ("code", "long"),
    ("target", "int"),
    ("tier_pos", "int"),
    ("server", "int"),
    ("served", "boolean"),
    ("load", "byte"),
    ("dropping", "boolean"),
]
"""The start state's rows ((name, Spark type) pairs) as ``prepare`` hands them to
:func:`write_start_state`: per tier, ``kind`` ``segment`` rows (``code`` = idx, ``target``,
``tier_pos``) and ``replica`` rows (``code``, ``server`` code, ``served``, ``load`` queue code or
-1, ``dropping``)."""


def _tier_result(state: TierState, table: SegmentTable, servers_pdf: pd.DataFrame) -> tuple:
    """``(tier, {group: serialized bitmap}, held_per_server, missing_replicas)`` of one tier's state."""
    status = tier_status(state, table, servers_pdf[servers_pdf["tier"] == state.tier])
    return (
        state.tier,
        {k: bm.serialize() for k, bm in status.items()},
        held_per_server(state, table),
        missing_replicas(state, table),
    )


def _combine(results: list[tuple], wanted: int) -> Status:
    """The :class:`Status` of every tier's :func:`_tier_result`; ``wanted``: the used segments a load
    rule asks replicas of (``prepared/meta.json``'s ``wanted``)."""
    per_tier = {tier: {k: BitMap.deserialize(v) for k, v in packed.items()} for tier, packed, _, _ in results}
    groups = combine(per_tier)
    held = {server: n for _, _, per, _ in results for server, n in per.items()}
    missing = {tier: n for tier, _, _, n in results}
    counts = {name: len(bm) for name, bm in sorted(groups.items())}
    return Status(groups, counts, held, missing, unavailable(per_tier, wanted))


def start_state(tier: str, rows, servers: tuple[str, ...]) -> TierState:
    """One tier's :class:`TierState` from its rows of :data:`START_STATE_SCHEMA` (a pyarrow Table):
    segments by code, replicas in the order given."""

    def col(table, name, dtype):
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)

    segs = rows.filter(pc.equal(rows.column("kind"), "segment")).sort_by("code")
    reps = rows.filter(pc.equal(rows.column("kind"), "replica")).sort_by(
        [("code", "ascending"), ("server", "ascending")]
    )
    return TierState(
        tier,
        servers,
        col(segs, "code", np.int64),
        col(segs, "target", np.int32),
        col(segs, "tier_pos", np.int32),
        col(reps, "code", np.int64),
        col(reps, "server", np.int32),
        col(reps, "served", bool),
        col(reps, "load", np.int8),
        col(reps, "dropping", bool),
        np.zeros(reps.num_rows, bool),
    )


def write_start_state(spark, work: Path, rel_dir: str, parts: str, servers_pdf: pd.DataFrame, wanted: int) -> Status:
    """Write the start state as one directory per tier (``rel_dir/tier=T``, relative to the local
    work directory ``work``, as every stage reads it: :func:`~segment_balancer.spark.state_store.write_tier_start`)
    and return its :class:`Status`, in one Spark job of one task per tier: the task reads its
    tier's rows of :data:`START_STATE_SCHEMA` (parquet parts under ``parts/tier=T/``, relative to
    ``work``), writes its state and measures it as :func:`status_pass` does. The tiers are written
    aside and moved into place together; a tier with no rows gets no directory. ``wanted``: the
    used segments a load rule asks replicas of. ``prepare`` writes the start state with it."""
    work = Path(work).absolute()
    work_uri = str(work)
    tmp_rel = f"{rel_dir}.tmp-{uuid.uuid4().hex[:8]}"
    names = server_names(servers_pdf)
    root = work / parts
    tiers = sorted(tier_of_dir(p.name) for p in root.glob("tier=*")) if root.is_dir() else []

    def per_tier(tier: str) -> tuple:
        fs, base = filesystem(work_uri)
        rows = ds.dataset(f"{base}/{parts}/{tier_dir_name(tier)}", format="parquet", filesystem=fs).to_table()
        tier_state = start_state(tier, rows, names)
        write_tier_start(fs, f"{base}/{tmp_rel}/{tier_dir_name(tier)}", tier_state)
        return _tier_result(tier_state, read_segment_table(work_uri), servers_pdf)

    try:
        results = run_tasks(spark, tiers, per_tier)
    except BaseException:
        remove_path(work / tmp_rel)
        raise
    (work / tmp_rel).mkdir(parents=True, exist_ok=True)  # no tier has rows: an empty state
    replace_path(work / tmp_rel, work / rel_dir)
    return _combine(sorted(results, key=lambda r: r[0]), wanted)


def status_pass(run) -> Status:
    """The :class:`Status` of ``run``'s current state (a :class:`~segment_balancer.spark.workdir.Run`):
    one Spark task per tier rebuilds its state (:func:`~segment_balancer.spark.state_store.read_tier`)
    and returns :func:`tier_status` as serialized bitmaps and :func:`held_per_server`; the driver
    combines them. ``assemble`` runs it on the final state, for the summary."""
    spec, work, names, servers_pdf = run.state_spec(), run.work_uri, run.server_names, run.servers_pdf

    def task(tier):
        return _tier_result(read_tier(work, spec, tier, names), read_segment_table(work), servers_pdf)

    return _combine(run_tasks(run.spark, sorted(spec["start"]), task), run.meta["wanted"])


def start_projection(replicas, segments):
    """What every server projects at the start of the run: served without a queued drop, plus
    queued loads. Columns ``server``, ``tier``, ``idx`` (−1 for unused segments), ``datasource``,
    ``start_ms``, ``end_ms``."""
    proj = replicas.filter((F.col("served") & ~F.col("queued_drop")) | F.col("queued_load"))
    return proj.join(segments.select("segment_id", "datasource", "start_ms", "end_ms"), "segment_id").select(
        "server", "tier", F.coalesce("idx", F.lit(-1)).alias("idx"), "datasource", "start_ms", "end_ms"
    )
