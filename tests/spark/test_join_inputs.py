"""``prepare``'s join inputs split by task functions (``spark.join_inputs``): every replica-file
layout Druid's exports take gives the same prepared tables, on the driver and in Spark tasks, with
the file cut into many byte ranges; a row is named by its place in the whole file whatever range
read it; buckets are the same in every process."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from segment_balancer.druid.snapshot import lines
from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.spark import session as S

SPLIT_BYTES = lines.GZIP_SPLIT_BYTES
SAMPLE = Path(__file__).resolve().parents[2] / "include" / "segment_balancer" / "snapshots" / "druid_sample"
LAYOUTS = ["compact", "per_line", "pretty", "jsonl", "jsonl.gz", "jsonl.gz-copy"]
"""``jsonl.gz-copy``: gzip JSON lines read through the plain copy (``GZIP_SPLIT_BYTES`` 0)."""


def _snapshot(tmp_path: Path, layout: str, rows: list[dict]) -> Path:
    """druid_sample with its replica file written as ``layout`` (the layouts of
    ``tests/druid/snapshot/test_segments.py``), blank lines and CRLF ends mixed into the lines."""
    snap = tmp_path / layout
    shutil.copytree(SAMPLE, snap)
    (snap / "server_segments.json").unlink()
    lines = [json.dumps(r) for r in rows]
    if layout == "compact":
        (snap / "server_segments.json").write_text(json.dumps(rows))
    elif layout == "per_line":
        (snap / "server_segments.json").write_bytes(("[\r\n" + ",\r\n".join(lines) + "\n]\n").encode())
    elif layout == "pretty":
        (snap / "server_segments.json").write_text(json.dumps(rows, indent=2))
    else:
        text = "".join(line + ("\r\n" if i % 3 else "\n\n") for i, line in enumerate(lines)).encode()
        if layout == "jsonl":
            (snap / "server_segments.jsonl").write_bytes(text)
        else:
            with gzip.open(snap / "server_segments.jsonl.gz", "wb") as out:
                out.write(text)
    return snap


def _prepared(spark, snap: Path, work: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    from segment_balancer.spark.prepare import prepare
    from segment_balancer.spark.used_segments import used_segments

    used_segments(spark, snap, work)
    prepare(spark, snap, work)
    reps = pd.read_parquet(work / "prepared" / "replicas.parquet")
    segs = pd.read_parquet(work / "prepared" / "segments.parquet")
    key = ["segment_id", "server"]
    return (
        reps.drop(columns=["code"]).sort_values(key).reset_index(drop=True),
        segs.drop(columns=["code"]).sort_values("segment_id").reset_index(drop=True),
    )


@pytest.fixture
def small_ranges(monkeypatch):
    """Byte ranges of 300 bytes: druid_sample's replica file in a few dozen (the driver's calls
    see the patch; so do Spark tasks of the local session, which only get the ranges as items)."""
    from segment_balancer.spark import used_segments

    monkeypatch.setattr(used_segments, "range_bytes", lambda size, cores: 300)


@pytest.mark.parametrize("document_bytes", [None, 0], ids=["arrays_whole", "arrays_by_spark_reader"])
def test_every_replica_layout_prepares_the_same_tables(spark, tmp_path, small_ranges, monkeypatch, document_bytes):
    """A one-line or pretty-printed array is parsed whole by one task (``document``), or, above
    ``DOCUMENT_BYTES_AT_MOST`` (0 here), by Spark's multi-line JSON reader: the same tables."""
    from segment_balancer.spark import join_inputs

    if document_bytes is not None:
        monkeypatch.setattr(join_inputs, "DOCUMENT_BYTES_AT_MOST", document_bytes)
    rows = json.loads((SAMPLE / "server_segments.json").read_text())
    want = None
    for layout in LAYOUTS:
        monkeypatch.setattr(
            "segment_balancer.spark.used_segments.GZIP_SPLIT_BYTES", 0 if layout.endswith("-copy") else SPLIT_BYTES
        )
        for on_driver in (True, False):
            with S.driver_tasks(on_driver):
                got = _prepared(
                    spark, _snapshot(tmp_path / str(on_driver), layout, rows), tmp_path / f"w-{layout}-{on_driver}"
                )
            if want is None:
                want = got
                servers = json.loads((SAMPLE / "servers.json").read_text())
                historicals = {x["server"] for x in servers if x["server_type"] == "historical"}
                assert got[0]["served"].sum() == sum(r["server"] in historicals for r in rows) > 0
            else:
                pd.testing.assert_frame_equal(got[0], want[0])
                pd.testing.assert_frame_equal(got[1], want[1])


@pytest.mark.parametrize(
    "layout, where",
    [
        # the unlisted check names the replica file so in every layout, a line of JSON lines as its row
        ("jsonl", "server_segments.json row 8"),
        ("jsonl.gz-copy", "server_segments.json row 8"),
        ("per_line", "server_segments.json row 5"),
        ("pretty", "server_segments.json row 5"),
        ("compact", "server_segments.json row 5"),
    ],
)
def test_a_bad_id_is_named_by_its_place_in_the_whole_file(spark, tmp_path, small_ranges, monkeypatch, layout, where):
    """An unlisted id that is no Druid segment id, the file's object 5 of 8 (0-based; an array names
    it row 5). In the JSON lines file (``_snapshot``) objects 0 and 3 are each followed by a blank
    line, so the object is on line 5 + 1 + 2 = 8; with ranges of 300 bytes it is not in the
    first."""
    rows = json.loads((SAMPLE / "server_segments.json").read_text())
    rows.insert(5, {"server": rows[0]["server"], "segment_id": "garbage-id"})
    if layout.endswith("-copy"):
        monkeypatch.setattr("segment_balancer.spark.used_segments.GZIP_SPLIT_BYTES", 0)
    for on_driver in (True, False):
        with S.driver_tasks(on_driver), pytest.raises(SnapshotError) as info:
            _prepared(spark, _snapshot(tmp_path / str(on_driver), layout, rows), tmp_path / f"w-{on_driver}")
        assert str(info.value).startswith(f"{where}: "), str(info.value)
        assert "garbage-id" in str(info.value)


def test_buckets_are_the_same_in_every_process():
    from segment_balancer.spark.join_inputs import buckets_of

    ids = ["wikipedia_2013-01-01T00:00:00.000Z_2013-01-02T00:00:00.000Z_v1", "a", "ü_2020"]
    code = f"from segment_balancer.spark.join_inputs import buckets_of; print(list(buckets_of({ids!r}, 64)))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == str(list(buckets_of(ids, 64)))
    assert all(0 <= b < 64 for b in buckets_of(ids, 64))


def test_buckets_are_pandas_hashes_of_the_ids():
    """The bucket is ``pandas.util.hash_array`` (its default, which factorizes first) modulo the
    buckets, for repeated and missing ids too."""
    import numpy as np

    from segment_balancer.spark.join_inputs import buckets_of

    ids = np.array([f"ds_{i % 97}_v{i % 5}" for i in range(2000)] + [None, "ü_2020", None], dtype=object)
    want = (pd.util.hash_array(ids) % np.uint64(64)).astype(np.int32)
    assert buckets_of(ids, 64).tolist() == want.tolist()
    assert buckets_of(pa.array(ids, pa.string()), 64).tolist() == want.tolist()


A = '{"server": "h1:8083", "segment_id": "ds_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_v1"}'
B = '{"server": "b1:8082", "segment_id": "ds_2020-01-02T00:00:00.000Z_2020-01-03T00:00:00.000Z_v1"}'
C = '{"server": "h2:8083", "segment_id": "ds_2020-01-03T00:00:00.000Z_2020-01-04T00:00:00.000Z_v\u00e9"}'
SIMPLE = {
    "array": [
        f"[\n{A},\n{B},\n{C}\n]\n",
        f"\ufeff[\n{A},\n\n{B},\n{C},\n]",  # a byte order mark, a blank line, a last comma, no last end
        f"{A},\n{B},\n",  # a range in the middle of the array
        f"{B}\n]\n",
        "",
        "[\n]\n",
        f"[\n{A} {B},\n]\n",  # two objects on a line: bad (pyarrow reads one row too many)
    ],
    "line": [
        f"{A}\n{B}\n\n\n{C}\n",
        f"\ufeff{A}\n{B}",
        f"\n\n{A}\n",
        "\n",
        f"{A}\n{{}}\n",  # an object without the fields: bad
        f'{A}\n{{"server": "x:1", "segment_id": "y"}}\n',  # a server servers.json lacks: bad
    ],
}
OTHER = {
    "array": [
        f"[\r\n{A},\r\n{B}\r\n]\r\n",  # CRLF
        f"[\n  {A},\n  {B}\n]\n",  # indented
        f"[{A},\n{B}]\n",  # a bracket on an object's line: bad
        f"[\n{A},,\n{B}\n]\n",  # two commas: bad
        f"[\n{A}, \n{B}\n]\n",  # a space after the comma
        "[\n" + A.replace("h1", "h\udcff1") + "\n]\n",  # not UTF-8
        f"[\n   \n{A}\n]\n",  # a line of spaces
    ],
    "line": [
        f"{A}\r{B}\n",
        f"{A},\n{B}\n",  # a comma in JSON lines: bad
        f"  {A}\n{B}\n",
        f"{A}\n  \n{B}\n",
        f"[{A}]\n",
        A.replace("h1", "h\udcff1") + "\n",
    ],
}


def _split(tmp_path: Path, data: bytes, layout: str, start: int = 0) -> tuple[dict, list[dict]]:
    """``_split_replicas`` of ``data`` (the range from ``start`` of a file of it): its summary and
    the rows it wrote."""
    import pyarrow.parquet as pq

    from segment_balancer.spark import join_inputs

    path = tmp_path / "replicas"
    path.write_bytes(b"x" * start + data)
    scratch = tmp_path / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    item = {
        "index": 0,
        "path": str(path),
        "start": start,
        "end": start + len(data),
        "gzip": False,
        "layout": layout,
        "historicals": ["h1:8083", "h2:8083"],
        "known": ["h1:8083", "h2:8083", "b1:8082"],
        "scratch": str(scratch),
        "buckets": 4,
        "parts": 2,
    }
    out = join_inputs._split_replicas(item)
    written = [r for f in sorted(scratch.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return out, sorted(written, key=lambda r: r["row"])


@pytest.mark.parametrize("layout", ["array", "line"])
def test_simple_lines_are_read_as_line_by_line(tmp_path, monkeypatch, layout):
    """A range whose lines all have the simple shape is read without a step per line
    (``_simple_lines``), anything else line by line: each gives what the line-by-line reading
    gives (rows and their numbers, lines, which rows are bad), at the file's start (a byte order
    mark dropped) and inside it."""
    from segment_balancer.spark import join_inputs

    cases = [(t, True) for t in SIMPLE[layout]] + [(t, False) for t in OTHER[layout]]
    for text, simple in cases:
        data = text.encode("utf-8", errors="surrogateescape")
        for start in (0, 5):
            if start and data.startswith(b"\xef\xbb\xbf"):
                continue
            assert (join_inputs._simple_lines(data, layout, start == 0) is not None) == simple, text
            fast = _split(tmp_path, data, layout, start)
            with monkeypatch.context() as m:
                m.setattr(join_inputs, "_simple_lines", lambda *args: None)
                slow = _split(tmp_path, data, layout, start)
            assert fast == slow, text
    assert _split(tmp_path, SIMPLE[layout][0].encode(), layout)[0]["rows"] == 3
