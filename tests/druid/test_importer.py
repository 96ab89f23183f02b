"""importer: druid_segments SQL dumps -> segments.jsonl.gz, Druid segment ids, ISO instants."""

from __future__ import annotations

import gzip
import json
import os
import re

import pytest

from segment_balancer.druid.importer import SqlImportError, import_druid_segments_sql, iso_to_ms, ms_to_iso, segment_id
from segment_balancer.tools.sample import SAMPLE_SQL

SHARED_SQL = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
    "shared",
    "data",
    "druid_segments-sample.sql",
)
"""Druid's sample dump in the shared folder next to the repository (``../shared/data/``), when present."""


def _sample_sql() -> str:
    return SHARED_SQL if os.path.exists(SHARED_SQL) else SAMPLE_SQL


def _read(out_dir) -> list[dict]:
    with gzip.open(os.path.join(out_dir, "segments.jsonl.gz"), "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _id_column(sql_path: str) -> list[str]:
    """The id column of every row, read with a plain regex (independently of the tokenizer):
    in Druid's sample every INSERT has one row whose first value is the id."""
    with open(sql_path, encoding="utf-8") as handle:
        return re.findall(r"VALUES \('([^']+)'", handle.read())


def _payload(
    ds="ds", interval="2020-01-01T00:00:00.000Z/2020-01-02T00:00:00.000Z", version="v1", partition=None, size=100
) -> str:
    spec = {"type": "none"} if partition is None else {"type": "numbered", "partitionNum": partition}
    return json.dumps({"dataSource": ds, "interval": interval, "version": version, "shardSpec": spec, "size": size})


def _sql_str(text: str) -> str:
    """A MySQL-dump string literal: backslash-escaped quotes, as in Druid's sample."""
    return "'" + text.replace("\\", "\\\\").replace('"', '\\"').replace("'", "\\'") + "'"


DAY1 = "2020-01-01T00:00:00.000Z/2020-01-02T00:00:00.000Z"
ID1 = "ds_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_v1"


def _row(sid=ID1, used="1", ds="ds", version="v1", interval=DAY1, payload=None) -> str:
    """One VALUES tuple in Druid's column order; ``payload`` defaults to one that agrees."""
    start, end = interval.split("/")
    payload = payload or _payload(ds, interval, version)
    return f"('{sid}','{ds}','2020-01-03T00:00:00.000Z','{start}','{end}',0,'{version}',{used},{_sql_str(payload)})"


COLS = "(id,dataSource,created_date,start,end,partitioned,version,used,payload)"


def _write(tmp_path, text: str, name="dump.sql") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------- the real sample


def test_imports_every_row_of_druids_sample(tmp_path):
    sql = _sample_sql()
    assert import_druid_segments_sql(sql, tmp_path) == 5  # five INSERTs, one row each
    segments = _read(tmp_path)
    assert [s["dataSource"] for s in segments] == ["twitterstream"] * 3 + ["wikipedia_editstream", "wikipedia"]
    assert all(s["used"] is True for s in segments)  # used 1, 1, 1, 1 and '1' in the file
    assert segments[0]["size"] == 445235220
    assert segments[4]["size"] == 24664730
    assert segments[0]["shardSpec"] == {"type": "none"}  # \" escapes decoded


def test_segment_ids_equal_the_id_column(tmp_path):
    sql = _sample_sql()
    import_druid_segments_sql(sql, tmp_path)
    ids = _id_column(sql)
    assert len(ids) == 5
    assert [segment_id(s) for s in _read(tmp_path)] == ids


def test_bundled_sql_is_druids_sample():
    if not os.path.exists(SHARED_SQL):
        pytest.skip("shared data not present")
    with open(SHARED_SQL, "rb") as a, open(SAMPLE_SQL, "rb") as b:
        assert a.read() == b.read()


def test_output_is_reproducible_and_leaves_no_temp_files(tmp_path):
    sql = _sample_sql()
    import_druid_segments_sql(sql, tmp_path / "a")
    import_druid_segments_sql(sql, tmp_path / "b")
    first = (tmp_path / "a" / "segments.jsonl.gz").read_bytes()
    assert first == (tmp_path / "b" / "segments.jsonl.gz").read_bytes()
    assert os.listdir(tmp_path / "a") == ["segments.jsonl.gz"]


# ----------------------------------------------------------------------------- segment ids


def test_segment_id_prints_utc_millis_and_omits_partition_zero():
    assert segment_id(json.loads(_payload())) == "ds_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_v1"
    assert segment_id(json.loads(_payload(partition=0))) == ("ds_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_v1")
    shifted = json.loads(_payload(interval="2020-01-01T01:00:00+01:00/2020-01-02T00:00:00.5Z", partition=3))
    assert segment_id(shifted) == "ds_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.500Z_v1_3"


def test_iso_instants_round_trip_including_eternity():
    assert iso_to_ms("1970-01-01T00:00:00.000Z") == 0
    assert iso_to_ms("2013-01-01T00:00:00.000Z") == 1356998400000
    assert iso_to_ms("2013-01-01") == 1356998400000
    assert ms_to_iso(-1) == "1969-12-31T23:59:59.999Z"
    # Druid's ETERNITY: JodaUtils MIN_INSTANT / MAX_INSTANT = Long.MIN_VALUE / 2, Long.MAX_VALUE / 2
    assert iso_to_ms("-146136543-09-08T08:23:32.096Z") == -(2**62)
    assert ms_to_iso(2**62 - 1) == "146140482-04-24T15:36:27.903Z"
    for bad in ("2013-02-30T00:00:00Z", "2013-01-01T25:00:00Z", "yesterday"):
        with pytest.raises(ValueError):
            iso_to_ms(bad)


# ----------------------------------------------------------------------- dialects accepted


def test_multi_row_multi_line_statements_comments_and_other_statements(tmp_path):
    day2 = "2020-01-02T00:00:00.000Z/2020-01-03T00:00:00.000Z"
    text = "\n".join(
        [
            "-- dump header",
            "/*!40101 SET NAMES utf8mb4 */;",
            "DROP TABLE IF EXISTS `druid_segments`;",
            "CREATE TABLE `druid_segments` (`id` varchar(255) NOT NULL, PRIMARY KEY (`id`));",
            "LOCK TABLES `druid_segments` WRITE;",
            "INSERT INTO `druid_tasks` VALUES ('t1','x');  # another table: skipped",
            "INSERT INTO `druid_segments` (`id`,`dataSource`,`created_date`,`start`,`end`,",
            "  `partitioned`,`version`,`used`,`payload`) VALUES",
            "  " + _row() + ",",
            "  "
            + _row(
                sid="ds_2020-01-02T00:00:00.000Z_2020-01-03T00:00:00.000Z_v1_2",
                used="0",
                interval=day2,
                payload=_payload(interval=day2, partition=2),
            )
            + ";",
            "UNLOCK TABLES;",
        ]
    )
    assert import_druid_segments_sql(_write(tmp_path, text), tmp_path / "out") == 2
    segments = _read(tmp_path / "out")
    assert [s["used"] for s in segments] == [True, False]
    assert segments[1]["shardSpec"]["partitionNum"] == 2


def test_derby_style_quoted_identifiers_booleans_and_no_column_list(tmp_path):
    payload = _payload(version="it's").replace("'", "''")
    derby = (
        'INSERT INTO "APP"."DRUID_SEGMENTS" ("ID","DATASOURCE","CREATED_DATE","START",'
        '"END","PARTITIONED","VERSION","USED","PAYLOAD") VALUES '
        "('ds_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_it''s','ds','c',"
        "'2020-01-01T00:00:00.000Z','2020-01-02T00:00:00.000Z',false,'it''s',TRUE,"
        f"'{payload}');\n"
    )
    plain = (
        "INSERT INTO druid_segments VALUES "
        + _row(
            sid="ds_2020-01-02T00:00:00.000Z_2020-01-03T00:00:00.000Z_v1",
            interval="2020-01-02T00:00:00.000Z/2020-01-03T00:00:00.000Z",
            used="0",
        )[:-1]
        + ",'1970-01-01T00:00:00.000Z');\n"
    )  # the later used_status_last_updated column
    assert import_druid_segments_sql(_write(tmp_path, derby + plain), tmp_path / "out") == 2
    segments = _read(tmp_path / "out")
    assert segments[0]["version"] == "it's" and segments[0]["used"] is True
    assert segments[1]["used"] is False


# ------------------------------------------------------------------------ malformed input


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("-- ok\nINSERT INTO druid_segments " + COLS + " VALUES\n('a','ds", 3, "unterminated string"),
        ("INSERT INTO druid_segments " + COLS + "\nVALUES\n" + _row() + "\n", 4, "not terminated"),
        (
            "INSERT INTO druid_segments " + COLS + " VALUES\n" + _row()[:-1] + "\n;",
            3,
            r"expected '\)' to close the row",
        ),
        ("\n\nINSERT INTO druid_segments " + COLS + " VALUES ('a', 'b');", 3, "2 values for 9 columns"),
        ("INSERT INTO druid_segments (id, payload) VALUES ('a', '{}');", 1, "lacks datasource"),
        ("INSERT INTO druid_segments " + COLS + " VALUES " + _row()[:-1] + " @);", 1, "unexpected character"),
        ("INSERT druid_segments VALUES ();", 1, "expected INTO"),
        ("INSERT INTO druid_segments " + COLS + " VALUES\n\n" + _row(used="'maybe'") + ";", 3, "not a boolean"),
        (
            "INSERT INTO druid_segments " + COLS + " VALUES\n" + _row(payload=_payload(ds="other")) + ";",
            2,
            "dataSource 'other' != column 'ds'",
        ),
        (
            "INSERT INTO druid_segments " + COLS + " VALUES\n" + _row(payload=_payload(version="v2")) + ";",
            2,
            "version 'v2' != column 'v1'",
        ),
        (
            "INSERT INTO druid_segments "
            + COLS
            + " VALUES\n"
            + _row(payload=_payload(interval="2020-01-01T00:00:00.000Z/2020-01-05T00:00:00.000Z"))
            + ";",
            2,
            "payload interval",
        ),
        (
            "INSERT INTO druid_segments " + COLS + " VALUES\n" + _row(sid="wrong") + ";",
            2,
            "does not match|!= the payload's segment id",
        ),
        ("INSERT INTO druid_segments " + COLS + " VALUES\n" + _row(payload=_payload(size=-5)) + ";", 2, "size"),
        (
            "INSERT INTO druid_segments " + COLS + " VALUES " + _row() + ";\n"
            "INSERT INTO druid_segments " + COLS + " VALUES " + _row() + ";",
            2,
            "duplicate segment id",
        ),
        (
            "INSERT INTO druid_segments " + COLS + " VALUES\n('a','ds','c','s','e',0,'v',1,'{not json');",
            2,
            "not valid JSON",
        ),
        ("CREATE TABLE druid_segments (id varchar(255));\n", 0, "no INSERT INTO druid_segments rows"),
        ("/* never closed\nINSERT", 1, r"unterminated /\* comment"),
    ],
)
def test_malformed_sql_is_refused_with_file_and_line(tmp_path, text, line, words):
    path = _write(tmp_path, text, "bad.sql")
    with pytest.raises(SqlImportError) as caught:
        import_druid_segments_sql(path, tmp_path / "out")
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert caught.value.line == line and caught.value.path == path
    assert re.search(words, str(caught.value)), str(caught.value)
    assert not (tmp_path / "out" / "segments.jsonl.gz").exists()


def test_segment_id_of_an_overwrite_segment_uses_its_partition_id():
    # Druid's SegmentId takes shardSpec.getPartitionNum(), which NumberedOverwriteShardSpec
    # answers with its partitionId (>= 32768).
    payload = {
        "dataSource": "d",
        "interval": "2020-01-01T00:00:00.000Z/2020-01-02T00:00:00.000Z",
        "version": "v1",
        "shardSpec": {
            "type": "numbered_overwrite",
            "partitionId": 32769,
            "startRootPartitionId": 0,
            "endRootPartitionId": 2,
        },
    }
    assert segment_id(payload) == "d_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_v1_32769"
