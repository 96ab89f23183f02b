"""The steps of stages 1–13 as Spark jobs around the greedy kernels of ``engine/``.

A step (1) builds its work items with Spark joins over the prepared tables, the op log and the
input groups, (2) runs the kernel per tier (or, for the cross-tier stage 1, in one task; for the
per-segment stage 12 and callbacks, per bucket of segments) inside ``applyInPandas``, (3) appends
its ops to the op log and (4) returns its groups as bitmaps.

Source: ALGORITHM.md "Stages"; seed 000 "Proposed algorithm".
"""

from __future__ import annotations

import logging

import pandas as pd
from pyroaring import BitMap

from . import groups as G
from .engine import balancing, callbacks, loading, unload
from .engine.state import OpSink, ServerHolder, StageLimit, group_name, split_group_name
from .run import KERNEL_SCHEMA, Run, sink_frame
from .status import current_replicas, replicated_status, should_hold_broadcast, tier_state

log = logging.getLogger(__name__)
BUCKETS = 16


def _list(value) -> list:
    """A Spark array cell (None, list or numpy array) as a list."""
    return [] if value is None else list(value)


def _tier_groups(groups, kind: str) -> list[str]:
    return sorted(n for n in groups if split_group_name(n)[0] == kind and split_group_name(n)[1] is not None and len(groups[n]))


def _members(run: Run, groups, names):
    """(``idx``, ``tier``, ``group``) of the named groups."""
    from pyspark.sql import functions as F

    return G.members_frame(run.spark, groups, names).withColumn("tier", F.regexp_extract("group", r"\[(.*)\]$", 1))


def _work_items(run: Run, members, with_ranking: bool = True):
    """Rows for the loading kernels: members joined with targets, current state and rankings."""
    from pyspark.sql import functions as F

    state = tier_state(current_replicas(run.table("replicas"), run.ops()), run.servers_df())
    seg = run.table("segments").select("idx", "segment_id", "datasource", "size_bytes")
    rows = (members.join(run.table("targets"), ["idx", "tier"], "left").join(state, ["idx", "tier"], "left")
            .join(seg, "idx").fillna({"target": 0, "count": 0, "tier_pos": 0}))
    if with_ranking:
        rows = rows.join(run.table("rankings").select("idx", "tier", F.col("servers").alias("ranking")), ["idx", "tier"], "left")
    return rows


def _candidates(servers: dict[str, ServerHolder], tier: str) -> dict[str, ServerHolder]:
    return {n: s for n, s in servers.items() if s.tier == tier and not s.decommissioning}


def _prep_row(row: dict, servers: dict[str, ServerHolder], num_best) -> dict:
    cands = _candidates(servers, row["tier"])
    ranking = [n for n in (row.get("ranking") if row.get("ranking") is not None else []) if n in cands]
    row["ranking"] = ranking
    row["present"] = set(row.get("present") if row.get("present") is not None else [])
    row["b"] = num_best(len(cands), int(row["target"])) if int(row["target"]) > 0 else 0
    return row


def _apply(df, key_col, fn):
    return df.groupBy(key_col).applyInPandas(fn, KERNEL_SCHEMA)


def _finish(run: Run, stage: int, step: str, out) -> dict[str, BitMap]:
    out = out.cache()
    run.write_ops(stage, step, out)
    result = G.bitmaps_from_members(out.filter("kind = 'member'").select("group", "idx"))
    out.unpersist()
    return result


def _merge(groups, result, replaced):
    """Input groups ``replaced`` take their new members from ``result``; other result groups grow."""
    for name in replaced:
        groups[name] = result.pop(name, BitMap())
    for name, bm in result.items():
        groups[name] = groups.get(name, BitMap()) | bm


# ---- stage 1 ----------------------------------------------------------------------------------
def step_unreplicated(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 1 (or its revisit): ``StillUnreplicated`` → one load each (one task, cross-tier)."""
    from pyspark.sql import functions as F

    bm = groups.get("StillUnreplicated", BitMap())
    if not len(bm):
        return
    members = G.members_frame(run.spark, groups, ["StillUnreplicated"]).select("idx")
    tiers = run.meta["tiers"]
    prio = run.spark.createDataFrame([(t, int(v["priority"])) for t, v in tiers.items()], "tier string, tier_priority int")
    rows = _work_items(run, members.join(run.table("targets").select("idx", "tier"), "idx")).join(F.broadcast(prio), "tier")
    servers, cfg = run.server_holders(), run.config
    step = "unreplicated"

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        from .run import num_best_function

        num_best, sink = num_best_function(cfg), OpSink()
        recs = [_prep_row(r, servers, num_best) for r in pdf.sort_values(["idx", "tier"]).to_dict("records")]
        per_seg: dict[int, list] = {}
        for r in recs:
            per_seg.setdefault(int(r["idx"]), []).append(r)
        loading.load_unreplicated((per_seg[i] for i in sorted(per_seg)), servers, limit, sink, stage)
        return sink_frame(sink)

    result = _finish(run, stage, step, _apply(rows.withColumn("k", F.lit(0)), "k", kernel))
    _merge(groups, result, ["StillUnreplicated"])


# ---- stages 2, 3, 4 ---------------------------------------------------------------------------
def step_underbroadcast(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 2 (or its revisit) per tier on ``StillUnderbroadcast[T]``."""
    names = _tier_groups(groups, "StillUnderbroadcast")
    if not names:
        return
    rows = _work_items(run, _members(run, groups, names), with_ranking=False)
    servers = run.server_holders()
    should = should_hold_broadcast(run.servers_pdf).groupby("tier")["server"].apply(list).to_dict()

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        sink = OpSink()
        recs = pdf.sort_values("idx").to_dict("records")
        for r in recs:
            r["present"] = set(r["present"] if r["present"] is not None else [])
            r["should"] = should.get(r["tier"], [])
        loading.load_underbroadcast(recs, servers, limit, sink)
        return sink_frame(sink)

    _merge(groups, _finish(run, stage, "underbroadcast", _apply(rows, "tier", kernel)), names)


def step_underreplicated(run: Run, groups, stage: int, limit: StageLimit, kind: str) -> None:
    """Stage 3 (``kind="StillUnderreplicated"``) or 4 (``"ToBecomeUnderreplicated"``) per tier,
    with the stage-3 callbacks."""
    names = _tier_groups(groups, kind)
    if not names:
        return
    rows = _work_items(run, _members(run, groups, names))
    servers, cfg = run.server_holders(), run.config
    reason = "underreplicated" if kind == "StillUnderreplicated" else "to_become_underreplicated"

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        from .run import num_best_function

        num_best, sink = num_best_function(cfg), OpSink()
        recs = [_prep_row(r, servers, num_best) for r in pdf.sort_values("idx").to_dict("records")]
        loading.load_underreplicated(recs, servers, limit, sink, kind, reason)
        return sink_frame(sink)

    out = _apply(rows, "tier", kernel).cache()
    if kind == "StillUnderreplicated":
        out = out.unionByName(_callbacks(run, out))
    _merge(groups, _finish(run, stage, reason, out), names)


def _callbacks(run: Run, out):
    """Dependent DROPs for this step's loads where the segment is overreplicated in another tier."""
    from pyspark.sql import functions as F

    loads = out.filter("kind = 'op' and action = 'LOAD'").select(
        "idx", F.col("tier").alias("load_tier"), F.col("server").alias("load_server"), "o1", "o2", "o3")
    seg_ids = loads.select("idx").distinct()
    state = tier_state(current_replicas(run.table("replicas"), run.ops()), run.servers_df()).join(seg_ids, "idx")
    st = (state.join(run.table("targets").select("idx", "tier", "target"), ["idx", "tier"], "left").fillna({"target": 0})
          .filter("count > target")
          .join(run.table("rankings").select("idx", "tier", "servers", "costs"), ["idx", "tier"], "left"))
    packed = st.groupBy("idx").agg(F.collect_list(F.struct("tier", "target", "count", "holders", "servers", "costs")).alias("over"))
    lp = loads.groupBy("idx").agg(F.sort_array(F.collect_list(F.struct("o3", "load_tier", "load_server", "o1", "o2"))).alias("loads"))
    seg = run.table("segments").select("idx", "segment_id", "datasource", "size_bytes")
    work = lp.join(packed, "idx").join(seg, "idx").withColumn("bucket", F.col("idx") % BUCKETS)
    available = _start_available(run)

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        sink = OpSink()
        for r in pdf.sort_values("idx").to_dict("records"):
            tiers = {o["tier"]: {"target": int(o["target"]), "count": int(o["count"]),
                                 "holders": set(_list(o["holders"])),
                                 "drop_order": callbacks.drop_order(_list(o["holders"]), dict(zip(_list(o["servers"]), _list(o["costs"]))), available)}
                     for o in r["over"]}
            lds = [(x["load_tier"], x["load_server"], (int(x["o1"]), x["o2"], float(x["o3"]))) for x in r["loads"]]
            callbacks.add_callbacks(r, lds, tiers, sink)
        return sink_frame(sink)

    return _apply(work, "bucket", kernel)


def _start_available(run: Run) -> dict[str, int]:
    pdf = run.servers_pdf
    return dict(zip(pdf["server"], (pdf["max_size"] - pdf["projected_size"]).astype("int64")))


# ---- stages 5, 9 ------------------------------------------------------------------------------
def step_decommissioning(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 5 or 9 per tier on ``StillLoadedOnDecommServers[T]``."""
    names = _tier_groups(groups, "StillLoadedOnDecommServers")
    if not names:
        return
    rows = _work_items(run, _members(run, groups, names))
    servers, cfg = run.server_holders(), run.config

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        from .run import num_best_function

        num_best, sink = num_best_function(cfg), OpSink()
        recs = [_prep_row(r, servers, num_best) for r in pdf.sort_values("idx").to_dict("records")]
        for r in recs:
            r["decommissioning_holders"] = list(r["decommissioning_holders"] if r["decommissioning_holders"] is not None else [])
        loading.move_from_decommissioning(recs, servers, limit, sink)
        return sink_frame(sink)

    _merge(groups, _finish(run, stage, "decommissioning", _apply(rows, "tier", kernel)), names)


# ---- stages 7, 10, 11 -------------------------------------------------------------------------
def _balancing_rows(run: Run, groups, flags: dict[str, str]):
    """Per tier every replica row of used replicated segments, with group flags."""
    from pyspark.sql import functions as F

    cur = current_replicas(run.table("replicas"), run.ops())
    seg = run.table("segments").filter("rule_kind = 'load'").select("idx", "segment_id", "datasource", "start_ms", "end_ms", "size_bytes")
    rows = (cur.join(seg, "idx").join(F.broadcast(run.servers_df().select("server", "decommissioning")), "server")
            .join(run.table("targets").select("idx", "tier", "target"), ["idx", "tier"], "left").fillna({"target": 0}))
    for col, kind in flags.items():
        names = _tier_groups(groups, kind)
        if names:
            m = _members(run, groups, names).select("idx", "tier", F.lit(True).alias(col))
            rows = rows.join(m, ["idx", "tier"], "left")
        else:
            rows = rows.withColumn(col, F.lit(None).cast("boolean"))
    return rows.fillna({c: False for c in flags})


def _tier_model(pdf: pd.DataFrame, servers: dict[str, ServerHolder], tier: str):
    cands = _candidates(servers, tier)
    segs, seg_rows, placement, holders, present = {}, {}, {}, {}, {}
    for r in pdf.to_dict("records"):
        i = int(r["idx"])
        segs[i] = (r["datasource"], int(r["start_ms"]), int(r["end_ms"]))
        seg_rows[i] = {"idx": i, "segment_id": r["segment_id"], "datasource": r["datasource"],
                       "size_bytes": int(r["size_bytes"]), "target": int(r["target"])}
        holders.setdefault(i, set())
        present.setdefault(i, set())
        if r["present"]:
            present[i].add(r["server"])
        if r["server"] in cands:
            if r["holds"]:
                placement.setdefault(r["server"], set()).add(i)
            if r["serving"]:
                holders[i].add(r["server"])
    return cands, segs, seg_rows, balancing.TierProjection(segs, placement), holders, present


def step_balancing(run: Run, groups, stage: int, limit: StageLimit, record: bool) -> None:
    """Stage 7 (``record`` ToBeBalanced) or 11 per tier on ``Balanceable[T]``."""
    rows = _balancing_rows(run, groups, {"eligible": "Balanceable", "visited": "VisitedInBalancing"})
    servers, cfg = run.server_holders(), run.config
    seed = int(cfg.get("balancerRandomSeed", 0) or 0)
    window = int(cfg.get("balancingIterationWindow", 100))
    threshold = int(cfg.get("balancingFailedIterationThreshold", 80))

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        import numpy as np

        from .run import num_best_function

        tier = pdf["tier"].iloc[0]
        cands, segs, seg_rows, proj, holders, present = _tier_model(pdf, servers, tier)
        population = np.array(sorted(set(pdf.loc[pdf["eligible"], "idx"].astype("int64"))), dtype=np.int64)
        visited = set(pdf.loc[pdf["visited"], "idx"].astype("int64"))
        sink = OpSink()
        balancing.balance_tier(tier, population, seg_rows, proj, holders, present, cands, limit,
                               num_best_function(cfg), balancing.tier_rng(seed, stage, tier), visited,
                               window, threshold, sink, stage, record)
        for i in sorted(visited):
            sink.member(i, group_name("VisitedInBalancing", tier))
        return sink_frame(sink)

    result = _finish(run, stage, "balancing", _apply(rows, "tier", kernel))
    _merge(groups, result, [n for n in result if split_group_name(n)[0] == "VisitedInBalancing"])


def step_to_be_balanced(run: Run, groups, stage: int, limit: StageLimit) -> None:
    """Stage 10 per tier on ``ToBeBalanced[T]``; the segments it fully moved leave the group."""
    names = _tier_groups(groups, "ToBeBalanced")
    if not names:
        return
    rows = _balancing_rows(run, groups, {"listed": "ToBeBalanced"})
    servers, cfg = run.server_holders(), run.config

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        from .run import num_best_function

        tier = pdf["tier"].iloc[0]
        cands, segs, seg_rows, proj, holders, present = _tier_model(pdf, servers, tier)
        listed = sorted(set(pdf.loc[pdf["listed"], "idx"].astype("int64")))
        sink = OpSink()
        balancing.balance_listed(tier, listed, seg_rows, proj, holders, present, cands, limit, num_best_function(cfg), sink)
        return sink_frame(sink)

    _merge(groups, _finish(run, stage, "to_be_balanced", _apply(rows, "tier", kernel)), names)


# ---- stages 12, 13 ----------------------------------------------------------------------------
def step_unload(run: Run, groups, stage: int) -> None:
    """Stage 12: excess replicas (under the availability rule), drop-rule, unused and overshadowed
    segments (once what overshadows them is served)."""
    from pyspark.sql import functions as F

    replicas, ops = run.table("replicas"), run.ops()
    cur = current_replicas(replicas, ops)
    state = tier_state(cur, run.servers_df())
    st = replicated_status(run.table("segments"), run.table("targets"), state).filter("total_count > total_target")
    st = st.join(run.table("rankings").select("idx", "tier", "servers", "costs"), ["idx", "tier"], "left")
    packed = st.groupBy("idx").agg(F.collect_list(F.struct("tier", "target", "count", "holders", "servers", "costs")).alias("tiers"))
    # loaded(s): servers of tiers with target > 0 that serve s with no drop queued or scheduled.
    loaded = (cur.filter("serving").join(run.table("targets").filter("target > 0").select("idx", "tier"), ["idx", "tier"])
              .groupBy("idx").agg(F.count("*").alias("loaded")))
    seg = run.table("segments").select("idx", "segment_id", "datasource", "size_bytes", "required")
    work = (packed.join(seg, "idx").join(loaded, "idx", "left").fillna({"loaded": 0})
            .withColumn("bucket", F.col("idx") % BUCKETS))
    available = _start_available(run)
    decommissioning = frozenset(run.servers_pdf.loc[run.servers_pdf["decommissioning"], "server"])

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        sink = OpSink()
        for r in pdf.sort_values("idx").to_dict("records"):
            tiers = {t["tier"]: {"target": int(t["target"]), "count": int(t["count"]), "holders": set(_list(t["holders"])),
                                 "costs": dict(zip(_list(t["servers"]), _list(t["costs"])))} for t in r["tiers"]}
            sink.defer(r, unload.unload_excess(r, tiers, available, decommissioning, sink))
        return sink_frame(sink)

    excess = _apply(work, "bucket", kernel)
    segs = run.table("segments")
    overshadowed = F.col("idx").isNull() & F.col("overshadowed")
    reason = (F.when(overshadowed & ~F.col("waiting"), "overshadowed").when(overshadowed, F.lit(None).cast("string"))
              .when(F.col("idx").isNull(), "unused").when(F.col("rule_kind") == "drop", "drop_rule"))
    doomed = segs.select("segment_id", "datasource", "size_bytes", "idx", reason.alias("reason")).filter("reason is not null")
    serving = replicas.filter("served and not queued_drop").select("segment_id", "server", "tier")
    if ops is not None:
        dropped = ops.filter("action = 'DROP'").select("segment_id", "server").distinct()
        serving = serving.join(dropped, ["segment_id", "server"], "left_anti")
    everywhere = doomed.join(serving, "segment_id").select(
        F.lit("op").alias("kind"), F.lit("DROP").alias("action"), F.lit(None).cast("string").alias("queue_type"),
        F.coalesce("idx", F.lit(-1)).alias("idx"), "segment_id", "datasource", "tier", "server", "size_bytes", "reason",
        F.lit(None).cast("string").alias("dep_server"),
        F.coalesce("idx", F.lit((1 << 62))).alias("o1"), F.concat_ws("|", "segment_id", "server").alias("o2"),
        F.lit(0.0).alias("o3"), F.lit(None).cast("string").alias("group"))
    out = excess.unionByName(everywhere).cache()
    deferred = out.filter("kind = 'deferred'").agg(
        F.count("*").alias("segments"), F.sum("o1").alias("drops"),
        F.slice(F.array_sort(F.collect_list("segment_id")), 1, 5).alias("examples")).collect()[0]
    facts = {"deferred_drops": int(deferred["drops"] or 0), "deferred_segments": int(deferred["segments"]),
             "deferred_examples": list(deferred["examples"] or [])}
    run.write_ops(stage, "unload", out, facts)
    out.unpersist()
    if facts["deferred_drops"]:
        log.info("stage %d: %d drops of %d segments deferred by the availability rule", stage,
                 facts["deferred_drops"], facts["deferred_segments"])


def step_broadcast_on_decomm(run: Run, groups, stage: int) -> None:
    """Stage 13: decommissioning servers holding only broadcast segments drop them all."""
    from pyspark.sql import functions as F

    only = run.servers_pdf[run.servers_pdf["broadcast_only"]]["server"].tolist()
    if not only:
        return
    cur = current_replicas(run.table("replicas"), run.ops()).filter(F.col("serving") & F.col("server").isin(only))
    seg = run.table("segments").select("idx", "segment_id", "datasource", "size_bytes")
    ops = cur.join(seg, "idx").select(
        F.lit("op").alias("kind"), F.lit("DROP").alias("action"), F.lit(None).cast("string").alias("queue_type"),
        "idx", "segment_id", "datasource", "tier", "server", "size_bytes",
        F.lit("broadcast_on_decommissioning").alias("reason"), F.lit(None).cast("string").alias("dep_server"),
        F.lit(0).cast("long").alias("o1"), F.col("server").alias("o2"), F.col("idx").cast("double").alias("o3"),
        F.lit(None).cast("string").alias("group"))
    _finish(run, stage, "broadcast_on_decommissioning", ops)
