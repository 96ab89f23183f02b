"""``druid/releases.py``: Druid version strings as ``sys.servers.version`` reports them (the jar's
``Implementation-Version``, Maven's project version, or ``DruidNode.UNKNOWN_VERSION``), which
reproduced release places segments as a version does, and a cluster's version from its rows."""

from __future__ import annotations

import pytest

from segment_balancer.druid.releases import (
    NEWEST_RELEASE,
    REPRODUCED_RELEASES,
    cluster_version,
    parse_version,
    reproduced_release,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("35.0.0", (35, 0, 0)),  # the release the druid coordinator reproduces first
        ("35.0.1", (35, 0, 1)),  # a patch release (2025-12-15)
        ("38.0.0", (38, 0, 0)),
        ("39.0.0-SNAPSHOT", (39, 0, 0)),  # a build of master after 38 (kfaraz/druid's pom.xml)
        ("38.0.0-SNAPSHOT", (38, 0, 0)),  # the pom of 38.0.0's branch point, aedca20599
        ("0.23.0", (0, 23, 0)),  # Apache numbering before 24.0.0
        ("0.17.0-incubating", (0, 17, 0)),  # the releases of the Apache incubator
        ("2024.03.0-iap", (2024, 3, 0)),  # a vendor's calendar version; 03 is the number 3
        ("31.0.0-rc1", (31, 0, 0)),
        ("35.0.0.1", (35, 0, 0)),  # a fourth number is a qualifier
    ],
)
def test_parse_version(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "unknown",  # DruidNode.UNKNOWN_VERSION: classes run without a jar manifest
        "",
        "35",
        "35.0",
        "v35.0.0",
        " 35.0.0",
        "35.0.0 ",
        "35.0.x",
        "35.0.0-",  # a dash and no qualifier
        "٣٥.0.0",  # digits, but not ASCII ones
        None,
        35,
        35.0,
    ],
)
def test_parse_version_refuses_what_is_no_version(text):
    with pytest.raises(ValueError) as info:
        parse_version(text)
    message = str(info.value)
    assert repr(text) in message and "MAJOR.MINOR.PATCH" in message


def test_reproduced_releases_are_oldest_first_and_map_to_themselves():
    numbers = [parse_version(r) for r in REPRODUCED_RELEASES]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert REPRODUCED_RELEASES == ("35.0.0", "38.0.0") and NEWEST_RELEASE == "38.0.0"
    assert [reproduced_release(r) for r in REPRODUCED_RELEASES] == list(REPRODUCED_RELEASES)


@pytest.mark.parametrize(
    "version, release",
    [
        ("35.0.1", "35.0.0"),
        ("36.0.0", "35.0.0"),  # 36 and 37 place segments as 35 (shared/DRUID_TODAY.md)
        ("37.1.2", "35.0.0"),
        ("37.99.99-SNAPSHOT", "35.0.0"),
        ("38.0.0-SNAPSHOT", "38.0.0"),  # the qualifier does not count: 38's branch builds are 38
        ("38.0.1", "38.0.0"),
        ("39.0.0-SNAPSHOT", "38.0.0"),  # newer than every reproduced release: the newest
        ("34.0.0", "35.0.0"),  # older than every reproduced release: the oldest
        ("0.23.0", "35.0.0"),
        ("2024.03.0-iap", "38.0.0"),  # numbers only: a calendar version compares above 38
    ],
)
def test_reproduced_release(version, release):
    assert reproduced_release(version) == release


def test_reproduced_release_refuses_what_is_no_version():
    with pytest.raises(ValueError, match="'unknown' is not a release number"):
        reproduced_release("unknown")


# ---- cluster_version ------------------------------------------------------------------------------------


def server(name: str, kind: str, version: str | None = "38.0.0", is_leader: int | None = None) -> dict:
    """A ``sys.servers`` row as Druid 38 gives it (the columns cluster_version reads, and a few more)."""
    row = {"server": name, "host": name.split(":")[0], "server_type": kind, "is_leader": is_leader}
    if version is not None:
        row["version"] = version
    return row


def historicals(*versions: str) -> list[dict]:
    return [server(f"hist-{i}:8083", "historical", v) for i, v in enumerate(versions)]


def test_the_coordinator_decides_over_the_historicals():
    """Druid upgrades historicals before the Coordinator (docs/operations/rolling-updates.md): while
    it does, the historicals run the new release and the Coordinator, which places segments, the old."""
    rows = historicals("38.0.0", "38.0.0", "38.0.0") + [server("coord:8081", "coordinator", "35.0.1", 1)]
    assert cluster_version(rows) == "35.0.1"


def test_one_coordinator_decides_whatever_is_leader_says():
    """One Coordinator row: Druid gives 0 to every coordinator when the leader lookup fails."""
    rows = [server("coord:8081", "coordinator", "37.0.0", 0)] + historicals("38.0.0")
    assert cluster_version(rows) == "37.0.0"


def test_among_several_coordinators_the_leader_decides():
    rows = [
        server("coord-1:8081", "coordinator", "35.0.0", 0),
        server("coord-2:8081", "coordinator", "38.0.0", 1),
        server("overlord-1:8090", "overlord", "35.0.0", 1),
    ] + historicals("35.0.0")
    assert cluster_version(rows) == "38.0.0"


def test_several_coordinators_and_no_leader_fall_back_to_the_historicals():
    rows = [
        server("coord-1:8081", "coordinator", "35.0.0", 0),
        server("coord-2:8081", "coordinator", "35.0.0", 0),
    ] + historicals("38.0.0", "37.0.0", "38.0.0")
    assert cluster_version(rows) == "38.0.0"


def test_a_leader_without_a_version_falls_back_to_the_historicals():
    for version in (None, "unknown"):
        rows = [server("coord:8081", "coordinator", version, 1)] + historicals("36.0.0")
        assert cluster_version(rows) == "36.0.0"


def test_the_historicals_most_common_version_ties_to_the_newest_by_number():
    assert cluster_version(historicals("35.0.0", "38.0.0", "35.0.0")) == "35.0.0"
    assert cluster_version(historicals("35.0.1", "38.0.0", "38.0.0", "35.0.1")) == "38.0.0"
    # by number, not by text: "0.9.2" sorts after "0.23.0" as text
    assert cluster_version(historicals("0.9.2", "0.23.0")) == "0.23.0"
    # unknown versions are no votes
    assert cluster_version(historicals("unknown", "unknown", "36.0.0")) == "36.0.0"


def test_server_types_in_any_case_and_other_services_ignored():
    """Druid writes the role in lower case; its docs (and older files) write it in capitals."""
    rows = [server("broker:8082", "broker", "38.0.0"), server("hist:8083", "HISTORICAL", "35.0.0")]
    assert cluster_version(rows) == "35.0.0"
    assert cluster_version([server("coord:8081", "COORDINATOR", "36.0.0")]) == "36.0.0"


def test_no_version_anywhere_is_none():
    """Druid 34 has no version column; an empty file, or only brokers and peons, says nothing."""
    assert cluster_version([]) is None
    assert cluster_version([server("coord:8081", "coordinator", None, 1), server("h:8083", "historical", None)]) is None
    assert cluster_version([server("broker:8082", "broker", "38.0.0"), server("p:8100", "peon", "38.0.0")]) is None


def test_a_version_that_does_not_parse_names_its_row():
    rows = historicals("38.0.0", "38.0.0-") + [server("coord:8081", "coordinator", None)]
    with pytest.raises(ValueError, match=r"^row 1: Druid version '38.0.0-' is not a release number"):
        cluster_version(rows)
    with pytest.raises(ValueError, match=r"^row 0: Druid version 38 is not"):
        cluster_version([{"server": "c:8081", "server_type": "coordinator", "version": 38}])
