"""Bad segment and replica rows are refused in stage 0 with file, row and problem; no plan input is written."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from segment_balancer.prepare import prepare
from segment_balancer.used_segments import used_segments
from segment_balancer.snapshot.errors import SnapshotError

SAMPLE = Path(__file__).resolve().parents[2] / "include/segment_balancer/snapshots/druid_sample"


def snapshot_with(tmp_path: Path, edit_segments=None, edit_server_segments=None) -> Path:
    snap = tmp_path / "snap"
    shutil.copytree(SAMPLE, snap)
    lines = gzip.open(snap / "segments.jsonl.gz", "rt").read().splitlines()
    (snap / "segments.jsonl.gz").unlink()
    if edit_segments:
        lines = edit_segments([json.loads(x) for x in lines])
        lines = [x if isinstance(x, str) else json.dumps(x) for x in lines]
    (snap / "segments.jsonl").write_text("\n".join(lines) + "\n")
    if edit_server_segments:
        rows = json.loads((snap / "server_segments.json").read_text())
        (snap / "server_segments.json").write_text(json.dumps(edit_server_segments(rows)))
    return snap


def refused(spark, snap: Path, tmp_path: Path) -> SnapshotError:
    work = tmp_path / "work"
    with pytest.raises(SnapshotError) as info:
        used_segments(spark, snap, work)  # segments.jsonl is read and checked here
        prepare(spark, snap, work)  # server_segments.json here
    assert not (work / "prepared" / "meta.json").exists()
    return info.value


def test_negative_size_names_the_line(spark, tmp_path):
    def edit(segs):
        segs[2]["size"] = -5
        return segs

    err = refused(spark, snapshot_with(tmp_path, edit), tmp_path)
    assert str(err) == "segments.jsonl line 3: size must be >= 0, got -5"


def test_bad_interval_and_malformed_line(spark, tmp_path):
    def edit(segs):
        segs[0]["interval"] = "2013-01-02T00:00:00.000Z/2013-01-01T00:00:00.000Z"
        return segs[:3] + ["{not json"] + segs[3:]

    err = refused(spark, snapshot_with(tmp_path, edit), tmp_path)
    assert err.file == "segments.jsonl" and err.row == 1
    assert "ends before it starts" in err.problem and "line 4" in err.problem


def test_duplicate_segment(spark, tmp_path):
    err = refused(spark, snapshot_with(tmp_path, lambda segs: segs + [segs[1]]), tmp_path)
    assert err.row == 6 and "duplicate segment twitterstream_2013-01-02" in err.problem and "line 2" in err.problem


def test_unknown_server_in_server_segments(spark, tmp_path):
    def edit(rows):
        rows[3]["server"] = "hist-nowhere:8083"
        return rows

    err = refused(spark, snapshot_with(tmp_path, edit_server_segments=edit), tmp_path)
    assert str(err).startswith("server_segments.json row 3: unknown server hist-nowhere:8083")


def test_unknown_segment_in_server_segments(spark, tmp_path):
    def edit(rows):
        rows.append({"server": "hist-hot-02:8083", "segment_id": "nope_2013"})
        return rows

    err = refused(spark, snapshot_with(tmp_path, edit_server_segments=edit), tmp_path)
    assert err.row == 7 and "unknown segment nope_2013" in err.problem
