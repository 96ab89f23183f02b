"""Text files as numbered lines, in the JVM and in parallel (no Python round trip per row).

A bad row must be named by its line, so every reader numbers its rows. ``RDD.zipWithIndex`` from
PySpark sends every row through a Python worker; here the numbering is done as Spark itself does
it for ``zipWithIndex``: each row's position inside its partition (``monotonically_increasing_id``
keeps it in the low 33 bits) plus the row count of the partitions before it (one small job that
counts rows per partition). The partitions of one text file follow the file's byte order, so the
numbers are the file's line numbers.
"""

from __future__ import annotations


def with_row_numbers(df, name: str, first: int = 1):
    """``df`` plus a long column ``name``: consecutive numbers from ``first`` in partition order
    (for a frame read from one file and only filtered since, the file order).

    Runs one Spark job (rows per partition); the returned frame is lazily evaluated like ``df``.
    """
    from pyspark.sql import functions as F

    from segment_balancer.common.spark_columns import lookup

    tagged = df.withColumn("__part", F.spark_partition_id()).withColumn("__mono", F.monotonically_increasing_id())
    counts = sorted((r[0], r[1]) for r in tagged.groupBy("__part").count().collect())
    offsets, total = [], first
    for part, n in counts:
        offsets.append((part, total))
        total += n
    position = F.col("__mono").bitwiseAND(F.lit((1 << 33) - 1))
    offset = lookup("__part", dict(offsets), "long")
    return tagged.withColumn(name, offset + position).drop("__part", "__mono")


def numbered_lines(spark, path, first: int = 1):
    """The lines of the text file ``path`` (gzip read by Spark) as (``line`` long from ``first``, ``text``).

    A gzip file cannot be split, so Spark reads it as one partition, whose row positions are the
    line numbers themselves: it costs no counting job (which would decompress and read the whole
    file once more). A plain file is split into many partitions and numbered by
    :func:`with_row_numbers` (one job)."""
    from pyspark.sql import functions as F

    raw = spark.read.text(str(path)).withColumnRenamed("value", "text")
    if str(path).endswith(".gz"):
        return raw.select((F.monotonically_increasing_id() + F.lit(first)).alias("line"), "text")
    return with_row_numbers(raw, "line", first).select("line", "text")
