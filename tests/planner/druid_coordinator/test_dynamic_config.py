"""The ``druid`` coordinator's dynamic config: Druid 35.0.0's keys with Druid's defaults
(``CoordinatorDynamicConfig``: constructor and ``Builder.build``), checked against their one
declaration (``config_keys.DRUID_KEYS``)."""

from __future__ import annotations

import pytest

from segment_balancer.planner.config import build_config
from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config


def test_druid_defaults():
    config = druid_config({})
    assert config["smartSegmentLoading"] is True
    assert config["maxSegmentsToMove"] == 100
    assert config["replicationThrottleLimit"] == 500
    assert config["maxSegmentsInNodeLoadingQueue"] == 500
    assert config["useRoundRobinSegmentAssignment"] is True
    assert config["millisToWaitBeforeDeleting"] == 900_000
    assert config["cloneServers"] == {} and config["turboLoadingNodes"] == [] and config["decommissioningNodes"] == []
    assert config["druid.coordinator.balancer.strategy"] == "cost"
    assert config.period_ms == 60_000
    # Druid's default threads: half the Coordinator's processors, at least 1 (8 assumed here).
    assert config.balancer_compute_threads == 4
    assert druid_config({"coordinatorCores": 1}).balancer_compute_threads == 1
    assert druid_config({"balancerComputeThreads": 0}).balancer_compute_threads == 1  # Druid clamps to 1


def test_a_captured_config_is_read_as_druid_writes_it():
    config = druid_config(
        {
            "decommissioningNodes": "h1:8083, h2:8083",  # Druid's comma-separated form
            "smartSegmentLoading": "false",  # Jackson reads a string boolean
            "cloneServers": {"h3:8083": "h1:8083"},
            "druid.coordinator.period": "PT30S",
            "killTaskSlotRatio": 0.5,  # no effect on placement: left alone
            "numBestServersChoosingFunctionDefaultLogBase": 5,  # a key of the #7458 planner only
        }
    )
    assert config["decommissioningNodes"] == ["h1:8083", "h2:8083"]
    assert config["smartSegmentLoading"] is False
    assert config["cloneServers"] == {"h3:8083": "h1:8083"}
    assert config.period_ms == 30_000


@pytest.mark.parametrize(
    "values, message",
    [
        ({"maxSegmentsToMove": -1}, "maxSegmentsToMove: -1 must be >= 0"),
        ({"smartSegmentLoading": 1}, "smartSegmentLoading: expected true or false, got 1"),
        ({"druid.coordinator.balancer.strategy": "magic"}, "is not one of cost, cachingCost, diskNormalized, random"),
        ({"cloneServers": ["h1"]}, "cloneServers: expected an object of strings"),
        ({"replicationThrottleLimit": 2.5}, "replicationThrottleLimit: expected an integer, got 2.5"),
    ],
)
def test_bad_values_are_refused_naming_key_value_and_expectation(values, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        druid_config(values)


def test_the_issue7458_planner_accepts_the_druid_keys_and_lists_them_ignored():
    config = build_config({"coordinatorCores": 16, "druid.coordinator.balancer.strategy": "diskNormalized"})
    ignored = {i["key"]: i["note"] for i in config.as_dict()["ignored"]}
    assert ignored["coordinatorCores"] == "read by the druid coordinator only"
    assert ignored["druid.coordinator.balancer.strategy"] == "read by the druid coordinator only"


@pytest.mark.parametrize(
    "given, cluster, expected",
    [
        ({}, None, ("38.0.0", "default", None)),
        ({}, "37.0.0", ("35.0.0", "snapshot", None)),  # 36 and 37 place segments as 35 does
        ({}, "38.0.0-SNAPSHOT", ("38.0.0", "snapshot", None)),
        ({}, "39.0.0", ("38.0.0", "snapshot", None)),
        ({"druidVersion": "35.0.1"}, "38.0.0", ("35.0.0", "config", None)),
        ({}, "34.0.0", ("35.0.0", "snapshot", "older than any release reproduced")),
        ({}, "2024.03.0-iap", ("38.0.0", "default", "calendar version")),
    ],
)
def test_the_release_reproduced(given, cluster, expected):
    """``druidVersion`` given wins; else the snapshot's cluster's version names the release that
    places segments as it does; else the newest. A vendor's calendar version tells no release."""
    config = druid_config(given, cluster)
    note = config.release_note
    assert (config.release, config.release_from) == expected[:2]
    assert (note is None) if expected[2] is None else (expected[2] in note)


@pytest.mark.parametrize("version", ["latest", "2024.03.0-iap"])
def test_a_druid_version_that_names_no_release_is_refused(version):
    with pytest.raises(ValueError, match="druidVersion"):
        druid_config({"druidVersion": version})


def test_historical_tier_aliases_are_read_by_druid_38_only():
    """Druid 38.0.0 checks the aliases (no alias a tier, no tier under two aliases); 35.0.0 does not
    know the key and ignores it."""
    aliases = {"hot": ["hot_blue", "hot_green"]}
    assert druid_config({"historicalTierAliases": aliases}).aliases == {"hot": ("hot_blue", "hot_green")}
    assert druid_config({"historicalTierAliases": aliases, "druidVersion": "35.0.0"}).aliases == {}
    with pytest.raises(ValueError, match="cannot also be a physical tier"):
        druid_config({"historicalTierAliases": {"hot": ["hot", "warm"]}})
    with pytest.raises(ValueError, match="cannot belong to both"):
        druid_config({"historicalTierAliases": {"hot": ["a"], "warm": ["a"]}})
