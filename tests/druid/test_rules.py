"""Tests of rules.py. Rule cases are ported from Druid's rule tests (PeriodLoadRuleTest,
PeriodDropRuleTest, PeriodDropBeforeRuleTest, IntervalLoadRuleTest); dates are worked out by hand and
cross-checked with the standard library's calendar where it reaches."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime

import numpy as np
import pytest

from segment_balancer.druid.rules import (
    Period,
    Rule,
    first_applying_rule,
    format_instant_ms,
    parse_instant_ms,
    parse_interval,
    rule_index_for,
    rules_for,
)
from segment_balancer.druid.snapshot.models import RuleSpec

HOUR, DAY = 3_600_000, 86_400_000


def ms(text: str) -> int:
    return parse_instant_ms(text)


def utc(*args: int) -> int:
    return calendar.timegm(datetime(*args, tzinfo=UTC).timetuple()) * 1000


def rule(**raw) -> Rule:
    return RuleSpec.model_validate(raw).to_rule()


def minus(period: str, t: int) -> int:
    return Period.parse(period).subtract_from(t)


def plus(period: str, t: int) -> int:
    return Period.parse(period).add_to(t)


NOW = utc(2012, 12, 31, 1)  # DateTimes.of("2012-12-31T01:00:00") in Druid's tests


# --------------------------------------------------------------------------- instants, periods


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2012-12-31T01:00:00", utc(2012, 12, 31, 1)),
        ("2012-12-31T01:00:00.000Z", utc(2012, 12, 31, 1)),
        ("2012-12-31T01", utc(2012, 12, 31, 1)),
        ("2013-01-01", utc(2013, 1, 1)),
        ("2013", utc(2013, 1, 1)),
        ("2013-02", utc(2013, 2, 1)),
        ("2012-12-31T01:00:00.123456Z", utc(2012, 12, 31, 1) + 123),
        ("2012-12-31T03:30:00+02:30", utc(2012, 12, 31, 1)),
        ("2012-12-30T20:00:00-05:00", utc(2012, 12, 31, 1)),
        ("1970-01-01T00:00:00Z", 0),
        ("0", -62_167_219_200_000),  # 0000-01-01: 719528 days before the epoch
        ("3000", utc(3000, 1, 1)),
    ],
)
def test_parse_instant(text, expected):
    assert parse_instant_ms(text) == expected


@pytest.mark.parametrize("text", ["2012-13-01", "2013-02-29", "2012-12-31T24:00", "yesterday", "2012/01/01", ""])
def test_parse_instant_rejects(text):
    with pytest.raises(ValueError):
        parse_instant_ms(text)


def test_format_instant():
    assert format_instant_ms(utc(2012, 12, 31, 1) + 5) == "2012-12-31T01:00:00.005Z"
    assert format_instant_ms(-62_167_219_200_000) == "0000-01-01T00:00:00.000Z"


def test_offset_with_seconds_as_in_druid_interval_test():
    start, end = parse_interval("0000-01-01T00:00:00.000-05:50:36/3000-01-01T00:00:00.000-06:00")
    assert start == -62_167_219_200_000 + (5 * 3600 + 50 * 60 + 36) * 1000
    assert end == utc(3000, 1, 1, 6)


@pytest.mark.parametrize(
    "period, start, expected",
    [
        ("P1M", utc(2020, 3, 31, 5), utc(2020, 2, 29, 5)),  # clamps to the month's last day
        ("P1M", utc(2019, 3, 31), utc(2019, 2, 28)),
        ("P1Y", utc(2020, 2, 29), utc(2019, 2, 28)),
        ("P1Y1M", utc(2020, 2, 29), utc(2019, 1, 28)),  # years first, then months, each clamped
        ("P1M1D", utc(2020, 3, 31), utc(2020, 2, 28)),  # 03-31 -> 02-29 -> 02-28
        ("P1W", utc(2013, 1, 3), utc(2012, 12, 27)),
        ("PT6H", utc(2013, 1, 1, 3), utc(2012, 12, 31, 21)),
        ("PT1.5S", 10_000, 8_500),
        ("P2D", NOW, utc(2012, 12, 29, 1)),
        ("P13M", utc(2013, 1, 15), utc(2011, 12, 15)),
        # -2987-01-01 by hand: years -2987..2012 hold 1250 - 50 + 13 = 1213 leap years (ISO has a year 0),
        # so 5000 * 365 + 1213 = 1826213 days; 2013-01-01 is day 15706 -> day -1810507
        ("P5000Y", utc(2013, 1, 1), -1_810_507 * DAY),
    ],
)
def test_period_subtract(period, start, expected):
    assert minus(period, start) == expected


def test_period_add_and_print_negative_year():
    assert plus("P1M", utc(2020, 1, 31)) == utc(2020, 2, 29)
    assert plus("P1Y2M", utc(2019, 12, 31)) == utc(2021, 2, 28)
    assert format_instant_ms(minus("P5000Y", utc(2013, 1, 1))) == "-2987-01-01T00:00:00.000Z"


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1D", "P1.5D", "PT1H30", "P1S"])
def test_period_rejects(text):
    with pytest.raises(ValueError):
        Period.parse(text)


def test_period_fields_and_fixed_length():
    p = Period.parse("P1Y2M3W4DT5H6M7.008S")
    assert (p.years, p.months, p.weeks, p.days, p.hours, p.minutes, p.seconds, p.millis) == (1, 2, 3, 4, 5, 6, 7, 8)
    assert Period.parse("PT60S").fixed_ms() == 60_000
    assert Period.parse("p1d").fixed_ms() == DAY
    with pytest.raises(ValueError):
        Period.parse("P1M").fixed_ms()


def test_parse_interval_forms():
    assert parse_interval("2012-01-01/2012-01-02") == (utc(2012, 1, 1), utc(2012, 1, 2))
    assert parse_interval("2012-01-31/P1M") == (utc(2012, 1, 31), utc(2012, 2, 29))
    assert parse_interval("P1D/2012-03-01") == (utc(2012, 2, 29), utc(2012, 3, 1))
    for bad in ("2012-01-02/2012-01-01", "2012-01-01", "P1D/P2D", "a/b"):
        with pytest.raises(ValueError):
            parse_interval(bad)


# ------------------------------------------------------------------------- ported Druid cases


def test_period_load_applies_to_all():  # PeriodLoadRuleTest.testAppliesToAll
    r = rule(type="loadByPeriod", period="P5000Y", includeFuture=False, tieredReplicants={"": 0})
    now = ms("2013-01-01")
    assert r.applies_to(ms("2012-01-01"), ms("2012-12-31"), now)
    assert r.applies_to(ms("1000-01-01"), ms("2012-12-31"), now)
    assert r.applies_to(ms("0500-01-01"), ms("2100-12-31"), now)


def test_period_load_applies_to_period():  # PeriodLoadRuleTest.testAppliesToPeriod
    r = rule(type="loadByPeriod", period="P1M", includeFuture=False, tieredReplicants={"": 0})
    assert r.applies_to(NOW - 7 * DAY, NOW, NOW)
    assert r.applies_to(NOW - DAY, NOW + DAY, NOW)
    assert not r.applies_to(NOW + DAY, NOW + 2 * DAY, NOW)


def test_period_load_partial_overlap():  # PeriodLoadRuleTest.testAppliesToPartialOverlap
    r = rule(type="loadByPeriod", period="P1M", includeFuture=False, tieredReplicants={"": 0})
    assert r.applies_to(NOW - 7 * DAY, NOW + 7 * DAY, NOW)
    month_ago = minus("P1M", NOW)
    assert r.applies_to(month_ago - 7 * DAY, month_ago + 7 * DAY, NOW)
    # by hand: ends exactly at now - P1M -> no overlap with [now - P1M, now)
    assert not r.applies_to(month_ago - DAY, month_ago, NOW)


def test_period_load_include_future():  # PeriodLoadRuleTest.testIncludeFuture
    inc = rule(type="loadByPeriod", period="P2D", includeFuture=True, tieredReplicants={"": 0})
    exc = rule(type="loadByPeriod", period="P2D", includeFuture=False, tieredReplicants={"": 0})
    assert inc.applies_to(NOW + DAY, NOW + 2 * DAY, NOW)
    assert not exc.applies_to(NOW + DAY, NOW + 2 * DAY, NOW)


def test_period_drop_applies_to_all():  # PeriodDropRuleTest.testAppliesToAll
    r = rule(type="dropByPeriod", period="P5000Y", includeFuture=False)
    assert r.applies_to(NOW - 2 * DAY, NOW - DAY, NOW)
    assert r.applies_to(minus("P100Y", NOW), NOW - DAY, NOW)


def test_period_drop_applies_to_period():  # PeriodDropRuleTest.testAppliesToPeriod
    r = rule(type="dropByPeriod", period="P1M", includeFuture=False)
    assert r.applies_to(NOW - 7 * DAY, NOW - DAY, NOW)
    assert r.applies_to(NOW - DAY, NOW, NOW)
    assert not r.applies_to(minus("P1Y", NOW), NOW - DAY, NOW)
    assert not r.applies_to(minus("P2M", NOW), NOW - DAY, NOW)


def test_period_drop_include_future():  # PeriodDropRuleTest.testIncludeFuture
    inc = rule(type="dropByPeriod", period="P2D", includeFuture=True)
    exc = rule(type="dropByPeriod", period="P2D", includeFuture=False)
    assert inc.applies_to(NOW + DAY, NOW + 2 * DAY, NOW)
    assert not exc.applies_to(NOW + DAY, NOW + 2 * DAY, NOW)
    # includeFuture compares starts only: a segment starting exactly at now - P2D is dropped,
    # one starting 1 ms earlier is not
    assert inc.applies_to(NOW - 2 * DAY, NOW + 9 * DAY, NOW)
    assert not inc.applies_to(NOW - 2 * DAY - 1, NOW, NOW)


def test_drop_before_by_period():  # PeriodDropBeforeRuleTest.testDropBefore
    r = rule(type="dropBeforeByPeriod", period="P1D")
    assert r.applies_to(NOW - 3 * DAY, NOW - 2 * DAY, NOW)
    assert r.applies_to(NOW - 2 * DAY, NOW - DAY, NOW)
    assert not r.applies_to(NOW - DAY, NOW, NOW)
    assert not r.applies_to(NOW, NOW + DAY, NOW)


def test_interval_rules_overlap_versus_contains():
    load = rule(type="loadByInterval", interval="2012-01-01/2012-02-01")
    bcast = rule(type="broadcastByInterval", interval="2012-01-01/2012-02-01")
    drop = rule(type="dropByInterval", interval="2012-01-01/2012-02-01")
    inside = (ms("2012-01-10"), ms("2012-01-11"))
    straddle = (ms("2011-12-31"), ms("2012-01-02"))
    touching = (ms("2012-02-01"), ms("2012-02-02"))
    ending_at_end = (ms("2012-01-31"), ms("2012-02-01"))
    for r in (load, bcast):
        assert r.applies_to(*inside, 0) and r.applies_to(*straddle, 0)
        assert not r.applies_to(*touching, 0)
        assert r.applies_to(*ending_at_end, 0)
    assert drop.applies_to(*inside, 0) and drop.applies_to(*ending_at_end, 0)
    assert not drop.applies_to(*straddle, 0) and not drop.applies_to(*touching, 0)


def test_broadcast_by_period_and_forever_rules():
    b = rule(type="broadcastByPeriod", period="P1D", includeFuture=False)
    assert b.applies_to(NOW - 2 * DAY, NOW - DAY + 1, NOW)
    assert not b.applies_to(NOW - 2 * DAY, NOW - DAY, NOW)
    assert not b.applies_to(NOW, NOW + DAY, NOW)
    assert rule(type="broadcastByPeriod", period="P1D").applies_to(NOW, NOW + DAY, NOW)
    for t in ("loadForever", "dropForever", "broadcastForever"):
        assert rule(type=t).applies_to(-(10**15), 10**15, NOW)


def test_load_rule_defaults_as_druid():  # ForeverLoadRuleTest / PeriodLoadRuleTest serde defaults
    assert rule(type="loadForever").tiered_replicants == {"_default_tier": 2}
    assert rule(type="loadByPeriod", period="P1D").include_future is True
    assert rule(type="loadForever", useDefaultTierForNull="false").tiered_replicants == {}
    assert rule(type="loadForever", useDefaultTierForNull="true").tiered_replicants == {"_default_tier": 2}
    assert rule(type="loadForever", tieredReplicants={}).tiered_replicants == {}
    r = rule(type="loadForever", tieredReplicants={"hot": 2, "cold": 1})
    assert list(r.tiered_replicants) == ["hot", "cold"] and r.replicants("cold") == 1 and r.replicants("x") == 0
    assert rule(type="loadByInterval", interval="0/3000", tier="hot", replicants=3).tiered_replicants == {"hot": 3}
    assert rule(type="dropForever").kind == "drop" and rule(type="broadcastForever").kind == "broadcast"


# ------------------------------------------------------------------------ matching and vectors

RULES = {
    "wiki": [rule(type="loadByPeriod", period="P1M", tieredReplicants={"hot": 2}), rule(type="dropForever")],
    "_default": [rule(type="loadForever", tieredReplicants={"cold": 1})],
    "lookup": [rule(type="broadcastForever")],
}


def test_first_applying_rule_datasource_then_default():
    recent = (NOW - DAY, NOW)
    old = (minus("P2M", NOW), minus("P2M", NOW) + DAY)
    assert first_applying_rule(RULES, "wiki", *recent, NOW).type == "loadByPeriod"
    assert first_applying_rule(RULES, "wiki", *old, NOW).type == "dropForever"
    assert first_applying_rule(RULES, "other", *old, NOW).tiered_replicants == {"cold": 1}
    assert first_applying_rule(RULES, "lookup", *old, NOW).kind == "broadcast"
    assert first_applying_rule({"_default": []}, "x", *old, NOW) is None
    only_period = {"_default": [rule(type="loadByPeriod", period="P1D", includeFuture=False)]}
    assert first_applying_rule(only_period, "x", *old, NOW) is None


def test_rule_index_for_matches_scalar_function():
    starts = np.array([NOW - DAY, minus("P2M", NOW), NOW + DAY, minus("P1M", NOW) - DAY], dtype=np.int64)
    ends = starts + DAY
    rl = rules_for(RULES, "wiki")
    got = rule_index_for(rl, starts, ends, NOW)
    assert got.dtype == np.int32
    # by hand: recent -> period rule; 2 months old -> dropForever; future (includeFuture) -> period rule;
    # ends exactly at now - P1M -> no overlap -> dropForever
    assert got.tolist() == [0, 1, 0, 1]
    none = rule_index_for([rule(type="dropBeforeByPeriod", period="P1D")], starts, ends, NOW)
    assert none.tolist() == [-1, 0, -1, 0]
    assert rule_index_for([], starts, ends, NOW).tolist() == [-1] * 4
