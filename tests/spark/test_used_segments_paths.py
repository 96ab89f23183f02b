"""Stage 0's fast path (byte ranges parsed and datasource buckets classified by ``run_tasks``, on the
driver or as Spark tasks) writes the timeline table, summary.json and XCom groups that Spark's text
reader path (numbered lines parsed in ``mapInArrow``, repartitioned by datasource) and the reference
reader (``read_segments``, Spark SQL) give: for every bundled snapshot and scenario, the bundled
20k generated cluster, and that cluster rewritten with CRLF and lone CR line ends, blank lines, a
byte order mark and no final line end, read in many ranges."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from segment_balancer.spark import session as S
from segment_balancer.spark import used_segments as U

REPO = Path(__file__).resolve().parents[2]
SNAPSHOTS = REPO / "include" / "segment_balancer" / "snapshots"
BUNDLED = [
    SNAPSHOTS / "druid_sample",
    SNAPSHOTS / "druid38",
    SNAPSHOTS / "generated",
    *sorted((REPO / "tests" / "scenarios").iterdir()),
]


def text_reader_summaries(spark, path: Path, work: Path, aside: str) -> list[dict]:
    """The DataFrame path: Spark's text reader numbers the lines, pyarrow parses each batch in
    ``mapInArrow``, ``_timeline_job`` repartitions by datasource and classifies."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import functions as F

    from segment_balancer.druid.snapshot.lines import numbered_lines
    from segment_balancer.druid.snapshot.segment_lines import PARSED_SCHEMA, parse_lines

    def parse(batches):
        for batch in batches:
            line = np.asarray(batch.column(0).to_numpy(zero_copy_only=False), np.int64)
            table = parse_lines(line, batch.column(1).to_pylist())
            yield from table.to_batches() or [pa.RecordBatch.from_pylist([], table.schema)]

    lines = numbered_lines(spark, path).filter(F.trim("text") != "").mapInArrow(parse, PARSED_SCHEMA)
    return U._timeline_job(spark, lines, work, aside)


def reference_summaries(spark, path: Path, work: Path, aside: str) -> list[dict]:
    """The reference reader's rows, classified."""
    return U._timeline_job(spark, U._parsed_reference(spark, path.parent), work, aside)


def stage0(spark, snap: Path, work: Path, how: str, monkeypatch) -> tuple:
    """(table rows by line, summary.json, XCom) of ``used_segments`` run ``how``: ``driver`` or
    ``spark`` (the fast path's tasks), ``text_reader`` or ``reference``."""
    with monkeypatch.context() as m:
        if how == "text_reader":
            m.setattr(U, "_fast_summaries", text_reader_summaries)
        elif how == "reference":
            m.setattr(U, "_fast_summaries", reference_summaries)
        with S.driver_tasks(how == "driver"):
            xcom = U.used_segments(spark, snap, work)
    table = pq.read_table(work / U.TABLE_FILE).sort_by("line")
    assert not list((work / "timeline").glob("*.tmp-*")) and not list((work / "timeline").glob("*.parsed-*"))
    return table.column_names, table.to_pylist(), U.read_summary(work), xcom


def awkward_copy(snap: Path, tmp_path: Path) -> Path:
    """``snap`` with its segments.jsonl plain and rewritten: a byte order mark, CRLF, lone CR and LF
    line ends in turn, a blank or space-only line every 7th line, no end after the last line."""
    out = tmp_path / f"{snap.name}-awkward"
    shutil.copytree(snap, out)
    gz = out / "segments.jsonl.gz"
    lines = (
        gzip.decompress(gz.read_bytes()).splitlines()
        if gz.exists()
        else (out / "segments.jsonl").read_bytes().splitlines()
    )
    gz.unlink(missing_ok=True)
    ends = [b"\r\n", b"\r", b"\n"]
    body = b"".join(
        line + ends[i % 3] + ((b"  " if i % 2 else b"") + ends[i % 3] if i % 7 == 0 else b"")
        for i, line in enumerate(lines)
    )
    (out / "segments.jsonl").write_bytes(b"\xef\xbb\xbf" + body.rstrip(b"\r\n"))
    return out


@pytest.mark.parametrize("snap", BUNDLED, ids=lambda p: p.name)
def test_the_fast_path_on_the_driver_and_in_spark_tasks_writes_what_the_text_reader_path_wrote(
    spark, tmp_path, monkeypatch, snap
):
    driver = stage0(spark, snap, tmp_path / "driver", "driver", monkeypatch)
    assert driver[1], "a snapshot with segments"
    assert stage0(spark, snap, tmp_path / "spark", "spark", monkeypatch) == driver
    assert stage0(spark, snap, tmp_path / "text", "text_reader", monkeypatch) == driver


def test_awkward_line_ends_in_many_ranges_read_as_spark_reads_them(spark, tmp_path, monkeypatch):
    """The 20k cluster in ranges of 256 KiB (about 40), line numbers counted over blank lines and
    every line end, against the text reader path and the reference reader."""
    snap = awkward_copy(SNAPSHOTS / "generated", tmp_path)
    monkeypatch.setattr(U, "RANGE_BYTES", 1 << 18)
    monkeypatch.setattr(U, "MIN_RANGE_BYTES", 1 << 18)
    spark_tasks = stage0(spark, snap, tmp_path / "spark", "spark", monkeypatch)
    assert stage0(spark, snap, tmp_path / "driver", "driver", monkeypatch) == spark_tasks
    assert stage0(spark, snap, tmp_path / "text", "text_reader", monkeypatch) == spark_tasks
    assert stage0(spark, snap, tmp_path / "reference", "reference", monkeypatch) == spark_tasks
    given = gzip.decompress((SNAPSHOTS / "generated" / "segments.jsonl.gz").read_bytes()).splitlines()
    # every 7th row is followed by a blank line (rows 0, 7, …): row i is line i + 1 + ceil(i / 7)
    assert [r["line"] for r in spark_tasks[1]] == [i + 1 + -(-i // 7) for i in range(len(given))]
    assert [r["size_bytes"] for r in spark_tasks[1]] == [json.loads(x)["size"] for x in given]


def test_a_large_gzip_file_is_read_in_ranges_of_its_plain_copy(spark, tmp_path, monkeypatch):
    """The awkward 20k cluster gzipped: read whole by one task, and (``GZIP_SPLIT_BYTES`` 0) through
    its plain copy in ranges of 256 KiB, the same table, summary and groups; the copy is gone after."""
    snap = awkward_copy(SNAPSHOTS / "generated", tmp_path)
    plain = snap / "segments.jsonl"
    (snap / "segments.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    whole = stage0(spark, snap, tmp_path / "whole", "spark", monkeypatch)
    monkeypatch.setattr(U, "GZIP_SPLIT_BYTES", 0)
    monkeypatch.setattr(U, "RANGE_BYTES", 1 << 18)
    monkeypatch.setattr(U, "MIN_RANGE_BYTES", 1 << 18)
    ranges = []
    cut = U.line_ranges
    monkeypatch.setattr(
        U, "line_ranges", lambda path, target: ranges.append((path, cut(path, target))) or ranges[-1][1]
    )
    assert stage0(spark, snap, tmp_path / "driver", "driver", monkeypatch) == whole
    [(path, cuts)] = ranges  # the plain copy, in ranges
    assert Path(path).name == "segments.jsonl" and len(cuts) > 10
    assert stage0(spark, snap, tmp_path / "spark-copy", "spark", monkeypatch) == whole
    assert sorted(p.name for p in (tmp_path / "spark-copy" / "timeline").iterdir()) == [
        "segments.parquet",
        "summary.json",
    ]


def test_a_line_that_is_not_utf8_goes_to_the_reference_reader(spark, tmp_path, monkeypatch):
    """A version with bytes that are not UTF-8: the fast path hands over to the reference reader,
    which reads them as U+FFFD (as Spark decodes text), and the timeline is built from its rows."""
    snap = tmp_path / "snap"
    snap.mkdir()
    day = b'"interval": "2013-01-01T00:00:00.000Z/2013-01-02T00:00:00.000Z", "size": 1'
    (snap / "segments.jsonl").write_bytes(
        b'{"dataSource": "x", "version": "v\xff", '
        + day
        + b"}\n"
        + b'{"dataSource": "x", "version": "v1", '
        + day
        + b"}\n"
    )
    for how in ("driver", "spark"):
        names, rows, summary, xcom = stage0(spark, snap, tmp_path / how, how, monkeypatch)
        assert [r["version"] for r in rows] == ["v\ufffd", "v1"]
        assert [r["status"] for r in rows] == ["visible", "overshadowed"]  # "v\ufffd" > "v1"
