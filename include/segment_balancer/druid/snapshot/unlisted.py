"""Segments that replicas or queue entries name but ``segments.jsonl`` lacks, parsed with pandas.

An unlisted segment is unused (ALGORITHM.md "Inputs"): its datasource, interval, version and
partition come from its id (:func:`segment_balancer.druid.segment_id.parse_segment_id`); an id
that is no Druid segment id is a problem of the file and row (or queue place) that first names it,
which :func:`~segment_balancer.druid.snapshot.segments.refuse_unlisted` raises. The pandas
counterpart of :func:`~segment_balancer.druid.snapshot.segments.unlisted_segments` (Spark), for one
task's rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from segment_balancer.druid.segment_id import parse_segment_id

SERVER_SEGMENTS_NAME = "server_segments.json"
"""How an unlisted segment's first naming row is reported (whatever the replica file's layout)."""
QUEUES_NAME = "load_queues.json"
"""How an unlisted segment's first naming queue entry is reported."""
UNLISTED_COLUMNS = ["segment_id", "datasource", "start_ms", "end_ms", "version", "partition_num", "bucket"]
"""The columns :func:`parse_unlisted` parses, before the constant ones."""


def first_named(named: pd.DataFrame) -> pd.DataFrame:
    """Per segment id, the row of ``named`` (``segment_id``, ``file`` str, ``row`` Int64 or null,
    ``place`` str or None, …) where it is first named: the least (``file``, ``row``, ``place``),
    nulls first."""
    key = pd.DataFrame(
        {
            "f": named["file"],
            "rn": named["row"].notna(),
            "r": named["row"].fillna(0),
            "pn": named["place"].notna(),
            "p": named["place"].fillna(""),
        }
    )
    order = np.lexsort((key["p"], key["pn"], key["r"], key["rn"], key["f"]))
    return named.iloc[order].drop_duplicates("segment_id", keep="first")


def parse_unlisted(missing: pd.DataFrame, datasources: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    """The segments of ``missing`` (:func:`first_named`'s rows, with ``bucket``) parsed from their
    ids, and the problems of the ids that are no Druid segment id.

    ``datasources``: every datasource of ``segments.jsonl`` (an id is split at a known datasource
    first). Returns the frame (:data:`UNLISTED_COLUMNS`: ``start_ms``, ``end_ms`` int epoch ms,
    ``partition_num`` int; then ``size_bytes`` 0, ``used`` False, ``overshadowed`` False,
    ``shard_type`` ``"unknown"``, ``listed`` False, ``overshadowed_by`` []) and the problems
    (``{"file", "row" (int or None), "place", "segment_id", "problem"}``, for
    :func:`~segment_balancer.druid.snapshot.segments.refuse_unlisted`; the first by
    :func:`problem_key`)."""
    rows, problems = [], []
    for sid, file, row, place, bucket in zip(
        missing["segment_id"], missing["file"], missing["row"], missing["place"], missing["bucket"]
    ):
        parts = parse_segment_id(sid, datasources)
        if parts is None:
            problems.append(
                {
                    "file": file,
                    "row": None if pd.isna(row) else int(row),
                    "place": place,
                    "segment_id": sid,
                    "problem": f"segment {sid} is not in segments.jsonl and is not a Druid segment id "
                    "(dataSource_start_end_version[_partitionNum])",
                }
            )
            continue
        rows.append(
            {
                "segment_id": sid,
                "datasource": parts.datasource,
                "start_ms": parts.start_ms,
                "end_ms": parts.end_ms,
                "version": parts.version,
                "partition_num": parts.partition_num,
                "bucket": bucket,
            }
        )
    frame = pd.DataFrame(rows, columns=UNLISTED_COLUMNS)
    return frame.assign(
        size_bytes=0,
        used=False,
        overshadowed=False,
        shard_type="unknown",
        listed=False,
        overshadowed_by=[[] for _ in range(len(frame))],
    ), problems


def problem_key(p: dict) -> tuple:
    """The order unlisted problems are refused in (``file``, ``row``, ``place``, id; nulls first):
    Spark's order of :func:`~segment_balancer.druid.snapshot.segments.first_unlisted_problem`."""
    return (p["file"], p["row"] is not None, p["row"] or 0, p["place"] is not None, p["place"] or "", p["segment_id"])
