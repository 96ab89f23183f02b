"""Replication status of a run state in Spark: :func:`segment_balancer.planner.status.tier_status`
and the holdings of every tier, one Spark task per tier over its state directory
(:func:`status_pass`), or while ``prepare`` writes the first state (:func:`write_state_with_status`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pyroaring import BitMap

from segment_balancer.common.files import filesystem
from segment_balancer.planner.status import Status, combine, held_per_server, missing_replicas, tier_status
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.state_store import read_tier_state


def _tier_result(fs, path: str, tier: str, servers_pdf: pd.DataFrame) -> tuple:
    """``(tier, {group: serialized bitmap}, held_per_server, missing_replicas)`` of the tier state
    directory ``path``."""
    rows = read_tier_state(fs, path)
    status = tier_status(rows, servers_pdf[servers_pdf["tier"] == tier])
    return tier, {k: bm.serialize() for k, bm in status.items()}, held_per_server(rows), missing_replicas(rows)


def _combine(results: list[tuple]) -> Status:
    groups = combine({tier: {k: BitMap.deserialize(v) for k, v in packed.items()} for tier, packed, _, _ in results})
    held = {server: n for _, _, per, _ in results for server, n in per.items()}
    missing = {tier: n for tier, _, _, n in results}
    return Status(groups, {name: len(bm) for name, bm in sorted(groups.items())}, held, missing)


def write_state_with_status(state, work: Path, rel_dir: str, servers_pdf: pd.DataFrame) -> Status:
    """Write the run state ``state`` (Spark DataFrame of ``STATE_COLUMNS``) as one directory per
    tier (``rel_dir/tier=T``, relative to the local work directory ``work``, as every stage reads
    it) and return its :class:`Status`, in one Spark job: one ``applyInPandas`` group per tier
    writes its rows (:func:`~segment_balancer.spark.state_store.write_tier_state`) and measures them as
    :func:`status_pass` does. The tiers are written aside and moved into place together; a tier
    with no rows gets no directory. ``prepare`` writes the initial state with it."""
    import pickle
    import uuid

    from segment_balancer.common.files import remove_path, replace_path
    from segment_balancer.spark.state_store import tier_dir_name, write_tier_state

    work = Path(work).absolute()
    work_uri = str(work)
    tmp_rel = f"{rel_dir}.tmp-{uuid.uuid4().hex[:8]}"

    def per_tier(pdf: pd.DataFrame) -> pd.DataFrame:
        tier = pdf["tier"].iloc[0]
        fs, base = filesystem(work_uri)
        path = f"{base}/{tmp_rel}/{tier_dir_name(tier)}"
        write_tier_state(fs, path, pdf)
        return pd.DataFrame({"tier": [tier], "data": [pickle.dumps(_tier_result(fs, path, tier, servers_pdf))]})

    try:
        rows = state.groupBy("tier").applyInPandas(per_tier, "tier string, data binary").collect()
    except BaseException:
        remove_path(work / tmp_rel)
        raise
    (work / tmp_rel).mkdir(parents=True, exist_ok=True)  # no tier has rows: an empty state
    replace_path(work / tmp_rel, work / rel_dir)
    return _combine(sorted((pickle.loads(r["data"]) for r in rows), key=lambda r: r[0]))


def status_pass(spark, work_uri: str, state_dirs: dict[str, str], servers_pdf: pd.DataFrame) -> Status:
    """The :class:`Status` of a run state: one Spark task per tier reads its state directory
    (pyarrow, through the work-directory URI) and returns :func:`tier_status` as serialized
    bitmaps and :func:`held_per_server`; the driver combines them.

    ``work_uri``: the work directory as tasks address it; ``state_dirs``: ``{tier: directory}``
    relative to it; ``servers_pdf``: ``prepared/servers.parquet`` with ``broadcast_only``.
    ``prepare`` runs it on the initial state (the start-of-run groups; counts and holdings kept in
    ``meta.json``); ``assemble`` on the final state, for the summary.
    """
    def task(tier):
        fs, base = filesystem(work_uri)
        return _tier_result(fs, f"{base}/{state_dirs[tier]}", tier, servers_pdf)

    return _combine(run_tasks(spark, sorted(state_dirs), task))


def start_projection(replicas, segments):
    """What every server projects at the start of the run: served without a queued drop, plus
    queued loads. Columns ``server``, ``tier``, ``idx`` (−1 for unused segments), ``datasource``,
    ``start_ms``, ``end_ms``."""
    from pyspark.sql import functions as F

    proj = replicas.filter((F.col("served") & ~F.col("queued_drop")) | F.col("queued_load"))
    return proj.join(segments.select("segment_id", "datasource", "start_ms", "end_ms"), "segment_id").select(
        "server", "tier", F.coalesce("idx", F.lit(-1)).alias("idx"), "datasource", "start_ms", "end_ms")
