"""The fast reader of ``segments.jsonl`` (``segment_lines.parse_lines``, pyarrow) reads every valid
line as the reference reader (``segments.read_segments``, Spark's ``from_json``) does, and marks
``bad`` every line the reference refuses, so that the reference names it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from segment_balancer.druid.snapshot.segment_lines import PARSED_FIELDS, parse_lines

DAY = "2013-01-01T00:00:00.000Z/2013-01-02T00:00:00.000Z"
VALID = [
    {"dataSource": "wiki", "interval": DAY, "version": "v1", "size": 10, "shardSpec": {"type": "none"}},
    {
        "dataSource": "wiki",
        "interval": DAY,
        "version": "v1",
        "size": 0,
        "shardSpec": {"type": "numbered", "partitionNum": 3, "partitions": 4},
        "used": False,
    },
    {
        "dataSource": "wiki",
        "interval": DAY,
        "version": "v2",
        "size": 7,
        "overshadowed": True,
        "shardSpec": {
            "type": "numbered_overwrite",
            "partitionId": 32768,
            "startRootPartitionId": 0,
            "endRootPartitionId": 2,
            "minorVersion": 1,
            "atomicUpdateGroupSize": 1,
        },
    },
    # Druid's eternity (ALL granularity), a year past 9999, an offset, a zero-length interval
    {
        "dataSource": "all",
        "interval": "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z",
        "version": "v",
        "size": 1,
        "loadSpec": {"type": "s3_zip"},
        "dimensions": "a,b",
    },
    {"dataSource": "far", "interval": "2013-01-01T00:00:00.000Z/12013-01-01T00:00:00.000Z", "version": "v", "size": 1},
    {"dataSource": "tz", "interval": "2013-01-01T01:00:00.000+01:00/2013-01-02", "version": "v", "size": 1},
    {"dataSource": "tz", "interval": "2013-01-05T00:00:00.000Z/2013-01-05T00:00:00.000Z", "version": "v", "size": 1},
    # Druid 38's partial-load fields: projections comma-joined (as DataSegment writes them), clusterGroups
    {
        "dataSource": "p",
        "interval": DAY,
        "version": "v",
        "size": 1,
        "projections": "daily,hourly",
        "clusterGroups": {
            "clusteringColumns": [{"name": "tenant", "type": "STRING"}, {"name": "n", "type": "DOUBLE"}],
            "virtualColumns": [{"type": "expression", "name": "v", "expression": "lower(tenant)"}],
            "tuples": [["acme", 1], [None, 2.5]],
        },
    },
    {"dataSource": "p", "interval": DAY, "version": "w", "size": 1, "projections": "", "clusterGroups": None},
]
BAD = [
    "{not json",
    json.dumps({"dataSource": "x", "interval": "yesterday", "version": "v", "size": 1}),
    json.dumps(
        {"dataSource": "x", "interval": "2013-01-03T00:00:00.000Z/2013-01-02T00:00:00.000Z", "version": "v", "size": 1}
    ),
    json.dumps(
        {"dataSource": "x", "interval": "2013-02-30T00:00:00.000Z/2013-03-02T00:00:00.000Z", "version": "v", "size": 1}
    ),
    json.dumps({"dataSource": "x", "interval": DAY, "version": "v", "size": -1}),
    json.dumps({"dataSource": "x", "interval": DAY, "version": "v", "size": "big"}),
    json.dumps({"dataSource": "x", "interval": DAY, "version": "v"}),
    json.dumps({"interval": DAY, "version": "v", "size": 1}),
    json.dumps({"dataSource": "x", "interval": DAY, "size": 1}),
    json.dumps({"dataSource": "x", "interval": DAY + "/2014", "version": "v", "size": 1}),
    json.dumps({"dataSource": "x", "interval": DAY, "version": "v", "size": 1, "projections": 5}),
    json.dumps({"dataSource": "x", "interval": DAY, "version": "v", "size": 1, "clusterGroups": {"tuples": []}}),
    json.dumps(
        {
            "dataSource": "x",
            "interval": DAY,
            "version": "v",
            "size": 1,
            "clusterGroups": {"clusteringColumns": [{"name": "n", "type": "LONG"}], "tuples": [["1"]]},
        }
    ),
    # a NaN literal, which Jackson refuses (Python's and Spark's JSON readers take it)
    '{"dataSource": "x", "interval": "' + DAY + '", "version": "v", "size": 1, "clusterGroups": '
    '{"clusteringColumns": [{"name": "n", "type": "DOUBLE"}], "tuples": [[NaN]]}}',
]


def _reference(spark, tmp_path, lines):
    from segment_balancer.druid.snapshot.segments import read_segments

    (tmp_path / "segments.jsonl").write_text("\n".join(lines) + "\n")
    df = read_segments(spark, tmp_path)
    rows = {r["line"]: r.asDict() for r in df.collect()}
    df.unpersist()
    return rows


def test_valid_lines_read_as_the_reference_reads_them(spark, tmp_path):
    lines = [json.dumps(x) for x in VALID]
    fast = parse_lines(np.arange(1, len(lines) + 1), lines).to_pylist()
    reference = _reference(spark, tmp_path, lines)
    assert not any(r["bad"] for r in fast)
    for row in fast:
        want = reference[row["line"]]
        assert want["problem"] is None
        assert {n: row[n] for n, _ in PARSED_FIELDS if n != "bad"} == {
            n: want[n] for n, _ in PARSED_FIELDS if n != "bad"
        }
    assert fast[3]["start_ms"] == -(2**62) and fast[3]["end_ms"] == 2**62 - 1
    assert fast[5]["segment_id"] == "tz_2013-01-01T00:00:00.000Z_2013-01-02T00:00:00.000Z_v"
    assert fast[7]["projections"] == "daily,hourly"  # Druid's form; the timeline table has lists
    assert json.loads(fast[7]["cluster_groups"]) == VALID[7]["clusterGroups"]
    assert (fast[8]["projections"], fast[8]["cluster_groups"]) == ("", None)
    assert (fast[0]["projections"], fast[0]["cluster_groups"]) == (None, None)


@pytest.mark.parametrize("line", BAD)
def test_every_line_the_reference_refuses_is_bad(spark, tmp_path, line):
    lines = [json.dumps(VALID[0]), line]
    fast = parse_lines(np.array([1, 2]), lines).to_pylist()
    assert fast[1]["bad"]
    assert _reference(spark, tmp_path, lines)[2]["problem"] is not None
