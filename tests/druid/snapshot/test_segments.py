"""Bad segment and replica rows are refused in stage 0 with file, row and problem; no plan input is written."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.spark.prepare import prepare
from segment_balancer.spark.used_segments import used_segments

SAMPLE = Path(__file__).resolve().parents[3] / "include/segment_balancer/snapshots/druid_sample"


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
    if info.value.file.startswith("segments.jsonl"):  # the table that failed its check never appears
        assert not (work / "timeline" / "segments.parquet").exists()
    else:  # nothing of prepare's appears: no table, no aside copy, no scratch
        assert not [p for p in (work / "prepared").rglob("*.parquet")] if (work / "prepared").exists() else True
        assert not [p for p in work.iterdir() if p.name.startswith("prepared.")]
    assert not [p for p in work.rglob("*") if ".tmp-" in p.name or ".staged-" in p.name]  # nor an aside copy of it
    return info.value


def test_negative_size_names_the_line(spark, tmp_path):
    def edit(segs):
        segs[2]["size"] = -5
        return segs

    err = refused(spark, snapshot_with(tmp_path, edit), tmp_path)
    assert str(err) == "segments.jsonl line 3: size must be >= 0, got -5"


@pytest.mark.parametrize(
    "raw, problem",
    [
        ('"size": NaN', "size must be a whole number of bytes, got NaN"),
        ('"size": "big"', 'size must be a whole number of bytes, got "big"'),
        ('"size": 1.5', "size must be a whole number of bytes, got 1.5"),
        ('"size": null', "size is missing"),
    ],
)
def test_a_size_that_is_no_whole_number_names_its_value(spark, tmp_path, raw, problem):
    """A size of NaN or "big" is named as such, not reported as "size is missing"."""

    def edit(segs):
        segs[1]["size"] = "PLACEHOLDER"
        return [json.dumps(x).replace('"size": "PLACEHOLDER"', raw) for x in segs]

    err = refused(spark, snapshot_with(tmp_path, edit), tmp_path)
    assert (err.file, err.row, err.problem) == ("segments.jsonl", 2, problem)


@pytest.mark.parametrize("split_bytes", [None, 0], ids=["read_whole", "plain_copy"])
def test_a_truncated_gzip_is_refused_naming_the_file(spark, tmp_path, monkeypatch, split_bytes):
    """Half of segments.jsonl.gz: one error names the file (no Java stack trace), whether it is read
    whole or first decompressed to a plain copy (``GZIP_SPLIT_BYTES`` 0)."""
    if split_bytes is not None:
        monkeypatch.setattr("segment_balancer.spark.used_segments.GZIP_SPLIT_BYTES", split_bytes)
    snap = tmp_path / "snap"
    shutil.copytree(SAMPLE, snap)
    whole = (snap / "segments.jsonl.gz").read_bytes()
    (snap / "segments.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    err = refused(spark, snap, tmp_path)
    assert (err.file, err.row) == ("segments.jsonl.gz", None)
    assert err.problem.startswith("is not a whole gzip file (truncated or corrupt: Unexpected end of input stream)")


@pytest.mark.parametrize("split_bytes", [None, 0], ids=["read_whole", "plain_copy"])
def test_a_truncated_replica_file_is_refused_naming_the_file(spark, tmp_path, monkeypatch, split_bytes):
    """The same for ``server_segments.jsonl.gz``, read in prepare."""
    if split_bytes is not None:
        monkeypatch.setattr("segment_balancer.spark.used_segments.GZIP_SPLIT_BYTES", split_bytes)
    snap = tmp_path / "snap"
    shutil.copytree(SAMPLE, snap)
    rows = json.loads((snap / "server_segments.json").read_text())
    (snap / "server_segments.json").unlink()
    whole = gzip.compress("".join(json.dumps(r) + "\n" for r in rows * 200).encode())
    (snap / "server_segments.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    err = refused(spark, snap, tmp_path)
    assert (err.file, err.row) == ("server_segments.jsonl.gz", None)
    assert err.problem.startswith("is not a whole gzip file (truncated or corrupt:")


def test_bad_interval_and_malformed_line(spark, tmp_path):
    def edit(segs):
        segs[0]["interval"] = "2013-01-02T00:00:00.000Z/2013-01-01T00:00:00.000Z"
        return segs[:3] + ["{not json"] + segs[3:]

    err = refused(spark, snapshot_with(tmp_path, edit), tmp_path)
    assert err.file == "segments.jsonl" and err.row == 1
    assert "ends before it starts" in err.problem and "line 4" in err.problem


@pytest.mark.parametrize(
    "interval, problem",
    [
        ("2013-01-01T00:00:00.000Z/P1D", "interval is not start/end ISO-8601: 2013-01-01T00:00:00.000Z/P1D"),
        ("2013-01-01T25:00:00.000Z/2013-01-02", "interval is not start/end ISO-8601"),
        ("2013-01-01/2013-01-02/2013-01-03", "interval is not start/end ISO-8601"),
        ("1234567890-01-01/1234567891-01-01", "interval is not start/end ISO-8601"),  # 10-digit years: past Joda
        ("yesterday", "interval is not start/end ISO-8601: yesterday"),  # one part: was a Spark index error
    ],
)
def test_malformed_interval_is_a_clear_error_not_a_spark_traceback(spark, tmp_path, interval, problem):
    def edit(segs):
        segs[1]["interval"] = interval
        return segs

    err = refused(spark, snapshot_with(tmp_path, edit), tmp_path)
    assert (err.file, err.row) == ("segments.jsonl", 2) and problem in err.problem


def test_eternity_and_far_instants_are_read_as_epoch_millis(spark, tmp_path):
    """An ALL-granularity segment (Druid's eternity interval) and a year past 9999, as Joda prints them."""
    from segment_balancer.druid.snapshot.segments import read_segments

    def edit(segs):
        segs[0]["interval"] = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
        segs[1]["interval"] = "2013-01-01T00:00:00.000Z/12013-01-01T00:00:00.000Z"
        return segs

    df = read_segments(spark, snapshot_with(tmp_path, edit)).orderBy("line")
    rows = df.select("line", "segment_id", "start_ms", "end_ms").collect()
    df.unpersist()
    assert (rows[0].start_ms, rows[0].end_ms) == (-(2**62), 2**62 - 1)  # JodaUtils MIN/MAX_INSTANT
    assert "_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z_" in rows[0].segment_id
    # 1970..12012: 10043 years, leap years 3003 - 492 (by 4) - (120 - 19) (by 100) + (30 - 4) (by 400)
    # = 2436: 10043 * 365 + 2436 = 3,668,131 days.
    assert rows[1].end_ms == 3_668_131 * 86_400_000 and "_12013-01-01T00:00:00.000Z_" in rows[1].segment_id


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
    assert err.file == "server_segments.json" and err.row == 7
    assert "segment nope_2013 is not in segments.jsonl and is not a Druid segment id" in err.problem


# ---------------------------------------------------------------- replica file layouts


def _rows_by_layout(spark, tmp_path, layout: str, edit=None):
    """``read_server_segments`` of the druid_sample replicas written as ``layout``: ``compact``
    (a one-line JSON array), ``per_line`` (``[`` / one object per line / ``]``), ``pretty``
    (``json.dumps(indent=2)``), ``jsonl`` or ``jsonl.gz`` (Druid SQL objectLines)."""
    from segment_balancer.druid.snapshot.segments import first_problems, read_server_segments, refuse

    snap = tmp_path / layout
    shutil.copytree(SAMPLE, snap)
    rows = json.loads((snap / "server_segments.json").read_text())
    rows = edit(rows) if edit else rows
    (snap / "server_segments.json").unlink()
    if layout == "compact":
        (snap / "server_segments.json").write_text(json.dumps(rows))
    elif layout == "per_line":
        (snap / "server_segments.json").write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    elif layout == "pretty":
        (snap / "server_segments.json").write_text(json.dumps(rows, indent=2))
    else:
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if layout == "jsonl":
            (snap / "server_segments.jsonl").write_text(text)
        else:
            with gzip.open(snap / "server_segments.jsonl.gz", "wt") as out:
                out.write(text)
    servers = json.loads((SAMPLE / "servers.json").read_text())
    historicals = {s["server"] for s in servers if s["server_type"] == "historical"}
    rows, file, word = read_server_segments(spark, snap, historicals, {s["server"] for s in servers})
    refuse(file, [r.asDict() for r in first_problems(rows, key="row").collect()], word, key="row")
    return rows.filter("historical")


@pytest.mark.parametrize("layout", ["compact", "per_line", "pretty", "jsonl", "jsonl.gz"])
def test_every_replica_file_layout_gives_the_same_rows(spark, tmp_path, layout):
    rows = json.loads((SAMPLE / "server_segments.json").read_text())
    got = _rows_by_layout(spark, tmp_path, layout).orderBy("row").collect()
    first = 1 if layout.startswith("jsonl") else 0  # a line (1-based) or an array index (0-based)
    assert [(r["row"], r["server"], r["segment_id"]) for r in got] == [
        (i + first, r["server"], r["segment_id"]) for i, r in enumerate(rows)
    ]


@pytest.mark.parametrize(
    "layout, where",
    [
        ("per_line", "server_segments.json row 3"),
        ("compact", "server_segments.json row 3"),
        ("jsonl", "server_segments.jsonl line 4"),
    ],
)
def test_bad_replica_row_is_named_in_every_layout(spark, tmp_path, layout, where):
    def edit(rows):
        rows[3]["server"] = "hist-nowhere:8083"
        return rows

    with pytest.raises(SnapshotError) as info:
        _rows_by_layout(spark, tmp_path, layout, edit)
    assert str(info.value).startswith(f"{where}: unknown server hist-nowhere:8083")


def test_a_line_that_is_no_json_object_is_named(spark, tmp_path):
    with pytest.raises(SnapshotError) as info:
        _rows_by_layout(spark, tmp_path, "jsonl", lambda rows: rows[:2] + ["not json"] + rows[2:])
    assert str(info.value).startswith("server_segments.jsonl line 3: not valid JSON, got ")


def test_a_bad_line_of_a_gzip_segments_file_is_named_by_its_line(spark, tmp_path):
    """``segments.jsonl.gz`` (one partition: its rows numbered without a counting job) names a bad
    row by its line in the file, blank lines counted, as the plain file does."""
    snap = snapshot_with(tmp_path, lambda segs: segs[:2] + ["", " "] + segs[2:4] + ["{not json"] + segs[4:])
    text = (snap / "segments.jsonl").read_text()
    (snap / "segments.jsonl").unlink()
    with gzip.open(snap / "segments.jsonl.gz", "wt") as out:
        out.write(text)
    err = refused(spark, snap, tmp_path)
    assert str(err).startswith("segments.jsonl.gz line 7: "), str(err)


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("projections", ["a", 1], 'projections must be a comma-separated string of projection names, got ["a", 1]'),
        ("clusterGroups", {"tuples": [["a"]]}, "clusterGroups.clusteringColumns must not be null or empty"),
        (
            "clusterGroups",
            {"clusteringColumns": [{"name": "n", "type": "LONG"}], "tuples": [["1"]]},
            "clusterGroups.tuples[0]: cannot coerce the value \"1\" of column 'n' to LONG: not a number",
        ),
    ],
)
def test_partial_load_fields_that_druid_refuses_name_the_line(spark, tmp_path, field, value, problem):
    """A payload whose ``projections`` or ``clusterGroups`` Druid's ``DataSegment`` would not read
    is refused as a bad line."""

    def edit(segs):
        segs[1][field] = value
        return segs

    err = refused(spark, snapshot_with(tmp_path, edit), tmp_path)
    assert str(err) == f"segments.jsonl line 2: {problem}"
