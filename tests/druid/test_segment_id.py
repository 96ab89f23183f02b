"""Parsing segment ids back into their parts, ported from Druid's ``SegmentIdTest``
(``processing/src/test/java/org/apache/druid/timeline/SegmentIdTest.java``), plus ALGORITHM.md's
rule that a datasource of the snapshot wins."""

import pytest

from segment_balancer.druid.instants import parse_instant_ms
from segment_balancer.druid.segment_id import (
    SegmentIdParts,
    most_probable_datasource,
    parse_segment_id,
    parse_with_datasource,
)

D2, D3 = parse_instant_ms("2015-01-02"), parse_instant_ms("2015-01-03")
O20, O21 = parse_instant_ms("2014-10-20"), parse_instant_ms("2014-10-21")


@pytest.mark.parametrize(
    "datasource, segment_id, expected",
    [
        # testBasic
        ("datasource", "datasource_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0_1", (D2, D3, "ver_0", 1)),
        ("datasource", "datasource_2014-10-20T00:00:00.000Z_2014-10-21T00:00:00.000Z_ver_0_1", (O20, O21, "ver_0", 1)),
        ("datasource", "datasource_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver", (D2, D3, "ver", 0)),
        # testDataSourceWithUnderscore
        (
            "datasource_1",
            "datasource_1_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0_1",
            (D2, D3, "ver_0", 1),
        ),
        ("datasource_1", "datasource_1_2014-10-20T00:00:00.000Z_2014-10-21T00:00:00.000Z_ver", (O20, O21, "ver", 0)),
        # testDataSourceWithUnderscoreAndTimeStringInDataSourceName
        (
            "datasource_2015-01-01T00:00:00.000Z",
            "datasource_2015-01-01T00:00:00.000Z_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0_1",
            (D2, D3, "ver_0", 1),
        ),
        (
            "datasource_2015-01-01T00:00:00.000Z",
            "datasource_2015-01-01T00:00:00.000Z_2014-10-20T00:00:00.000Z_2014-10-21T00:00:00.000Z_ver",
            (O20, O21, "ver", 0),
        ),
        # testTryParseVersionAmbiguity: a trailing 0 is no partition number
        ("datasource", "datasource_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0", (D2, D3, "ver_0", 0)),
    ],
)
def test_try_parse_with_datasource(datasource, segment_id, expected):
    assert parse_with_datasource(datasource, segment_id) == SegmentIdParts(datasource, *expected)


@pytest.mark.parametrize(
    "segment_id",
    [
        "datasource_2015-01-02T00:00:00.000Z_2014-10-20T00:00:00.000Z_version",  # testInvalidFormat0: start > end
        "datasource_invalid_interval_version",  # testInvalidFormat1
        "datasource_2015-01-02T00:00:00.000Z_version",  # testInvalidFormat2
    ],
)
def test_invalid_formats(segment_id):
    assert parse_with_datasource("datasource", segment_id) is None
    assert parse_segment_id(segment_id) is None


@pytest.mark.parametrize(
    "segment_id",
    [  # testTryParseHeuristically
        "datasource_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0_1",
        "datasource_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver",
        "datasource_1_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0_1",
        "datasource_1_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver",
        "datasource_2015-01-01T00:00:00.000Z_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0_1",
        "datasource_2015-01-01T00:00:00.000Z_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver",
    ],
)
def test_most_probable_datasource(segment_id):
    ds = most_probable_datasource(segment_id)
    assert ds in ("datasource", "datasource_1")
    assert parse_with_datasource(ds, segment_id) is not None


def test_no_probable_datasource_for_eternity_ids_of_non_table_sources():
    # testBasicEmptyDataSource: SegmentId.simple(LOOKUP)
    assert most_probable_datasource("_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z_lookup") is None


def test_parse_prefers_druids_most_probable_datasource_then_the_snapshots():
    # testIterateAllPossibleParsings: Druid's first parsing takes the most probable datasource.
    sid = "datasource_2015-01-01T00:00:00.000Z_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_ver_0_1"
    first = parse_segment_id(sid)
    assert (first.datasource, first.start_ms, first.end_ms, first.version, first.partition_num) == (
        "datasource",
        parse_instant_ms("2015-01-01"),
        D2,
        "2015-01-03T00:00:00.000Z_ver_0",
        1,
    )
    # ALGORITHM.md: the longest datasource of the snapshot that prefixes the id wins.
    known = parse_segment_id(sid, ["datasource", "datasource_2015-01-01T00:00:00.000Z"])
    assert (known.datasource, known.start_ms, known.version, known.partition_num) == (
        "datasource_2015-01-01T00:00:00.000Z",
        D2,
        "ver_0",
        1,
    )


def test_a_snapshot_datasource_that_leaves_no_valid_rest_falls_back_to_druids_parsing():
    sid = "ry_old_2019-08-01T00:00:00.000Z_2019-08-02T00:00:00.000Z_v1_3"
    parts = parse_segment_id(sid, ["ry"])
    assert (parts.datasource, parts.version, parts.partition_num) == ("ry_old", "v1", 3)


def test_eternity_segment_id():
    sid = "countries_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z_2024-01-01T00:00:00.000Z"
    parts = parse_segment_id(sid, ["countries"])
    # JodaUtils.MIN_INSTANT = Long.MIN_VALUE / 2, MAX_INSTANT = Long.MAX_VALUE / 2
    assert (parts.start_ms, parts.end_ms) == (-(2**62), 2**62 - 1)
