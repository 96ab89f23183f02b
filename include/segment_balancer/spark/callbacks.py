"""The stage-3 callbacks in Spark: the dependent DROPs of a step's loads where the segment is
overreplicated in another tier, decided per bucket of segments over the tier pass's output.

The tier pass (:mod:`segment_balancer.planner.stages.s03_underreplicated`) reports, per segment it
loads elsewhere, the tiers where it is overreplicated with their holders in drop order (``over``
rows); one ``applyInPandas`` task per bucket of segments runs
:func:`segment_balancer.planner.kernels.callbacks.add_callbacks` on each. Source: ALGORITHM.md
"Callbacks"; seed 000 stage 3.
"""

from __future__ import annotations

import json

import pandas as pd

from segment_balancer.planner.kernels import callbacks
from segment_balancer.planner.runstate import OpSink, SegmentRef
from segment_balancer.spark.workdir import OUT_COLUMNS, OUT_SCHEMA, out_frame

BUCKETS = 16
"""Spark tasks deciding the callbacks (segments by ``idx`` modulo)."""


def callback_drops(out):
    """Dependent DROPs for this step's loads where the segment is overreplicated in another tier
    (``out``'s ``over`` rows), decided per bucket of segments (Spark DataFrame of ``OUT_COLUMNS``)."""
    from pyspark.sql import functions as F

    loads = out.filter("kind = 'op' and action = 'LOAD'").select(
        "idx",
        F.struct(
            "o1",
            "o2",
            "o3",
            F.col("tier").alias("load_tier"),
            F.col("server").alias("load_server"),
            "segment_id",
            "datasource",
            "size_bytes",
        ).alias("load"),
    )
    over = out.filter("kind = 'over'").select("idx", F.struct("tier", "target", "detail").alias("over"))
    work = (
        loads.groupBy("idx")
        .agg(F.collect_list("load").alias("loads"))
        .join(over.groupBy("idx").agg(F.collect_list("over").alias("over")), "idx")
        .withColumn("bucket", F.col("idx") % BUCKETS)
    )

    def kernel(pdf: pd.DataFrame) -> pd.DataFrame:
        sink = OpSink()
        for r in pdf.sort_values("idx").to_dict("records"):
            lds = sorted(r["loads"], key=lambda x: (int(x["o1"]), x["o2"], float(x["o3"])))
            seg = SegmentRef(int(r["idx"]), lds[0]["segment_id"], lds[0]["datasource"], int(lds[0]["size_bytes"]))
            tiers = {}
            for o in r["over"]:
                detail = json.loads(o["detail"])
                tiers[o["tier"]] = callbacks.OverreplicatedTier(
                    int(o["target"]), int(detail["count"]), list(detail["drop_order"])
                )
            loads = [
                callbacks.ScheduledLoad(x["load_tier"], x["load_server"], (int(x["o1"]), x["o2"], float(x["o3"])))
                for x in lds
            ]
            callbacks.add_callbacks(seg, loads, tiers, sink)
        return out_frame(sink)

    return work.groupBy("bucket").applyInPandas(kernel, OUT_SCHEMA).select(*OUT_COLUMNS)
