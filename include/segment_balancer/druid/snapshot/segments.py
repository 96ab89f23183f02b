"""Reads ``segments.jsonl[.gz]`` and ``server_segments.json`` (or ``.jsonl[.gz]``) with Spark, and validates them.

The files may hold millions of rows, so they are parsed and checked by Spark jobs; only the first
few bad rows come back to the driver, to name them in a :class:`SnapshotError`.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pandas as pd  # module level: the pandas UDF's type hints name it
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from segment_balancer.common.spark_columns import parallelism
from segment_balancer.druid.instants import format_instant_ms, parse_instant_ms
from segment_balancer.druid.partial_load import PAYLOAD_KEYS, line_payload_texts
from segment_balancer.druid.segment_id import parse_segment_id
from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.druid.snapshot.files import segments_path, server_segments_path
from segment_balancer.druid.snapshot.lines import numbered_lines, with_row_numbers

SEGMENT_JSON_SCHEMA = (
    "dataSource string, interval string, version string, size long, "
    "shardSpec struct<type: string, partitionNum: int, partitionId: int, partitions: int, numCorePartitions: int, "
    "startRootPartitionId: int, endRootPartitionId: int, minorVersion: int, atomicUpdateGroupSize: int>, "
    "used boolean, overshadowed boolean"
)


def _shown(column: str, limit: int = 60):
    """A Spark column of the text of ``column`` as a refusal shows an offending value: cut to
    ``limit`` characters (with ``...``)."""
    text = F.trim(F.col(column))
    return F.when(F.length(text) > limit, F.concat(F.substring(text, 1, limit - 3), F.lit("..."))).otherwise(text)


def _more(word: str, rows, key: str | None = None) -> str:
    """`` (also line 7: …; line 9: …)`` for the further bad rows (their number in column ``key``,
    by default ``word``'s), or nothing."""
    if not rows:
        return ""
    key = key or ("line" if word == "line" else "row")
    return " (also " + "; ".join(f"{word} {r[key]}: {r['problem']}" for r in rows) + ")"


def read_segments(spark, snapshot: Path):
    """All segments of the snapshot as a DataFrame, each line with what is wrong with it, if anything.

    Returns columns ``line`` (long, 1-based), ``segment_id``, ``datasource``, ``version`` (str),
    ``start_ms``, ``end_ms`` (long, epoch ms UTC), ``partition_num`` (int: ``partitionNum``, or
    ``partitionId`` of ``numbered_overwrite``), ``shard_type`` (str), ``num_core_partitions``,
    ``start_root_partition_id``, ``end_root_partition_id``, ``minor_version``,
    ``atomic_update_group_size`` (nullable ints from the shardSpec, for the timeline),
    ``size_bytes`` (long), ``used``, ``overshadowed`` (bool; false when absent) and
    ``overshadowed_given`` (bool: the line has the key), ``projections`` (str: Druid 38's
    projection names joined by commas, as Druid writes them, null when the payload has none) and
    ``cluster_groups`` (str: the ``clusterGroups`` JSON text, null when absent), the raw ``interval`` text with its
    ``interval_parts``, and ``problem`` (str, null on a good line): malformed JSON, a missing
    field, a bad interval (unparseable or end before start), a negative size, ``projections`` or
    ``clusterGroups`` that Druid refuses, or a repeated segment id (on every line after its first).
    The partial-load fields are read in Python
    (:func:`~segment_balancer.druid.partial_load.line_payload_texts`) from the lines that name
    them only.

    Nothing is checked here: the frame is lazy (one Spark job numbers the lines) and cached, so
    that the caller writes it and checks it in the same jobs (:func:`first_problems`,
    :func:`refuse`), then unpersists it.
    """
    path = segments_path(snapshot)
    raw = numbered_lines(spark, path)
    if path.suffix == ".gz":
        # gzip is read by one task: spread the parsing over the cores once the lines are numbered
        raw = raw.repartition(parallelism(spark))
    parsed = raw.filter(F.trim("text") != "").select(
        "line", F.from_json("text", SEGMENT_JSON_SCHEMA, {"mode": "PERMISSIVE"}).alias("j"), "text"
    )
    parsed = _with_payload_fields(parsed)
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
        # the size as written, to tell a missing size from one that is no whole number of bytes
        F.regexp_extract("text", r'"size"\s*:\s*("[^"]*"|[^,}\s]+)', 1).alias("size_text"),
        # the line as written, where it has no dataSource (no JSON object, perhaps)
        F.when(F.col("j.dataSource").isNull(), _shown("text")).alias("line_text"),
        F.coalesce("j.used", F.lit(True)).alias("used"),
        F.coalesce("j.overshadowed", F.lit(False)).alias("overshadowed"),
        F.col("j.overshadowed").isNotNull().alias("overshadowed_given"),
        F.col("j.interval").alias("interval"),
        F.size(interval).alias("interval_parts"),
        F.get(interval, 0).alias("start_text"),  # get: null, not an error, for "yesterday"
        F.get(interval, 1).alias("end_text"),
        "projections",
        "cluster_groups",
        "payload_problem",
    )
    df = with_interval_instants(df, "start_text", "end_text")
    seg_id = F.concat_ws("_", "datasource", "start_printed", "end_printed", "version")
    seg_id = F.when(
        F.col("partition_num") > 0, F.concat_ws("_", seg_id, F.col("partition_num").cast("string"))
    ).otherwise(seg_id)
    df = df.withColumn("segment_id", seg_id).drop("start_text", "end_text", "start_printed", "end_printed")
    problem = (
        F.when(
            F.col("datasource").isNull(),
            F.concat(F.lit("dataSource is missing or the line is not a JSON object, got "), F.col("line_text")),
        )
        .when(F.col("version").isNull(), F.lit("version is missing"))
        .when(F.col("interval").isNull(), F.lit("interval is missing"))
        .when(
            F.col("start_ms").isNull() | F.col("end_ms").isNull() | (F.col("interval_parts") != 2),
            F.concat(
                F.lit("interval is not start/end ISO-8601: "),
                F.col("interval"),
                F.lit(" (expected e.g. 2013-01-01T00:00:00.000Z/2013-01-02T00:00:00.000Z)"),
            ),
        )
        .when(
            F.col("end_ms") < F.col("start_ms"),
            F.concat(F.lit("interval ends before it starts: "), F.col("interval"), F.lit(" (expected start <= end)")),
        )
        .when(F.col("size_bytes").isNull() & (F.col("size_text").isin("", "null")), F.lit("size is missing"))
        .when(
            F.col("size_bytes").isNull(),
            F.concat(F.lit("size must be a whole number of bytes, got "), F.col("size_text")),
        )
        .when(F.col("size_bytes") < 0, F.concat(F.lit("size must be >= 0, got "), F.col("size_bytes").cast("string")))
        .when(F.col("partition_num") < 0, F.lit("shardSpec.partitionNum must be >= 0"))
        .when(F.col("payload_problem").isNotNull(), F.col("payload_problem"))
    )
    df = df.withColumn("problem", problem).drop("size_text", "line_text", "payload_problem")
    # a repeated id: every line after the id's first (lines that are bad already share one window)
    first = F.min("line").over(Window.partitionBy(F.when(F.col("problem").isNull(), F.col("segment_id"))))
    duplicate = F.when(
        F.col("problem").isNull() & (F.col("line") > first),
        F.concat(
            F.lit("duplicate segment "),
            F.col("segment_id"),
            F.lit(" (first on line "),
            first.cast("string"),
            F.lit(")"),
        ),
    )
    # Cached: the caller writes it and classifies it in one job (the JSON is parsed once).
    return df.withColumn("problem", F.coalesce("problem", duplicate)).cache()


def _with_payload_fields(parsed):
    """``parsed`` (``line``, ``j``, ``text``) plus ``projections``, ``cluster_groups`` and
    ``payload_problem`` (what Druid refuses in them), read by
    :func:`~segment_balancer.druid.partial_load.line_payload_texts` in a pandas UDF that is given
    the text of the lines naming the fields alone (null for the others: nearly nothing to ship
    to Python when a file has none)."""

    @pandas_udf("projections string, cluster_groups string, payload_problem string")
    def payload(text: pd.Series) -> pd.DataFrame:
        rows = []
        for line in text:
            if line is None:
                rows.append((None, None, None))
                continue
            try:
                rows.append((*line_payload_texts(line), None))
            except ValueError as exc:
                rows.append((None, None, str(exc)))
        return pd.DataFrame(rows, columns=["projections", "cluster_groups", "payload_problem"], dtype=object)

    named = F.col("text").contains(PAYLOAD_KEYS[0]) | F.col("text").contains(PAYLOAD_KEYS[1])
    extra = parsed.select("*", payload(F.when(named, F.col("text"))).alias("__payload"))
    return extra.select(*parsed.columns, "__payload.*")


GZIP_FAILURES = (
    "Unexpected end of input stream",
    "Not in GZIP format",
    "invalid stored block lengths",
    "invalid distance too far back",
    "Corrupt GZIP trailer",
    "incorrect header check",
)
"""Messages of Hadoop's and Java's gzip readers for a truncated or corrupt ``.gz`` file."""


@contextmanager
def gzip_refusal(file: str):
    """Turn a Spark job's failure on a truncated or corrupt gzip input (:data:`GZIP_FAILURES`)
    into a :class:`SnapshotError` naming ``file`` (a snapshot file name); other errors pass.

    Raises:
        SnapshotError: ``file``, no row: ``is not a whole gzip file (truncated or corrupt: …)``.
    """
    try:
        yield
    except Exception as exc:  # Py4JJavaError or Spark's own exception classes: matched on the message
        text = str(exc)
        found = next((m for m in GZIP_FAILURES if m in text), None)
        if found is None:
            raise
        raise SnapshotError(
            file, None, f"is not a whole gzip file (truncated or corrupt: {found}); copy or capture it again"
        ) from None


def first_problems(df, key: str = "line", n: int = 5):
    """The first ``n`` rows of ``df`` with a ``problem``, by ``key``: (``key``, ``problem``), for
    :func:`refuse` (a query for :func:`segment_balancer.spark.session.collect_small`)."""
    return df.filter("problem is not null").select(key, "problem").orderBy(key).limit(n)


def refuse(file: str, rows: list[dict], word: str = "line", key: str = "line") -> None:
    """Raise the :class:`SnapshotError` for the bad rows ``rows`` of ``file`` (dicts with ``key``
    and ``problem``, the first first, as :func:`first_problems` gives them), if there are any: the
    first row is the error's row, the others are named after it. ``word`` names a row (``line``:
    1-based line, ``row``: 0-based index)."""
    rows = sorted(rows, key=lambda r: r[key])
    if rows:
        raise SnapshotError(file, rows[0][key], rows[0]["problem"] + _more(word, rows[1:], key=key), _KIND[word])


def _array_one_object_per_line(path: Path) -> bool:
    """Whether the JSON array ``path`` is laid out ``[`` / one object per line / ``]`` (how the
    generator and ``jq -c`` write it), so that its lines can be read in parallel."""
    with open(path, "rb") as handle:
        head = [handle.readline().strip() for _ in range(2)]
    return head[0] == b"[" and (head[1].startswith(b"{") and head[1].rstrip(b",").endswith(b"}") or head[1] == b"]")


def replica_lines(spark, path: Path):
    """The replica file as numbered text rows, ``(row long, text)``, and the word that names a row
    in errors: ``line`` (1-based) for JSON lines, ``row`` (0-based array index) for an array of one
    object per line (its brackets and trailing commas taken off); both read in parallel. None for
    any other array (one line, or pretty-printed), which only Spark's multi-line JSON reader reads
    (:func:`read_server_segments`)."""
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        lines = numbered_lines(spark, path).filter(F.trim("text") != "")
        return lines.select(F.col("line").alias("row"), "text"), "line"
    if _array_one_object_per_line(path):
        lines = spark.read.text(str(path)).withColumnRenamed("value", "text").filter(~F.trim("text").isin("[", "]", ""))
        rows = with_row_numbers(lines, "row", first=0).select(
            "row", F.regexp_replace(F.trim("text"), ",$", "").alias("text")
        )
        return rows, "row"
    return None, "row"


def _replica_rows(spark, path: Path):
    """(``row`` long, ``server``, ``segment_id``, ``corrupt``) of the replica file, and the word that
    names a row in errors (:func:`replica_lines`). Lines and arrays of one object per line are
    parsed in parallel; any other array (one line, or pretty-printed) by Spark's multi-line JSON
    reader, in one task."""
    schema = "server string, segment_id string, _corrupt_record string"
    parsed, word = replica_lines(spark, path)
    if parsed is None:
        raw = spark.read.option("multiLine", True).schema(schema).json(str(path))
        rows = with_row_numbers(raw.coalesce(1), "row", first=0)
        return rows.select("row", "server", "segment_id", F.col("_corrupt_record").alias("corrupt")), "row"
    j = F.from_json("text", schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"})
    parsed = parsed.select("row", j.alias("j"), "text")
    # a line that is valid JSON but no object (a number, a list) has no fields: corrupt too
    corrupt = F.when(F.col("j._corrupt_record").isNotNull() | ~F.trim("text").startswith("{"), F.col("text"))
    return parsed.select(
        "row", F.col("j.server").alias("server"), F.col("j.segment_id").alias("segment_id"), corrupt.alias("corrupt")
    ), word


_KIND = {"line": "line", "row": "index"}  # SnapshotError.row_kind of each word


def read_server_segments(
    spark, snapshot: Path, historicals: set[str], known_servers: set[str], duplicates: bool = True
):
    """The replica file's rows, each with what is wrong with it, if anything: a lazy DataFrame
    (``row`` long, ``server``, ``segment_id``, ``historical`` bool — null for a server
    ``servers.json`` lacks —, ``problem`` str, null on a good row), the file's name and the word
    that names its rows (``line`` or ``row``, for :func:`refuse`).

    The file is ``server_segments.jsonl[.gz]`` (Druid SQL ``resultFormat: objectLines`` of
    ``sys.server_segments``; ``row`` = its line, 1-based) or ``server_segments.json`` (a JSON array;
    ``row`` = the array index, 0-based). A problem is invalid JSON, a missing field, an unknown
    server or a repeated (server, segment) row on a historical (on every row after the first).
    Rows of known non-historical servers (peons, brokers) are kept with ``historical`` false: the
    caller keeps the historicals' good rows. A segment id that ``segments.jsonl`` lacks is fine
    here (an unused segment: :func:`unlisted_segments`). One Spark job numbers the rows; the caller
    writes the frame and checks it (:func:`first_problems` with ``key="row"``). With
    ``duplicates`` False a repeated row is no problem here (the caller finds repeats itself, where
    the rows of one segment meet).
    """
    path = server_segments_path(snapshot)
    rows, word = _replica_rows(spark, path)
    # set membership (Spark's InSet, a hash set) rather than a literal map, which Spark scans per row
    others = sorted(set(known_servers) - set(historicals))
    historical = F.when(F.col("server").isin(sorted(historicals)), F.lit(True))
    if others:
        historical = historical.when(F.col("server").isin(others), F.lit(False))
    rows = rows.withColumn("historical", historical)
    problem = (
        F.when(
            F.col("corrupt").isNotNull(),
            F.concat(
                F.lit("not valid JSON, got "),
                _shown("corrupt"),
                F.lit("; expected an object with server and segment_id"),
            ),
        )
        .when(F.col("server").isNull() | F.col("segment_id").isNull(), F.lit("server and segment_id are required"))
        .when(
            F.col("historical").isNull(),
            F.concat(F.lit("unknown server "), F.col("server"), F.lit(" (not in servers.json)")),
        )
    )
    rows = rows.withColumn("problem", problem)
    if not duplicates:
        return rows.select("row", "server", "segment_id", "historical", "problem"), path.name, word
    good = F.col("problem").isNull() & F.col("historical")
    first = F.min("row").over(Window.partitionBy(F.when(good, F.col("server")), F.when(good, F.col("segment_id"))))
    duplicate = F.when(
        good & (F.col("row") > first),
        F.concat(
            F.lit("duplicate row: "),
            F.col("server"),
            F.lit(" already serves "),
            F.col("segment_id"),
            F.lit(f" ({word} "),
            first.cast("string"),
            F.lit(")"),
        ),
    )
    rows = rows.select("row", "server", "segment_id", "historical", F.coalesce("problem", duplicate).alias("problem"))
    return rows, path.name, word


UNLISTED_SCHEMA = (
    "segment_id string, datasource string, start_ms long, end_ms long, version string, "
    "partition_num int, file string, row long, place string, problem string"
)


def unlisted_segments(served, queued, segments, datasources: list[str]):
    """The segments that replicas or queue entries name but ``segments.jsonl`` lacks: unused
    segments (ALGORITHM.md "Inputs"), parsed from their ids by
    :func:`segment_balancer.druid.segment_id.parse_segment_id` in Spark tasks; a lazy DataFrame.

    ``served``: (``row``, ``server``, ``segment_id``) of the good rows of
    :func:`read_server_segments`; ``queued``: (``server``, ``segment_id``, ``place``) of
    ``load_queues.json`` entries; ``segments``: the segments read from ``segments.jsonl``
    (``segment_id``); ``datasources``: every datasource of ``segments.jsonl`` (a segment id is
    split at a known datasource first). Returns (``segment_id``, ``datasource``, ``start_ms``,
    ``end_ms`` long epoch ms, ``version``, ``partition_num`` int, and where it is first named:
    ``file``, ``row``, ``place``), one row per segment, with ``problem`` (str) when the id is no
    Druid segment id: the caller refuses the first (:func:`refuse_unlisted`).
    """
    datasources = sorted(datasources)
    named = served.select(
        "segment_id", F.lit("server_segments.json").alias("file"), "row", F.lit(None).cast("string").alias("place")
    ).unionByName(
        queued.select(
            "segment_id", F.lit("load_queues.json").alias("file"), F.lit(None).cast("long").alias("row"), "place"
        )
    )
    missing = named.join(segments.select("segment_id"), "segment_id", "left_anti")
    first = (
        missing.groupBy("segment_id")
        .agg(F.min(F.struct("file", "row", "place")).alias("at"))
        .select("segment_id", "at.*")
    )

    def parse(batches):
        for pdf in batches:
            out = []
            for sid, file, row, place in zip(pdf["segment_id"], pdf["file"], pdf["row"], pdf["place"]):
                parts = parse_segment_id(sid, datasources)
                out.append(
                    {
                        "segment_id": sid,
                        "file": file,
                        "row": row,
                        "place": place,
                        **(
                            {
                                "datasource": parts.datasource,
                                "start_ms": parts.start_ms,
                                "end_ms": parts.end_ms,
                                "version": parts.version,
                                "partition_num": parts.partition_num,
                                "problem": None,
                            }
                            if parts
                            else {
                                "problem": f"segment {sid} is not in segments.jsonl and is not a Druid segment id "
                                "(dataSource_start_end_version[_partitionNum])"
                            }
                        ),
                    }
                )
            frame = pd.DataFrame(out, columns=[f.split()[0] for f in UNLISTED_SCHEMA.split(", ")])
            yield frame.astype(
                {
                    "start_ms": "Int64",
                    "end_ms": "Int64",
                    "row": "Int64",
                    "partition_num": "Int32",
                    **{c: object for c in ("datasource", "version", "file", "place", "problem")},
                }
            )

    return first.mapInPandas(parse, UNLISTED_SCHEMA)


def first_unlisted_problem(unlisted):
    """The first unlisted segment id that is no Druid segment id (a query for
    :func:`segment_balancer.spark.session.collect_small`; :func:`refuse_unlisted` raises it)."""
    return (
        unlisted.filter("problem is not null")
        .select("file", "row", "place", "segment_id", "problem")
        .orderBy("file", "row", "place", "segment_id")
        .limit(1)
    )


def refuse_unlisted(rows: list[dict]) -> None:
    """Raise the :class:`SnapshotError` of :func:`first_unlisted_problem`'s row, if there is one:
    the file and row (or queue place) that name the id."""
    if rows:
        bad = rows[0]
        where = f"{bad['place']}: " if bad.get("place") else ""
        raise SnapshotError(bad["file"], bad.get("row"), where + bad["problem"])


# ---- instants over Spark DataFrames (druid.instants' forms) ---------------------------------------------------
# Druid's own print form (``DateTime.toString()`` in UTC) of years 1-9999: nearly every instant of a
# real snapshot. Spark's own timestamp parsing reads it, and it prints back as it is written.
CANONICAL_INSTANT = r"^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"


def _full_range_udf():
    """A pandas UDF (start text, end text) -> struct of ``start_ms``, ``end_ms`` (long, null where
    malformed) and their printed forms, by :func:`parse_instant_ms` and :func:`format_instant_ms`."""

    def ms(text):
        try:
            return parse_instant_ms(text)
        except ValueError:
            return None

    @pandas_udf("start_ms long, end_ms long, start_printed string, end_printed string")
    def full_range(start: pd.Series, end: pd.Series) -> pd.DataFrame:
        s, e = [ms(t) for t in start], [ms(t) for t in end]
        return pd.DataFrame(
            {
                "start_ms": pd.array(s, dtype="Int64"),
                "end_ms": pd.array(e, dtype="Int64"),
                "start_printed": [None if m is None else format_instant_ms(m) for m in s],
                "end_printed": [None if m is None else format_instant_ms(m) for m in e],
            }
        )

    return full_range


def with_interval_instants(df, start: str, end: str):
    """``df`` plus ``start_ms``, ``end_ms`` (long: epoch ms UTC of the ISO-8601 texts in the string
    columns ``start`` and ``end``, as :func:`parse_instant_ms` reads them; null where malformed or
    out of range, so the caller can name the bad row) and ``start_printed``, ``end_printed``
    (string: those instants as :func:`format_instant_ms` prints them, as Druid's segment ids do).

    Rows whose two instants are in Druid's print form of years 1-9999 (:data:`CANONICAL_INSTANT`)
    take Spark's timestamp parsing and keep their text as printed; only the other rows (the
    eternity interval, offsets, short forms) go through Python (a pandas UDF over those rows
    alone), which reads Druid's whole range. A short plan: a Spark form of the full-range
    arithmetic took seconds of query planning for every read, whatever its size.
    """
    canonical = F.coalesce(F.col(start).rlike(CANONICAL_INSTANT) & F.col(end).rlike(CANONICAL_INSTANT), F.lit(False))
    s_ms, e_ms = F.unix_millis(F.try_to_timestamp(F.col(start))), F.unix_millis(F.try_to_timestamp(F.col(end)))
    fast = df.filter(canonical).select("*", s_ms.alias("start_ms"), e_ms.alias("end_ms"))
    fast = fast.select(
        "*",
        F.when(F.col("start_ms").isNotNull(), F.col(start)).alias("start_printed"),
        F.when(F.col("end_ms").isNotNull(), F.col(end)).alias("end_printed"),
    )
    slow = df.filter(~canonical).select("*", _full_range_udf()(F.col(start), F.col(end)).alias("__instants"))
    slow = slow.select(*df.columns, "__instants.*")
    return fast.unionByName(slow)
