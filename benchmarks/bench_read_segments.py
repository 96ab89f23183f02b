"""Wall time of reading ``segments.jsonl`` (``snapshot.segments.read_segments``: parse, validate,
build segment ids), with instants as Druid's whole range (``instants.with_interval_instants``), against
Spark's own ``to_timestamp``/``date_format`` (years 1-9999 only: what the reader used before Druid's
eternity interval had to be read). Both write every row's ``start_ms``, ``end_ms`` and
``segment_id`` to Spark's ``noop`` sink, so nothing is collected to the driver.

Usage: ``.venv/bin/python benchmarks/bench_read_segments.py [N ...]`` (default 20000 200000 1000000
segments: daily segments of 8 datasources, one line of JSON each). Prints a table; the output for
this machine is kept in ``benchmarks/README.md``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

DAY = 86_400_000
T0 = 1_356_998_400_000  # 2013-01-01


def write_snapshot(directory: Path, n: int) -> Path:
    from segment_balancer.druid.instants import format_instant_ms

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "segments.jsonl", "w") as out:
        for i in range(n):
            start = T0 + (i // 8) * DAY
            out.write(
                json.dumps(
                    {
                        "dataSource": f"ds{i % 8}",
                        "interval": f"{format_instant_ms(start)}/{format_instant_ms(start + DAY)}",
                        "version": "2020-01-01T00:00:00.000Z",
                        "size": 1000,
                        "shardSpec": {"type": "numbered", "partitionNum": 0, "partitions": 1},
                    }
                )
                + "\n"
            )
    return directory


def _parsed(spark, snapshot: Path):
    from pyspark.sql import functions as F

    raw = spark.read.text(str(snapshot / "segments.jsonl"))
    j = raw.select(F.from_json("value", "dataSource string, interval string, version string").alias("j"))
    parts = F.split("j.interval", "/")
    return j.select(
        F.col("j.dataSource").alias("datasource"),
        F.col("j.version").alias("version"),
        parts.getItem(0).alias("start_text"),
        parts.getItem(1).alias("end_text"),
    )


def spark_builtin(spark, snapshot: Path):
    """Instants with Spark timestamps (years 1-9999 only; what the reader used before)."""
    from pyspark.sql import functions as F

    df = _parsed(spark, snapshot).select(
        "datasource",
        "version",
        F.unix_millis(F.to_timestamp("start_text")).alias("start_ms"),
        F.unix_millis(F.to_timestamp("end_text")).alias("end_ms"),
    )
    fmt = lambda c: F.date_format(F.timestamp_millis(c), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")  # noqa: E731
    return df.select(
        "start_ms",
        "end_ms",
        F.concat_ws("_", "datasource", fmt("start_ms"), fmt("end_ms"), "version").alias("segment_id"),
    )


def full_range(spark, snapshot: Path):
    """Instants as ``instants.with_interval_instants`` (Druid's whole range)."""
    from pyspark.sql import functions as F

    from segment_balancer.druid.snapshot.segments import with_interval_instants

    df = with_interval_instants(_parsed(spark, snapshot), "start_text", "end_text")
    return df.select(
        "start_ms",
        "end_ms",
        F.concat_ws("_", "datasource", "start_printed", "end_printed", "version").alias("segment_id"),
    )


def _noop(df) -> float:
    t = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t


def main(sizes: list[int]) -> None:
    from segment_balancer.druid.snapshot.segments import read_segments
    from segment_balancer.spark.session import local_session

    spark = local_session("bench_read_segments")
    print(f"{'segments':>10} {'full range s':>13} {'spark builtin s':>16} {'ratio':>6} {'read_segments s':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            snap = write_snapshot(Path(tmp) / str(n), n)
            _noop(spark_builtin(spark, snap))  # warm-up: JIT, file cache
            ours, builtin = _noop(full_range(spark, snap)), _noop(spark_builtin(spark, snap))
            t = time.perf_counter()
            df = read_segments(spark, snap)  # parse, validate (bad rows, duplicates), ids; cached
            df.select("start_ms", "end_ms", "segment_id").write.format("noop").mode("overwrite").save()
            reader = time.perf_counter() - t
            df.unpersist()
            print(f"{n:>10} {ours:>13.1f} {builtin:>16.1f} {ours / builtin:>6.1f} {reader:>16.1f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [20_000, 200_000, 1_000_000])
