"""Druid segment ids: parsing an id back into datasource, interval, version and partition.

A snapshot may name a segment only by its id: a replica in ``server_segments.json`` or an entry of
``load_queues.json`` whose segment is not in ``segments.jsonl`` is a replica of an *unused* segment
(ALGORITHM.md "Inputs"). Its datasource is the longest datasource of the snapshot that prefixes the
id followed by ``_`` (and leaves a parseable rest), else what Druid's ``SegmentId`` parsing gives:
the datasource before the first ``_`` + ``yyyy-MM-ddTHH:mm:ss.SSS`` instant, then every other split.

Source: Druid ``org.apache.druid.timeline.SegmentId`` (``iteratePossibleParsingsWithDataSource``,
``tryExtractMostProbableDataSource``, ``iterateAllPossibleParsings``) and
``DateTimes.COMMON_DATE_TIME_PATTERN``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from segment_balancer.druid.instants import parse_instant_ms

DELIMITER = "_"
# Druid's DateTimes.COMMON_DATE_TIME_PATTERN: the instant that most probably ends the datasource.
COMMON_DATE_TIME = re.compile(
    r"[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]\.[0-9]{3}(Z|[+\-][0-9]{2}(:[0-9]{2}))"
)


@dataclass(frozen=True)
class SegmentIdParts:
    """A parsed segment id: ``start_ms``/``end_ms`` epoch ms UTC, ``partition_num`` >= 0."""

    datasource: str
    start_ms: int
    end_ms: int
    version: str
    partition_num: int


def parse_with_datasource(datasource: str, segment_id: str) -> SegmentIdParts | None:
    """The first parsing of ``segment_id`` as a segment of ``datasource``, or None.

    As Druid's ``iteratePossibleParsingsWithDataSource``: the rest after ``datasource_`` splits on
    ``_`` into start, end, version…; a last split that is a positive int is the partition number
    (Druid's first parsing), otherwise part of the version. None when the datasource does not
    prefix the id, fewer than three splits remain, an instant does not parse, or start >= end.
    """
    if not datasource or not segment_id.startswith(datasource + DELIMITER):
        return None
    splits = segment_id[len(datasource) + 1 :].split(DELIMITER)
    if len(splits) < 3:
        return None
    try:
        start, end = parse_instant_ms(splits[0]), parse_instant_ms(splits[1])
    except ValueError:
        return None
    if start >= end:
        return None
    version = DELIMITER.join(splits[2 : max(len(splits) - 1, 3)])
    if len(splits) > 3:
        trail = splits[-1]
        if re.fullmatch(r"-?\d+", trail) and 0 < int(trail) < 2**31:
            return SegmentIdParts(datasource, start, end, version, int(trail))
        version = version + DELIMITER + trail
    return SegmentIdParts(datasource, start, end, version, 0)


def most_probable_datasource(segment_id: str) -> str | None:
    """Druid's ``tryExtractMostProbableDataSource``: what precedes the first ``_`` + common instant."""
    for match in COMMON_DATE_TIME.finditer(segment_id):
        end = match.start() - 1
        if end >= 0 and segment_id[end] == DELIMITER:
            return segment_id[:end]
    return None


def parse_segment_id(segment_id: str, datasources: Iterable[str] = ()) -> SegmentIdParts | None:
    """Parse ``segment_id`` (ALGORITHM.md "Inputs"), or None when no parsing exists.

    ``datasources``: the snapshot's datasources; the longest one that prefixes the id followed by
    ``_`` and leaves a valid rest wins. Otherwise Druid's order: the most probable datasource,
    then every prefix of 1, 2, … ``_``-separated splits.
    """
    for ds in sorted((d for d in set(datasources) if segment_id.startswith(d + DELIMITER)), key=len, reverse=True):
        parts = parse_with_datasource(ds, segment_id)
        if parts is not None:
            return parts
    probable = most_probable_datasource(segment_id)
    if probable:
        parts = parse_with_datasource(probable, segment_id)
        if parts is not None:
            return parts
    splits = segment_id.split(DELIMITER)
    for n in range(1, len(splits) - 3):
        ds = DELIMITER.join(splits[:n])
        if ds != probable:
            parts = parse_with_datasource(ds, segment_id)
            if parts is not None:
                return parts
    return None
