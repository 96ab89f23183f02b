"""Reads ``segments.jsonl[.gz]`` and ``server_segments.json`` (or ``.jsonl[.gz]``) with Spark, and validates them.

The files may hold millions of rows, so they are parsed and checked by Spark jobs; only the first
few bad rows come back to the driver, to name them in a :class:`SnapshotError`.
"""

from __future__ import annotations

from pathlib import Path

from ..instants import with_interval_instants
from ..io import remove_path, write_parquet_atomic
from ..sparkutil import parallelism
from .errors import SnapshotError
from .lines import numbered_lines, with_row_numbers

SEGMENT_JSON_SCHEMA = (
    "dataSource string, interval string, version string, size long, "
    "shardSpec struct<type: string, partitionNum: int, partitionId: int, partitions: int, numCorePartitions: int, "
    "startRootPartitionId: int, endRootPartitionId: int, minorVersion: int, atomicUpdateGroupSize: int>, "
    "used boolean, overshadowed boolean"
)


def segments_path(snapshot: Path) -> Path:
    """``segments.jsonl`` or ``segments.jsonl.gz`` in ``snapshot``; raises SnapshotError if neither."""
    for name in ("segments.jsonl", "segments.jsonl.gz"):
        if (snapshot / name).exists():
            return snapshot / name
    raise SnapshotError("segments.jsonl", None, "file is missing (segments.jsonl or segments.jsonl.gz)")


def _more(word: str, rows, key: str | None = None) -> str:
    """`` (also line 7: …; line 9: …)`` for the further bad rows (their number in column ``key``,
    by default ``word``'s), or nothing."""
    if not rows:
        return ""
    key = key or ("line" if word == "line" else "row")
    return " (also " + "; ".join(f"{word} {r[key]}: {r['problem']}" for r in rows) + ")"


def read_segments(spark, snapshot: Path):
    """All segments of the snapshot as a DataFrame, validated.

    Returns columns ``line`` (long, 1-based), ``segment_id``, ``datasource``, ``version`` (str),
    ``start_ms``, ``end_ms`` (long, epoch ms UTC), ``partition_num`` (int: ``partitionNum``, or
    ``partitionId`` of ``numbered_overwrite``), ``shard_type`` (str), ``num_core_partitions``,
    ``start_root_partition_id``, ``end_root_partition_id``, ``minor_version``,
    ``atomic_update_group_size`` (nullable ints from the shardSpec, for the timeline),
    ``size_bytes`` (long), ``used``, ``overshadowed`` (bool; false when absent) and
    ``overshadowed_given`` (bool: the line has the key), and the raw ``interval`` text with its
    ``interval_parts``. Raises :class:`SnapshotError`
    naming the line of the first bad rows: malformed JSON, a missing field, a bad interval
    (unparseable or end before start), a negative size, a duplicate segment id. The frame is
    built on a cached one: the caller unpersists it (``unpersist()``) once it has written it.
    """
    from pyspark.sql import functions as F

    path = segments_path(snapshot)
    raw = numbered_lines(spark, path)
    if path.suffix == ".gz":
        # gzip is read by one task: spread the parsing over the cores once the lines are numbered
        raw = raw.repartition(parallelism(spark))
    parsed = raw.filter(F.trim("text") != "").select(
        "line", F.from_json("text", SEGMENT_JSON_SCHEMA, {"mode": "PERMISSIVE"}).alias("j"), "text"
    )
    interval = F.split("j.interval", "/")
    df = parsed.select(
        "line",
        F.col("j.dataSource").alias("datasource"),
        F.col("j.version").alias("version"),
        F.coalesce("j.shardSpec.partitionNum", "j.shardSpec.partitionId", F.lit(0)).alias("partition_num"),
        F.coalesce("j.shardSpec.numCorePartitions", "j.shardSpec.partitions").alias("num_core_partitions"),
        F.col("j.shardSpec.startRootPartitionId").alias("start_root_partition_id"),
        F.col("j.shardSpec.endRootPartitionId").alias("end_root_partition_id"),
        F.col("j.shardSpec.minorVersion").alias("minor_version"),
        F.col("j.shardSpec.atomicUpdateGroupSize").alias("atomic_update_group_size"),
        F.coalesce("j.shardSpec.type", F.lit("none")).alias("shard_type"),
        F.col("j.size").alias("size_bytes"),
        F.coalesce("j.used", F.lit(True)).alias("used"),
        F.coalesce("j.overshadowed", F.lit(False)).alias("overshadowed"),
        F.col("j.overshadowed").isNotNull().alias("overshadowed_given"),
        F.col("j.interval").alias("interval"),
        F.size(interval).alias("interval_parts"),
        interval.getItem(0).alias("start_text"),
        interval.getItem(1).alias("end_text"),
    )
    df = with_interval_instants(df, "start_text", "end_text")
    seg_id = F.concat_ws("_", "datasource", "start_printed", "end_printed", "version")
    seg_id = F.when(F.col("partition_num") > 0, F.concat_ws("_", seg_id, F.col("partition_num").cast("string"))).otherwise(seg_id)
    # Cached: the checks below and the caller read it (the JSON is parsed once).
    df = df.withColumn("segment_id", seg_id).drop("start_text", "end_text", "start_printed", "end_printed").cache()
    problem = (
        F.when(F.col("datasource").isNull(), F.lit("dataSource is missing or the line is not a JSON object"))
        .when(F.col("version").isNull(), F.lit("version is missing"))
        .when(F.col("interval").isNull(), F.lit("interval is missing"))
        .when(F.col("start_ms").isNull() | F.col("end_ms").isNull() | (F.col("interval_parts") != 2),
              F.concat(F.lit("interval is not start/end ISO-8601: "), F.col("interval")))
        .when(F.col("end_ms") < F.col("start_ms"), F.concat(F.lit("interval ends before it starts: "), F.col("interval")))
        .when(F.col("size_bytes").isNull(), F.lit("size is missing"))
        .when(F.col("size_bytes") < 0, F.concat(F.lit("size must be >= 0, got "), F.col("size_bytes").cast("string")))
        .when(F.col("partition_num") < 0, F.lit("shardSpec.partitionNum must be >= 0"))
    )
    bad = df.select("line", problem.alias("problem")).filter(F.col("problem").isNotNull()).orderBy("line").limit(5).collect()
    if bad:
        df.unpersist()
        raise SnapshotError(path.name, bad[0]["line"], bad[0]["problem"] + _more("line", bad[1:]), "line")
    # lines of repeated ids: min and second-smallest line per id, without collecting every id's lines
    firsts = df.groupBy("segment_id").agg(F.count("*").alias("n"), F.min("line").alias("first")).filter("n > 1")
    dup = (df.join(firsts, "segment_id").filter(F.col("line") > F.col("first"))
           .groupBy("segment_id", "first").agg(F.min("line").alias("second"))
           .orderBy("second").limit(1).collect()) if firsts.limit(1).count() else []
    if dup:
        df.unpersist()
        raise SnapshotError(path.name, dup[0]["second"],
                            f"duplicate segment {dup[0]['segment_id']} (first on line {dup[0]['first']})", "line")
    return df


SERVER_SEGMENTS_FILES = ("server_segments.jsonl.gz", "server_segments.jsonl", "server_segments.json")


def server_segments_path(snapshot: Path) -> Path:
    """The snapshot's replica file, the first of :data:`SERVER_SEGMENTS_FILES` present; raises
    :class:`SnapshotError` if none is."""
    for name in SERVER_SEGMENTS_FILES:
        if (snapshot / name).exists():
            return snapshot / name
    raise SnapshotError("server_segments.json", None, "file is missing (server_segments.json, or .jsonl[.gz])")


def _array_one_object_per_line(path: Path) -> bool:
    """Whether the JSON array ``path`` is laid out ``[`` / one object per line / ``]`` (how the
    generator and ``jq -c`` write it), so that its lines can be read in parallel."""
    with open(path, "rb") as handle:
        head = [handle.readline().strip() for _ in range(2)]
    return head[0] == b"[" and (head[1].startswith(b"{") and head[1].rstrip(b",").endswith(b"}") or head[1] == b"]")


def _replica_rows(spark, path: Path):
    """(``row`` long, ``server``, ``segment_id``, ``corrupt``) of the replica file, and the word that
    names a row in errors: ``line`` (1-based) for JSON lines, ``row`` (0-based array index) for an
    array. Lines and arrays of one object per line are parsed in parallel; any other array (one
    line, or pretty-printed) by Spark's multi-line JSON reader, in one task."""
    from pyspark.sql import functions as F

    schema = "server string, segment_id string, _corrupt_record string"
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        lines = numbered_lines(spark, path).filter(F.trim("text") != "")
        parsed, word = lines.select(F.col("line").alias("row"), "text"), "line"
    elif _array_one_object_per_line(path):
        lines = spark.read.text(str(path)).withColumnRenamed("value", "text").filter(~F.trim("text").isin("[", "]", ""))
        parsed = with_row_numbers(lines, "row", first=0).select("row", F.regexp_replace(F.trim("text"), ",$", "").alias("text"))
        word = "row"
    else:
        raw = spark.read.option("multiLine", True).schema(schema).json(str(path))
        rows = with_row_numbers(raw.coalesce(1), "row", first=0)
        return rows.select("row", "server", "segment_id", F.col("_corrupt_record").alias("corrupt")), "row"
    j = F.from_json("text", schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"})
    parsed = parsed.select("row", j.alias("j"), "text")
    # a line that is valid JSON but no object (a number, a list) has no fields: corrupt too
    corrupt = F.when(F.col("j._corrupt_record").isNotNull() | ~F.trim("text").startswith("{"), F.col("text"))
    return parsed.select("row", F.col("j.server").alias("server"), F.col("j.segment_id").alias("segment_id"),
                         corrupt.alias("corrupt")), word


_KIND = {"line": "line", "row": "index"}  # SnapshotError.row_kind of each word


def read_server_segments(spark, snapshot: Path, historicals: set[str], known_servers: set[str], table: Path):
    """The replica file's rows on historical servers as DataFrame (``row`` long, ``server``,
    ``segment_id``); rows of known non-historical servers (peons, brokers) are dropped.

    The file is parsed once, into the parquet directory ``table`` (every row, with ``corrupt``
    and ``historical``); the checks and the returned frame read that table. On a bad row the
    table is removed before the error is raised.

    The file is ``server_segments.jsonl[.gz]`` (Druid SQL ``resultFormat: objectLines`` of
    ``sys.server_segments``; ``row`` = its line, 1-based) or ``server_segments.json`` (a JSON array;
    ``row`` = the array index, 0-based). A segment id that ``segments.jsonl`` lacks is accepted
    (an unused segment: :func:`unlisted_segments`). Raises :class:`SnapshotError` naming the file
    and row of the first bad row: invalid JSON, an unknown server, a missing field or a duplicate
    (server, segment) row.
    """
    from pyspark.sql import functions as F

    path = server_segments_path(snapshot)
    rows, word = _replica_rows(spark, path)
    known = spark.createDataFrame([(s, s in historicals) for s in sorted(known_servers)], "server string, historical boolean")
    write_parquet_atomic(rows.join(F.broadcast(known), "server", "left"), table)
    checked = spark.read.parquet(str(table))
    problem = (
        F.when(F.col("corrupt").isNotNull(), F.lit("not valid JSON"))
        .when(F.col("server").isNull() | F.col("segment_id").isNull(), F.lit("server and segment_id are required"))
        .when(F.col("historical").isNull(), F.concat(F.lit("unknown server "), F.col("server"), F.lit(" (not in servers.json)")))
    )
    bad = checked.select("row", problem.alias("problem")).filter(F.col("problem").isNotNull()).orderBy("row").limit(5).collect()
    if bad:
        remove_path(table)
        raise SnapshotError(path.name, bad[0]["row"], bad[0]["problem"] + _more(word, bad[1:], key="row"), _KIND[word])
    served = checked.filter("historical").select("row", "server", "segment_id")
    dup = served.groupBy("server", "segment_id").agg(F.min("row").alias("first"), F.max("row").alias("row"), F.count("*").alias("n")).filter("n > 1").orderBy("row").limit(1).collect()
    if dup:
        remove_path(table)
        raise SnapshotError(path.name, dup[0]["row"],
                            f"duplicate row: {dup[0]['server']} already serves {dup[0]['segment_id']} ({word} {dup[0]['first']})", _KIND[word])
    return served


UNLISTED_SCHEMA = ("segment_id string, datasource string, start_ms long, end_ms long, version string, "
                   "partition_num int, file string, row long, place string, problem string")


def unlisted_segments(spark, served, queued, segments):
    """The segments that replicas or queue entries name but ``segments.jsonl`` lacks: unused
    segments (ALGORITHM.md "Inputs"), parsed from their ids by
    :func:`segment_balancer.segment_id.parse_segment_id` in a Spark job.

    ``served``: (``row``, ``server``, ``segment_id``) of :func:`read_server_segments`; ``queued``:
    (``server``, ``segment_id``, ``place``) of ``load_queues.json`` entries; ``segments``: the
    segments read from ``segments.jsonl`` (``segment_id``, ``datasource``). Returns (``segment_id``,
    ``datasource``, ``start_ms``, ``end_ms`` long epoch ms, ``version``, ``partition_num`` int), one
    row per segment. Raises :class:`SnapshotError` naming the file and row of the first id that is
    no Druid segment id.
    """
    import pandas as pd
    from pyspark.sql import functions as F

    from ..segment_id import parse_segment_id

    datasources = sorted(r[0] for r in segments.select("datasource").distinct().collect())
    named = served.select("segment_id", F.lit("server_segments.json").alias("file"), "row",
                          F.lit(None).cast("string").alias("place")).unionByName(
        queued.select("segment_id", F.lit("load_queues.json").alias("file"), F.lit(None).cast("long").alias("row"), "place"))
    missing = named.join(segments.select("segment_id"), "segment_id", "left_anti")
    first = missing.groupBy("segment_id").agg(F.min(F.struct("file", "row", "place")).alias("at")).select("segment_id", "at.*")

    def parse(batches):
        for pdf in batches:
            out = []
            for sid, file, row, place in zip(pdf["segment_id"], pdf["file"], pdf["row"], pdf["place"]):
                parts = parse_segment_id(sid, datasources)
                out.append({"segment_id": sid, "file": file, "row": row, "place": place,
                            **({"datasource": parts.datasource, "start_ms": parts.start_ms, "end_ms": parts.end_ms,
                                "version": parts.version, "partition_num": parts.partition_num, "problem": None}
                               if parts else {"problem": f"segment {sid} is not in segments.jsonl and is not a Druid segment id "
                                                         "(dataSource_start_end_version[_partitionNum])"})})
            frame = pd.DataFrame(out, columns=[f.split()[0] for f in UNLISTED_SCHEMA.split(", ")])
            yield frame.astype({"start_ms": "Int64", "end_ms": "Int64", "row": "Int64", "partition_num": "Int32",
                                **{c: object for c in ("datasource", "version", "file", "place", "problem")}})

    # cached: few rows (unused segments still served or queued), read by the check and the caller
    parsed = first.mapInPandas(parse, UNLISTED_SCHEMA).cache()
    bad = parsed.filter("problem is not null").orderBy("file", "row", "place", "segment_id").limit(1).collect()
    if bad:
        where = f"{bad[0]['place']}: " if bad[0]["place"] else ""
        raise SnapshotError(bad[0]["file"], bad[0]["row"], where + bad[0]["problem"])
    return parsed.select("segment_id", "datasource", "start_ms", "end_ms", "version", "partition_num")
