"""Tests of segment_balancer.druid.timeline (segment timeline: visible / standby / overshadowed).

Cases marked "Druid" are ported from apache/druid (read via gargvishesh/druid), under
processing/src/test/java/org/apache/druid/timeline/:
VersionedIntervalTimelineTest.java, VersionedIntervalTimelineSpecificDataTest.java,
SegmentTimelineTest.java and partition/OvershadowableManagerTest.java.  The expected lookups,
overshadowed sets and states are Druid's assertions, translated:

* ``add(interval, version, value)`` (a SingleElementPartitionChunk) becomes a ``none`` segment with
  id ``"<version>:<value>"``; ``makeNumbered(v, p, chunks, ...)`` a ``numbered`` segment with
  ``num_core_partitions = chunks``; ``makeNumberedOverwriting(v, ordinal, val, s, e, minor, size)``
  a ``numbered_overwrite`` segment with partition id 32768 + ordinal; IntegerPartitionChunks
  ``(null, 10), (10, 20), (20, null)`` become numbered partitions 0..N-1 of N (same completeness).
* ``timeline.remove(...)`` is modelled by leaving the segment out of the input.
* ``lookup(interval)`` is :func:`timeline_pieces` clipped to the interval (Druid trims the first
  and last holder the same way); ``findFullyOvershadowed`` / ``isOvershadowed`` become the set of
  segments with status ``overshadowed``.

Cases marked "seed" come from Druid issue #7491, section "Timeline management"; "hand" cases are
worked out by hand from the rules in the module docstrings.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

import pandas as pd
import pytest

from segment_balancer.druid.timeline import (
    classify_datasource,
    explain_overshadowing,
    time_chunk_states,
    timeline_pieces,
)

HOUR = 3_600_000
DAY = 24 * HOUR
COLUMNS = [
    "segment_id",
    "start_ms",
    "end_ms",
    "version",
    "shard_type",
    "partition_num",
    "num_core_partitions",
    "start_root_partition_id",
    "end_root_partition_id",
    "minor_version",
    "atomic_update_group_size",
]
NULLABLE = COLUMNS[6:]


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def span(interval: str) -> tuple[int, int]:
    start, end = interval.split("/")
    return ms(start), ms(end)


def seg(sid, interval, version, shard="none", part=0, core=None, root=None, minor=None, aug=None):
    start, end = span(interval) if isinstance(interval, str) else interval
    return {
        "segment_id": sid,
        "start_ms": start,
        "end_ms": end,
        "version": version,
        "shard_type": shard,
        "partition_num": part,
        "num_core_partitions": core,
        "start_root_partition_id": None if root is None else root[0],
        "end_root_partition_id": None if root is None else root[1],
        "minor_version": minor,
        "atomic_update_group_size": aug,
    }


def single(interval, version, value):
    """Druid's ``add(interval, version, value)``: one SingleElementPartitionChunk."""
    return seg(f"{version}:{value}", interval, version)


def numbered(sid, interval, version, part, chunks=0):
    """Druid's ``makeNumbered(version, part, chunks, val)``."""
    return seg(sid, interval, version, "numbered", part, core=chunks)


def overwriting(sid, interval, version, ordinal, start, end, minor, size):
    """Druid's ``makeNumberedOverwriting(version, ordinal, val, start, end, minor, size)``."""
    return seg(sid, interval, version, "numbered_overwrite", 32768 + ordinal, root=(start, end), minor=minor, aug=size)


def frame(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("start_ms", "end_ms", "partition_num"):
        df[col] = df[col].astype("int64")
    for col in NULLABLE:
        df[col] = df[col].astype("Int64")
    return df


def status_of(rows) -> dict[str, str]:
    out = classify_datasource(frame(rows))
    return dict(zip(out["segment_id"], out["status"]))


def ids_with(rows, status) -> set[str]:
    return {k for k, v in status_of(rows).items() if v == status}


def lookup(rows, interval):
    """Druid ``lookup(interval)`` (only complete partition sets): [(start, end, version, ids)]."""
    qs, qe = span(interval) if isinstance(interval, str) else interval
    out = []
    for p in timeline_pieces(frame(rows)).itertuples():
        if p.start_ms < qe and qs < p.end_ms:
            out.append((max(p.start_ms, qs), min(p.end_ms, qe), p.version, sorted(p.segment_ids)))
    return out


def expected(*holders):
    """Druid ``createExpected(interval, version, value-or-ids)`` list for :func:`lookup`."""
    out = []
    for interval, version, values in holders:
        start, end = span(interval)
        values = values if isinstance(values, list) else [f"{version}:{values}"]
        out.append((start, end, version, sorted(values)))
    return out


# ------------------------------------------------------------------------------------------
# VersionedIntervalTimelineTest: lookups over overlapping intervals
# ------------------------------------------------------------------------------------------

# (Druid test method, adds as (interval, version, value), lookup interval, expected holders)
LOOKUP_CASES = [
    (
        "testOverlapSecondBetween",
        [("2011-01-01/2011-01-10", "1", 1), ("2011-01-10/2011-01-20", "1", 2), ("2011-01-05/2011-01-15", "2", 3)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-15", "2", 3), ("2011-01-15/2011-01-20", "1", 2)],
    ),
    (
        "testOverlapFirstBetween",
        [("2011-01-05/2011-01-15", "2", 3), ("2011-01-01/2011-01-10", "1", 1), ("2011-01-10/2011-01-20", "1", 2)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-15", "2", 3), ("2011-01-15/2011-01-20", "1", 2)],
    ),
    (
        "testOverlapFirstBefore",
        [("2011-01-01/2011-01-10", "1", 1), ("2011-01-05/2011-01-15", "2", 3)],
        "2011-01-01/2011-01-15",
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-15", "2", 3)],
    ),
    (
        "testOverlapFirstAfter",
        [("2011-01-05/2011-01-15", "2", 3), ("2011-01-01/2011-01-10", "1", 1)],
        "2011-01-01/2011-01-15",
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-15", "2", 3)],
    ),
    (
        "testOverlapSecondBefore",
        [("2011-01-05/2011-01-15", "1", 3), ("2011-01-01/2011-01-10", "2", 1)],
        "2011-01-01/2011-01-15",
        [("2011-01-01/2011-01-10", "2", 1), ("2011-01-10/2011-01-15", "1", 3)],
    ),
    (
        "testOverlapSecondAfter",
        [("2011-01-01/2011-01-10", "2", 3), ("2011-01-05/2011-01-15", "1", 1)],
        "2011-01-01/2011-01-15",
        [("2011-01-01/2011-01-10", "2", 3), ("2011-01-10/2011-01-15", "1", 1)],
    ),
    (
        "testOverlapFirstLarger",
        [("2011-01-01/2011-01-20", "1", 2), ("2011-01-05/2011-01-15", "2", 3)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-05", "1", 2), ("2011-01-05/2011-01-15", "2", 3), ("2011-01-15/2011-01-20", "1", 2)],
    ),
    (
        "testOverlapSecondLarger",
        [("2011-01-05/2011-01-15", "2", 3), ("2011-01-01/2011-01-20", "1", 2)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-05", "1", 2), ("2011-01-05/2011-01-15", "2", 3), ("2011-01-15/2011-01-20", "1", 2)],
    ),
    (
        "testOverlapSecondPartialAlign",
        [("2011-01-01/2011-01-10", "1", 1), ("2011-01-10/2011-01-20", "1", 2), ("2011-01-01/2011-01-15", "2", 3)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-15", "2", 3), ("2011-01-15/2011-01-20", "1", 2)],
    ),
    (
        "testOverlapFirstPartialAlign",
        [("2011-01-01/2011-01-15", "2", 3), ("2011-01-01/2011-01-10", "1", 1), ("2011-01-10/2011-01-20", "1", 2)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-15", "2", 3), ("2011-01-15/2011-01-20", "1", 2)],
    ),
    (
        "testOverlapAscending",
        [("2011-01-01/2011-01-10", "1", 1), ("2011-01-05/2011-01-20", "2", 2), ("2011-01-03/2011-01-06", "3", 3)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-03", "1", 1), ("2011-01-03/2011-01-06", "3", 3), ("2011-01-06/2011-01-20", "2", 2)],
    ),
    (
        "testOverlapDescending",
        [("2011-01-03/2011-01-06", "3", 3), ("2011-01-05/2011-01-20", "2", 2), ("2011-01-01/2011-01-10", "1", 1)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-03", "1", 1), ("2011-01-03/2011-01-06", "3", 3), ("2011-01-06/2011-01-20", "2", 2)],
    ),
    (
        "testOverlapMixed",
        [("2011-01-05/2011-01-20", "2", 2), ("2011-01-03/2011-01-06", "3", 3), ("2011-01-01/2011-01-10", "1", 1)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-03", "1", 1), ("2011-01-03/2011-01-06", "3", 3), ("2011-01-06/2011-01-20", "2", 2)],
    ),
    (
        "testOverlapContainedAscending",
        [("2011-01-01/2011-01-20", "1", 1), ("2011-01-02/2011-01-10", "2", 2), ("2011-01-02/2011-01-06", "3", 3)],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-02", "1", 1),
            ("2011-01-02/2011-01-06", "3", 3),
            ("2011-01-06/2011-01-10", "2", 2),
            ("2011-01-10/2011-01-20", "1", 1),
        ],
    ),
    (
        "testOverlapContainedDescending",
        [("2011-01-02/2011-01-06", "3", 3), ("2011-01-02/2011-01-10", "2", 2), ("2011-01-01/2011-01-20", "1", 1)],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-02", "1", 1),
            ("2011-01-02/2011-01-06", "3", 3),
            ("2011-01-06/2011-01-10", "2", 2),
            ("2011-01-10/2011-01-20", "1", 1),
        ],
    ),
    (
        "testOverlapContainedmixed",
        [("2011-01-02/2011-01-10", "2", 2), ("2011-01-02/2011-01-06", "3", 3), ("2011-01-01/2011-01-20", "1", 1)],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-02", "1", 1),
            ("2011-01-02/2011-01-06", "3", 3),
            ("2011-01-06/2011-01-10", "2", 2),
            ("2011-01-10/2011-01-20", "1", 1),
        ],
    ),
    (
        "testOverlapSecondContained",
        [
            ("2011-01-01/2011-01-07", "1", 1),
            ("2011-01-07/2011-01-15", "1", 2),
            ("2011-01-15/2011-01-20", "1", 3),
            ("2011-01-10/2011-01-13", "2", 4),
        ],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-07", "1", 1),
            ("2011-01-07/2011-01-10", "1", 2),
            ("2011-01-10/2011-01-13", "2", 4),
            ("2011-01-13/2011-01-15", "1", 2),
            ("2011-01-15/2011-01-20", "1", 3),
        ],
    ),
    (
        "testOverlapFirstContained",
        [
            ("2011-01-10/2011-01-13", "2", 4),
            ("2011-01-01/2011-01-07", "1", 1),
            ("2011-01-07/2011-01-15", "1", 2),
            ("2011-01-15/2011-01-20", "1", 3),
        ],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-07", "1", 1),
            ("2011-01-07/2011-01-10", "1", 2),
            ("2011-01-10/2011-01-13", "2", 4),
            ("2011-01-13/2011-01-15", "1", 2),
            ("2011-01-15/2011-01-20", "1", 3),
        ],
    ),
    (
        "testOverlapSecondContainsFirst",
        [("2011-01-01/2011-01-20", "1", 1), ("2011-01-01/2011-01-10", "2", 2), ("2011-01-10/2011-01-20", "2", 3)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-10", "2", 2), ("2011-01-10/2011-01-20", "2", 3)],
    ),
    (
        "testOverlapFirstContainsSecond",
        [("2011-01-10/2011-01-20", "2", 3), ("2011-01-01/2011-01-20", "1", 1), ("2011-01-01/2011-01-10", "2", 2)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-10", "2", 2), ("2011-01-10/2011-01-20", "2", 3)],
    ),
    (
        "testOverlapLayeredAscending",
        [("2011-01-01/2011-01-10", "1", 1), ("2011-01-05/2011-01-15", "2", 2), ("2011-01-15/2011-01-25", "3", 3)],
        "2011-01-01/2011-01-25",
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-15", "2", 2), ("2011-01-15/2011-01-25", "3", 3)],
    ),
    (
        "testOverlapLayeredDescending",
        [("2011-01-15/2011-01-25", "3", 3), ("2011-01-05/2011-01-15", "2", 2), ("2011-01-01/2011-01-10", "1", 1)],
        "2011-01-01/2011-01-25",
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-15", "2", 2), ("2011-01-15/2011-01-25", "3", 3)],
    ),
    (
        "testOverlapV1Large",
        [("2011-01-01/2011-01-15", "1", 1), ("2011-01-03/2011-01-05", "2", 2), ("2011-01-13/2011-01-20", "2", 3)],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-03", "1", 1),
            ("2011-01-03/2011-01-05", "2", 2),
            ("2011-01-05/2011-01-13", "1", 1),
            ("2011-01-13/2011-01-20", "2", 3),
        ],
    ),
    (
        "testOverlapV2Large",
        [("2011-01-01/2011-01-15", "2", 1), ("2011-01-03/2011-01-05", "1", 2), ("2011-01-13/2011-01-20", "1", 3)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-15", "2", 1), ("2011-01-15/2011-01-20", "1", 3)],
    ),
    (
        "testOverlapV1LargeIsAfter",
        [("2011-01-03/2011-01-20", "1", 1), ("2011-01-01/2011-01-05", "2", 2), ("2011-01-13/2011-01-17", "2", 3)],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-05", "2", 2),
            ("2011-01-05/2011-01-13", "1", 1),
            ("2011-01-13/2011-01-17", "2", 3),
            ("2011-01-17/2011-01-20", "1", 1),
        ],
    ),
    (
        "testOverlapV1SecondLargeIsAfter",
        [("2011-01-13/2011-01-17", "2", 3), ("2011-01-01/2011-01-05", "2", 2), ("2011-01-03/2011-01-20", "1", 1)],
        "2011-01-01/2011-01-20",
        [
            ("2011-01-01/2011-01-05", "2", 2),
            ("2011-01-05/2011-01-13", "1", 1),
            ("2011-01-13/2011-01-17", "2", 3),
            ("2011-01-17/2011-01-20", "1", 1),
        ],
    ),
    (
        "testOverlapV1FirstBetween",
        [("2011-01-03/2011-01-17", "1", 1), ("2011-01-01/2011-01-05", "2", 2), ("2011-01-15/2011-01-20", "2", 3)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-05", "2", 2), ("2011-01-05/2011-01-15", "1", 1), ("2011-01-15/2011-01-20", "2", 3)],
    ),
    (
        "testOverlapV1SecondBetween",
        [("2011-01-01/2011-01-05", "2", 2), ("2011-01-15/2011-01-20", "2", 3), ("2011-01-03/2011-01-17", "1", 1)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-05", "2", 2), ("2011-01-05/2011-01-15", "1", 1), ("2011-01-15/2011-01-20", "2", 3)],
    ),
    (
        "testOverlapLargeUnderlyingWithSmallDayAlignedOverlays",  # lookup(ETERNITY)
        [
            ("2011-01-01/2011-01-05", "1", 1),
            ("2011-01-03/2011-01-04", "2", 2),
            ("2011-01-04/2011-01-05", "3", 3),
            ("2011-01-05/2011-01-06", "4", 4),
        ],
        (-(2**62), 2**62 - 1),
        [
            ("2011-01-01/2011-01-03", "1", 1),
            ("2011-01-03/2011-01-04", "2", 2),
            ("2011-01-04/2011-01-05", "3", 3),
            ("2011-01-05/2011-01-06", "4", 4),
        ],
    ),
    (
        "testOverlapCausesNullEntries",
        [("2011-01-01T12/2011-01-02", "3", 3), ("2011-01-02/3011-01-03", "1", 1), ("2011-01-01/2011-01-02", "2", 2)],
        "2011-01-01/3011-01-03",
        [("2011-01-01/2011-01-01T12", "2", 2), ("2011-01-01T12/2011-01-02", "3", 3), ("2011-01-02/3011-01-03", "1", 1)],
    ),
    # testOverlapAndRemove*: the removed segment is left out of the input.
    (
        "testOverlapAndRemove",
        [("2011-01-01/2011-01-20", "1", 1)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-20", "1", 1)],
    ),
    (
        "testOverlapAndRemove2",
        [("2011-01-01/2011-01-20", "1", 1), ("2011-01-20/2011-01-30", "3", 4)],
        "2011-01-01/2011-01-30",
        [("2011-01-01/2011-01-20", "1", 1), ("2011-01-20/2011-01-30", "3", 4)],
    ),
    (
        "testOverlapAndRemove4",
        [("2011-01-01/2011-01-20", "1", 1), ("2011-01-10/2011-01-15", "2", 2)],
        "2011-01-01/2011-01-20",
        [("2011-01-01/2011-01-10", "1", 1), ("2011-01-10/2011-01-15", "2", 2), ("2011-01-15/2011-01-20", "1", 1)],
    ),
    (
        "testRemoveNothingBacking",  # lookup(EPOCH/MAX)
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-10", "2", 2), ("2011-01-10/2011-01-15", "3", 3)],
        (0, 2**62 - 1),
        [("2011-01-01/2011-01-05", "1", 1), ("2011-01-05/2011-01-10", "2", 2), ("2011-01-10/2011-01-15", "3", 3)],
    ),
]


@pytest.mark.parametrize("name,adds,query,holders", LOOKUP_CASES, ids=[c[0] for c in LOOKUP_CASES])
def test_druid_lookup_cases(name, adds, query, holders):
    # Druid: VersionedIntervalTimelineTest.<name> (lookup over the whole span of the data).
    rows = [single(*a) for a in adds]
    assert lookup(rows, query) == expected(*holders)
    # Every segment is a complete single chunk: those in no holder are overshadowed, the rest visible.
    shown = {i for h in expected(*holders) for i in h[3]}
    assert status_of(rows) == {r["segment_id"]: "visible" if r["segment_id"] in shown else "overshadowed" for r in rows}


def test_druid_get_all_objects_sub_interval_lookup():
    # Druid: VersionedIntervalTimelineTest.testGetAllObjects
    rows = [single("2011-01-01/2011-01-10", "1", 1), single("2011-01-02/2011-01-05", "2", 1)]
    assert [h[3] for h in lookup(rows, "2011-01-02T02/2011-01-04")] == [["2:1"]]
    # testNotFoundReturnsEmpty
    assert lookup([single("2011-04-01/2011-04-09", "1", 1)], "1970-01-01/1980-01-01") == []


def test_druid_overlap_same_version_raises():
    # Druid: VersionedIntervalTimelineTest.testOverlapSameVersionThrowException
    # (Druid throws UnsupportedOperationException; here ValueError, whatever the order).
    rows = [single("2011-01-01/2011-01-10", "1", 1), single("2011-01-05/2011-01-15", "1", 3)]
    with pytest.raises(ValueError, match="same version"):
        classify_datasource(frame(rows))
    with pytest.raises(ValueError, match="same version"):
        classify_datasource(frame(rows[::-1]))


def test_druid_overlap_same_version_is_okay():
    # Druid: VersionedIntervalTimelineTest.testOverlapSameVersionIsOkay.  Druid adds two
    # SingleElementPartitionChunks per version and silently drops the second (equal chunk);
    # segment ids are unique here, so the second chunk of each version is partition 1 (linear).
    interval = "2011-01-01/2011-01-10"
    rows = [
        seg("1:1", interval, "1", "linear", 0),
        seg("2:2", interval, "2", "linear", 0),
        seg("2:3", interval, "2", "linear", 1),
        seg("1:4", interval, "1", "linear", 1),
    ]
    assert lookup(rows, interval) == expected((interval, "2", ["2:2", "2:3"]))
    assert ids_with(rows, "overshadowed") == {"1:1", "1:4"}


# ------------------------------------------------------------------------------------------
# VersionedIntervalTimelineTest: findFullyOvershadowed
# ------------------------------------------------------------------------------------------

# (Druid test method, adds, expected overshadowed (version, value) pairs)
OVERSHADOWED_CASES = [
    (
        "testOverlapOvershadowedThirdContains",
        [
            ("2011-01-03/2011-01-06", "1", 1),
            ("2011-01-09/2011-01-12", "1", 2),
            ("2011-01-02/2011-01-08", "2", 3),
            ("2011-01-10/2011-01-16", "2", 4),
            ("2011-01-01/2011-01-20", "3", 5),
        ],
        {"2:3", "2:4", "1:1", "1:2"},
    ),
    (
        "testOverlapOvershadowedAligned",
        [
            ("2011-01-01/2011-01-05", "2", 1),
            ("2011-01-05/2011-01-10", "2", 2),
            ("2011-01-01/2011-01-10", "1", 3),
            ("2011-01-01/2011-01-10", "3", 4),
        ],
        {"2:1", "2:2", "1:3"},
    ),
    (
        "testOverlapOvershadowedSomeComplexOverlapsCantThinkOfBetterName",
        [
            ("2011-01-01/2011-01-05", "2", 1),
            ("2011-01-10/2011-01-15", "2", 2),
            ("2011-01-03/2011-01-12", "1", 3),
            ("2011-01-01/2011-01-10", "3", 4),
        ],
        {"1:3", "2:1"},
    ),
    (
        "testOvershadowingHigherVersionWins1",
        [
            ("2011-04-01/2011-04-03", "1", 2),
            ("2011-04-03/2011-04-06", "1", 3),
            ("2011-04-06/2011-04-09", "1", 4),
            ("2011-04-01/2011-04-09", "2", 1),
        ],
        {"1:2", "1:3", "1:4"},
    ),
    (
        "testOvershadowingHigherVersionWins2",
        [
            ("2011-04-01/2011-04-09", "1", 1),
            ("2011-04-01/2011-04-03", "2", 2),
            ("2011-04-03/2011-04-06", "2", 3),
            ("2011-04-06/2011-04-09", "2", 4),
        ],
        {"1:1"},
    ),
    (
        "testOvershadowingHigherVersionWins3",
        [
            ("2011-04-01/2011-04-03", "1", 2),
            ("2011-04-03/2011-04-06", "1", 3),
            ("2011-04-09/2011-04-12", "1", 4),
            ("2011-04-01/2011-04-12", "2", 1),
        ],
        {"1:2", "1:3", "1:4"},
    ),
    (
        "testOvershadowingHigherVersionWins4",
        [("2011-04-03/2011-04-06", "1", 3), ("2011-04-06/2011-04-09", "1", 4), ("2011-04-01/2011-04-09", "2", 1)],
        {"1:3", "1:4"},
    ),
    (
        "testOvershadowingHigherVersionNeverOvershadowedByLower1",
        [("2011-04-01/2011-04-09", "1", 1), ("2011-04-03/2011-04-06", "2", 3), ("2011-04-06/2011-04-09", "2", 4)],
        set(),
    ),
    (
        "testOvershadowingHigherVersionNeverOvershadowedByLower2",
        [("2011-04-01/2011-04-09", "1", 1), ("2011-04-01/2011-04-03", "2", 2), ("2011-04-06/2011-04-09", "2", 4)],
        set(),
    ),
    (
        "testOvershadowingHigherVersionNeverOvershadowedByLower3",
        [("2011-04-01/2011-04-09", "1", 1), ("2011-04-01/2011-04-03", "2", 2), ("2011-04-03/2011-04-06", "2", 3)],
        set(),
    ),
    (
        "testOvershadowingHigherVersionNeverOvershadowedByLower4",
        [
            ("2011-04-01/2011-04-09", "2", 1),
            ("2011-04-01/2011-04-03", "3", 2),
            ("2011-04-03/2011-04-06", "4", 3),
            ("2011-04-03/2011-04-06", "1", 3),
        ],
        {"1:3"},
    ),
    (
        "testOvershadowingHigherVersionNeverOvershadowedByLower5",
        [
            ("2011-04-01/2011-04-12", "2", 1),
            ("2011-04-01/2011-04-03", "3", 2),
            ("2011-04-06/2011-04-09", "4", 3),
            ("2011-04-09/2011-04-12", "1", 3),
            ("2011-04-03/2011-04-06", "1", 4),
        ],  # Druid reuses value 3; renamed to keep ids unique
        {"1:3", "1:4"},
    ),
    (
        "testOvershadowingSameIntervalHighVersionWins",  # "9" > "2" > "1" as strings
        [("2011-04-01/2011-04-09", "1", 1), ("2011-04-01/2011-04-09", "9", 2), ("2011-04-01/2011-04-09", "2", 3)],
        {"2:3", "1:1"},
    ),
]


@pytest.mark.parametrize("name,adds,overshadowed", OVERSHADOWED_CASES, ids=[c[0] for c in OVERSHADOWED_CASES])
def test_druid_find_fully_overshadowed(name, adds, overshadowed):
    # Druid: VersionedIntervalTimelineTest.<name> (findFullyOvershadowed; all chunks complete).
    rows = [single(*a) for a in adds]
    statuses = status_of(rows)
    assert {k for k, v in statuses.items() if v == "overshadowed"} == overshadowed
    assert {k for k, v in statuses.items() if v == "visible"} == set(statuses) - overshadowed


def test_druid_same_interval_same_version_all_kept():
    # Druid: VersionedIntervalTimelineTest.testOvershadowingSameIntervalSameVersionAllKept
    # (two chunks of version 9; here partitions 0 and 1 of a linear set, see above).
    interval = "2011-04-01/2011-04-09"
    rows = [
        seg("1:1", interval, "1"),
        seg("9:2", interval, "9", "linear", 0),
        seg("2:3", interval, "2"),
        seg("9:4", interval, "9", "linear", 1),
    ]
    assert status_of(rows) == {"1:1": "overshadowed", "9:2": "visible", "2:3": "overshadowed", "9:4": "visible"}


# ------------------------------------------------------------------------------------------
# VersionedIntervalTimelineTest: isOvershadowed for an extra segment
# ------------------------------------------------------------------------------------------

NON_OVERLAPPING_BASE = [
    seg("a", "2011-04-05/2011-04-07", "1"),
    seg("b", "2011-04-07/2011-04-09", "1"),
    seg("c", "2011-04-15/2011-04-17", "1"),
    seg("d", "2011-04-17/2011-04-19", "1"),
]
OVERLAPPING_BASE = [
    seg("a", "2011-04-05/2011-04-09", "11"),
    seg("b", "2011-04-07/2011-04-11", "12"),
    seg("c", "2011-04-15/2011-04-19", "12"),
    seg("d", "2011-04-17/2011-04-21", "11"),
]

# Druid: testIsOvershadowedWithNonOverlappingSegmentsInTimeline, (interval, version, expected).
# The version-"1" queries overlap version-1 segments with a different interval, which this
# module rejects (see test_druid_overlap_same_version_raises), so they are not ported.
NON_OVERLAPPING_QUERIES = [
    ("2011-04-01/2011-04-03", "0", False),
    ("2011-04-01/2011-04-05", "0", False),
    ("2011-04-01/2011-04-06", "0", False),
    ("2011-04-01/2011-04-07", "0", False),
    ("2011-04-01/2011-04-08", "0", False),
    ("2011-04-01/2011-04-09", "0", False),
    ("2011-04-01/2011-04-10", "0", False),
    ("2011-04-01/2011-04-30", "0", False),
    ("2011-04-05/2011-04-06", "0", True),
    ("2011-04-05/2011-04-07", "0", True),
    ("2011-04-05/2011-04-08", "0", True),
    ("2011-04-05/2011-04-09", "0", True),
    ("2011-04-05/2011-04-06", "2", False),
    ("2011-04-05/2011-04-07", "2", False),
    ("2011-04-05/2011-04-08", "2", False),
    ("2011-04-05/2011-04-09", "2", False),
    ("2011-04-06/2011-04-07", "0", True),
    ("2011-04-06/2011-04-08", "0", True),
    ("2011-04-06/2011-04-09", "0", True),
    ("2011-04-06/2011-04-10", "0", False),
    ("2011-04-06/2011-04-30", "0", False),
    ("2011-04-07/2011-04-08", "0", True),
    ("2011-04-07/2011-04-09", "0", True),
    ("2011-04-07/2011-04-10", "0", False),
    ("2011-04-07/2011-04-30", "0", False),
    ("2011-04-08/2011-04-09", "0", True),
    ("2011-04-08/2011-04-10", "0", False),
    ("2011-04-08/2011-04-30", "0", False),
    ("2011-04-09/2011-04-10", "0", False),
    ("2011-04-09/2011-04-15", "0", False),
    ("2011-04-09/2011-04-17", "0", False),
    ("2011-04-09/2011-04-19", "0", False),
    ("2011-04-09/2011-04-30", "0", False),
    ("2011-04-15/2011-04-16", "0", True),
    ("2011-04-15/2011-04-17", "0", True),
    ("2011-04-15/2011-04-18", "0", True),
    ("2011-04-15/2011-04-19", "0", True),
    ("2011-04-15/2011-04-20", "0", False),
    ("2011-04-15/2011-04-30", "0", False),
    ("2011-04-19/2011-04-20", "0", False),
    ("2011-04-21/2011-04-22", "0", False),
]
# Druid: testIsOvershadowedWithOverlappingSegmentsInTimeline (version "12" queries that overlap
# version-12 segments are not ported, as above).
OVERLAPPING_QUERIES = [
    ("2011-04-01/2011-04-03", "0", False),
    ("2011-04-01/2011-04-05", "0", False),
    ("2011-04-01/2011-04-06", "0", False),
    ("2011-04-01/2011-04-07", "0", False),
    ("2011-04-01/2011-04-08", "0", False),
    ("2011-04-01/2011-04-09", "0", False),
    ("2011-04-01/2011-04-10", "0", False),
    ("2011-04-01/2011-04-11", "0", False),
    ("2011-04-01/2011-04-30", "0", False),
    ("2011-04-05/2011-04-06", "0", True),
    ("2011-04-05/2011-04-07", "0", True),
    ("2011-04-05/2011-04-08", "0", True),
    ("2011-04-05/2011-04-09", "0", True),
    ("2011-04-05/2011-04-10", "0", True),
    ("2011-04-05/2011-04-11", "0", True),
    ("2011-04-05/2011-04-06", "12", False),
    ("2011-04-05/2011-04-06", "13", False),
    ("2011-04-05/2011-04-07", "13", False),
    ("2011-04-05/2011-04-08", "13", False),
    ("2011-04-05/2011-04-09", "13", False),
    ("2011-04-05/2011-04-10", "13", False),
    ("2011-04-05/2011-04-11", "13", False),
    ("2011-04-05/2011-04-12", "0", False),
    ("2011-04-05/2011-04-15", "0", False),
    ("2011-04-05/2011-04-16", "0", False),
    ("2011-04-05/2011-04-17", "0", False),
    ("2011-04-05/2011-04-18", "0", False),
    ("2011-04-05/2011-04-19", "0", False),
    ("2011-04-05/2011-04-20", "0", False),
    ("2011-04-05/2011-04-21", "0", False),
    ("2011-04-05/2011-04-22", "0", False),
    ("2011-04-06/2011-04-07", "0", True),
    ("2011-04-06/2011-04-08", "0", True),
    ("2011-04-06/2011-04-09", "0", True),
    ("2011-04-06/2011-04-10", "0", True),
    ("2011-04-06/2011-04-11", "0", True),
    ("2011-04-06/2011-04-12", "0", False),
    ("2011-04-06/2011-04-15", "0", False),
    ("2011-04-06/2011-04-16", "0", False),
    ("2011-04-06/2011-04-17", "0", False),
    ("2011-04-06/2011-04-18", "0", False),
    ("2011-04-06/2011-04-19", "0", False),
    ("2011-04-06/2011-04-20", "0", False),
    ("2011-04-06/2011-04-21", "0", False),
    ("2011-04-06/2011-04-22", "0", False),
    ("2011-04-12/2011-04-15", "0", False),
    ("2011-04-12/2011-04-16", "0", False),
    ("2011-04-12/2011-04-17", "0", False),
    ("2011-04-12/2011-04-18", "0", False),
    ("2011-04-12/2011-04-19", "0", False),
    ("2011-04-12/2011-04-20", "0", False),
    ("2011-04-12/2011-04-21", "0", False),
    ("2011-04-12/2011-04-22", "0", False),
    ("2011-04-15/2011-04-21", "0", True),
    ("2011-04-21/2011-04-22", "0", False),
]


@pytest.mark.parametrize(
    "base,query",
    [(NON_OVERLAPPING_BASE, q) for q in NON_OVERLAPPING_QUERIES] + [(OVERLAPPING_BASE, q) for q in OVERLAPPING_QUERIES],
)
def test_druid_is_overshadowed(base, query):
    # Druid: VersionedIntervalTimelineTest.testIsOvershadowedWith(Non)OverlappingSegmentsInTimeline
    interval, version, overshadowed = query
    statuses = status_of(base + [seg("q", interval, version)])
    assert statuses["q"] == ("overshadowed" if overshadowed else "visible")


# ------------------------------------------------------------------------------------------
# VersionedIntervalTimelineSpecificDataTest
# ------------------------------------------------------------------------------------------

SPECIFIC = {
    "april": [
        single("2011-04-01/2011-04-03", "1", 2),
        single("2011-04-03/2011-04-06", "1", 3),
        single("2011-04-01/2011-04-09", "2", 1),
        single("2011-04-06/2011-04-09", "3", 4),
        single("2011-04-01/2011-04-02", "3", 5),
    ],
    "may": [
        single("2011-05-01/2011-05-02", "1", 6),
        single("2011-05-01/2011-05-05", "2", 7),
        single("2011-05-03/2011-05-04", "3", 8),
        single("2011-05-01/2011-05-10", "4", 9),
    ],
    # IntegerPartitionChunk (null,10),(10,null) = numbered partitions 0 and 1 of 2.
    "october": [
        single("2011-10-01/2011-10-02", "1", 1),
        numbered("3:20", "2011-10-02/2011-10-03", "3", 0, 2),
        numbered("3:21", "2011-10-02/2011-10-03", "3", 1, 2),
        single("2011-10-03/2011-10-04", "3", 3),
        single("2011-10-04/2011-10-05", "4", 4),
        single("2011-10-05/2011-10-06", "5", 5),
    ],
}


def specific(without=()):
    rows = SPECIFIC["april"] + SPECIFIC["may"] + SPECIFIC["october"]
    return [r for r in rows if r["segment_id"] not in without]


@pytest.mark.parametrize(
    "name,without,query,holders",
    [
        (
            "testApril",
            (),
            "2011-04-01/2011-04-09",
            [("2011-04-01/2011-04-02", "3", 5), ("2011-04-02/2011-04-06", "2", 1), ("2011-04-06/2011-04-09", "3", 4)],
        ),
        (
            "testApril2",
            ("2:1",),
            "2011-04-01/2011-04-09",
            [
                ("2011-04-01/2011-04-02", "3", 5),
                ("2011-04-02/2011-04-03", "1", 2),
                ("2011-04-03/2011-04-06", "1", 3),
                ("2011-04-06/2011-04-09", "3", 4),
            ],
        ),
        (
            "testApril3",
            ("2:1", "1:2"),
            "2011-04-01/2011-04-09",
            [("2011-04-01/2011-04-02", "3", 5), ("2011-04-03/2011-04-06", "1", 3), ("2011-04-06/2011-04-09", "3", 4)],
        ),
        (
            "testApril4",
            ("2:1",),
            "2011-04-01/2011-04-05",
            [("2011-04-01/2011-04-02", "3", 5), ("2011-04-02/2011-04-03", "1", 2), ("2011-04-03/2011-04-05", "1", 3)],
        ),
        (
            "testApril4",
            ("2:1",),
            "2011-04-02T18/2011-04-04T01",
            [("2011-04-02T18/2011-04-03", "1", 2), ("2011-04-03/2011-04-04T01", "1", 3)],
        ),
        ("testMay", (), "2011-05-01/2011-05-09", [("2011-05-01/2011-05-09", "4", 9)]),
        (
            "testMay2",
            ("4:9",),
            "2011-05-01/2011-05-09",
            [("2011-05-01/2011-05-03", "2", 7), ("2011-05-03/2011-05-04", "3", 8), ("2011-05-04/2011-05-05", "2", 7)],
        ),
        (
            "testMay3",
            ("4:9", "2:7"),
            "2011-05-01/2011-05-09",
            [("2011-05-01/2011-05-02", "1", 6), ("2011-05-03/2011-05-04", "3", 8)],
        ),
        (
            "testPartitioning",
            (),
            "2011-10-01/2011-10-06",
            [
                ("2011-10-01/2011-10-02", "1", 1),
                ("2011-10-02/2011-10-03", "3", ["3:20", "3:21"]),
                ("2011-10-03/2011-10-04", "3", 3),
                ("2011-10-04/2011-10-05", "4", 4),
                ("2011-10-05/2011-10-06", "5", 5),
            ],
        ),
    ],
)
def test_druid_specific_data_lookups(name, without, query, holders):
    # Druid: VersionedIntervalTimelineSpecificDataTest.<name>
    assert lookup(specific(without), query) == expected(*holders)


def test_druid_specific_data_statuses_and_check_remove():
    # Druid: VersionedIntervalTimelineSpecificDataTest.setUp + testApril/testMay/testRemove.
    statuses = status_of(specific())
    assert {k for k, v in statuses.items() if v == "overshadowed"} == {"1:2", "1:3", "1:6", "2:7", "3:8"}
    # checkRemove: removing what is fully overshadowed leaves nothing overshadowed.
    kept = [r for r in specific() if statuses[r["segment_id"]] != "overshadowed"]
    assert set(status_of(kept).values()) == {"visible"}


def test_druid_insert_and_remove_same_thing():
    # Druid: VersionedIntervalTimelineSpecificDataTest.testInsertAndRemoveSameThingsion
    v5 = single("2011-05-01/2011-05-10", "5", 10)
    may = "2011-05-01/2011-05-09"
    assert lookup(specific() + [v5], may) == expected((may, "5", 10))
    assert lookup(specific(), may) == expected((may, "4", 9))
    assert lookup(specific(("4:9",)) + [v5], may) == expected((may, "5", 10))


def test_druid_insert_in_wrong_order():
    # Druid: VersionedIntervalTimelineSpecificDataTest.testInsertInWrongOrder (two hours of
    # version 1, then a day of version 2 over them).
    t0 = ms("2030-01-01T00")
    rows = specific() + [
        seg("h1", (t0 + 3 * HOUR, t0 + 4 * HOUR), "1"),
        seg("h2", (t0 + 4 * HOUR, t0 + 5 * HOUR), "1"),
        seg("day", (t0, t0 + DAY), "2"),
    ]
    assert lookup(rows, (t0 + 3 * HOUR, t0 + 4 * HOUR)) == [(t0 + 3 * HOUR, t0 + 4 * HOUR, "2", ["day"])]


def _after_check_remove():
    statuses = status_of(specific())
    return [r for r in specific() if statuses[r["segment_id"]] != "overshadowed"]


def _v6(interval, parts):
    """Version 6, IntegerPartitionChunks (null,10),(10,20),(20,null) = numbered 0, 1, 2 of 3."""
    return [numbered(f"6:6{p}", interval, "6", p, 3) for p in parts]


def test_druid_partial_partition_not_returned():
    # Druid: VersionedIntervalTimelineSpecificDataTest.testPartialPartitionNotReturned
    base, interval = _after_check_remove(), "2011-10-06/2011-10-07"
    for parts in ([0], [0, 1]):
        rows = base + _v6(interval, parts)
        assert lookup(rows, "2011-10-05/2011-10-07") == expected(("2011-10-05/2011-10-06", "5", 5))
        assert ids_with(rows, "overshadowed") == set()
        assert ids_with(rows, "standby") == {f"6:6{p}" for p in parts}
    rows = base + _v6(interval, [0, 1, 2])
    assert lookup(rows, "2011-10-05/2011-10-07") == expected(
        ("2011-10-05/2011-10-06", "5", 5), (interval, "6", ["6:60", "6:61", "6:62"])
    )
    assert ids_with(rows, "overshadowed") == set()


def test_druid_incomplete_partition_does_not_overshadow():
    # Druid: VersionedIntervalTimelineSpecificDataTest.testIncompletePartitionDoesNotOvershadow
    # and testRemovePartitionMakesIncomplete.
    base, interval = _after_check_remove(), "2011-10-05/2011-10-07"
    for parts in ([0], [0, 1], [1, 2]):
        rows = base + _v6(interval, parts)
        assert ids_with(rows, "overshadowed") == set()
        assert status_of(rows)["5:5"] == "visible"
        assert lookup(rows, interval) == expected(("2011-10-05/2011-10-06", "5", 5))
    rows = base + _v6(interval, [0, 1, 2])
    assert ids_with(rows, "overshadowed") == {"5:5"}


def test_druid_remove_incomplete_keeps_complete():
    # Druid: VersionedIntervalTimelineTest.testRemoveIncompleteKeepsComplete (issue #3010).
    interval = "2011-04-01/2011-04-02"
    rows = [
        numbered("1:77", interval, "1", 0, 2),
        numbered("1:88", interval, "1", 1, 2),
        numbered("2:99", interval, "2", 0, 2),
    ]
    assert lookup(rows, interval) == expected((interval, "1", ["1:77", "1:88"]))
    rows.append(numbered("3:110", interval, "3", 0, 2))
    assert lookup(rows, interval) == expected((interval, "1", ["1:77", "1:88"]))
    statuses = status_of(rows)
    assert statuses["1:77"] == statuses["1:88"] == "visible"
    # Druid's findFullyOvershadowed lists 2:99 (hidden by the incomplete version 3 in the
    # incomplete-partitions timeline); the coordinator's isOvershadowed, followed here, does not:
    # neither incomplete higher version overshadows anything.
    assert statuses["2:99"] == statuses["3:110"] == "standby"


# ------------------------------------------------------------------------------------------
# SegmentTimelineTest
# ------------------------------------------------------------------------------------------

SEGMENT_TIMELINE_BASE = [numbered(f"v1p{p}", "2022-01-01/2022-01-02", "v1", p, 3) for p in range(3)] + [
    numbered(f"v2p{p}", "2022-01-02/2022-01-03", "v2", p, 2) for p in range(2)
]


@pytest.mark.parametrize(
    "extra,overshadowed",
    [
        (None, False),
        (numbered("q", "2022-01-02/2022-01-03", "v1", 2, 4), True),
        (numbered("q", "2022-01-02/2022-01-03", "v1", 0, 1), True),
    ],
)
def test_druid_segment_timeline_is_overshadowed(extra, overshadowed):
    # Druid: SegmentTimelineTest.testIsOvershadowed (queries that would collide with an existing
    # partition number or overlap version v1 with another interval are not ported).
    statuses = status_of(SEGMENT_TIMELINE_BASE + ([extra] if extra else []))
    assert statuses["v1p1"] == statuses["v1p2"] == "visible"
    if extra:
        assert (statuses["q"] == "overshadowed") is overshadowed


# ------------------------------------------------------------------------------------------
# VersionedIntervalTimelineTest: minor versions (segment locking) at the datasource level
# ------------------------------------------------------------------------------------------

D1, D2, D3 = "2019-01-01/2019-01-02", "2019-01-02/2019-01-03", "2019-01-03/2019-01-04"


def _v0_two_days():
    return [
        numbered("a0", D1, "0", 0),
        numbered("a1", D1, "0", 1),
        numbered("a2", D1, "0", 2),
        numbered("b0", D2, "0", 0),
        numbered("b1", D2, "0", 1),
    ]


def test_druid_overshadowed_by_reference():
    # Druid: VersionedIntervalTimelineTest.testOvershadowedByReference
    rows = [
        numbered("a0", D1, "0", 0),
        numbered("a1", D1, "0", 1),
        numbered("a2", D1, "0", 2),
        overwriting("o0", D1, "0", 0, 0, 3, 1, 2),
        overwriting("o1", D1, "0", 1, 0, 3, 1, 2),
    ]
    assert ids_with(rows, "overshadowed") == {"a0", "a1", "a2"}
    assert ids_with(rows, "visible") == {"o0", "o1"}
    out = classify_datasource(frame(rows)).set_index("segment_id")
    assert sorted(out.loc["a1", "overshadowed_by"]) == ["o0", "o1"]
    assert out.loc["a1", "reason"] == "minor version 1 of root range [0, 3) is complete"


def test_druid_overshadowed_by_reference_chain():
    # Druid: VersionedIntervalTimelineTest.testOvershadowedByReferenceChain
    rows = _v0_two_days() + [
        overwriting("o0", D1, "0", 0, 0, 3, 1, 2),
        overwriting("o1", D1, "0", 1, 0, 3, 1, 2),
        overwriting("o2", D1, "0", 2, 0, 3, 2, 2),
        overwriting("o3", D1, "0", 3, 0, 3, 2, 2),
    ]
    assert ids_with(rows, "overshadowed") == {"a0", "a1", "a2", "o0", "o1"}
    assert ids_with(rows, "visible") == {"b0", "b1", "o2", "o3"}


def test_druid_overshadowed_by_reference_and_then_version():
    # Druid: VersionedIntervalTimelineTest.testOvershadowedByReferenceAndThenVersion
    rows = _v0_two_days() + [
        overwriting("o0", D1, "0", 0, 0, 3, 1, 2),
        overwriting("o1", D1, "0", 1, 0, 3, 1, 2),
        numbered("c0", D1, "1", 0),
        numbered("c1", D1, "1", 1),
    ]
    assert ids_with(rows, "overshadowed") == {"a0", "a1", "a2", "o0", "o1"}
    out = classify_datasource(frame(rows)).set_index("segment_id")
    assert out.loc["o0", "reason"] == "version 1 covers 2019-01-01/2019-01-02 completely"
    assert sorted(out.loc["o0", "overshadowed_by"]) == ["c0", "c1"]


def _v1_overwritten(members=(0, 1, 2)):
    return [numbered("c0", D1, "1", 0), numbered("c1", D1, "1", 1)] + [
        overwriting(f"p{m}", D1, "1", m, 0, 2, 1, 3) for m in members
    ]


def test_druid_overshadowed_by_version_and_then_reference():
    # Druid: VersionedIntervalTimelineTest.testOvershadowedByVersionAndThenReference
    rows = _v0_two_days() + _v1_overwritten()
    assert ids_with(rows, "overshadowed") == {"a0", "a1", "a2", "c0", "c1"}


def test_druid_fallback_on_missing_segment():
    # Druid: VersionedIntervalTimelineTest.testFallbackOnMissingSegment (p2 removed).
    rows = [numbered("a0", D1, "0", 0), numbered("a1", D1, "0", 1), numbered("a2", D1, "0", 2)]
    rows += _v1_overwritten((0, 1))
    assert lookup(rows, D1) == expected((D1, "1", ["c0", "c1"]))
    statuses = status_of(rows)
    assert statuses["p0"] == statuses["p1"] == "standby"
    assert ids_with(rows, "overshadowed") == {"a0", "a1", "a2"}
    out = classify_datasource(frame(rows)).set_index("segment_id")
    assert out.loc["p0", "reason"] == "atomic update group incomplete (2 of 3); older generation stays visible"


def test_druid_add_same_chunk_to_full_atomic_update_group():
    # Druid: VersionedIntervalTimelineTest.testAddSameChunkToFullAtomicUpdateGroup (the third add
    # repeats partition 0 and is ignored by Druid).
    rows = [numbered("n0", D1, "0", 0), overwriting("o0", D1, "0", 0, 0, 1, 1, 1)]
    assert status_of(rows) == {"n0": "overshadowed", "o0": "visible"}


def test_druid_overshadow_multiple_standby_atomic_update_group():
    # Druid: VersionedIntervalTimelineTest.testOvershadowMultipleStandbyAtomicUpdateGroup
    rows = [
        overwriting("o0", D1, "0", 0, 0, 1, 1, 2),
        overwriting("o1", D1, "0", 1, 0, 1, 2, 2),
        overwriting("o2", D1, "0", 2, 0, 1, 3, 2),
        overwriting("o3", D1, "0", 3, 0, 1, 3, 2),
    ]
    assert ids_with(rows, "overshadowed") == {"o0", "o1"}
    assert ids_with(rows, "visible") == {"o2", "o3"}


@pytest.mark.parametrize(
    "query,overshadowed",
    [
        *[(numbered("q", D1, "0", p), True) for p in range(5, 10)],
        (numbered("q", D1, "0", 4), False),
        (numbered("q", D1, "0", 11), False),
        (overwriting("q", D1, "0", 1, 5, 6, 5, 2), True),
        (overwriting("q", D1, "0", 1, 7, 8, 5, 2), True),
        (overwriting("q", D1, "0", 1, 8, 10, 5, 2), True),
        (overwriting("q", D1, "0", 1, 5, 10, 12, 2), False),
        (overwriting("q", D1, "0", 1, 4, 15, 12, 2), False),
    ],
)
def test_druid_is_overshadowed_for_overwriting_segments(query, overshadowed):
    # Druid: VersionedIntervalTimelineTest.testIsOvershadowedForOverwritingSegments
    rows = [overwriting("w", D1, "0", 0, 5, 10, 10, 1), query]
    assert (status_of(rows)["q"] == "overshadowed") is overshadowed


def _find_non_overshadowed_rows():
    return _v0_two_days() + [numbered("i0", D3, "0", 0, 3), numbered("i1", D3, "0", 1, 3)] + _v1_overwritten()


def test_druid_find_non_overshadowed_objects_in_interval():
    # Druid: VersionedIntervalTimelineTest.testFindNonOvershadowedObjectsInIntervalWith
    # OnlyCompletePartitionsReturningValidResult / ...WithIncompleteOkReturningValidResult:
    # ONLY_COMPLETE gives the visible ones, INCOMPLETE_OK adds the incomplete day (standby).
    rows = _find_non_overshadowed_rows()
    assert ids_with(rows, "visible") == {"p0", "p1", "p2", "b0", "b1"}
    assert ids_with(rows, "standby") == {"i0", "i1"}
    assert {i for h in lookup(rows, "2019-01-01/2019-01-04") for i in h[3]} == {"p0", "p1", "p2", "b0", "b1"}


# ------------------------------------------------------------------------------------------
# OvershadowableManagerTest: states inside one time chunk
# ------------------------------------------------------------------------------------------


def root(p):
    """OvershadowableManagerTest.newRootChunk: NumberedPartitionChunk(p, chunks=0)."""
    return numbered(f"r{p}", D1, "v", p, 0)


def nonroot(k, start, end, minor, size):
    """OvershadowableManagerTest.newNonRootChunk (the k-th non-root chunk of the test)."""
    return overwriting(f"n{k}", D1, "v", k, start, end, minor, size)


def nonroots(first, count, start, end, minor, size):
    return [nonroot(first + i, start, end, minor, size) for i in range(count)]


def manager_states(rows):
    out = time_chunk_states(frame(rows))
    states = {s: set(out.loc[out["chunk_state"] == s, "segment_id"]) for s in ("visible", "standby", "overshadowed")}
    return states, bool(out["chunk_complete"].iloc[0])


def check(rows, visible=(), standby=(), overshadowed=(), complete=None):
    states, is_complete = manager_states(rows)
    assert states == {"visible": set(visible), "standby": set(standby), "overshadowed": set(overshadowed)}
    if complete is not None:
        assert is_complete is complete


def test_manager_add_root_chunks():
    # Druid: OvershadowableManagerTest.testAddRootChunkToEmptyManager
    check([root(0)], visible={"r0"}, complete=True)
    check([root(0), root(1)], visible={"r0", "r1"}, complete=True)


def test_manager_add_non_root_chunks_to_empty():
    # Druid: OvershadowableManagerTest.testAddNonRootChunkToEmptyManager (a lone incomplete
    # group is visible; the manager is complete once the group is full)
    chunks = nonroots(0, 3, 10, 12, 1, 3)
    check(chunks[:1], visible={"n0"}, complete=False)
    check(chunks[:2], visible={"n0", "n1"}, complete=False)
    check(chunks, visible={"n0", "n1", "n2"}, complete=True)
    with pytest.raises(ValueError, match="has 4 members"):
        time_chunk_states(frame(chunks + [nonroot(3, 10, 12, 1, 3)]))


@pytest.mark.parametrize(
    "name,rows,visible,standby,overshadowed",
    [
        (
            "testAddOvershadowedChunkToCompletePartition",
            nonroots(0, 2, 0, 3, 1, 2) + [root(1)],
            {"n0", "n1"},
            set(),
            {"r1"},
        ),
        (
            "testAddOvershadowedChunkToIncompletePartition",
            nonroots(0, 1, 0, 3, 1, 2) + [root(1)],
            {"n0"},
            set(),
            {"r1"},
        ),
        (
            "testAddStandbyChunksToCompletePartition (one chunk)",
            [root(0), root(1), root(2), nonroot(0, 0, 3, 1, 2)],
            {"r0", "r1", "r2"},
            {"n0"},
            set(),
        ),
        (
            "testAddStandbyChunksToCompletePartition (full)",
            [root(0), root(1), root(2)] + nonroots(0, 2, 0, 3, 1, 2),
            {"n0", "n1"},
            set(),
            {"r0", "r1", "r2"},
        ),
        (
            "testAddStandbyChunksToIncompletePartition (one newer chunk)",
            [nonroot(0, 0, 3, 1, 2), nonroot(1, 0, 3, 2, 3)],
            {"n1"},
            set(),
            {"n0"},
        ),
        (
            "testAddStandbyChunksToIncompletePartition",
            [nonroot(0, 0, 3, 1, 2)] + nonroots(1, 2, 0, 3, 2, 3),
            {"n1", "n2"},
            set(),
            {"n0"},
        ),
        (
            "testRemoveStandbyChunk (before remove)",
            [root(0), root(1), root(2)] + nonroots(0, 2, 0, 3, 1, 3),
            {"r0", "r1", "r2"},
            {"n0", "n1"},
            set(),
        ),
        (
            "testRemoveStandbyChunk",
            [root(0), root(1), root(2), nonroot(1, 0, 3, 1, 3)],
            {"r0", "r1", "r2"},
            {"n1"},
            set(),
        ),
        (
            "testRemoveVisibleChunkAndFallBackToStandby (before remove)",
            [root(0), root(1)] + nonroots(0, 2, 0, 2, 1, 3),
            {"r0", "r1"},
            {"n0", "n1"},
            set(),
        ),
        (
            "testRemoveVisibleChunkAndFallBackToStandby",
            [root(1)] + nonroots(0, 2, 0, 2, 1, 3),
            {"n0", "n1"},
            set(),
            {"r1"},
        ),
        (
            "testAddCompleteOvershadowedToInCompletePartition (one root)",
            nonroots(0, 2, 0, 2, 1, 3) + [root(0)],
            {"n0", "n1"},
            set(),
            {"r0"},
        ),
        (
            "testAddCompleteOvershadowedToInCompletePartition",
            nonroots(0, 2, 0, 2, 1, 3) + [root(0), root(1)],
            {"r0", "r1"},
            {"n0", "n1"},
            set(),
        ),
        (
            "testAddCompleteOvershadowedToCompletePartition",
            nonroots(0, 2, 0, 2, 1, 2) + [root(0), root(1)],
            {"n0", "n1"},
            set(),
            {"r0", "r1"},
        ),
        ("testRemoveChunkFromOvershadowd (before remove)", [root(1), nonroot(0, 0, 2, 1, 2)], {"n0"}, set(), {"r1"}),
        ("testRemoveChunkFromOvershadowd", [nonroot(0, 0, 2, 1, 2)], {"n0"}, set(), set()),
        (
            "testRemoveChunkFromCompleteParition (full)",
            [root(1)] + nonroots(0, 2, 0, 2, 1, 2),
            {"n0", "n1"},
            set(),
            {"r1"},
        ),
        ("testRemoveChunkFromCompleteParition (one removed)", [root(1), nonroot(1, 0, 2, 1, 2)], {"n1"}, set(), {"r1"}),
        ("testRemoveChunkFromCompleteParition (both removed)", [root(1)], {"r1"}, set(), set()),
        (
            "testRemoveChunkFromCompletePartitionFallBackToOvershadowed (one chunk)",
            [root(0), root(1), nonroot(0, 0, 2, 1, 2)],
            {"r0", "r1"},
            {"n0"},
            set(),
        ),
        (
            "testRemoveChunkFromCompletePartitionFallBackToOvershadowed (full)",
            [root(0), root(1)] + nonroots(0, 2, 0, 2, 1, 2),
            {"n0", "n1"},
            set(),
            {"r0", "r1"},
        ),
        (
            "testRemoveChunkFromCompletePartitionFallBackToOvershadowed",
            [root(0), root(1), nonroot(1, 0, 2, 1, 2)],
            {"r0", "r1"},
            {"n1"},
            set(),
        ),
        (
            "testFallBackToStandbyOnRemove (before remove)",
            [root(0), nonroot(0, 0, 1, 1, 3), nonroot(1, 0, 1, 2, 2)],
            {"r0"},
            {"n0", "n1"},
            set(),
        ),
        ("testFallBackToStandbyOnRemove", [nonroot(0, 0, 1, 1, 3), nonroot(1, 0, 1, 2, 2)], {"n1"}, set(), {"n0"}),
        ("testMissingStartRootPartitionId", [root(2)] + nonroots(0, 2, 0, 3, 1, 2), {"n0", "n1"}, set(), {"r2"}),
        ("testMissingStartRootPartitionId (visible group removed)", [root(2)], {"r2"}, set(), set()),
        (
            "testCopyVisible / testDeepCopy setup",
            [root(0), root(1)] + nonroots(0, 3, 0, 2, 1, 3) + [root(2), root(3), nonroot(3, 2, 4, 1, 3)],
            {"n0", "n1", "n2", "r2", "r3"},
            {"n3"},
            {"r0", "r1"},
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_manager_states(name, rows, visible, standby, overshadowed):
    # Druid: OvershadowableManagerTest.<name>
    check(rows, visible, standby, overshadowed)


def test_manager_add_and_overwrite_and_add():
    # Druid: OvershadowableManagerTest.testAddAndOverwriteAndAdd
    roots = [root(p) for p in range(5)]
    check(roots + [nonroot(0, 1, 3, 3, 2)], visible={f"r{p}" for p in range(5)}, standby={"n0"})
    rows = roots + nonroots(0, 2, 1, 3, 3, 2)
    check(rows, visible={"r0", "r3", "r4", "n0", "n1"}, overshadowed={"r1", "r2"})
    rows += [root(p) for p in range(5, 8)] + nonroots(2, 2, 1, 3, 2, 2)
    check(rows, visible={"r0", "r3", "r4", "r5", "r6", "r7", "n0", "n1"}, overshadowed={"r1", "r2", "n2", "n3"})


def test_manager_remove_overshadowed_and_overshadowing():
    # Druid: OvershadowableManagerTest.testRemoveOvershadowed and testRemoveOvershadowingVisible
    roots = [root(p) for p in range(5)]
    check(roots + nonroots(0, 2, 1, 3, 1, 2), visible={"r0", "r3", "r4", "n0", "n1"}, overshadowed={"r1", "r2"})
    # testRemoveOvershadowed: remove r1, then the visible n0; the incomplete n1 stays visible
    # because r2 alone cannot stand in for root range [1, 3).
    no_r1 = [r for r in roots if r["segment_id"] != "r1"]
    check(no_r1 + nonroots(0, 2, 1, 3, 1, 2), visible={"r0", "r3", "r4", "n0", "n1"}, overshadowed={"r2"})
    check(no_r1 + [nonroot(1, 1, 3, 1, 2)], visible={"r0", "r3", "r4", "n1"}, overshadowed={"r2"})
    # testRemoveOvershadowingVisible: remove n0 with r1 still present: fall back to the roots.
    check(roots + [nonroot(1, 1, 3, 1, 2)], visible={f"r{p}" for p in range(5)}, standby={"n1"})


def test_manager_add_complete_overshadowed_to_complete_partition_2():
    # Druid: OvershadowableManagerTest.testAddCompleteOvershadowedToCompletePartition2
    g = {  # name: (first ordinal, count, start, end, minor, size)
        "A": (0, 2, 0, 2, 1, 3),
        "B": (2, 2, 2, 5, 1, 3),
        "C": (4, 2, 5, 8, 1, 3),
        "D": (6, 2, 8, 10, 1, 3),
        "E": (8, 2, 0, 5, 2, 3),
        "F": (10, 2, 0, 8, 3, 3),
        "G": (12, 2, 0, 10, 4, 2),
        "H": (14, 1, 0, 10, 5, 2),
    }
    rows = {k: nonroots(*v) for k, v in g.items()}
    ids = {k: {r["segment_id"] for r in v} for k, v in rows.items()}
    every = [r for v in rows.values() for r in v]
    check(every, visible=ids["G"], standby=ids["H"], overshadowed=set().union(*(ids[k] for k in "ABCDEF")))
    # Third chunks complete E, C and D.
    extra = {"E": nonroot(15, 0, 5, 2, 3), "C": nonroot(16, 5, 8, 1, 3), "D": nonroot(17, 8, 10, 1, 3)}
    for k, r in extra.items():
        ids[k].add(r["segment_id"])
    every += list(extra.values())
    check(every, visible=ids["G"], standby=ids["H"], overshadowed=set().union(*(ids[k] for k in "ABCDEF")))
    # Remove a chunk of G: fall back to the newest complete groups E, C, D.
    g_removed = sorted(ids["G"])[0]
    every = [r for r in every if r["segment_id"] != g_removed]
    check(
        every,
        visible=ids["E"] | ids["C"] | ids["D"],
        standby=ids["F"] | (ids["G"] - {g_removed}) | ids["H"],
        overshadowed=ids["A"] | ids["B"],
    )


def test_manager_add_complete_standby_to_complete_partition():
    # Druid: OvershadowableManagerTest.testAddCompleteStandbyToCompletePartition
    g = {
        "A": (0, 2, 0, 2, 1, 3),
        "B": (2, 2, 2, 5, 1, 3),
        "C": (4, 2, 5, 8, 1, 3),
        "D": (6, 2, 8, 10, 1, 2),
        "E": (8, 2, 0, 5, 2, 2),
        "F": (10, 2, 5, 10, 2, 2),
        "G": (12, 2, 0, 5, 3, 3),
        "H": (14, 2, 5, 10, 3, 3),
        "I": (16, 2, 0, 5, 4, 3),
        "J": (18, 2, 0, 10, 5, 3),
    }
    rows = {k: nonroots(*v) for k, v in g.items()}
    ids = {k: {r["segment_id"] for r in v} for k, v in rows.items()}
    every = [r for v in rows.values() for r in v]
    check(
        every,
        visible=ids["E"] | ids["F"],
        standby=set().union(*(ids[k] for k in "GHIJ")),
        overshadowed=set().union(*(ids[k] for k in "ABCD")),
    )
    every += [nonroot(20, 0, 5, 4, 3), nonroot(21, 5, 10, 3, 3)]  # complete I and H
    ids["I"].add("n20")
    ids["H"].add("n21")
    check(every, visible=ids["I"] | ids["H"], standby=ids["J"], overshadowed=set().union(*(ids[k] for k in "ABCDEFG")))


def test_manager_fall_back_to_standby_2():
    # Druid: OvershadowableManagerTest.testFallBackToStandby2
    rows = (
        nonroots(0, 2, 0, 2, 1, 3)
        + nonroots(2, 2, 0, 2, 2, 2)
        + nonroots(4, 2, 0, 2, 3, 3)
        + nonroots(6, 2, 0, 2, 4, 3)
        + nonroots(8, 2, 0, 2, 5, 3)
    )
    check(rows, visible={"n2", "n3"}, standby={f"n{k}" for k in range(4, 10)}, overshadowed={"n0", "n1"})
    # Remove a chunk of the visible group: the newest standby group (minor 5) becomes visible.
    rows = [r for r in rows if r["segment_id"] != "n2"]
    check(rows, visible={"n8", "n9"}, overshadowed={f"n{k}" for k in (0, 1, 3, 4, 5, 6, 7)})


def test_manager_fall_back_to_overshadowed_on_remove():
    # Druid: OvershadowableManagerTest.testFallBackToOvershadowedOnRemove
    older = [nonroot(2, 10, 20, 4, 3), nonroot(3, 10, 20, 3, 3), nonroot(4, 10, 20, 4, 3), nonroot(5, 10, 20, 3, 3)]
    rows = nonroots(0, 2, 10, 20, 5, 3) + older
    check(rows, visible={"n0", "n1"}, overshadowed={"n2", "n3", "n4", "n5"})
    check([nonroot(1, 10, 20, 5, 3)] + older, visible={"n1"}, overshadowed={"n2", "n3", "n4", "n5"})
    check(older, visible={"n2", "n4"}, overshadowed={"n3", "n5"})


def test_manager_add_incomplete_atomic_update_groups():
    # Druid: OvershadowableManagerTest.testAddIncompleteAtomicUpdateGroups
    rows = [nonroot(0, 0, 1, 1, 3), nonroot(1, 0, 1, 2, 2), nonroot(2, 0, 1, 3, 5)]
    check(rows[:2], visible={"n1"}, overshadowed={"n0"})
    check(rows, visible={"n2"}, overshadowed={"n0", "n1"})
    check(rows + [nonroot(3, 0, 1, 2, 2)], visible={"n1", "n3"}, standby={"n2"}, overshadowed={"n0"})


# ------------------------------------------------------------------------------------------
# Seed: Druid issue #7491, "Timeline management" (segments 1-8)
# ------------------------------------------------------------------------------------------

SEED_DAY = "2019-04-16/2019-04-17"


def seed_segments(step):
    """Step 1: batch 1, 2, 3 (root partitions 0-2).  Step 2: compaction merges 2 and 3 into 4
    (root range [1, 3), minor 1, group of 1); Kafka appends 5 (partition 3).  Step 3: compaction
    rewrites 4 and 5 into 6 and 7 (root range [1, 4), minor 2, group of 2); Kafka appends 8."""
    rows = [numbered("1", SEED_DAY, "v", 0), numbered("2", SEED_DAY, "v", 1), numbered("3", SEED_DAY, "v", 2)]
    if step >= 2:
        rows += [overwriting("4", SEED_DAY, "v", 0, 1, 3, 1, 1), numbered("5", SEED_DAY, "v", 3)]
    if step >= 3:
        rows += [
            overwriting("6", SEED_DAY, "v", 1, 1, 4, 2, 2),
            overwriting("7", SEED_DAY, "v", 2, 1, 4, 2, 2),
            numbered("8", SEED_DAY, "v", 4),
        ]
    return rows


def test_seed_timeline_management_example():
    # seed: "After 3., only segments 1, 6, 7, and 8 are visible."
    assert ids_with(seed_segments(1), "visible") == {"1", "2", "3"}
    assert status_of(seed_segments(2)) == {
        "1": "visible",
        "2": "overshadowed",
        "3": "overshadowed",
        "4": "visible",
        "5": "visible",
    }
    statuses = status_of(seed_segments(3))
    assert {k for k, v in statuses.items() if v == "visible"} == {"1", "6", "7", "8"}
    assert {k for k, v in statuses.items() if v == "overshadowed"} == {"2", "3", "4", "5"}
    out = classify_datasource(frame(seed_segments(3))).set_index("segment_id")
    for sid in ("2", "3", "4", "5"):
        assert sorted(out.loc[sid, "overshadowed_by"]) == ["6", "7"]
        assert out.loc[sid, "reason"] == "minor version 2 of root range [1, 4) is complete"


def test_seed_standby_until_atomic_update_group_complete():
    # seed (hand): during step 3 only segment 6 of the group {6, 7} is published: the group is
    # standby and the previous generation (4 and 5) stays visible.
    rows = [r for r in seed_segments(3) if r["segment_id"] != "7"]
    out = classify_datasource(frame(rows)).set_index("segment_id")
    assert dict(out["status"]) == {
        "1": "visible",
        "2": "overshadowed",
        "3": "overshadowed",
        "4": "visible",
        "5": "visible",
        "6": "standby",
        "8": "visible",
    }
    assert out.loc["6", "reason"] == "atomic update group incomplete (1 of 2); older generation stays visible"
    # Falling back further: without 4, root range [1, 3) is again served by 2 and 3.
    rows = [r for r in rows if r["segment_id"] != "4"]
    assert ids_with(rows, "visible") == {"1", "2", "3", "5", "8"}
    assert ids_with(rows, "standby") == {"6"}


def test_seed_explain():
    info = explain_overshadowing(frame(seed_segments(3)), "5")
    assert info["status"] == "overshadowed"
    assert sorted(info["minor_overshadowed_by"]) == ["6", "7"]
    assert info["atomic_update_group"] == {
        "root_range": [3, 4],
        "minor_version": 0,
        "size": 1,
        "present": 1,
        "state": "overshadowed",
    }
    assert info["time_chunk_complete"] is True
    assert [p["relation"] for p in info["complete_timeline"]] == ["own"]
    assert info["uncovered"] == []
    with pytest.raises(KeyError):
        explain_overshadowing(frame(seed_segments(3)), "nope")


# ------------------------------------------------------------------------------------------
# Hand-worked cases
# ------------------------------------------------------------------------------------------

DAY0 = ms("2013-01-01")


def hours(version, shard="numbered", core=None, count=24, first=0):
    return [
        seg(f"h{h}", (DAY0 + h * HOUR, DAY0 + (h + 1) * HOUR), version, shard, 0, core=core)
        for h in range(first, first + count)
    ]


def day_partitions(version, parts, core, shard="hashed", start=DAY0, end=DAY0 + DAY):
    return [seg(f"d{p}", (start, end), version, shard, p, core=core) for p in parts]


def test_hand_day_over_hours():
    # hand: a complete DAY of version 2013-02 (hashed, 2 of 2) over 24 HOUR segments of 2013-01.
    rows = hours("2013-01-01") + day_partitions("2013-02-01", [0, 1], 2)
    out = classify_datasource(frame(rows)).set_index("segment_id")
    assert set(out.loc[[f"h{h}" for h in range(24)], "status"]) == {"overshadowed"}
    assert out.loc["h5", "overshadowed_by"] == ["d0", "d1"]
    assert out.loc["h5", "reason"] == (
        "version 2013-02-01 covers 2013-01-01T05:00:00.000Z/2013-01-01T06:00:00.000Z completely"
    )
    assert set(out.loc[["d0", "d1"], "status"]) == {"visible"}
    info = explain_overshadowing(frame(rows), "h0")
    assert [(p["relation"], p["version"], p["segment_ids"]) for p in info["complete_timeline"]] == [
        ("higher", "2013-02-01", ["d0", "d1"])
    ]


def test_hand_day_over_hours_partial_and_incomplete():
    # hand: (a) the DAY covers only hours 0-11 (a 12-hour segment) -> the hours 0-11 are
    # overshadowed, 12-23 visible; a DAY-long 2013-01 segment under it stays visible ("part of").
    half = day_partitions("2013-02-01", [0], 1, end=DAY0 + 12 * HOUR)
    rows = hours("2013-01-01") + half
    statuses = status_of(rows)
    assert {h for h in range(24) if statuses[f"h{h}"] == "overshadowed"} == set(range(12))
    whole = [seg("old-day", (DAY0, DAY0 + DAY), "2013-01-01", "none")]
    out = classify_datasource(frame(whole + half)).set_index("segment_id")
    assert out.loc["old-day", "status"] == "visible"
    assert out.loc["old-day", "reason"] == "newest complete version over part of 2013-01-01/2013-01-02"
    info = explain_overshadowing(frame(whole + half), "old-day")
    assert [p["relation"] for p in info["complete_timeline"]] == ["higher", "own"]
    # (b) the DAY is hashed 2 of 3 partitions -> incomplete: it overshadows nothing and is standby.
    rows = hours("2013-01-01") + day_partitions("2013-02-01", [0, 2], 3)
    out = classify_datasource(frame(rows)).set_index("segment_id")
    assert set(out.loc[[f"h{h}" for h in range(24)], "status"]) == {"visible"}
    assert set(out.loc[["d0", "d2"], "status"]) == {"standby"}
    assert out.loc["d0", "reason"] == (
        "partition set of version 2013-02-01 for 2013-01-01/2013-01-02 is incomplete: core partitions "
        "incomplete (2 of 3 present); not overshadowed, so Druid loads it but brokers do not query it"
    )
    # (c) a gap: hours 0-22 plus the incomplete day; a complete newer day over hours 0-22 only
    # would still not cover hour 23 -> nothing is overshadowed there.
    rows = hours("2013-01-01", count=23) + day_partitions("2013-02-01", [0, 1], 2, end=DAY0 + 23 * HOUR)
    assert ids_with(rows, "overshadowed") == {f"h{h}" for h in range(23)}


@pytest.mark.parametrize(
    "parts,core,complete",
    [
        ([0, 1, 2], 3, True),
        ([0, 2], 3, False),  # core partition 1 missing
        ([1, 2], 3, False),  # partition 0 missing
        ([0, 1, 5], 2, True),  # appended partition beyond the core set
        ([0, 5], 2, False),
        ([3], 0, True),  # numCorePartitions 0: always complete (NumberedPartitionChunk with chunks 0)
        ([3], None, True),
    ],
)
def test_hand_core_partitions(parts, core, complete):
    # hand: PartitionHolder.isComplete for numbered chunks, with an older complete day under it.
    rows = [seg("old", (DAY0, DAY0 + DAY), "2013-01-01")] + day_partitions("2013-02-01", parts, core, shard="numbered")
    statuses = status_of(rows)
    assert statuses["old"] == ("overshadowed" if complete else "visible")
    assert {statuses[f"d{p}"] for p in parts} == {"visible" if complete else "standby"}


def test_hand_overwrite_after_core_partition_is_incomplete():
    # hand (Druid quirk, NumberedPartitionChunk.abuts): partition 0 of 3 followed by a visible
    # overwriting group [1, 3) does not form a chain, so the time chunk is incomplete.
    rows = (
        [seg("old", (DAY0, DAY0 + DAY), "2013-01-01")]
        + day_partitions("2013-02-01", [0, 1, 2], 3, shard="numbered")
        + [seg("ow", (DAY0, DAY0 + DAY), "2013-02-01", "numbered_overwrite", 32768, root=(1, 3), minor=1, aug=1)]
    )
    statuses = status_of(rows)
    assert statuses["old"] == "visible"
    assert {statuses[k] for k in ("d0", "d1", "d2", "ow")} == {"standby"}
    # Compacting from partition 0 ([0, 3)) puts an overwriting chunk first: complete.
    rows[-1] = seg("ow", (DAY0, DAY0 + DAY), "2013-02-01", "numbered_overwrite", 32768, root=(0, 3), minor=1, aug=1)
    statuses = status_of(rows)
    assert statuses["ow"] == "visible" and statuses["old"] == "overshadowed"


def test_hand_tombstone():
    # hand: a tombstone of a newer version over a day of data overshadows it and is itself visible.
    rows = day_partitions("2013-01-01", [0, 1], 2) + [seg("tomb", (DAY0, DAY0 + DAY), "2013-02-01", "tombstone", 0)]
    out = classify_datasource(frame(rows)).set_index("segment_id")
    assert out.loc["tomb", "status"] == "visible"
    assert out.loc["tomb", "reason"].startswith("tombstone")
    assert out.loc["d0", "status"] == out.loc["d1", "status"] == "overshadowed"
    assert out.loc["d0", "overshadowed_by"] == ["tomb"]
    # A newer complete version over the tombstone overshadows the tombstone.
    rows.append(seg("new", (DAY0, DAY0 + DAY), "2013-03-01", "linear", 0))
    assert status_of(rows)["tomb"] == "overshadowed"


def test_hand_versions_compare_as_strings():
    # hand: Druid compares versions with String.compareTo, so "9" is newer than "10".
    rows = [seg("ten", (DAY0, DAY0 + DAY), "10"), seg("nine", (DAY0, DAY0 + DAY), "9")]
    assert status_of(rows) == {"ten": "overshadowed", "nine": "visible"}


def test_output_shape_and_errors():
    rows = hours("2013-01-01", count=3) + day_partitions("2013-02-01", [0, 1], 2)
    df = frame(rows)
    df.index = [10 * i for i in range(len(df))]
    df["extra"] = "x"
    out = classify_datasource(df.iloc[::-1])
    assert list(out.index) == list(df.index[::-1])
    assert list(out["segment_id"]) == list(df["segment_id"][::-1])
    assert list(out.columns) == list(df.columns) + ["status", "overshadowed_by", "reason"]
    assert all(isinstance(v, list) for v in out["overshadowed_by"])
    assert all(v == [] for v in out.loc[out["status"] != "overshadowed", "overshadowed_by"])
    # The overwrite columns may be absent.
    minimal = df[["segment_id", "start_ms", "end_ms", "version", "shard_type", "partition_num"]]
    # Without core partition counts the day (2 partitions) is complete and covers the 3 hours.
    assert dict(zip(minimal["segment_id"], classify_datasource(minimal)["status"])) == {
        "h0": "overshadowed",
        "h1": "overshadowed",
        "h2": "overshadowed",
        "d0": "visible",
        "d1": "visible",
    }
    empty = classify_datasource(frame([]))
    assert len(empty) == 0 and "status" in empty.columns
    with pytest.raises(ValueError, match="duplicate segment_id"):
        classify_datasource(frame(rows + rows[:1]))
    with pytest.raises(ValueError, match="end_ms"):
        classify_datasource(frame([seg("z", (DAY0, DAY0), "1")]))
    with pytest.raises(ValueError, match="repeats"):
        classify_datasource(frame([seg("a", (DAY0, DAY0 + DAY), "1"), seg("b", (DAY0, DAY0 + DAY), "1")]))
    with pytest.raises(ValueError, match="minor version"):
        classify_datasource(frame([seg("a", (DAY0, DAY0 + DAY), "1", "numbered_overwrite", 32768)]))
    with pytest.raises(ValueError, match="missing column"):
        classify_datasource(df.drop(columns=["version"]))


# ------------------------------------------------------------------------------------------
# Random cross-check against a brute-force reading of isOvershadowed (first-generation only)
# ------------------------------------------------------------------------------------------


def _brute_force(rows):
    """Per time chunk: complete = core partitions 0..N-1 present (N <= 0: always); overshadowed
    iff every hour of the interval lies in a complete time chunk of a higher version."""
    chunks: dict[tuple, list] = {}
    for r in rows:
        chunks.setdefault((r["start_ms"], r["end_ms"], r["version"]), []).append(r)

    def complete(members):
        n = members[0]["num_core_partitions"] or 0
        return n <= 0 or set(range(n)) <= {m["partition_num"] for m in members}

    done = {k: complete(v) for k, v in chunks.items()}
    out = {}
    for (s, e, v), members in chunks.items():
        covered = all(any(done[k] and k[2] > v and k[0] <= t < k[1] for k in chunks) for t in range(s, e, HOUR))
        status = "overshadowed" if covered else ("visible" if done[(s, e, v)] else "standby")
        for m in members:
            out[m["segment_id"]] = status
    return out


@pytest.mark.parametrize("seed", range(40))
def test_random_against_brute_force(seed):
    rng = random.Random(seed)
    rows, n = [], 0
    for version_index in range(rng.randint(3, 30)):
        length = rng.choice([1, 2, 3, 6, 12, 24, 48])
        start = DAY0 + rng.randrange(0, 72) * HOUR
        core = rng.choice([None, 0, 1, 2, 3])
        parts = [p for p in range(4) if rng.random() < 0.8] or [0]
        for p in parts:
            rows.append(
                seg(
                    f"s{n}",
                    (start, start + length * HOUR),
                    f"v{version_index:03d}",
                    rng.choice(["numbered", "hashed"]),
                    p,
                    core=core,
                )
            )
            n += 1
    assert status_of(rows) == _brute_force(rows)


def test_many_segments_run_in_reasonable_time():
    # 100 days x 24 hours x 10 partitions of one version, one newer day-partitioned version over
    # half of the days (about 26k segments).
    rows = []
    for d in range(100):
        for h in range(24):
            start = DAY0 + d * DAY + h * HOUR
            rows += [
                seg(f"h{d}-{h}-{p}", (start, start + HOUR), "2013-01-01", "numbered", p, core=10) for p in range(10)
            ]
        if d % 2 == 0:
            rows += [
                seg(f"d{d}-{p}", (DAY0 + d * DAY, DAY0 + (d + 1) * DAY), "2013-02-01", "hashed", p, core=4)
                for p in range(4)
            ]
    df = frame(rows)
    t0 = time.perf_counter()
    out = classify_datasource(df)
    elapsed = time.perf_counter() - t0
    counts = out["status"].value_counts().to_dict()
    assert counts == {"visible": 12000 + 200, "overshadowed": 12000}
    assert elapsed < 30, elapsed
