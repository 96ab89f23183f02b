"""Druid retention rules and the UTC calendar arithmetic they need (ALGORITHM.md "Terms": Target).

A segment's rule is the first rule of its datasource's list that applies to its interval, else the
first of ``_default``'s (Druid's ``MetadataRuleManager.getRulesWithDefault`` order). ``applies_to``
follows Druid's rule classes (``org.apache.druid.server.coordinator.rules``) exactly; with the segment
interval ``[s, e)``, the rule's interval ``[rs, re)`` and ``p = now - period`` (Joda calendar
arithmetic in UTC):

=====================================  ====================================================
type                                   applies when
=====================================  ====================================================
loadForever, dropForever,              always
broadcastForever, loadPartialForever
loadByInterval, broadcastByInterval    overlap: ``rs < e and s < re`` (``Rules.eligibleForLoad``)
loadPartialByInterval
dropByInterval                         contains: ``rs <= s and s < re and e <= re``
loadByPeriod, broadcastByPeriod,       includeFuture: ``p < e``; else ``p < e and s < now``
loadPartialByPeriod
dropByPeriod                           includeFuture: ``p <= s``; else ``p <= s and s < now and e <= now``
dropBeforeByPeriod                     ``e <= p``
=====================================  ====================================================

The three partial-load rules of Druid 38 (``loadPartial*``, ``PartialLoadRule``) are load rules whose
decision also depends on the segment itself: they apply when the interval test above holds and
their matcher (:mod:`segment_balancer.druid.partial_load`) applies to the segment or their
``onCannotMatch`` is ``fullLoad`` (the default). ``applies_to``/``applies_mask`` are the interval test
alone (Druid's ``appliesTo(Interval, DateTime)``), exact for every rule that ``is_interval_based``;
``applies_to_segment`` is the whole decision (Druid's ``appliesTo(DataSegment, DateTime)``).

All instants are epoch milliseconds UTC (int). Periods are ISO-8601 (``P1Y2M3W4DT5H6M7.008S``) and are
added field by field in Joda's order (years, months, weeks, days, hours, minutes, seconds, millis),
each year/month step clamping the day of month (2020-03-31 minus P1M is 2020-02-29).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from segment_balancer.druid.partial_load import CannotMatch, Matcher, MatchResult, SegmentShape

__all__ = [
    "Period",
    "Rule",
    "RULE_KINDS",
    "parse_instant_ms",
    "format_instant_ms",
    "parse_interval",
    "first_applying_rule",
    "rule_index_for",
    "DEFAULT_RULES_KEY",
    "PARTIAL_RULE_TYPES",
    "HANDLER_METHODS",
]

DEFAULT_RULES_KEY = "_default"

RULE_KINDS: dict[str, Literal["load", "drop", "broadcast"]] = {
    "loadForever": "load",
    "loadByInterval": "load",
    "loadByPeriod": "load",
    "dropForever": "drop",
    "dropByInterval": "drop",
    "dropByPeriod": "drop",
    "dropBeforeByPeriod": "drop",
    "broadcastForever": "broadcast",
    "broadcastByInterval": "broadcast",
    "broadcastByPeriod": "broadcast",
    "loadPartialForever": "load",
    "loadPartialByInterval": "load",
    "loadPartialByPeriod": "load",
}

PARTIAL_RULE_TYPES = ("loadPartialForever", "loadPartialByInterval", "loadPartialByPeriod")
"""Druid 38's partial-load rules (``ForeverPartialLoadRule``, ``IntervalPartialLoadRule``,
``PeriodPartialLoadRule``; PRs #19374, #19409, #19461, #19462, #19565, #19682)."""

HANDLER_METHODS = ("replicateSegment", "replicateSegmentPartially", "deleteSegment", "broadcastSegment")
"""The ``SegmentActionHandler`` methods a rule's ``run`` calls (Druid 38)."""


from segment_balancer.druid.instants import (  # noqa: E402, F401  (re-exported)
    DAY_MS,
    _civil_from_days,
    _days_from_civil,
    _days_in_month,
    format_instant_ms,
    parse_instant_ms,
)

# ---------------------------------------------------------------------------------- periods

_PERIOD = re.compile(
    r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?"
    r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+)(?:[.,](\d{1,3}))?S)?)?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Period:
    """An ISO-8601 period (Joda ``Period``, standard type). Fields are signed integers."""

    years: int = 0
    months: int = 0
    weeks: int = 0
    days: int = 0
    hours: int = 0
    minutes: int = 0
    seconds: int = 0
    millis: int = 0
    text: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str) -> Period:
        """Parse ``PnYnMnWnDTnHnMn[.fff]S`` (case-insensitive, as Joda's ``ISOPeriodFormat.standard``).

        Raises:
            ValueError: malformed text, or no field at all (``P``, ``PT``).
        """
        if not isinstance(text, str):
            raise ValueError(f"period must be a string, got {text!r}")
        m = _PERIOD.fullmatch(text.strip())
        if not m or all(g is None for g in m.groups()) or text.strip().upper().endswith("T"):
            raise ValueError(f"not an ISO-8601 period: {text!r}")
        g = [int(x) if x is not None else 0 for x in m.groups()[:7]]
        millis = int((m.group(8) or "").ljust(3, "0")) if m.group(8) else 0
        if m.group(7) is not None and m.group(7).startswith("-"):
            millis = -millis
        return cls(*g, millis, text=text.strip())

    def add_to(self, ms: int, scalar: int = 1) -> int:
        """``ms + scalar * period`` in UTC, field by field as Joda's ``ISOChronology.add`` does."""
        ms = int(ms)
        if self.years or self.months:
            days, rest = divmod(ms, DAY_MS)
            y, mo, d = _civil_from_days(days)
            if self.years:
                y += self.years * scalar
                d = min(d, _days_in_month(y, mo))
            if self.months:
                total = y * 12 + (mo - 1) + self.months * scalar
                y, mo = divmod(total, 12)
                mo += 1
                d = min(d, _days_in_month(y, mo))
            ms = _days_from_civil(y, mo, d) * DAY_MS + rest
        fixed = (
            (((self.weeks * 7 + self.days) * 24 + self.hours) * 60 + self.minutes) * 60 + self.seconds
        ) * 1000 + self.millis
        return ms + fixed * scalar

    def subtract_from(self, ms: int) -> int:
        """``ms - period`` (Joda ``DateTime.minus(Period)`` / ``new Interval(period, end)`` start)."""
        return self.add_to(ms, -1)

    def fixed_ms(self) -> int:
        """The length in ms of a period without years or months. Raises ValueError otherwise."""
        if self.years or self.months:
            raise ValueError(f"period {self.text or self!r} has years or months; its length is not fixed")
        return self.add_to(0)

    def __str__(self) -> str:
        return self.text or repr(self)


def parse_interval(text: str) -> tuple[int, int]:
    """Parse a Druid/Joda interval ``start/end``, ``start/period`` or ``period/end`` to (start_ms, end_ms).

    Raises:
        ValueError: malformed text or end before start.
    """
    if not isinstance(text, str) or text.count("/") != 1:
        raise ValueError(f"interval must be 'start/end', got {text!r}")
    a, b = (p.strip() for p in text.split("/"))
    a_is_p, b_is_p = a[:1] in ("P", "p"), b[:1] in ("P", "p")
    if a_is_p and b_is_p:
        raise ValueError(f"interval cannot be two periods: {text!r}")
    try:
        if a_is_p:
            end = parse_instant_ms(b)
            start = Period.parse(a).subtract_from(end)
        else:
            start = parse_instant_ms(a)
            end = Period.parse(b).add_to(start) if b_is_p else parse_instant_ms(b)
    except ValueError as exc:
        raise ValueError(f"interval {text!r}: {exc}") from None
    if end < start:
        raise ValueError(f"interval end is before its start: {text!r}")
    return start, end


# ------------------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """One Druid retention rule (``org.apache.druid.server.coordinator.rules.*``).

    Attributes:
        type: Druid's JSON ``type`` (``loadByPeriod``, ...).
        kind: ``load``, ``drop`` or ``broadcast``.
        tiered_replicants: ``{tier: replicas}`` in the rule's JSON order (load rules; empty otherwise).
        interval_start_ms, interval_end_ms: the ``interval`` of ``*ByInterval`` rules (epoch ms UTC).
        period: the ``period`` of ``*ByPeriod`` rules.
        include_future: ``includeFuture`` of ``loadByPeriod``/``dropByPeriod``/``broadcastByPeriod``/
            ``loadPartialByPeriod``.
        matcher: the ``matcher`` of a partial-load rule (``None`` for other rules).
        on_cannot_match: the ``onCannotMatch`` of a partial-load rule (``None`` for other rules).
    """

    type: str
    kind: Literal["load", "drop", "broadcast"]
    tiered_replicants: dict[str, int] = field(default_factory=dict, hash=False)
    interval_start_ms: int | None = None
    interval_end_ms: int | None = None
    period: Period | None = None
    include_future: bool = True
    matcher: Matcher | None = field(default=None, hash=False)
    on_cannot_match: CannotMatch | None = None

    @property
    def is_interval_based(self) -> bool:
        """Whether the rule's decision depends on the segment's interval alone (Druid's
        ``Rule.isIntervalBased``): false for the partial-load rules only."""
        return self.matcher is None

    def partial_match(self, shape: SegmentShape) -> MatchResult | None:
        """What the rule's matcher makes of the segment (``None``: it does not apply, or the rule
        is no partial-load rule)."""
        return None if self.matcher is None else self.matcher.match(shape)

    def applies_to_segment(self, start_ms: int, end_ms: int, now_ms: int, shape: SegmentShape | None = None) -> bool:
        """Whether the rule applies to the segment (Druid's ``appliesTo(DataSegment, DateTime)``;
        ``PartialLoadRule.appliesTo``): the interval test, then, for a partial-load rule, its
        matcher applies or its ``onCannotMatch`` is ``fullLoad``.

        ``shape`` is needed only by a ``fallThrough`` partial-load rule whose interval test holds.

        Raises:
            ValueError: that rule, without ``shape``.
        """
        if not self.applies_to(start_ms, end_ms, now_ms):
            return False
        if self.is_interval_based or self.on_cannot_match is not CannotMatch.FALL_THROUGH:
            return True
        if shape is None:
            raise ValueError(
                f"a {self.type} rule with onCannotMatch fallThrough needs the segment's projections and "
                "clusterGroups to decide whether it applies"
            )
        return self.partial_match(shape) is not None

    def handler_method(self, shape: SegmentShape | None = None) -> str:
        """The ``SegmentActionHandler`` method (:data:`HANDLER_METHODS`) Druid's ``Rule.run`` calls
        for a segment this rule applies to: ``replicateSegment`` for a load rule, and for a
        partial-load rule whose matcher does not apply (``fullLoad``); ``replicateSegmentPartially``
        when it applies; ``deleteSegment`` for a drop rule; ``broadcastSegment`` for a broadcast rule.

        Raises:
            ValueError: a partial-load rule without ``shape``.
        """
        if self.kind == "drop":
            return "deleteSegment"
        if self.kind == "broadcast":
            return "broadcastSegment"
        if self.is_interval_based:
            return "replicateSegment"
        if shape is None:
            raise ValueError(f"a {self.type} rule needs the segment's projections and clusterGroups to run")
        return "replicateSegment" if self.partial_match(shape) is None else "replicateSegmentPartially"

    def applies_to(self, start_ms: int, end_ms: int, now_ms: int) -> bool:
        """Whether the rule applies to the segment interval ``[start_ms, end_ms)`` at ``now_ms`` (the
        interval test alone: the whole decision of a rule that ``is_interval_based``)."""
        return bool(self.applies_mask(np.asarray(start_ms), np.asarray(end_ms), now_ms))

    def applies_mask(self, start_ms: np.ndarray, end_ms: np.ndarray, now_ms: int) -> np.ndarray:
        """Vectorised ``applies_to`` over arrays of interval starts/ends (int64 epoch ms)."""
        s, e, t = start_ms, end_ms, self.type
        if t.endswith("Forever"):
            return np.ones(np.shape(s), dtype=bool)
        if t.endswith("ByInterval"):
            rs, re_ = self.interval_start_ms, self.interval_end_ms
            if t == "dropByInterval":
                return (rs <= s) & (s < re_) & (e <= re_)
            return (rs < e) & (s < re_)
        assert self.period is not None
        p = self.period.subtract_from(now_ms)
        if t == "dropBeforeByPeriod":
            return e <= p
        if t == "dropByPeriod":
            return (p <= s) if self.include_future else (p <= s) & (s < now_ms) & (e <= now_ms)
        return (p < e) if self.include_future else (p < e) & (s < now_ms)

    def replicants(self, tier: str) -> int:
        """Target replicas in ``tier`` (0 when the rule does not name it, or for drop/broadcast rules)."""
        return self.tiered_replicants.get(tier, 0)


def rules_for(rules: dict[str, list[Rule]], datasource: str) -> list[Rule]:
    """The datasource's rules followed by ``_default``'s (the order rules are matched in)."""
    own = rules.get(datasource, []) if datasource != DEFAULT_RULES_KEY else []
    return list(own) + list(rules.get(DEFAULT_RULES_KEY, []))


def first_applying_rule(
    rules: dict[str, list[Rule]],
    datasource: str,
    start_ms: int,
    end_ms: int,
    now_ms: int,
    shape: SegmentShape | None = None,
) -> Rule | None:
    """The first rule of ``rules[datasource] + rules['_default']`` that applies
    (:meth:`Rule.applies_to_segment`), or ``None``.

    ``shape`` (the segment's projections and clusterGroups) is needed only when a partial-load
    rule with ``onCannotMatch`` ``fallThrough`` is reached and its interval test holds.

    Raises:
        ValueError: such a rule is reached without ``shape``.

    Source: Druid ``RunRules`` (first matching rule wins); ALGORITHM.md "Terms" (Target).
    """
    for rule in rules_for(rules, datasource):
        if rule.applies_to_segment(start_ms, end_ms, now_ms, shape):
            return rule
    return None


def rule_index_for(
    rules_list: list[Rule],
    start_ms: np.ndarray,
    end_ms: np.ndarray,
    now_ms: int,
    shape_of: Callable[[int], SegmentShape] | None = None,
) -> np.ndarray:
    """Index of the first applying rule of ``rules_list`` per segment, ``-1`` when none applies.

    ``rules_list`` is ``rules_for(rules, datasource)`` (datasource rules then ``_default``);
    ``start_ms``/``end_ms`` are int64 arrays (epoch ms UTC). Returns an int32 array of the same length.
    ``shape_of(i)`` is the :class:`SegmentShape` of segment ``i``, asked only for the segments that
    reach a ``fallThrough`` partial-load rule whose interval test holds.

    Raises:
        ValueError: such a segment without ``shape_of``.
    """
    s = np.asarray(start_ms, dtype=np.int64)
    e = np.asarray(end_ms, dtype=np.int64)
    out = np.full(s.shape, -1, dtype=np.int32)
    pending = np.ones(s.shape, dtype=bool)
    for i, rule in enumerate(rules_list):
        hit = rule.applies_mask(s, e, now_ms) & pending
        if not rule.is_interval_based and rule.on_cannot_match is CannotMatch.FALL_THROUGH and hit.any():
            rows = np.flatnonzero(hit)
            if shape_of is None:
                rule.applies_to_segment(int(s[rows[0]]), int(e[rows[0]]), now_ms)  # raises: no shape
            hit[rows] = [rule.partial_match(shape_of(int(j))) is not None for j in rows]
        out[hit] = i
        pending &= ~hit
        if not pending.any():
            break
    return out
