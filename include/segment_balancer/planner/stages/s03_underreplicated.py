"""Stage 3: load underreplicated segments on their top ``B`` servers of the tier up to the target,
with the callbacks that drop the replica a load makes excess elsewhere (ALGORITHM.md stage 3 and
"Callbacks"; seed 000 stage 3).

Reads ``Underreplicated[T]`` (start of run) as ``StillUnderreplicated[T]``; writes
``StillUnderreplicated[T]``. Limit: ``run.limit(3)`` (loading queue). Two passes: one Spark task
per tier loads and reports, for the segments loaded in other tiers, whether it is overreplicated
here and its holders in drop order (the state at the start of the stage); a second Spark job per
bucket of segments decides the dependent drops (:func:`segment_balancer.planner.kernels.callbacks.add_callbacks`),
which are applied to their tiers before the stage commits.
"""

from __future__ import annotations

import json

import pandas as pd
from pyroaring import BitMap

from segment_balancer.planner.kernels import callbacks, loading
from segment_balancer.planner.kernels.state import OpSink, SegmentRef, StageLimit, group_name
from segment_balancer.spark.workdir import OUT_COLUMNS, OUT_SCHEMA, Run, out_frame
from segment_balancer.spark.tierpass import finish, kernel_pass, merge, packed, tier_groups, unpacked
from segment_balancer.planner.stages._groups import copy_groups

STAGE = 3
READS = ("Underreplicated[T]",)
WRITES = ("StillUnderreplicated[T]",)
BUCKETS = 16
"""Spark tasks deciding the callbacks (segments by ``idx`` modulo)."""


def start_groups(groups) -> None:
    """``StillUnderreplicated[T]`` starts as ``Underreplicated[T]``."""
    copy_groups(groups, "Underreplicated", "StillUnderreplicated")


def stage(run: Run, groups) -> None:
    """Run stage 3 on ``groups`` (after :func:`start_groups`; updated in place)."""
    step(run, groups, STAGE, run.limit(STAGE))


def step(run: Run, groups, stage: int, limit: StageLimit, kind: str = "StillUnderreplicated") -> None:
    """Loads up to the target for the members of ``kind[T]`` in each tier: stage 3
    (``StillUnderreplicated``, with callbacks), stage 4 (``ToBecomeUnderreplicated``, without)
    and their revisits. Replaces ``kind[T]`` with the segments still short."""
    members = tier_groups(groups, kind)
    if not members:
        return
    reason = "underreplicated" if kind == "StillUnderreplicated" else "to_become_underreplicated"
    with_callbacks = kind == "StillUnderreplicated"
    data = packed(members)
    tiers = sorted(run.meta["tiers"]) if with_callbacks else list(members)

    def body(runs, sink):
        bms = unpacked(data)
        extra = []
        for tier, tier_run in runs.items():
            if with_callbacks:
                extra += _overreplicated_here(tier_run, bms)
            if tier in bms:
                loading.load_underreplicated(tier_run, bms[tier], limit, sink, kind, reason)
        return extra

    result = kernel_pass(run, stage, reason, tiers, body)
    drops = _callbacks(result.out) if with_callbacks else None
    merge(groups, finish(run, stage, reason, result, drops), [group_name(kind, t) for t in members])


def _overreplicated_here(tier_run, bms: dict[str, BitMap]) -> list[dict]:
    """``over`` rows: the segments this step loads in other tiers that are overreplicated in
    ``tier_run``'s tier, with their count and holders in drop order, at the start of the stage."""
    elsewhere = BitMap()
    for other, bm in bms.items():
        if other != tier_run.tier:
            elsewhere |= bm
    rows = []
    for idx in elsewhere:
        if not tier_run.has(idx):
            continue
        seg = tier_run.segment(idx)
        count = seg.count()
        if count > seg.target:
            rows.append({"kind": "over", "idx": idx, "tier": tier_run.tier, "target": seg.target,
                         "detail": json.dumps({"count": count, "drop_order": tier_run.drop_order(seg, seg.serving())})})
    return rows


def _callbacks(out):
    """Dependent DROPs for this step's loads where the segment is overreplicated in another tier
    (``out``'s ``over`` rows), decided per bucket of segments (Spark DataFrame of ``OUT_COLUMNS``)."""
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
            seg = SegmentRef(int(r["idx"]), lds[0]["segment_id"], lds[0]["datasource"], int(lds[0]["size_bytes"]))
            tiers = {}
            for o in r["over"]:
                detail = json.loads(o["detail"])
                tiers[o["tier"]] = callbacks.OverreplicatedTier(int(o["target"]), int(detail["count"]), list(detail["drop_order"]))
            loads = [callbacks.ScheduledLoad(x["load_tier"], x["load_server"], (int(x["o1"]), x["o2"], float(x["o3"])))
                     for x in lds]
            callbacks.add_callbacks(seg, loads, tiers, sink)
        return out_frame(sink)

    return work.groupBy("bucket").applyInPandas(kernel, OUT_SCHEMA).select(*OUT_COLUMNS)
