"""Druid releases: the ones the ``druid`` coordinator reproduces, the version a cluster reports, and
which reproduced release places segments as a given version does (docs/DRUID_COORDINATOR.md).

A Druid process reports its version as its jar's ``Implementation-Version``, the Maven project
version it was built as (``DruidNode.version``, Druid 35.0.0), or ``"unknown"`` when it runs from
classes without a jar manifest (``DruidNode.UNKNOWN_VERSION``); ``sys.servers`` has it in the
column ``version`` from Druid 35.0.0 on (apache/druid#18542). Apache releases are
``MAJOR.MINOR.PATCH`` (``35.0.1``, ``0.23.0``), builds of the main branch carry ``-SNAPSHOT``
(``39.0.0-SNAPSHOT``), vendors add their own qualifier (``2024.03.0-iap``).

Standard library only.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "REPRODUCED_RELEASES",
    "NEWEST_RELEASE",
    "UNKNOWN_VERSION",
    "VERSION_FORMAT",
    "parse_version",
    "reproduced_release",
    "cluster_version",
]

REPRODUCED_RELEASES: tuple[str, ...] = ("35.0.0", "38.0.0")
"""The Druid releases whose Coordinator the ``druid`` coordinator reproduces, oldest first: each one
where segment placement changed (36 and 37 place segments as 35 does)."""
NEWEST_RELEASE: str = REPRODUCED_RELEASES[-1]
UNKNOWN_VERSION = "unknown"
"""What a Druid process reports when it knows no version (``DruidNode.UNKNOWN_VERSION``)."""

VERSION_FORMAT = "a Druid version MAJOR.MINOR.PATCH[-qualifier] (e.g. 35.0.1, 39.0.0-SNAPSHOT)"
"""What :func:`parse_version` takes, in words (for messages)."""

_VERSION = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)(?:[-+.][0-9A-Za-z][0-9A-Za-z.+_-]*)?")


def parse_version(text: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a Druid version as ``sys.servers.version`` reports it.

    The qualifier after the patch number (``-SNAPSHOT``, ``-iap``, ``-rc1``) is ignored:
    ``39.0.0-SNAPSHOT`` gives ``(39, 0, 0)``; leading zeros are numbers (``2024.03.0-iap`` gives
    ``(2024, 3, 0)``).

    Raises:
        ValueError: ``text`` is not a string of that form (``"unknown"`` included); the message
            names the text and what was expected.
    """
    match = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"Druid version {text!r} is not a release number: expected {VERSION_FORMAT}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def reproduced_release(version: str) -> str:
    """The release of :data:`REPRODUCED_RELEASES` whose Coordinator places segments as Druid
    ``version`` does: the newest one not newer than ``version`` (38.x and later: ``"38.0.0"``;
    35, 36, 37: ``"35.0.0"``), and the oldest, ``"35.0.0"``, for a release older than every
    reproduced one (the caller tells the user it is not reproduced exactly).

    Versions compare by their numbers alone (:func:`parse_version`): ``38.0.0-SNAPSHOT`` counts as
    38, and a vendor's calendar version (``2024.03.0-iap``) as newer than every Apache release,
    whatever Apache release it was built from.

    Raises:
        ValueError: ``version`` does not parse (:func:`parse_version`).
    """
    number = parse_version(version)
    chosen = REPRODUCED_RELEASES[0]
    for release in REPRODUCED_RELEASES:
        if parse_version(release) <= number:
            chosen = release
    return chosen


def cluster_version(server_rows: Iterable[Mapping[str, Any]]) -> str | None:
    """The Druid version of a cluster from its ``sys.servers`` rows (``servers.json``), as given.

    The leading Coordinator's ``version``: the one row of ``server_type`` ``coordinator`` (any
    case), or, among several, the first with ``is_leader`` 1. When there is none, or its version is
    absent, null or ``"unknown"``: the most common ``version`` among the historicals (ties: the
    newest by :func:`parse_version`, then the greater string). None when no row says (rows of Druid
    before 35.0.0, which has no ``version`` column, or written by hand).

    Raises:
        ValueError: a version it considers does not parse; the message names the 0-based row.
    """
    rows = list(server_rows)

    def kind(row: Mapping[str, Any]) -> str:
        value = row.get("server_type")
        return value.lower() if isinstance(value, str) else ""

    def known(i: int) -> tuple[int, int, int] | None:
        value = rows[i].get("version")
        if value is None or value == UNKNOWN_VERSION:
            return None
        try:
            return parse_version(value)
        except ValueError as exc:
            raise ValueError(f"row {i}: {exc}") from None

    coordinators = [i for i, row in enumerate(rows) if kind(row) == "coordinator"]
    leaders = coordinators if len(coordinators) == 1 else [i for i in coordinators if rows[i].get("is_leader") == 1]
    if leaders and known(leaders[0]) is not None:
        return rows[leaders[0]]["version"]
    counts: Counter[str] = Counter()
    numbers: dict[str, tuple[int, int, int]] = {}
    for i, row in enumerate(rows):
        if kind(row) == "historical":
            number = known(i)
            if number is not None:
                counts[row["version"]] += 1
                numbers[row["version"]] = number
    if not counts:
        return None
    return max(counts, key=lambda v: (counts[v], numbers[v], v))
