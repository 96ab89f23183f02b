"""Text files as numbered lines, in the JVM and in parallel (no Python round trip per row).

A bad row must be named by its line, so every reader numbers its rows. ``RDD.zipWithIndex`` from
PySpark sends every row through a Python worker; here the numbering is done as Spark itself does
it for ``zipWithIndex``: each row's position inside its partition (``monotonically_increasing_id``
keeps it in the low 33 bits) plus the row count of the partitions before it (one small job that
counts rows per partition). The partitions of one text file follow the file's byte order, so the
numbers are the file's line numbers.

Without Spark, :func:`line_ranges` cuts a plain file into byte ranges at line ends and
:func:`split_lines` splits a range into the lines Spark's text reader gives (Hadoop's
``LineRecordReader``), so tasks that read ranges apart number the file's lines alike; stage 0's
fast path (``spark.used_segments``, ``spark.join_inputs``) reads ``segments.jsonl`` and the replica
file so. A gzip file of at least :data:`GZIP_SPLIT_BYTES` is first decompressed whole to a plain
copy (:func:`decompress_task`, one task streaming it), whose ranges are then read like a plain
file's: its lines are parsed in parallel, and no task holds the whole file.
"""

from __future__ import annotations

import gzip
import re

from pyspark.sql import functions as F

from segment_balancer.common.files import filesystem
from segment_balancer.common.spark_columns import lookup


def with_row_numbers(df, name: str, first: int = 1):
    """``df`` plus a long column ``name``: consecutive numbers from ``first`` in partition order
    (for a frame read from one file and only filtered since, the file order).

    Runs one Spark job (rows per partition); the returned frame is lazily evaluated like ``df``.
    """
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
    raw = spark.read.text(str(path)).withColumnRenamed("value", "text")
    if str(path).endswith(".gz"):
        return raw.select((F.monotonically_increasing_id() + F.lit(first)).alias("line"), "text")
    return with_row_numbers(raw, "line", first).select("line", "text")


UTF8_BOM = b"\xef\xbb\xbf"
"""Skipped at the start of a file by Hadoop's line reader (Spark's text source), plain or gzip."""

_LINE_END = re.compile(rb"\r\n|\r|\n")


def split_lines(data: bytes, file_start: bool) -> list[bytes]:
    """The lines of ``data`` (bytes of a text file cut at line ends, :func:`line_ranges`) as Spark's
    text reader gives them (Hadoop ``LineRecordReader``): LF, CRLF and a lone CR each end a line,
    nothing else does; a last line without an end is a line; a UTF-8 byte order mark at the start
    of the file (``file_start``: ``data`` begins at byte 0) is dropped. Bytes, not decoded."""
    if file_start and data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    return data.splitlines()  # bytes split on exactly LF, CRLF and CR


def is_blank(line: bytes) -> bool:
    """Whether a line is skipped as no row: empty or only spaces (Spark's ``trim(text) = ''``, which
    trims the space character only: a tab is no blank)."""
    return not line.strip(b" ")


def _line_end(fs, path: str, pos: int, size: int) -> int:
    """The offset just after the first line end at or after byte ``pos`` of the file (a CRLF is one
    end), or ``size`` when none follows."""
    with fs.open_input_file(path) as f:
        while pos < size:
            block = f.read_at(min(1 << 16, size - pos), pos)
            found = _LINE_END.search(block)
            if found is None:
                pos += len(block)
                continue
            end = pos + found.end()
            if found.group() == b"\r" and found.end() == len(block) and end < size and f.read_at(1, end) == b"\n":
                end += 1  # the CR was the block's last byte, its LF the next block's first
            return end
    return size


def line_ranges(path, target_bytes: int) -> list[tuple[int, int]]:
    """``(start, end)`` byte ranges covering the plain text file ``path`` (an absolute path or a URI
    pyarrow's filesystems read), each cut just after a line end and about ``target_bytes`` long
    (the last one shorter): ranges read apart and split by :func:`split_lines` give the file's
    lines, in order. An empty file is one empty range."""
    fs, base = filesystem(str(path))
    size = fs.get_file_info(base).size
    cuts = [0]
    while cuts[-1] + target_bytes < size:
        end = _line_end(fs, base, cuts[-1] + target_bytes, size)
        if end >= size:
            break
        cuts.append(end)
    return list(zip(cuts, cuts[1:] + [size]))


def count_rows(path, at_most: int) -> int:
    """The rows of the text file ``path`` (``.gz``: gzip) as stage 0 counts them: lines of
    :func:`split_lines` that are not :func:`is_blank`; reading stops once more than ``at_most``
    are found (then ``at_most + 1`` is returned). Raises ``OSError``/``EOFError`` for an unreadable
    or corrupt file."""
    rows, rest, first = 0, b"", True
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        while rows <= at_most:
            block = f.read(1 << 20)
            data = rest + block
            if not block:
                return rows + sum(not is_blank(line) for line in split_lines(data, first))
            cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
            if cut == len(data) - 1 and data.endswith(b"\r"):
                cut -= 1  # its LF may open the next block
            whole, rest = data[: cut + 1], data[cut + 1 :]
            rows += sum(not is_blank(line) for line in split_lines(whole, first))
            first = first and not whole
    return at_most + 1


GZIP_SPLIT_BYTES = 1 << 20
"""A gzip file of at least this many bytes (compressed; some 70,000 segment lines) is decompressed to
a plain copy and read in ranges (:func:`decompress_task`); a smaller one is read whole by one task,
which costs less than the copy."""
COPY_BLOCK_BYTES = 16 << 20


def decompress_task(item: dict) -> bool:
    """Decompress the gzip file ``item["path"]`` to the plain file ``item["dest"]`` (absolute paths or
    URIs pyarrow's filesystems read and write), streaming :data:`COPY_BLOCK_BYTES` at a time. Returns
    False, leaving no ``dest``, when the file does not decompress whole (truncated or corrupt: the
    reference reader's Spark job names it)."""
    fs, source = filesystem(str(item["path"]))
    out_fs, dest = filesystem(str(item["dest"]))
    out_fs.create_dir(dest.rsplit("/", 1)[0], recursive=True)
    try:
        with fs.open_input_stream(source, compression="gzip") as f, out_fs.open_output_stream(dest) as out:
            while block := f.read(COPY_BLOCK_BYTES):
                out.write(block)
    except OSError:
        out_fs.delete_file(dest)
        return False
    return True


def read_range(path, start: int, end: int, gzip: bool) -> bytes:
    """The bytes ``start`` … ``end`` of the file ``path`` (an absolute path or a URI pyarrow's
    filesystems read), or the whole decompressed file when ``gzip``. Raises ``OSError`` for a gzip
    file that does not decompress whole."""
    fs, base = filesystem(str(path))
    if gzip:
        with fs.open_input_stream(base, compression="gzip") as f:
            return f.read()
    with fs.open_input_file(base) as f:
        return f.read_at(end - start, start)
