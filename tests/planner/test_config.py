"""Tests of config.py; every expected number is worked out by hand from the seed and ALGORITHM.md."""

from __future__ import annotations

import json

import pytest

from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.planner.config import (
    DEFAULT_FUNCTION,
    build_config,
    check_override_keys,
    config_from_dict,
    unknown_keys,
)


def test_defaults_and_stage_limits():
    c = build_config({})
    assert c.max_segments_in_node_loading_queue == 500
    assert (c.loading_min_percent, c.decommissioning_min_percent, c.balancing_min_percent) == (70, 10, 20)
    assert c.decommissioning_max_percent == 70 and c.segment_loading_max_seconds_before_alerting == 900
    assert c.num_best_servers_choosing_function == DEFAULT_FUNCTION
    assert (c.balancer_random_seed, c.balancing_iteration_window, c.balancing_failed_iteration_threshold) == (
        0,
        100,
        80,
    )
    expected = {  # stage: (queue type of its loads, counted, cap)
        1: ("loading", "loading", 350),
        2: ("loading", "loading", 350),
        3: ("loading", "loading", 350),
        4: ("loading", "loading", 350),
        5: ("decommissioning", "decommissioning", 50),
        6: ("loading", "all", 400),
        7: ("balancing", "balancing", 100),
        8: ("loading", "all", 500),
        9: ("decommissioning", "decommissioning", 350),
        10: ("balancing", "all", 500),
        11: ("balancing", "all", 500),
    }
    for stage, (qt, counted, cap) in expected.items():
        lim = c.limit(stage)
        assert (lim.queue_type, lim.counted, lim.cap, lim.total_cap) == (qt, counted, cap, 500), stage
    assert c.limit(12).queue_type is None and c.limit(13).queue_type is None
    with pytest.raises(ValueError):
        c.limit(14)


def test_admits_counts_stage_type_and_total():
    c = build_config({})
    assert c.limit(1).admits({"loading": 349})
    assert not c.limit(1).admits({"loading": 350})
    assert not c.limit(1).admits({"loading": 200, "balancing": 300})  # total would be 501
    assert c.limit(5).admits({"loading": 400, "decommissioning": 49})
    assert not c.limit(5).admits({"decommissioning": 50})
    assert c.limit(6).admits({"loading": 100, "balancing": 299})  # all loads after = 400
    assert not c.limit(6).admits({"loading": 100, "balancing": 300})
    assert c.limit(8).admits({"loading": 499}) and not c.limit(8).admits({"balancing": 500})
    assert not c.limit(12).admits({})


def test_zero_means_unlimited():
    c = build_config({"maxSegmentsInNodeLoadingQueue": 0})
    for stage in range(1, 12):
        lim = c.limit(stage)
        assert lim.cap is None and lim.total_cap is None
        assert lim.admits({"loading": 10**6, "decommissioning": 10**6, "balancing": 10**6})


@pytest.mark.parametrize(
    "given, expected",
    [
        ({"loadingMinPercent": 40}, (40, 20, 40)),  # 60 shared 10:20
        ({"balancingMinPercent": 50}, (43.75, 6.25, 50)),  # 50 shared 70:10
        ({"loadingMinPercent": 60, "decommissioningMinPercent": 15}, (60, 15, 25)),
        ({"decommissioningMinPercent": 0, "balancingMinPercent": 0}, (100, 0, 0)),
        (
            {"loadingMinPercent": 33.3, "decommissioningMinPercent": 33.3, "balancingMinPercent": 33.4},
            (33.3, 33.3, 33.4),
        ),
    ],
)
def test_min_percent_derivation(given, expected):
    c = build_config(given)
    assert (c.loading_min_percent, c.decommissioning_min_percent, c.balancing_min_percent) == pytest.approx(expected)


def test_fractional_derivation_floors_only_the_limit():
    # decommissioningMinPercent 30: the other 70 shared 70:20 -> loading 490/9 = 54.44.., balancing 140/9
    c = build_config({"decommissioningMinPercent": 30})
    assert c.loading_min_percent == pytest.approx(54.444444, abs=1e-6)
    assert c.limit(1).cap == 272  # floor(500 * 490/9 / 100) = floor(272.2)
    assert c.limit(7).cap == 77  # floor(500 * 140/9 / 100) = floor(77.7)
    assert c.limit(6).cap == 422  # floor(500 * (490/9 + 30) / 100) = floor(422.2)
    assert c.limit(5).cap == 150
    c = build_config(
        {
            "maxSegmentsInNodeLoadingQueue": 7,
            "loadingMinPercent": 33.3,
            "decommissioningMinPercent": 33.3,
            "balancingMinPercent": 33.4,
        }
    )
    assert c.limit(1).cap == 2 and c.limit(6).cap == 4 and c.limit(7).cap == 2  # 2.331, 4.662, 2.338


@pytest.mark.parametrize(
    "given, needle",
    [
        ({"loadingMinPercent": 70, "decommissioningMinPercent": 10, "balancingMinPercent": 30}, "must be 100"),
        ({"loadingMinPercent": 80, "balancingMinPercent": 30}, "more than 100"),
        ({"loadingMinPercent": 120}, "between 0 and 100"),
        ({"balancingMinPercent": -1}, "between 0 and 100"),
        ({"loadingMinPercent": "70"}, "finite number"),
        ({"maxSegmentsInNodeLoadingQueue": -1}, "must be >= 0, got -1"),
        ({"maxSegmentsInNodeLoadingQueue": "500"}, "must be an integer"),
        ({"maxSegmentsInNodeLoadingQueue": True}, "must be an integer"),
        ({"maxSegmentsInNodeLoadingQueue": 5.0}, "must be an integer"),
        ({"numBestServersChoosingFunctionDefaultLogBase": 1}, "must be > 1, got 1"),
        ({"numBestServersChoosingFunctionDefaultLogBase": 0.5}, "must be > 1, got 0.5"),  # B would be t whatever n
        ({"numBestServersChoosingFunctionDefaultLogBase": 0}, "must be > 1, got 0"),
        ({"balancingFailedIterationThreshold": 101}, "<= 100"),
        ({"balancingIterationWindow": 0}, ">= 1"),
        ({"decommissioningNodes": [1, 2]}, "list of server names"),
        ({"topBReuse": "no"}, "must be true or false, got 'no'"),
        (
            {"balancingMoveTrigger": "outsideTopb"},
            "must be one of 'betterServerInTopB', 'outsideTopB', got 'outsideTopb'",
        ),
        ({"coordinatorPeriodMillis": 30000, "druid.coordinator.period": "PT60S"}, "disagrees"),
        ({"druid.coordinator.period": "P1M"}, "fixed ISO-8601 period"),
        (
            {"numBestServersChoosingFunction": "function (n, t) { return n + x; }"},
            '"function (n, t) { return n + x; }" is not accepted: f(1, 1) threw ReferenceError: x is not defined',
        ),
        ({"numBestServersChoosingFunction": "function (n, t) { return n +; }"}, "SyntaxError: Unexpected token ';' at"),
        (
            {"numBestServersChoosingFunction": "function (n, t) { return Math.random(); }"},
            "Math.random is not available",
        ),
        ({"numBestServersChoosingFunction": "function (n, t) { if (n > 0) return 'many'; }"}, "returned a string"),
        ({"numBestServersChoosingFunction": 5}, "must be a string"),
    ],
)
def test_refused(given, needle):
    with pytest.raises(SnapshotError) as info:
        build_config(given)
    assert needle in str(info.value)
    assert info.value.file == "coordinator_config.json" and info.value.row is None


def test_an_unknown_key_of_the_snapshot_is_a_warning_and_of_an_override_an_error(caplog):
    """Druid ignores properties it does not know (CoordinatorDynamicConfigTest
    .testDeserializationWithUnknownProperties): a captured config of a newer release plans, the key
    listed with its closest known key; the user's own override stays strict."""
    with caplog.at_level("WARNING", logger="segment_balancer.planner.config"):
        c = build_config({"maxSegmentToMove": 5, "somethingElse": None, "maxSegmentsInNodeLoadingQueue": 7})
    assert c.max_segments_in_node_loading_queue == 7
    assert [(e["key"], e["value"]) for e in unknown_keys(c)] == [("maxSegmentToMove", 5), ("somethingElse", None)]
    assert unknown_keys(c)[0]["note"].endswith("closest known key: 'maxSegmentsToMove'")
    assert "closest" not in unknown_keys(c)[1]["note"]
    assert "coordinator_config.json: key 'maxSegmentToMove'" in caplog.text
    # a bad value of an unknown key is nobody's business: Druid does not read it either
    assert unknown_keys(build_config({"newFeatureLimit": "not a number"}))[0]["value"] == "not a number"
    with pytest.raises(SnapshotError) as info:
        build_config({}, {"maxSegmentToMove": 5})
    assert str(info.value) == "config overrides: unknown key 'maxSegmentToMove' (did you mean 'maxSegmentsToMove'?)"


def test_an_override_is_refused_where_it_was_given():
    with pytest.raises(SnapshotError) as info:
        check_override_keys({"maxSegmentsInNodeLoadingQueue": 3, "balancingMinCostReductionPct": 5}, "--config my.json")
    assert str(info.value) == (
        "--config my.json: unknown key 'balancingMinCostReductionPct' "
        "(did you mean 'balancingMinCostReductionPercent'?)"
    )
    with pytest.raises(SnapshotError, match="must be a JSON object, got an array"):
        check_override_keys([1], "--config my.json")
    check_override_keys({"replicationThrottleLimit": 3}, "--config my.json")  # Druid's, retired: fine
    check_override_keys(None, "--config my.json")


def test_druid_nulls_and_comma_separated_lists_are_accepted():
    """Druid's parseJsonStringOrArray takes "a, b" for a list; a null value means the default."""
    c = build_config(
        {
            "decommissioningNodes": "h1, h2,,h1",
            "killDataSourceWhitelist": "a,b",
            "maxSegmentsInNodeLoadingQueue": None,
            "balancerRandomSeed": None,
        }
    )
    assert c.decommissioning_nodes == ("h1", "h2") and c.max_segments_in_node_loading_queue == 500
    assert c.balancer_random_seed == 0


def test_overrides_win_and_are_named_in_errors():
    c = build_config(
        {"maxSegmentsInNodeLoadingQueue": 100, "balancerRandomSeed": 3}, {"maxSegmentsInNodeLoadingQueue": 10}
    )
    assert c.max_segments_in_node_loading_queue == 10 and c.balancer_random_seed == 3
    assert c.limit(1).cap == 7
    with pytest.raises(SnapshotError) as info:
        build_config({}, {"loadingMinPercent": 101})
    assert info.value.file == "config overrides"
    with pytest.raises(SnapshotError) as info:
        build_config({}, {"bogus": 1})
    assert str(info.value).startswith("config overrides: unknown key 'bogus'")


def test_legacy_and_retired_keys():
    c = build_config(
        {
            "decommissioningMaxPercentOfMaxSegmentsToMove": 40,
            "replicantLifetime": 15,
            "coordinatorPeriodMillis": 30000,
            "maxSegmentsToMove": 100,
            "replicationThrottleLimit": 10,
            "emitBalancingStats": False,
            "mergeBytesLimit": 1,
        }
    )
    assert c.decommissioning_max_percent == 40
    assert c.segment_loading_max_seconds_before_alerting == 450  # 15 runs x 30 s
    assert c.segment_loading_max_ms == 450_000
    ignored = {e["key"]: e for e in c.ignored}
    assert set(ignored) == {
        "decommissioningMaxPercentOfMaxSegmentsToMove",
        "replicantLifetime",
        "maxSegmentsToMove",
        "replicationThrottleLimit",
        "emitBalancingStats",
        "mergeBytesLimit",
    }
    assert "mapped to decommissioningMaxPercent" in ignored["decommissioningMaxPercentOfMaxSegmentsToMove"]["note"]
    assert "mapped to segmentLoadingMaxSecondsBeforeAlerting" in ignored["replicantLifetime"]["note"]
    assert ignored["maxSegmentsToMove"]["value"] == 100
    assert set(c.derived) == {"decommissioningMaxPercent", "segmentLoadingMaxSecondsBeforeAlerting"}

    c = build_config(
        {
            "decommissioningMaxPercent": 20,
            "decommissioningMaxPercentOfMaxSegmentsToMove": 40,
            "segmentLoadingMaxSecondsBeforeAlerting": 60,
            "replicantLifetime": 15,
        }
    )
    assert c.decommissioning_max_percent == 20 and c.segment_loading_max_seconds_before_alerting == 60
    assert all("superseded" in e["note"] for e in c.ignored)
    assert build_config({"replicantLifetime": 15}).segment_loading_max_seconds_before_alerting == 900
    assert (
        build_config(
            {"replicantLifetime": 15, "druid.coordinator.period": "PT2M"}
        ).segment_loading_max_seconds_before_alerting
        == 1800
    )


def test_decommissioning_nodes_list_or_druid_string():
    assert build_config({"decommissioningNodes": ["h1:8083", "h2:8083"]}).decommissioning_nodes == (
        "h1:8083",
        "h2:8083",
    )
    assert build_config({"decommissioningNodes": "h1:8083, h2:8083,h1:8083"}).decommissioning_nodes == (
        "h1:8083",
        "h2:8083",
    )
    assert build_config({"decommissioningNodes": None}).decommissioning_nodes == ()


@pytest.mark.parametrize(
    "n, t, b",
    [
        (1, 1, 1),
        (4, 1, 1),
        (5, 1, 2),
        (24, 1, 2),
        (25, 1, 3),
        (124, 2, 4),
        (125, 2, 5),
        (126, 1, 4),
        (1, 2, 1),  # target above tier size: n wins
        (0, 1, 0),
        (3, 3, 3),
    ],
)
def test_num_best_servers_default(n, t, b):
    assert build_config({}).num_best_servers(n, t) == b


def test_num_best_servers_custom_function_and_base():
    c = build_config({"numBestServersChoosingFunctionDefaultLogBase": 10})
    assert c.num_best_servers(9, 1) == 1 and c.num_best_servers(10, 1) == 2 and c.num_best_servers(100, 1) == 3
    cases = {
        "function (n, t) { return n; }": (7, 2, 7),
        "function (n, t) { return 0 / 0; }": (7, 2, 2),  # NaN -> target
        "function (n, t) { return 1 / 0; }": (7, 2, 7),  # +Infinity -> all servers
        "function (n, t) { return -1 / 0; }": (7, 2, 2),
        "function (n, t) { return t + 0.9; }": (7, 2, 2),  # floored
        "function (n, t) { return -5; }": (7, 2, 2),
        "function (n, t) { return t + numBestServersChoosingFunctionDefaultLogBase; }": (30, 1, 6),
        "function (n, t) { return n > 10 ? t * 2 : t; }": (11, 3, 6),
        "function (n, t) { var b = t + 1; if (n > 10) { b = Math.max(b, 3); } return b; }": (11, 1, 3),
        "function (n, t) { return n > 10; }": (11, 0, 1),  # a boolean counts as Number(b)
    }
    for text, (n, t, b) in cases.items():
        assert build_config({"numBestServersChoosingFunction": text}).num_best_servers(n, t) == b, text


def test_as_dict_uses_druid_keys():
    d = build_config({"loadingMinPercent": 40, "maxSegmentsToMove": 5}).as_dict()
    assert d["loadingMinPercent"] == 40 and d["decommissioningMinPercent"] == 20 and d["balancingMinPercent"] == 40
    assert d["maxSegmentsInNodeLoadingQueue"] == 500 and d["coordinatorPeriodMillis"] == 60000
    assert d["ignored"][0]["key"] == "maxSegmentsToMove"
    assert set(d["derived"]) == {"decommissioningMinPercent", "balancingMinPercent"}


def test_balancing_move_trigger_defaults_to_the_seeds_alternative_design():
    assert build_config({}).as_dict()["balancingMoveTrigger"] == "betterServerInTopB"
    assert build_config({}, {"balancingMoveTrigger": "outsideTopB"}).as_dict()["balancingMoveTrigger"] == "outsideTopB"


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "maxSegmentsInNodeLoadingQueue": 7,
            "loadingMinPercent": 65,
            "decommissioningMinPercent": 15,
            "balancingMinPercent": 20,
            "decommissioningMaxPercent": 55,
            "numBestServersChoosingFunction": "function (n, t) { return t + 1; }",
            "decommissioningNodes": ["h2", "h1"],
            "balancerRandomSeed": 42,
            "balancingMoveTrigger": "outsideTopB",
            "topBReuse": False,
            "coordinatorPeriodMillis": 30_000,
            "segmentLoadingMaxSecondsBeforeAlerting": 60,
        },
        {"maxSegmentsInNodeLoadingQueue": 0, "numBestServersChoosingFunctionDefaultLogBase": 2.5},
        {"maxSegmentsInNodeLoadingQueue": 10, "loadingMinPercent": 60},  # 13.33… and 26.66… derived
        {"loadingMinPercent": 50, "balancingMinPercent": 25},
    ],
)
def test_the_config_kept_in_meta_json_reads_back_as_the_same_config(values):
    """A run keeps its effective config in ``meta.json`` (``as_dict``); the stages read it back
    typed (``config_from_dict``): every value, every stage's limit and ``B`` are the same."""
    first = build_config(values)
    again = config_from_dict(json.loads(json.dumps(first.as_dict())))
    keep = lambda d: {k: v for k, v in d.items() if k not in ("ignored", "derived")}  # noqa: E731
    assert keep(again.as_dict()) == keep(first.as_dict())
    assert [again.limit(s) for s in range(1, 14)] == [first.limit(s) for s in range(1, 14)]
    assert all(again.num_best_servers(n, t) == first.num_best_servers(n, t) for n in range(1, 40) for t in range(1, 4))


def test_balancing_min_cost_reduction_percent_defaults_to_0_and_is_a_number_in_0_to_100():
    assert build_config({}).balancing_min_cost_reduction_percent == 0.0
    assert build_config({"balancingMinCostReductionPercent": 2.5}).balancing_min_cost_reduction_percent == 2.5
    assert build_config({}).as_dict()["balancingMinCostReductionPercent"] == 0.0
    for bad in (-1, 100, 250, "5", True):
        with pytest.raises(SnapshotError) as err:
            build_config({"balancingMinCostReductionPercent": bad})
        assert "balancingMinCostReductionPercent" in str(err.value) and repr(bad) in str(err.value)


# ---- balancerStrategy and the avgShedder thresholds (issue 28) ----------------------------------------


def test_avg_shedder_keys_default_to_the_cost_strategy_and_algorithm_thresholds():
    cfg = build_config({})
    assert (
        cfg.balancer_strategy,
        cfg.avg_shedder_low_threshold_percent,
        cfg.avg_shedder_high_threshold_percent,
        cfg.avg_shedder_hit_count_low_threshold,
        cfg.avg_shedder_hit_count_high_threshold,
    ) == ("cost", 15, 40, 8, 2)
    d = build_config(
        {},
        {
            "balancerStrategy": "avgShedder",
            "avgShedderLowThresholdPercent": 10,
            "avgShedderHighThresholdPercent": 10,
            "avgShedderHitCountLowThreshold": 1,
        },
    ).as_dict()
    assert (
        d["balancerStrategy"],
        d["avgShedderLowThresholdPercent"],
        d["avgShedderHighThresholdPercent"],
        d["avgShedderHitCountLowThreshold"],
        d["avgShedderHitCountHighThreshold"],
    ) == ("avgShedder", 10, 10, 1, 2)
    assert build_config({}, {"avgShedderHighThresholdPercent": 100}).avg_shedder_high_threshold_percent == 100


@pytest.mark.parametrize(
    "values, message",
    [
        (
            {"balancerStrategy": "diskNormalized"},
            "balancerStrategy must be one of 'cost', 'avgShedder', got 'diskNormalized'",
        ),
        ({"avgShedderLowThresholdPercent": 0}, "avgShedderLowThresholdPercent must be above 0 and at most 100, got 0"),
        (
            {"avgShedderHighThresholdPercent": 100.5},
            "avgShedderHighThresholdPercent must be above 0 and at most 100, got 100.5",
        ),
        ({"avgShedderLowThresholdPercent": "15"}, "avgShedderLowThresholdPercent must be a finite number, got '15'"),
        (
            {"avgShedderLowThresholdPercent": 30, "avgShedderHighThresholdPercent": 20},
            "avgShedderHighThresholdPercent must be >= avgShedderLowThresholdPercent (30), got 20",
        ),
        (
            {"avgShedderHighThresholdPercent": 10},
            "avgShedderHighThresholdPercent must be >= avgShedderLowThresholdPercent (15), got 10",
        ),
        ({"avgShedderHitCountLowThreshold": 0}, "avgShedderHitCountLowThreshold must be >= 1, got 0"),
        ({"avgShedderHitCountHighThreshold": 1.5}, "avgShedderHitCountHighThreshold must be an integer, got 1.5"),
    ],
)
def test_avg_shedder_keys_out_of_range_are_refused_with_key_and_value(values, message):
    with pytest.raises(SnapshotError) as info:
        build_config({}, values)
    assert info.value.problem == message
