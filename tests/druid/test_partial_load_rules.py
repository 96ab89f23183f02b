"""Druid 38.0.0's partial-load rules (``loadPartialForever``, ``loadPartialByInterval``,
``loadPartialByPeriod``): parsing (``RuleSpec``), ``applies_to_segment``, ``fallThrough``/``fullLoad``
and which ``SegmentActionHandler`` method a rule's ``run`` calls (rules.py).

Ported from Druid 38.0.0 (commit ``aedca20599``) ``rules/PartialLoadRuleTest`` with its values; each
test names its Druid test method. Not ported, having nothing to port: JSON round trips of the Java
rules (``testPeriodSerde``, ``testIntervalSerde``, ``testForeverSerde``) and their ``equals``
contracts (``testPeriodEquals``, ``testIntervalEquals``, ``testForeverEquals``). What a handler then
does with a partial load (``StrategicSegmentAssigner.replicateSegmentPartially``) is the
coordinators' concern, not tested here.
"""

from __future__ import annotations

import numpy as np
import pytest

from segment_balancer.druid.partial_load import CannotMatch, ExactProjectionMatcher, SegmentShape, UnknownMatcher
from segment_balancer.druid.rules import Rule, first_applying_rule, parse_instant_ms, parse_interval, rule_index_for
from segment_balancer.druid.snapshot.models import RuleSpec

NOW = parse_instant_ms("2024-06-01T00:00:00")
IN_WINDOW = parse_interval("2024-05-15/2024-05-20")
OUT_OF_WINDOW = parse_interval("2020-01-01/2020-02-01")
LOAD_SPEC = {"type": "local", "path": "/var/druid/segments/foo"}


def rule(**raw) -> Rule:
    return RuleSpec.model_validate(raw).to_rule()


def exact(*names: str) -> dict:
    return {"type": "exactProjection", "names": list(names)}


def period_rule(matcher: dict, on_cannot_match: str | None = None, replicas: int = 1) -> Rule:
    """``new PeriodPartialLoadRule(P30D, includeFuture false, {_default_tier: replicas}, null, matcher, …)``."""
    raw = {
        "type": "loadPartialByPeriod",
        "period": "P30D",
        "includeFuture": False,
        "tieredReplicants": {"_default_tier": replicas},
        "matcher": matcher,
    }
    if on_cannot_match is not None:
        raw["onCannotMatch"] = on_cannot_match
    return rule(**raw)


def forever(**raw) -> Rule:
    """``new ForeverPartialLoadRule({_default_tier: 1}, null, exact("a"), …)``."""
    return rule(type="loadPartialForever", tieredReplicants={"_default_tier": 1}, matcher=exact("a"), **raw)


def shape(projections) -> SegmentShape:
    """``segmentWithProjections`` (``NumberedShardSpec(0, 0)``)."""
    return SegmentShape(projections=projections, load_spec=LOAD_SPEC)


def applies(r: Rule, interval, projections) -> bool:
    return r.applies_to_segment(*interval, NOW, shape(projections))


def test_outside_window_is_false_whatever_the_matcher():
    """PartialLoadRuleTest.testAppliesToOutsideWindowReturnsFalseRegardlessOfMatcher."""
    assert not applies(period_rule(exact("a")), OUT_OF_WINDOW, ["a", "b"])


def test_window_and_matcher_applies():
    """PartialLoadRuleTest.testAppliesToWindowMatchAndMatcherProducesResultReturnsTrue."""
    assert applies(period_rule(exact("a")), IN_WINDOW, ["a", "b"])


def test_matcher_does_not_apply():
    """PartialLoadRuleTest: testAppliesToMatcherDoesNotApplyFallThroughReturnsFalse,
    testAppliesToMatcherDoesNotApplyFullLoadIsDefault, testAppliesToProjectionAgnosticSegmentFallThrough,
    testAppliesToProjectionAgnosticSegmentFullLoad."""
    assert not applies(period_rule(exact("nonexistent"), "fallThrough"), IN_WINDOW, ["a", "b"])
    assert applies(period_rule(exact("nonexistent")), IN_WINDOW, ["a", "b"])
    assert not applies(period_rule(exact("a"), "fallThrough"), IN_WINDOW, None)
    assert applies(period_rule(exact("a")), IN_WINDOW, None)


def test_interval_overload_ignores_matcher():
    """PartialLoadRuleTest.testIntervalOverloadIgnoresMatcher: ``applies_to`` (and its mask) is the
    time window alone."""
    r = period_rule(exact("nonexistent"))
    assert r.applies_to(*IN_WINDOW, NOW)
    assert not r.applies_to(*OUT_OF_WINDOW, NOW)
    mask = r.applies_mask(np.array([IN_WINDOW[0], OUT_OF_WINDOW[0]]), np.array([IN_WINDOW[1], OUT_OF_WINDOW[1]]), NOW)
    assert mask.tolist() == [True, False]
    assert not r.is_interval_based
    assert rule(type="loadByPeriod", period="P30D").is_interval_based


def test_cascade_falls_through_to_full_load():
    """PartialLoadRuleTest.testCascadeFallThroughToFullLoad, through ``first_applying_rule`` and
    ``rule_index_for``."""
    partial = period_rule(exact("a"), "fallThrough")
    full = rule(type="loadForever", tieredReplicants={"_default_tier": 1})
    rules = {"test": [partial], "_default": [full]}
    assert first_applying_rule(rules, "test", *IN_WINDOW, NOW, shape(None)) is full
    assert first_applying_rule(rules, "test", *IN_WINDOW, NOW, shape(["a", "b"])) is partial
    shapes = [shape(None), shape(["a", "b"]), shape(["b"])]
    index = rule_index_for(
        [partial, full],
        np.array([IN_WINDOW[0]] * 3 + [OUT_OF_WINDOW[0]]),
        np.array([IN_WINDOW[1]] * 3 + [OUT_OF_WINDOW[1]]),
        NOW,
        shape_of=lambda i: shapes[i],
    )
    assert index.tolist() == [1, 0, 1, 1]


def test_fall_through_needs_the_shape():
    """A ``fallThrough`` rule cannot decide without the segment's shape (a ``fullLoad`` one can: the
    matcher does not change its answer); one whose window misses the segment needs none."""
    partial = period_rule(exact("a"), "fallThrough")
    full_load = period_rule(exact("a"))
    rules = {"test": [partial], "_default": []}
    with pytest.raises(ValueError, match="needs the segment's projections and clusterGroups"):
        first_applying_rule(rules, "test", *IN_WINDOW, NOW)
    with pytest.raises(ValueError, match="needs the segment's projections and clusterGroups"):
        rule_index_for([partial], np.array([IN_WINDOW[0]]), np.array([IN_WINDOW[1]]), NOW)
    assert first_applying_rule(rules, "test", *OUT_OF_WINDOW, NOW) is None
    assert first_applying_rule({"_default": [full_load]}, "x", *IN_WINDOW, NOW) is full_load
    assert rule_index_for([full_load], np.array([IN_WINDOW[0]]), np.array([IN_WINDOW[1]]), NOW).tolist() == [0]


def test_constructor_rejects_null_matcher():
    """PartialLoadRuleTest.testConstructorRejectsNullMatcher."""
    for raw in (
        {"type": "loadPartialByPeriod", "period": "P1D", "includeFuture": False},
        {"type": "loadPartialByPeriod", "period": "P1D", "matcher": None},
    ):
        with pytest.raises(ValueError, match="needs a matcher"):
            rule(**raw)


def test_period_defaults():
    """PartialLoadRuleTest.testPeriodSerdeDefaults."""
    r = rule(type="loadPartialByPeriod", period="P30D", matcher=exact("a"))
    assert r.on_cannot_match is CannotMatch.FULL_LOAD
    assert r.include_future is True
    assert r.tiered_replicants == {"_default_tier": 2}
    assert r.kind == "load" and r.matcher == ExactProjectionMatcher(("a",))


def test_unknown_on_cannot_match_is_full_load():
    """PartialLoadRuleTest.testUnknownOnCannotMatchValueDeserializesToFullLoadDefault."""
    r = rule(type="loadPartialByPeriod", period="P30D", matcher=exact("a"), onCannotMatch="SOME_FUTURE_BEHAVIOR")
    assert r.on_cannot_match is CannotMatch.FULL_LOAD


def test_interval_and_forever_rules_parse():
    """PartialLoadRuleTest: testIntervalSerde, testForeverSerde (the fields Druid reads)."""
    r = rule(
        type="loadPartialByInterval",
        interval="2024-01-01/2024-02-01",
        tieredReplicants={"_default_tier": 1},
        matcher={"type": "globProjection", "patterns": ["user_*"]},
        onCannotMatch="fallThrough",
    )
    assert (r.interval_start_ms, r.interval_end_ms) == parse_interval("2024-01-01/2024-02-01")
    assert r.on_cannot_match is CannotMatch.FALL_THROUGH
    assert r.tiered_replicants == {"_default_tier": 1}
    f = forever(onCannotMatch="fullLoad")
    assert f.on_cannot_match is CannotMatch.FULL_LOAD and f.kind == "load"
    none = rule(type="loadPartialForever", useDefaultTierForNull=False, matcher=exact("a"))
    assert none.tiered_replicants == {}


def test_forever_always_applies_to_time_window():
    """PartialLoadRuleTest.testForeverAlwaysAppliesToTimeWindow."""
    r = forever(onCannotMatch="fullLoad")
    assert applies(r, OUT_OF_WINDOW, None)


def test_interval_rule_window():
    """``loadPartialByInterval`` takes ``loadByInterval``'s overlap test (``Rules.eligibleForLoad``)."""
    r = rule(type="loadPartialByInterval", interval="2024-05-19/2024-06-01", matcher=exact("a"))
    assert applies(r, IN_WINDOW, ["a"])
    assert not applies(r, parse_interval("2024-06-01/2024-06-02"), ["a"])


def test_run_routes_to_the_partial_handler():
    """PartialLoadRuleTest.testRunWithMatchRoutesToReplicateSegmentPartially."""
    r = period_rule(exact("a"), replicas=2)
    s = shape(["a", "b"])
    assert r.handler_method(s) == "replicateSegmentPartially"
    assert r.tiered_replicants == {"_default_tier": 2}
    match = r.partial_match(s)
    assert match.wrapped_load_spec["type"] == "partialProjection"
    assert match.wrapped_load_spec["projections"] == ["a"]
    assert match.fingerprint == "v1:ea6fde9e840d240a"  # Guava's sha256 of "a" (see test_partial_load.py)


def test_run_falls_back_to_full_load():
    """PartialLoadRuleTest.testRunWithFullLoadFallbackRoutesToReplicateSegment."""
    r = period_rule(exact("nonexistent"), "fullLoad", replicas=2)
    assert r.handler_method(shape(["a", "b"])) == "replicateSegment"
    assert r.partial_match(shape(["a", "b"])) is None


def test_handler_of_other_rules():
    """``LoadRule.run`` replicates, ``DropRule.run`` deletes, broadcast rules broadcast; no shape needed."""
    assert rule(type="loadForever").handler_method() == "replicateSegment"
    assert rule(type="dropForever").handler_method() == "deleteSegment"
    assert rule(type="broadcastForever").handler_method() == "broadcastSegment"
    with pytest.raises(ValueError):
        period_rule(exact("a")).handler_method()


def test_unknown_matcher_decides_by_on_cannot_match():
    """An unknown matcher type never matches: ``onCannotMatch`` decides (PartialLoadMatcherTest's
    fallback, in a rule)."""
    future = {"type": "someFutureMatcherType"}
    assert isinstance(period_rule(future).matcher, UnknownMatcher)
    assert applies(period_rule(future), IN_WINDOW, ["a"])
    assert not applies(period_rule(future, "fallThrough"), IN_WINDOW, ["a"])


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"type": "loadPartialForever", "matcher": {"type": "exactProjection", "names": []}}, "names must not be null"),
        ({"type": "loadPartialForever", "matcher": {"type": "globProjection", "patterns": ["x\\"]}}, "backslash"),
        ({"type": "loadPartialForever", "matcher": "exactProjection"}, "matcher must be an object"),
        ({"type": "loadPartialForever", "matcher": exact("a"), "onCannotMatch": {"x": 1}}, "onCannotMatch must be"),
        ({"type": "loadPartialForever", "matcher": exact("a"), "tier": "t", "replicants": 1}, "not allowed"),
        ({"type": "loadPartialForever", "matcher": exact("a"), "period": "P1D"}, "not allowed"),
        ({"type": "loadPartialByPeriod", "matcher": exact("a")}, "needs a period"),
        ({"type": "loadPartialByInterval", "matcher": exact("a")}, "needs an interval"),
        ({"type": "loadForever", "matcher": exact("a")}, "not allowed"),
        ({"type": "loadPartialForever", "matcher": exact("a"), "tieredReplicants": {"t": -1}}, "must be >= 0"),
    ],
)
def test_rule_refusals(raw, message):
    """What Druid refuses in a partial-load rule, and fields no such rule has."""
    with pytest.raises(ValueError, match=message):
        rule(**raw)


def test_loader_names_the_rule(tmp_path):
    """``rules.json`` with a partial-load rule loads; a bad matcher is a SnapshotError naming the rule."""
    import json

    from segment_balancer.druid.snapshot.errors import SnapshotError
    from segment_balancer.druid.snapshot.loader import load_rules

    good = {"_default": [{"type": "loadPartialForever", "matcher": exact("a"), "onCannotMatch": "fallThrough"}]}
    (tmp_path / "rules.json").write_text(json.dumps(good))
    loaded = load_rules(tmp_path)
    assert loaded["_default"][0].on_cannot_match is CannotMatch.FALL_THROUGH
    bad = {"_default": [{"type": "loadPartialForever", "matcher": {"type": "globClusterGroup", "patterns": [{}]}}]}
    (tmp_path / "rules.json").write_text(json.dumps(bad))
    with pytest.raises(SnapshotError, match=r"rule \[0\] \(0-based\) \(loadPartialForever\): matcher: patterns\[0\]"):
        load_rules(tmp_path)
