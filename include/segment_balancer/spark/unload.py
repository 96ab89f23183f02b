"""Stage 12 in Spark: what no rule wants any more, over the whole run state (ALGORITHM.md stage 12
and "Availability"; seed 000 stage 12).

Spark jobs: the replica tally per (segment, tier) and the overreplicated pairs (Spark SQL, written
partitioned by tier); when more than one tier has excess, the groups of tiers that some segment's
drops couple (:func:`segment_balancer.planner.kernels.unload.couples_tiers`, usually none); one
task per tier, or per coupled group, deciding the excess drops against the stage's own running
projection (:func:`segment_balancer.planner.kernels.unload.unload_tiers`); the stage's output
written and numbered into the op log (the drops count from there on). The stage itself is
:mod:`segment_balancer.planner.stages.s12_unload`.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import unquote

from segment_balancer.common.files import filesystem, write_partitioned_atomic
from segment_balancer.planner.kernels import unload
from segment_balancer.spark.state_store import conform, replica_tally
from segment_balancer.spark.tierpass import kernel_pass, pass_dir
from segment_balancer.spark.workdir import OUT_FIELDS, Run, read_output

log = logging.getLogger(__name__)

STAGE = 12
OVER_SCHEMA = ("idx long, target int, count long, cap long, excess long, loaded long, required int, "
               "counts string, tier string")
"""The overreplicated (segment, tier) pairs stage 12 decides on (``passes/12_unload/over.parquet``,
partitioned by tier): ``cap`` = min(count − target, holders serving it with no drop); ``excess``,
``loaded``, ``required`` of the segment; ``counts``: JSON ``{tier: [target, count]}`` of every tier
of the segment."""


def unload_pass(run: Run) -> None:
    """Stage 12 on the current run state of ``run``, committed as its step ``unload``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    state = run.state()
    w = Window.partitionBy("idx")
    counts = (replica_tally(state).withColumn("total_count", F.sum("count").over(w))
              .withColumn("total_target", F.sum("target").over(w)).withColumn("loaded", F.sum("loaded").over(w))
              .filter("total_count > total_target")
              .withColumn("counts", F.to_json(F.map_from_entries(F.collect_list(
                  F.struct("tier", F.array(F.col("target").cast("long"), F.col("count")))).over(w)))))
    over = counts.filter("count > target").select(
        "idx", "target", "count", F.least(F.col("count") - F.col("target"), F.col("droppable")).alias("cap"),
        (F.col("total_count") - F.col("total_target")).alias("excess"), "loaded", "required", "counts", "tier")
    over_rel = f"{pass_dir(STAGE, 'unload')}/over.parquet"
    # partitioned by tier: the tiers with excess are its directories (no job to find them)
    write_partitioned_atomic(over, run.work / over_rel, "tier")
    tiers = sorted(unquote(p.name.split("=", 1)[1]) for p in (run.work / over_rel).glob("tier=*"))
    out = _everywhere(run, state).unionByName(_waiting(run, state))
    if tiers:
        out = _excess(run, over_rel, tiers).unionByName(out)
    rel = run.write_output(STAGE, "unload", out)
    facts = _deferred_facts(run, rel)
    run.write_ops(STAGE, "unload", rel, facts)
    if facts["deferred_drops"]:
        log.info("stage %d: %d drops of %d segments deferred by the availability rule", STAGE,
                 facts["deferred_drops"], facts["deferred_segments"])


def _deferred_facts(run: Run, output: str) -> dict:
    """``deferred_drops``, ``deferred_segments`` and the first five ``deferred_examples`` (segment
    ids) from the ``deferred`` rows of the stage's output (one per segment whose excess drops the
    availability rule held back; ``o1``: how many), read with pyarrow."""
    rows = read_output(run.work_uri, output, ["segment_id", "o1"], "deferred")
    return {"deferred_drops": int(sum(x or 0 for x in rows.column("o1").to_pylist())), "deferred_segments": rows.num_rows,
            "deferred_examples": sorted(rows.column("segment_id").to_pylist())[:5]}


def _task_groups(run: Run, over_rel: str, tiers: list[str]) -> list[list[str]]:
    """The tiers of each Spark task of stage 12: one per tier, except that tiers some segment's
    drops couple (:func:`~segment_balancer.planner.kernels.unload.couples_tiers`) share a task
    (their union, closed over chains). One Spark job, only when more than one tier has excess;
    the driver collects the distinct coupled tier sets, never segments."""
    from pyspark.sql import functions as F

    root = {t: t for t in tiers}

    def find(t: str) -> str:
        while root[t] != t:
            t = root[t]
        return t

    if len(tiers) > 1:
        def coupled(batches):
            import pandas as pd

            for pdf in batches:
                yield pd.DataFrame({"tiers": [
                    sorted(c["tier"] for c in r["caps"]) for r in pdf.to_dict("records")
                    if unload.couples_tiers(int(r["excess"]), int(r["loaded"]), int(r["required"] or 0),
                                            {c["tier"]: (int(c["target"]), int(c["cap"])) for c in r["caps"]})]},
                    dtype=object)

        per_seg = (run.spark.read.schema(OVER_SCHEMA).parquet(f"{run.work_uri}/{over_rel}").groupBy("idx")
                   .agg(F.first("excess").alias("excess"), F.first("loaded").alias("loaded"),
                        F.first("required").alias("required"),
                        F.collect_list(F.struct("tier", "target", "cap")).alias("caps"))
                   .filter(F.size("caps") > 1))
        for row in per_seg.mapInPandas(coupled, "tiers array<string>").distinct().collect():
            first, *rest = row["tiers"]
            for t in rest:
                root[find(t)] = find(first)
    groups: dict[str, list[str]] = {}
    for t in tiers:
        groups.setdefault(find(t), []).append(t)
    return sorted(groups.values())


def _excess(run: Run, over_rel: str, tiers: list[str]):
    """Excess drops (and ``deferred`` rows) of the overreplicated segments, as a Spark DataFrame
    of ``OUT_COLUMNS``: :func:`~segment_balancer.planner.kernels.unload.unload_tiers` in one task
    per tier or coupled group of tiers, each reading its tiers' rows of ``over_rel`` with pyarrow."""
    work = run.work_uri
    groups = _task_groups(run, over_rel, tiers)
    if any(len(g) > 1 for g in groups):
        log.info("stage %d: tiers decided together (a segment's drops depend on the order across them): %s",
                 STAGE, [g for g in groups if len(g) > 1])

    def body(runs, sink):
        import pyarrow as pa
        import pyarrow.dataset as ds

        fs, base = filesystem(work)
        part = ds.partitioning(pa.schema([("tier", pa.string())]), flavor="hive")
        table = ds.dataset(f"{base}/{over_rel}", format="parquet", filesystem=fs, partitioning=part).to_table(
            filter=ds.field("tier").isin(list(runs)), columns=["idx", "excess", "loaded", "required", "counts"])
        items = {}
        for r in table.to_pylist():
            if r["idx"] not in items:
                items[r["idx"]] = unload.Excess(int(r["idx"]), int(r["excess"]), int(r["loaded"]), int(r["required"] or 0),
                                                {t: (int(a), int(b)) for t, (a, b) in json.loads(r["counts"]).items()})
        unload.unload_tiers(runs, items.values(), sink)
        return []

    result = kernel_pass(run, STAGE, "unload", tiers, body, keep_state=False, groups=groups)
    return result.out.filter("kind in ('op', 'deferred', 'decision')")


def _everywhere(run: Run, state):
    """DROPs of every served replica of drop-rule, unused and (no longer waiting) overshadowed
    segments (Spark DataFrame of ``OUT_COLUMNS``)."""
    from pyspark.sql import functions as F

    segs = run.table("segments")
    overshadowed = F.col("idx").isNull() & F.col("overshadowed")
    reason = (F.when(overshadowed & ~F.col("waiting"), "overshadowed").when(overshadowed, F.lit(None).cast("string"))
              .when(F.col("idx").isNull(), "unused").when(F.col("rule_kind") == "drop", "drop_rule"))
    doomed = segs.select("segment_id", reason.alias("reason")).filter("reason is not null")
    serving = state.filter("kind = 'replica' and served and not dropping").select(
        "segment_id", "idx", "code", "datasource", "size_bytes", "tier", "server")
    everywhere = doomed.join(serving, "segment_id").select(
        F.lit("op").alias("kind"), F.lit("DROP").alias("action"), "idx", "code", "segment_id", "datasource", "tier", "server",
        "size_bytes", "reason", F.when(F.col("idx") >= 0, F.col("idx")).otherwise(F.lit(1 << 62)).alias("o1"),
        F.concat_ws("|", "segment_id", "server").alias("o2"), F.lit(0.0).alias("o3"))
    return conform(everywhere, OUT_FIELDS)


def _waiting(run: Run, state):
    """``decision`` rows (outcome ``waiting``, the servers in ``detail``) of the overshadowed
    segments stage 12 keeps because a segment overshadowing them is served nowhere yet
    (ALGORITHM.md stage 12), one per segment still served (Spark DataFrame of ``OUT_COLUMNS``)."""
    from pyspark.sql import functions as F

    segs = run.table("segments").filter("idx is null and overshadowed and waiting").select("segment_id")
    serving = state.filter("kind = 'replica' and served and not dropping").select("segment_id", "idx", "server")
    rows = segs.join(serving, "segment_id").groupBy("segment_id").agg(
        F.min("idx").alias("idx"), F.to_json(F.struct(F.array_sort(F.collect_list("server")).alias("servers"))).alias("detail"))
    return conform(rows.select(F.lit("decision").alias("kind"), "idx", "segment_id", F.lit(None).cast("string").alias("tier"),
                               F.lit("waiting").alias("reason"), "detail"), OUT_FIELDS)
