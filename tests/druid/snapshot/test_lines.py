"""snapshot.lines: rows numbered in the JVM across many partitions, in file order."""

import pytest

from segment_balancer.druid.snapshot.lines import is_blank, line_ranges, numbered_lines, split_lines, with_row_numbers


def test_row_numbers_are_consecutive_across_partitions(spark):
    df = spark.range(0, 1000, numPartitions=7)
    got = with_row_numbers(df, "n", first=5).collect()
    assert sorted((r["id"], r["n"]) for r in got) == [(i, i + 5) for i in range(1000)]


def test_lines_of_a_file_split_into_many_partitions_keep_their_numbers(spark, tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("".join(f"line {i} " + "x" * (i % 50) + "\n" for i in range(1, 5001)))
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "8k")
    try:
        df = numbered_lines(spark, path)
        assert df.rdd.getNumPartitions() > 10
        got = df.collect()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before)
    assert len(got) == 5000
    assert all(r["text"].split()[1] == str(r["line"]) for r in got)


#: Every line end Spark's text reader knows (LF, CRLF, a lone CR), a byte order mark, blank,
#: space-only and tab-only lines, bytes that are not UTF-8, characters Python's ``str.splitlines``
#: would split on (VT, FF, NEL, LS) and a last line without an end.
AWKWARD = (
    b"\xef\xbb\xbfA1\r\nA2\rA3\n\n  \n\t\nA7 \xff\xfe bad\r\n\r\n\rA10\x0bX\x0cY\xc2\x85Z\xe2\x80\xa8W\n"
    b"\r\r\n\n\rA15\r\nA16\r" + b"".join(b"L%d %s\r\n" % (i, b"x" * (i % 13)) for i in range(17, 59)) + b"last"
)


@pytest.mark.parametrize("target", [1, 2, 3, 5, 7, 64, 1 << 20])
def test_byte_ranges_split_into_the_lines_spark_reads(spark, tmp_path, target):
    """Ranges of ``line_ranges`` split by ``split_lines`` and numbered one after another are the
    lines ``numbered_lines`` (Spark's text reader) gives, blank ones skipped alike (``is_blank``,
    Spark's ``trim(text) != ''``); cut points fall inside CRLF pairs at small targets. Bytes that
    are not UTF-8 arrive from Spark replaced (U+FFFD)."""
    from pyspark.sql import functions as F

    path = tmp_path / "awkward.txt"
    path.write_bytes(AWKWARD)
    spark_lines = [(r["line"], r["text"]) for r in numbered_lines(spark, path).orderBy("line").collect()]
    kept = {r["line"] for r in numbered_lines(spark, path).filter(F.trim("text") != "").collect()}
    ours, blank = [], set()
    ranges = line_ranges(path, target)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(AWKWARD)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    for start, end in ranges:
        for line in split_lines(AWKWARD[start:end], start == 0):
            ours.append((len(ours) + 1, line.decode("utf-8", "replace")))
            if is_blank(line):
                blank.add(len(ours))
    assert ours == spark_lines and len(ours) == 59 and ours[-2:] == [(58, "L58 " + "x" * 6), (59, "last")]
    assert {n for n, _ in ours} - blank == kept
    assert ours[0] == (1, "A1") and ours[5] == (6, "\t") and 6 in kept


def test_a_gzip_file_splits_into_the_lines_spark_reads(spark, tmp_path):
    import gzip

    path = tmp_path / "awkward.txt.gz"
    path.write_bytes(gzip.compress(AWKWARD))
    spark_lines = [r["text"] for r in numbered_lines(spark, path).orderBy("line").collect()]
    assert [x.decode("utf-8", "replace") for x in split_lines(AWKWARD, True)] == spark_lines


def test_an_empty_file_is_one_empty_range(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert line_ranges(path, 5) == [(0, 0)]
    assert split_lines(b"", True) == []


@pytest.mark.parametrize("block", [1, 2, 3, 1 << 20])
def test_count_rows_counts_what_stage_0_parses(tmp_path, monkeypatch, block):
    """Rows are the lines Spark's reader gives that are not blank: LF, CRLF and a lone CR end a line
    (a CRLF cut between two reads is one end), space-only lines are no row, a tab line is; counting
    stops one row past the limit."""
    import builtins
    import io

    from segment_balancer.druid.snapshot.lines import count_rows

    data = b"\xef\xbb\xbfa\r\nb\rc\n\n   \n\t\nd"  # a, b, c, tab line, d: 5 rows
    path = tmp_path / "segments.jsonl"
    path.write_bytes(data)
    real_open = builtins.open

    class Small(io.BufferedReader):
        def read(self, n=-1):
            return super().read(min(n, block) if n > 0 else block)

    monkeypatch.setattr(
        builtins, "open", lambda p, mode="r", *a, **k: Small(io.FileIO(p)) if p == path else real_open(p, mode, *a, **k)
    )
    assert count_rows(path, 10) == 5
    assert count_rows(path, 5) == 5
    assert count_rows(path, 4) == 5  # past the limit: at_most + 1
    assert count_rows(path, 0) == 1


def test_decompress_task_writes_the_plain_copy_or_nothing(tmp_path):
    """A whole gzip file is decompressed to ``dest`` in blocks (here of 7 bytes: a block boundary
    inside a line and a CRLF); a truncated one gives False and leaves no ``dest``."""
    import gzip

    from segment_balancer.druid.snapshot import lines

    body = b"\xef\xbb\xbf" + b"".join(b'{"n": %d}\r\n' % i for i in range(1000))
    (tmp_path / "whole.gz").write_bytes(gzip.compress(body))
    half = gzip.compress(body)
    (tmp_path / "half.gz").write_bytes(half[: len(half) // 2])
    lines.COPY_BLOCK_BYTES, saved = 7, lines.COPY_BLOCK_BYTES
    try:
        assert lines.decompress_task({"path": str(tmp_path / "whole.gz"), "dest": str(tmp_path / "out" / "plain")})
        assert not lines.decompress_task({"path": str(tmp_path / "half.gz"), "dest": str(tmp_path / "out" / "bad")})
    finally:
        lines.COPY_BLOCK_BYTES = saved
    assert (tmp_path / "out" / "plain").read_bytes() == body
    assert not (tmp_path / "out" / "bad").exists()
