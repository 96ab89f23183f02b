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
