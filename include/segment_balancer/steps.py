"""The steps of stages 1–13 as Spark jobs around the greedy kernels of ``engine/``.

A step reads the run state (``Run.state()``, parquet partitioned by tier), runs its kernel per tier
inside ``applyInPandas`` on a :class:`~segment_balancer.runstate.TierRun` (for the cross-tier
stage 1, all tiers in one task), and writes the tiers' new state, its ops and its groups. The
stage-3 callbacks and stage 12 need every tier of a segment: a second pass per bucket of segments
decides them from what the tier pass reported, and their drops are applied to the state as it is
written. No step recounts replicas or queues from the op log.

Source: ALGORITHM.md "Stages"; seed 000 "Proposed algorithm".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pandas as pd
from pyroaring import BitMap

from . import groups as G
from .engine import balancing, callbacks, loading, unload
from .engine.state import OpSink, StageLimit, group_name, split_group_name
from .run import OUT_COLUMNS, OUT_FIELDS, OUT_SCHEMA, Run, out_frame
from .runstate import STATE_COLUMNS, TierRun, apply_drops, concat_columns, conform, tier_runs

log = logging.getLogger(__name__)
BUCKETS = 16


def _tier_groups(groups, kind: str) -> dict[str, BitMap]:
    """``{tier: bitmap}`` of the non-empty per-tier groups of ``kind``."""
    out = {}
    for name, bm in groups.items():
        k, tier = split_group_name(name)
        if k == kind and tier is not None and len(bm):
            out[tier] = bm
    return dict(sorted(out.items()))


def _packed(bitmaps: dict[str, BitMap]) -> dict[str, bytes]:
    return {k: v.serialize() for k, v in bitmaps.items()}


def _unpacked(data: dict[str, bytes]) -> dict[str, BitMap]:
    return {k: BitMap.deserialize(v) for k, v in data.items()}


def _merge(groups, result, replaced):
    """Input groups ``replaced`` take their new members from ``result``; other result groups grow."""
    for name in replaced:
        groups[name] = result.pop(name, BitMap())
    for name, bm in result.items():
        groups[name] = groups.get(name, BitMap()) | bm


def _kernel_pass(run: Run, tiers: list[str], body: Callable[[dict[str, TierRun], OpSink], list[dict] | None],
                 ranked: bool = True, one_task: bool = False):
    """Run ``body(runs, sink)`` on the live state of ``tiers``: per tier in its own task, or all
    of them in one task (``one_task``: stage 1 falls back across tiers). Returns the cached Spark
    DataFrame of ``OUT_COLUMNS`` (new state of ``tiers``, ops, members, extra rows)."""
    from pyspark.sql import functions as F

    from .run import num_best_function

    state = run.state().filter(F.col("tier").isin(tiers))
    servers_pdf, cfg = run.servers_pdf, run.config

    def fn(pdf: pd.DataFrame) -> pd.DataFrame:
        sink = OpSink()
        runs = tier_runs(pdf, servers_pdf, num_best_function(cfg), ranked, sink)
        extra = body(runs, sink)
        rows = concat_columns([r.rows() for r in runs.values()], STATE_COLUMNS) if runs else None
        return out_frame(sink, rows, extra)

    key = F.lit(0) if one_task else F.col("tier")
    return state.groupBy(key.alias("_key")).applyInPandas(lambda k, pdf: fn(pdf), OUT_SCHEMA).cache()


def _finish(run: Run, stage: int, step: str, out, tiers: list[str], drops=None, facts: dict | None = None) -> dict[str, BitMap]:
    """Write the step: the new state (``out``'s rows of ``tiers``, the other tiers unchanged, then
    ``drops`` applied), its ops (``out``'s and ``drops``'), and return its groups as bitmaps."""
    from pyspark.sql import functions as F

    state = run.state()
    new = (out.filter(F.col("kind").isin("segment", "replica")).select(*STATE_COLUMNS)
           .unionByName(state.filter(~F.col("tier").isin(tiers))))
    ops = out
    if drops is not None:
        new = apply_drops(new, drops.filter("kind = 'op'"))
        ops = out.unionByName(drops)
    run.write_ops(stage, step, ops, facts, state=new)
    result = G.bitmaps_from_members(out.filter("kind = 'member'").select("group", "idx"))
    out.unpersist()
    return result


def _per_tier_step(run: Run, groups, stage: int, kind: str, step: str,
                   kernel: Callable[[TierRun, BitMap, OpSink], None], ranked: bool = True) -> None:
    """A step that runs ``kernel(tier_run, members, sink)`` on each tier's members of ``kind[T]``
    and replaces ``kind[T]`` with what the kernel writes back (stages 2, 5, 9, 10)."""
    members = _tier_groups(groups, kind)
    if not members:
        return
    data = _packed(members)

    def body(runs, sink):
        for tier, bm in _unpacked(data).items():
            if tier in runs:
                kernel(runs[tier], bm, sink)

    out = _kernel_pass(run, list(members), body, ranked=ranked)
    names = [group_name(kind, t) for t in members]
    _merge(groups, _finish(run, stage, step, out, list(members)), names)


# ---- stage 1 ----------------------------------------------------------------------------------
def step_unreplicated(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 1 (or its revisit): ``StillUnreplicated`` → one load each (one task, cross-tier)."""
    bm = groups.get("StillUnreplicated", BitMap())
    if not len(bm):
        return
    tiers = sorted(run.meta["tiers"])
    priority = {t: int(v["priority"]) for t, v in run.meta["tiers"].items()}
    data = bm.serialize()

    def body(runs, sink):
        loading.load_unreplicated(runs, BitMap.deserialize(data), priority, limit, sink)

    out = _kernel_pass(run, tiers, body, one_task=True)
    _merge(groups, _finish(run, stage, "unreplicated", out, tiers), ["StillUnreplicated"])


# ---- stages 2, 3, 4 ---------------------------------------------------------------------------
def step_underbroadcast(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 2 (or its revisit) per tier on ``StillUnderbroadcast[T]``."""
    from .status import should_hold_broadcast

    should = should_hold_broadcast(run.servers_pdf).groupby("tier")["server"].apply(list).to_dict()
    _per_tier_step(run, groups, stage, "StillUnderbroadcast", "underbroadcast",
                   lambda r, bm, sink: loading.load_underbroadcast(r, bm, should.get(r.tier, []), limit, sink),
                   ranked=False)


def step_underreplicated(run: Run, groups, stage: int, limit: StageLimit, kind: str) -> None:
    """Stage 3 (``kind="StillUnderreplicated"``) or 4 (``"ToBecomeUnderreplicated"``) per tier,
    with the stage-3 callbacks."""
    members = _tier_groups(groups, kind)
    if not members:
        return
    reason = "underreplicated" if kind == "StillUnderreplicated" else "to_become_underreplicated"
    with_callbacks = kind == "StillUnderreplicated"
    data = _packed(members)
    tiers = sorted(run.meta["tiers"]) if with_callbacks else list(members)

    def body(runs, sink):
        bms = _unpacked(data)
        extra = []
        for tier, tier_run in runs.items():
            if with_callbacks:
                # Callback inputs, at the start of the stage: segments loaded elsewhere this step
                # that are overreplicated here, with their holders in drop order.
                elsewhere = BitMap()
                for other, bm in bms.items():
                    if other != tier:
                        elsewhere |= bm
                for idx in elsewhere:
                    if not tier_run.has(idx):
                        continue
                    seg = tier_run.segment(idx)
                    count = seg.count()
                    if count > seg.target:
                        extra.append({"kind": "over", "idx": idx, "tier": tier, "target": seg.target,
                                      "detail": json.dumps({"count": count, "drop_order": tier_run.drop_order(seg, seg.serving())})})
            if tier in bms:
                loading.load_underreplicated(tier_run, bms[tier], limit, sink, kind, reason)
        return extra

    out = _kernel_pass(run, tiers, body)
    drops = _callbacks(run, out) if with_callbacks else None
    names = [group_name(kind, t) for t in members]
    _merge(groups, _finish(run, stage, reason, out, tiers, drops), names)


def _callbacks(run: Run, out):
    """Dependent DROPs for this step's loads where the segment is overreplicated in another tier
    (``over`` rows of the tier pass), decided per bucket of segments."""
    from pyspark.sql import functions as F

    loads = out.filter("kind = 'op' and action = 'LOAD'").select(
        "idx", F.struct("o1", "o2", "o3", F.col("tier").alias("load_tier"), F.col("server").alias("load_server"),
                        "segment_id", "datasource", "size_bytes").alias("load"))
    over = out.filter("kind = 'over'").select("idx", F.struct("tier", "target", "detail").alias("over"))
    work = (loads.groupBy("idx").agg(F.collect_list("load").alias("loads"))
            .join(over.groupBy("idx").agg(F.collect_list("over").alias("over")), "idx")
            .withColumn("bucket", F.col("idx") % BUCKETS))

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        sink = OpSink()
        for r in pdf.sort_values("idx").to_dict("records"):
            lds = sorted(r["loads"], key=lambda x: (int(x["o1"]), x["o2"], float(x["o3"])))
            seg = {"idx": int(r["idx"]), "segment_id": lds[0]["segment_id"], "datasource": lds[0]["datasource"],
                   "size_bytes": int(lds[0]["size_bytes"])}
            tiers = {}
            for o in r["over"]:
                detail = json.loads(o["detail"])
                tiers[o["tier"]] = {"target": int(o["target"]), "count": int(detail["count"]), "drop_order": detail["drop_order"]}
            callbacks.add_callbacks(seg, [(x["load_tier"], x["load_server"], (int(x["o1"]), x["o2"], float(x["o3"])))
                                          for x in lds], tiers, sink)
        return out_frame(sink)

    return work.groupBy("bucket").applyInPandas(kernel, OUT_SCHEMA).select(*OUT_COLUMNS)


# ---- stages 5, 9 ------------------------------------------------------------------------------
def step_decommissioning(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 5 or 9 per tier on ``StillLoadedOnDecommServers[T]``."""
    _per_tier_step(run, groups, stage, "StillLoadedOnDecommServers", "decommissioning",
                   lambda r, bm, sink: loading.move_from_decommissioning(r, bm, limit, sink))


# ---- stages 7, 10, 11 -------------------------------------------------------------------------
def step_balancing(run: Run, groups, stage: int, limit: StageLimit, record: bool) -> None:
    """Stage 7 (``record`` ToBeBalanced) or 11 per tier on ``Balanceable[T]``."""
    import numpy as np

    eligible = _tier_groups(groups, "Balanceable")
    if not eligible:
        return
    visited = {t: groups.get(group_name("VisitedInBalancing", t), BitMap()) for t in eligible}
    data, seen = _packed(eligible), _packed(visited)
    cfg = run.config
    seed = int(cfg.get("balancerRandomSeed", 0) or 0)
    window = int(cfg.get("balancingIterationWindow", 100))
    threshold = int(cfg.get("balancingFailedIterationThreshold", 80))

    def body(runs, sink):
        pops, vis = _unpacked(data), _unpacked(seen)
        for tier, tier_run in runs.items():
            population = np.array(list(pops[tier]), dtype=np.int64)
            done = set(vis.get(tier, BitMap()))
            balancing.balance_tier(tier_run, population, limit, balancing.tier_rng(seed, stage, tier), done,
                                   window, threshold, sink, record)
            for i in sorted(done):
                sink.member(i, group_name("VisitedInBalancing", tier))

    out = _kernel_pass(run, list(eligible), body)
    result = _finish(run, stage, "balancing", out, list(eligible))
    _merge(groups, result, [n for n in result if split_group_name(n)[0] == "VisitedInBalancing"])


def step_to_be_balanced(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 10 per tier on ``ToBeBalanced[T]``; the segments it fully moved leave the group."""
    _per_tier_step(run, groups, stage, "ToBeBalanced", "to_be_balanced",
                   lambda r, bm, sink: balancing.balance_listed(r, bm, limit, sink))


# ---- stages 12, 13 ----------------------------------------------------------------------------
def _tier_tally(state):
    """Per (``idx``, ``tier``) of used load-rule segments: ``target``, ``count`` (servers holding
    it: serving with no drop, or loading), ``loaded`` (servers serving it with no drop, counted
    where the target is above 0), ``required``; from the state, in Spark."""
    from pyspark.sql import functions as F

    rep = state.filter("kind = 'replica' and idx >= 0")
    holds = ((F.col("served") | F.col("load_type").isNotNull()) & ~F.col("dropping")).cast("int")
    serving = (F.col("served") & ~F.col("dropping")).cast("int")
    per = rep.groupBy("idx", "tier").agg(F.sum(holds).alias("count"), F.sum(serving).alias("serving"))
    seg = state.filter("kind = 'segment' and rule_kind = 'load'").select("idx", "tier", "target", "required")
    return (seg.join(per, ["idx", "tier"], "left").fillna({"count": 0, "serving": 0})
            .withColumn("loaded", F.when(F.col("target") > 0, F.col("serving")).otherwise(0)).drop("serving"))


def step_unload(run: Run, groups, stage: int) -> None:
    """Stage 12: excess replicas (under the availability rule), drop-rule, unused and overshadowed
    segments (once what overshadows them is served)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    state = run.state()
    tally = _tier_tally(state)
    w = Window.partitionBy("idx")
    tally = (tally.withColumn("total_count", F.sum("count").over(w)).withColumn("total_target", F.sum("target").over(w))
             .withColumn("total_loaded", F.sum("loaded").over(w)).filter("total_count > total_target").cache())
    over = tally.filter("count > target").select("idx", "tier", F.lit(True).alias("_over"))
    tiers = [r[0] for r in over.select("tier").distinct().collect()]
    excess = None
    if tiers:
        flagged = state.filter(F.col("tier").isin(tiers)).join(over, ["idx", "tier"], "left")
        servers_pdf, cfg = run.servers_pdf, run.config

        def candidates(pdf: pd.DataFrame) -> pd.DataFrame:
            from .run import num_best_function

            tier = pdf["tier"].iloc[0]
            wanted = sorted(set(pdf.loc[(pdf["kind"] == "segment") & pdf["_over"].astype("boolean").fillna(False).to_numpy(bool), "idx"].astype("int64")))
            tier_run = TierRun(tier, pdf, servers_pdf[servers_pdf["tier"] == tier], num_best_function(cfg))
            extra = []
            for idx in wanted:
                seg = tier_run.segment(idx)
                cands = tier_run.drop_candidates(seg, seg.serving())
                extra.append({"kind": "candidates", "idx": idx, "tier": tier, "segment_id": seg.segment_id,
                              "datasource": seg.datasource, "size_bytes": seg.size_bytes,
                              "detail": json.dumps([list(c) for c in cands])})
            return out_frame(OpSink(), None, extra)

        cand = flagged.groupBy("tier").applyInPandas(candidates, OUT_SCHEMA).filter("kind = 'candidates'").select(
            "idx", "tier", "segment_id", "datasource", "size_bytes", "detail")
        per_tier = tally.join(cand, ["idx", "tier"], "left").select(
            "idx", "total_loaded", "required", "segment_id", "datasource", "size_bytes",
            F.struct("tier", "target", "count", "detail").alias("t"))
        work = (per_tier.groupBy("idx").agg(
            F.first("total_loaded").alias("loaded"), F.first("required").alias("required"),
            F.max("segment_id").alias("segment_id"), F.max("datasource").alias("datasource"),
            F.max("size_bytes").alias("size_bytes"), F.collect_list("t").alias("tiers"))
            .withColumn("bucket", F.col("idx") % BUCKETS))

        def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
            sink = OpSink()
            for r in pdf.sort_values("idx").to_dict("records"):
                tiers_ = {}
                for t in r["tiers"]:
                    cands = [tuple(c) for c in json.loads(t["detail"])] if t["detail"] else []
                    tiers_[t["tier"]] = {"target": int(t["target"]), "count": int(t["count"]), "candidates": cands}
                seg = {"idx": int(r["idx"]), "segment_id": r["segment_id"], "datasource": r["datasource"],
                       "size_bytes": int(r["size_bytes"]), "loaded": int(r["loaded"]), "required": int(r["required"] or 0)}
                sink.defer(seg, unload.unload_excess(seg, tiers_, sink))
            return out_frame(sink)

        excess = work.groupBy("bucket").applyInPandas(kernel, OUT_SCHEMA).select(*OUT_COLUMNS)

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
    everywhere = conform(everywhere, OUT_FIELDS)
    out = everywhere if excess is None else excess.unionByName(everywhere)
    out = out.cache()
    deferred = out.filter("kind = 'deferred'").agg(
        F.count("*").alias("segments"), F.sum("o1").alias("drops"),
        F.slice(F.array_sort(F.collect_list("segment_id")), 1, 5).alias("examples")).collect()[0]
    facts = {"deferred_drops": int(deferred["drops"] or 0), "deferred_segments": int(deferred["segments"]),
             "deferred_examples": list(deferred["examples"] or [])}
    run.write_ops(stage, "unload", out, facts, state=apply_drops(state, out.filter("kind = 'op'")))
    out.unpersist()
    tally.unpersist()
    if facts["deferred_drops"]:
        log.info("stage %d: %d drops of %d segments deferred by the availability rule", stage,
                 facts["deferred_drops"], facts["deferred_segments"])


def step_broadcast_on_decomm(run: Run, groups, stage: int) -> None:
    """Stage 13: decommissioning servers holding only broadcast segments drop them all."""
    from pyspark.sql import functions as F

    only = run.servers_pdf[run.servers_pdf["broadcast_only"]]["server"].tolist()
    if not only:
        return
    state = run.state()
    rows = state.filter(F.col("kind") == "replica").filter("idx >= 0 and served and not dropping").filter(F.col("server").isin(only))
    ops = conform(rows.select(
        F.lit("op").alias("kind"), F.lit("DROP").alias("action"), "idx", "segment_id", "datasource", "tier", "server",
        "size_bytes", F.lit("broadcast_on_decommissioning").alias("reason"), F.lit(0).cast("long").alias("o1"),
        F.col("server").alias("o2"), F.col("idx").cast("double").alias("o3")), OUT_FIELDS).cache()
    run.write_ops(stage, "broadcast_on_decommissioning", ops, state=apply_drops(state, ops))
    ops.unpersist()
