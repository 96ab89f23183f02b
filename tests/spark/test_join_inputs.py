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
        monkeypatch.setattr(lines, "GZIP_SPLIT_BYTES", 0 if layout.endswith("-copy") else SPLIT_BYTES)
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
        monkeypatch.setattr(lines, "GZIP_SPLIT_BYTES", 0)
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
