"""Segments only replicas or queue entries name: where first named, parsed from their ids."""

from __future__ import annotations

import pandas as pd

from segment_balancer.druid.snapshot.unlisted import (
    QUEUES_NAME,
    SERVER_SEGMENTS_NAME,
    first_named,
    parse_unlisted,
    problem_key,
)

ID = "wiki_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_v1_3"


def test_first_named_is_the_least_file_row_place_nulls_first():
    named = pd.DataFrame(
        {
            "segment_id": [ID, ID, ID, "bad"],
            "file": [SERVER_SEGMENTS_NAME, QUEUES_NAME, QUEUES_NAME, QUEUES_NAME],
            "row": pd.array([4, None, None, None], dtype="Int64"),
            "place": [None, "server 'h' segmentsToLoad[1]", "server 'h' segmentsToLoad[0]", "q"],
            "bucket": [1, 1, 1, 2],
        }
    )
    first = first_named(named).set_index("segment_id")
    assert sorted(first.index) == sorted([ID, "bad"])
    assert first.loc[ID, "place"] == "server 'h' segmentsToLoad[0]"  # load_queues.json < server_segments.json


def test_parse_unlisted_parses_ids_and_names_the_others():
    missing = pd.DataFrame(
        {
            "segment_id": [ID, "nonsense"],
            "file": [SERVER_SEGMENTS_NAME, SERVER_SEGMENTS_NAME],
            "row": pd.array([2, 5], dtype="Int64"),
            "place": [None, None],
            "bucket": [7, 8],
        }
    )
    frame, problems = parse_unlisted(missing, ["wiki"])
    row = frame.iloc[0]
    assert (row["datasource"], row["version"], row["partition_num"], row["bucket"]) == ("wiki", "v1", 3, 7)
    assert (row["size_bytes"], row["used"], row["listed"], row["shard_type"]) == (0, False, False, "unknown")
    assert row["end_ms"] - row["start_ms"] == 86_400_000
    assert [(p["file"], p["row"], p["segment_id"]) for p in problems] == [(SERVER_SEGMENTS_NAME, 5, "nonsense")]


def test_problem_key_orders_nulls_first():
    a = {"file": QUEUES_NAME, "row": None, "place": "p", "segment_id": "x"}
    b = {"file": QUEUES_NAME, "row": 1, "place": None, "segment_id": "x"}
    c = {"file": SERVER_SEGMENTS_NAME, "row": 0, "place": None, "segment_id": "x"}
    assert sorted([c, b, a], key=problem_key) == [a, b, c]
