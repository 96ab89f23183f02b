"""Stage 0 ``used_segments``: which used segments are visible, standby or overshadowed, as a Spark job.

The timeline of one datasource (:func:`segment_balancer.druid.timeline.classify_datasource`) is computed
per (datasource, time bucket): every segment is clipped to each bucket of ``BUCKET_MS`` it overlaps
(instants clamped to 1900–2200, so eternity segments span a bounded number of buckets). Whether a
piece is covered depends only on segments overlapping that piece, so a segment is overshadowed
exactly when every piece of it is; visible when some piece is visible; standby otherwise. The
buckets spread one large datasource over many tasks.

Source: seed 003 (Druid issue #7491), Druid ``VersionedIntervalTimeline`` / ``SegmentTimeline``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from segment_balancer.common.files import staged_parquet, write_json_atomic
from segment_balancer.druid.snapshot.errors import SnapshotError

BUCKET_MS = 366 * 86_400_000
CLAMP_LO_MS = -2_208_988_800_000  # 1900-01-01
CLAMP_HI_MS = 7_258_118_400_000  # 2200-01-01
TIMELINE_COLUMNS = ["segment_id", "start_ms", "end_ms", "version", "shard_type", "partition_num",
                    "num_core_partitions", "start_root_partition_id", "end_root_partition_id",
                    "minor_version", "atomic_update_group_size"]
PIECE_SCHEMA = "segment_id string, status string, overshadowed_by array<string>, reason string, error string"
STATUS_RANK = {"visible": 0, "standby": 1, "overshadowed": 2}


def _classify_piece(pdf: pd.DataFrame) -> pd.DataFrame:
    """``classify_datasource`` on one (datasource, bucket) group of clipped pieces."""
    from segment_balancer.druid.timeline import classify_datasource

    try:
        out = classify_datasource(pdf[TIMELINE_COLUMNS].reset_index(drop=True))
    except ValueError as exc:
        first = pdf.sort_values("line").iloc[0]
        return pd.DataFrame([{"segment_id": first["segment_id"], "status": None, "overshadowed_by": [],
                              "reason": None, "error": f"datasource {first['datasource']}: {exc}"}])
    return pd.DataFrame({"segment_id": out["segment_id"], "status": out["status"],
                         "overshadowed_by": [list(x) for x in out["overshadowed_by"]],
                         "reason": out["reason"], "error": None})


def classify(segments):
    """Timeline status of every used segment, lazily.

    ``segments``: the good lines of :func:`segment_balancer.druid.snapshot.segments.read_segments`.
    Returns a DataFrame (``segment_id``, ``status`` — ``visible``/``standby``/``overshadowed`` —,
    ``overshadowed_by`` array<string>, ``reason``, ``timeline_error``) for used segments.
    ``timeline_error`` (str) is set on the first segment of a datasource whose segments cannot
    form a timeline (e.g. two overlapping intervals with the same version): the caller refuses it
    (file ``segments.jsonl``) once it has the table.
    """
    from pyspark.sql import functions as F

    used = segments.filter("used")
    lo = F.greatest(F.col("start_ms"), F.lit(CLAMP_LO_MS))
    hi = F.least(F.col("end_ms") - 1, F.lit(CLAMP_HI_MS))
    bucket = lambda c: F.floor((c - F.lit(CLAMP_LO_MS)) / F.lit(BUCKET_MS)).cast("long")  # noqa: E731
    pieces = used.withColumn("bucket", F.explode(F.sequence(bucket(lo), F.greatest(bucket(lo), bucket(hi)))))
    b0 = F.lit(CLAMP_LO_MS) + F.col("bucket") * F.lit(BUCKET_MS)
    pieces = pieces.withColumn("start_ms", F.greatest("start_ms", b0)).withColumn(
        "end_ms", F.least("end_ms", b0 + F.lit(BUCKET_MS)))
    pieces = pieces.withColumn("end_ms", F.greatest("end_ms", F.col("start_ms") + 1))
    cols = TIMELINE_COLUMNS + ["datasource", "bucket", "line"]
    out = pieces.select(*cols).groupBy("datasource", "bucket").applyInPandas(_classify_piece, PIECE_SCHEMA)
    rank = F.create_map(*[x for k, v in STATUS_RANK.items() for x in (F.lit(k), F.lit(v))])
    agg = out.groupBy("segment_id").agg(
        F.min(rank[F.col("status")]).alias("best"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("overshadowed_by")))).alias("overshadowed_by"),
        F.first("reason").alias("reason"),
        F.first("error", ignorenulls=True).alias("timeline_error"))
    names = F.create_map(*[x for k, v in STATUS_RANK.items() for x in (F.lit(v), F.lit(k))])
    return agg.select("segment_id", names[F.col("best")].alias("status"),
                      F.when(F.col("best") == 2, F.col("overshadowed_by")).otherwise(F.array()).alias("overshadowed_by"),
                      "reason", "timeline_error")


def used_segments(spark, snapshot: Path, work: Path) -> dict:
    """Run stage 0: read and validate ``segments.jsonl``, compute the timeline, write
    ``WORK/timeline/segments.parquet`` (every segment with ``status``, ``overshadowed_by``,
    ``reason`` and ``input_overshadowed``) and ``WORK/timeline/summary.json`` (counts per datasource
    and status, flag disagreements), and return the XCom dict: groups ``Visible``, ``Standby``,
    ``Overshadowed`` as bitmaps over the segment's row in ``segments.jsonl`` (line − 1).

    Three Spark jobs (two for ``segments.jsonl.gz``, whose lines are numbered as they are read):
    the lines are numbered; the table is parsed, classified and written aside; its checks, counts
    and groups are read back in one job. Raises :class:`SnapshotError` naming
    the file and line of the first bad rows (or the datasource whose timeline cannot be built), and
    then no table is left behind.
    """
    from pyspark.sql import functions as F

    from segment_balancer.druid.snapshot.segments import first_problems, gzip_refusal, read_segments, refuse, segments_path
    from segment_balancer.planner import groups as G
    from segment_balancer.spark.session import collect_small, read_parquet

    file = segments_path(Path(snapshot)).name
    segs = read_segments(spark, Path(snapshot))
    status = classify(segs.filter("problem is null"))
    table = (segs.drop("interval", "interval_parts").withColumnRenamed("overshadowed", "input_overshadowed")
             .join(status, "segment_id", "left")
             .withColumn("status", F.coalesce("status", F.lit("unused")))
             .withColumn("overshadowed", F.col("status") == "overshadowed"))
    out = Path(work) / "timeline"
    with gzip_refusal(file), staged_parquet(table, out / "segments.parquet") as written:
        segs.unpersist()
        t = read_parquet(spark, written)
        mismatch = t.filter(F.col("used") & F.col("overshadowed_given")
                            & (F.col("input_overshadowed") != F.col("overshadowed")))
        members = t.filter("status != 'unused'").select(F.initcap("status").alias("group"), (F.col("line") - 1).alias("idx"))
        found = collect_small({
            "problems": first_problems(t),
            "timeline": t.filter("timeline_error is not null").select("line", "timeline_error").orderBy("line").limit(1),
            "counts": t.groupBy("datasource", "status").count(),
            "mismatch": mismatch.select("line", "segment_id", "input_overshadowed", "status").orderBy("line").limit(5),
            "mismatches": mismatch.agg(F.count("*").alias("n")),
            "groups": G.bitmaps_frame(members),
        })
        refuse(file, found["problems"])
        if found["timeline"]:
            raise SnapshotError("segments.jsonl", None, found["timeline"][0]["timeline_error"])
    per_ds: dict = {}
    for r in found["counts"]:
        per_ds.setdefault(r["datasource"], {})[r["status"]] = r["count"]
    examples = [f"{r['segment_id']}: input says {'not ' if not r['input_overshadowed'] else ''}overshadowed, "
                f"timeline says {r['status']}" for r in sorted(found["mismatch"], key=lambda r: r["line"])]
    summary = {"per_datasource": {ds: dict(sorted(v.items())) for ds, v in sorted(per_ds.items())},
               "flag_disagreements": found["mismatches"][0]["n"], "flag_examples": examples}
    write_json_atomic(summary, out / "summary.json")
    groups = G.bitmaps_from_rows(found["groups"])
    return {"stage": 0, "index": "segments.jsonl row (line - 1)", "groups": G.encode_all(groups)}


def read_summary(work: Path) -> dict:
    """``WORK/timeline/summary.json`` written by :func:`used_segments`."""
    return json.loads((Path(work) / "timeline" / "summary.json").read_text())
