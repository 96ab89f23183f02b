"""Stage 12 in Spark: what no rule wants any more, over the whole run state (ALGORITHM.md stage 12
and "Availability"; seed 000 stage 12).

Four Spark jobs: the replica tally per (segment, tier) and the overreplicated pairs (Spark SQL,
written partitioned by tier); one task per tier with excess that lists the holders in drop order
against the state at the start of the stage; the stage's output written, its excess drops picked
by one task per bucket of segments (:func:`segment_balancer.planner.kernels.unload.unload_excess`);
the drops marked in the state, one task per tier. The stage itself is
:mod:`segment_balancer.planner.stages.s12_unload`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import astuple
from urllib.parse import unquote

import pandas as pd

from segment_balancer.common.files import filesystem, write_partitioned_atomic
from segment_balancer.planner.kernels import unload
from segment_balancer.planner.runstate import DropCandidate, OpSink, SegmentRef
from segment_balancer.spark.state_store import conform, replica_tally
from segment_balancer.spark.tierpass import apply_drops_pass, kernel_pass, pass_dir
from segment_balancer.spark.workdir import OUT_COLUMNS, OUT_FIELDS, OUT_SCHEMA, Run, out_frame, read_output

log = logging.getLogger(__name__)

STAGE = 12
BUCKETS = 16
"""Spark tasks deciding the excess drops (segments by ``idx`` modulo)."""


def unload_pass(run: Run) -> None:
    """Stage 12 on the current run state of ``run``, committed as its step ``unload``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    state = run.state()
    w = Window.partitionBy("idx")
    counts = (replica_tally(state).withColumn("total_count", F.sum("count").over(w)).withColumn("total_target", F.sum("target").over(w))
              .withColumn("total_loaded", F.sum("loaded").over(w)).filter("total_count > total_target").cache())
    over_rel = f"{pass_dir(STAGE, 'unload')}/over.parquet"
    # partitioned by tier: the tiers with excess are its directories (no job to find them)
    write_partitioned_atomic(counts.filter("count > target").select("idx", "tier"), run.work / over_rel, "tier")
    tiers = sorted(unquote(p.name.split("=", 1)[1]) for p in (run.work / over_rel).glob("tier=*"))
    excess = _excess(run, counts, over_rel, tiers) if tiers else None
    out = _everywhere(run, state).unionByName(_waiting(run, state))
    out = out if excess is None else excess.unionByName(out)
    rel = run.write_output(STAGE, "unload", out)
    counts.unpersist()
    facts = _deferred_facts(run, rel)
    run.write_ops(STAGE, "unload", rel, facts, state=apply_drops_pass(run, STAGE, "unload", rel, run.state_dirs()))
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


def _excess(run: Run, counts, over_rel: str, tiers: list[str]):
    """Excess drops (and ``deferred`` rows) of the overreplicated segments, as a Spark DataFrame of
    ``OUT_COLUMNS``."""
    from pyspark.sql import functions as F

    work = run.work_uri

    def candidates(runs, sink):
        import pyarrow.dataset as ds

        fs, base = filesystem(work)
        extra = []
        for tier, tier_run in runs.items():
            wanted = ds.dataset(f"{base}/{over_rel}", format="parquet", filesystem=fs, partitioning="hive").to_table(
                filter=ds.field("tier") == tier, columns=["idx"]).column("idx").to_pylist()
            for idx in sorted(wanted):
                seg = tier_run.segment(idx)
                cands = tier_run.drop_candidates(seg, seg.serving())
                extra.append({"kind": "candidates", "idx": idx, "tier": tier, "segment_id": seg.segment_id,
                              "datasource": seg.datasource, "size_bytes": seg.size_bytes,
                              "detail": json.dumps([astuple(c) for c in cands])})
        return extra

    cand = kernel_pass(run, STAGE, "unload", tiers, candidates, keep_state=False).out.filter(
        "kind = 'candidates'").select("idx", "tier", "segment_id", "datasource", "size_bytes", "detail")
    per_tier = counts.join(cand, ["idx", "tier"], "left").select(
        "idx", "total_loaded", "required", "segment_id", "datasource", "size_bytes",
        F.struct("tier", "target", "count", "detail").alias("t"))
    work_df = (per_tier.groupBy("idx").agg(
        F.first("total_loaded").alias("loaded"), F.first("required").alias("required"),
        F.max("segment_id").alias("segment_id"), F.max("datasource").alias("datasource"),
        F.max("size_bytes").alias("size_bytes"), F.collect_list("t").alias("tiers"))
        .withColumn("bucket", F.col("idx") % BUCKETS))

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        sink = OpSink()
        for r in pdf.sort_values("idx").to_dict("records"):
            tiers_ = {}
            for t in r["tiers"]:
                cands = tuple(DropCandidate(*c) for c in json.loads(t["detail"])) if t["detail"] else ()
                tiers_[t["tier"]] = unload.TierReplicas(int(t["target"]), int(t["count"]), cands)
            seg = SegmentRef(int(r["idx"]), r["segment_id"], r["datasource"], int(r["size_bytes"]))
            sink.defer(seg, unload.unload_excess(seg, int(r["loaded"]), int(r["required"] or 0), tiers_, sink))
        return out_frame(sink)

    return work_df.groupBy("bucket").applyInPandas(kernel, OUT_SCHEMA).select(*OUT_COLUMNS)


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
        "segment_id", "idx", "datasource", "size_bytes", "tier", "server")
    everywhere = doomed.join(serving, "segment_id").select(
        F.lit("op").alias("kind"), F.lit("DROP").alias("action"), "idx", "segment_id", "datasource", "tier", "server",
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
