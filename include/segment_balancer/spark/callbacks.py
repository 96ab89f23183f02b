"""The stage-3 callbacks: the dependent DROPs of a step's loads where the segment is
overreplicated in another tier, decided per bucket of segments over the tier pass's output.

The tier pass (:mod:`segment_balancer.planner.stages.s03_underreplicated`) reports, per segment it
loads elsewhere, the tiers where it is overreplicated with their holders in drop order (``over``
rows); one task per bucket of segments (``idx`` modulo the buckets; a Spark task, or a call on
the driver: :func:`~segment_balancer.spark.session.run_tasks`) reads the pass's output files with
pyarrow, runs :func:`segment_balancer.planner.kernels.callbacks.add_callbacks` on each of its
segments and writes its drops beside the pass's task files, where the step's commit reads them.
Source: ALGORITHM.md "Callbacks"; seed 000 stage 3.
"""

from __future__ import annotations

import json

from segment_balancer.common.files import filesystem
from segment_balancer.common.spark_columns import parallelism
from segment_balancer.planner.kernels import callbacks
from segment_balancer.planner.operations import ORDER_COLUMNS, Action, OpOrder
from segment_balancer.planner.runstate import OpSink, SegmentRef
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.tierpass import PassResult, write_out
from segment_balancer.spark.workdir import out_frame, read_output

_LOAD_COLUMNS = ["idx", *ORDER_COLUMNS, "tier", "server", "segment_id", "datasource", "size_bytes"]
_OVER_COLUMNS = ["idx", "tier", "target", "detail"]


def callback_file(bucket: int) -> str:
    """The name of bucket ``bucket``'s drops among the pass's task files."""
    return f"callbacks-{bucket:05d}.parquet"


def callback_drops(spark, work_uri: str, result: PassResult) -> int:
    """Decide the dependent DROPs of the pass ``result``'s loads (its ``op`` LOAD rows) where the
    segment is overreplicated in another tier (its ``over`` rows), one task per bucket of segments
    (the application's cores), each writing :func:`callback_file` into ``result.out_dir`` (rows of
    ``OUT_COLUMNS``; none when the bucket drops nothing). Returns the number of drops."""
    buckets = parallelism(spark)
    items = [(work_uri, result.out_dir, bucket, buckets) for bucket in range(buckets)]
    return sum(run_tasks(spark, items, _bucket_drops))


def _order_of(row: dict) -> OpOrder:
    """The :class:`OpOrder` of an ``op`` row of a step's output."""
    idx, key, seq, after = (row[c] for c in ORDER_COLUMNS)
    return OpOrder(int(idx), key, int(seq), int(after))


def _bucket_drops(item: tuple[str, str, int, int]) -> int:
    """One bucket of :func:`callback_drops`: ``(work_uri, out_dir, bucket, buckets)``; segments in
    ``idx`` order, each segment's loads in their scheduling order (their ``OpOrder``)."""
    work_uri, rel, bucket, buckets = item
    loads = read_output(work_uri, rel, _LOAD_COLUMNS, "op", action=Action.LOAD).to_pandas()
    over = read_output(work_uri, rel, _OVER_COLUMNS, "over").to_pandas()
    loads = loads[loads["idx"] % buckets == bucket]
    over = over[over["idx"] % buckets == bucket]
    loads_of = {int(idx): rows for idx, rows in loads.groupby("idx")}
    sink = OpSink()
    for idx, overs in sorted(over.groupby("idx"), key=lambda kv: kv[0]):
        if int(idx) not in loads_of:
            continue
        lds = sorted(loads_of[int(idx)].to_dict("records"), key=_order_of)
        first = lds[0]
        seg = SegmentRef(int(idx), first["segment_id"], first["datasource"], int(first["size_bytes"]))
        tiers = {}
        for o in overs.to_dict("records"):
            detail = json.loads(o["detail"])
            tiers[o["tier"]] = callbacks.OverreplicatedTier(
                int(o["target"]), int(detail["count"]), list(detail["drop_order"])
            )
        scheduled = [callbacks.ScheduledLoad(x["tier"], x["server"], _order_of(x)) for x in lds]
        callbacks.add_callbacks(seg, scheduled, tiers, sink)
    if sink.ops:
        fs, base = filesystem(work_uri)
        write_out(fs, f"{base}/{rel}/{callback_file(bucket)}", out_frame(sink))
    return len(sink.ops)
