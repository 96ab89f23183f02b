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
broadcastForever
loadByInterval, broadcastByInterval    overlap: ``rs < e and s < re`` (``Rules.eligibleForLoad``)
dropByInterval                         contains: ``rs <= s and s < re and e <= re``
loadByPeriod, broadcastByPeriod        includeFuture: ``p < e``; else ``p < e and s < now``
dropByPeriod                           includeFuture: ``p <= s``; else ``p <= s and s < now and e <= now``
dropBeforeByPeriod                     ``e <= p``
=====================================  ====================================================

All instants are epoch milliseconds UTC (int). Periods are ISO-8601 (``P1Y2M3W4DT5H6M7.008S``) and are
added field by field in Joda's order (years, months, weeks, days, hours, minutes, seconds, millis),
each year/month step clamping the day of month (2020-03-31 minus P1M is 2020-02-29).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

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
}


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
        include_future: ``includeFuture`` of ``loadByPeriod``/``dropByPeriod``/``broadcastByPeriod``.
    """

    type: str
    kind: Literal["load", "drop", "broadcast"]
    tiered_replicants: dict[str, int] = field(default_factory=dict, hash=False)
    interval_start_ms: int | None = None
    interval_end_ms: int | None = None
    period: Period | None = None
    include_future: bool = True

    def applies_to(self, start_ms: int, end_ms: int, now_ms: int) -> bool:
        """Whether the rule applies to the segment interval ``[start_ms, end_ms)`` at ``now_ms``."""
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
    rules: dict[str, list[Rule]], datasource: str, start_ms: int, end_ms: int, now_ms: int
) -> Rule | None:
    """The first rule of ``rules[datasource] + rules['_default']`` that applies, or ``None``.

    Source: Druid ``RunRules`` (first matching rule wins); ALGORITHM.md "Terms" (Target).
    """
    for rule in rules_for(rules, datasource):
        if rule.applies_to(start_ms, end_ms, now_ms):
            return rule
    return None


def rule_index_for(rules_list: list[Rule], start_ms: np.ndarray, end_ms: np.ndarray, now_ms: int) -> np.ndarray:
    """Index of the first applying rule of ``rules_list`` per segment, ``-1`` when none applies.

    ``rules_list`` is ``rules_for(rules, datasource)`` (datasource rules then ``_default``);
    ``start_ms``/``end_ms`` are int64 arrays (epoch ms UTC). Returns an int32 array of the same length.
    """
    s = np.asarray(start_ms, dtype=np.int64)
    e = np.asarray(end_ms, dtype=np.int64)
    out = np.full(s.shape, -1, dtype=np.int32)
    pending = np.ones(s.shape, dtype=bool)
    for i, rule in enumerate(rules_list):
        hit = rule.applies_mask(s, e, now_ms) & pending
        out[hit] = i
        pending &= ~hit
        if not pending.any():
            break
    return out
