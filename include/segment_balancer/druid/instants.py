"""ISO-8601 instants as Druid (Joda) reads and prints them, in epoch milliseconds UTC.

Python's ``datetime`` and Spark's timestamps stop short of Druid's ``ETERNITY``
(``-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z``, epoch ms ``[-2**62, 2**62 - 1)``),
so the proleptic Gregorian arithmetic is done here on integers (H. Hinnant's civil-date algorithms)
in plain Python (:func:`parse_instant_ms`, :func:`format_instant_ms`: rules, queue entries, the
importer). Over Spark DataFrames (``segments.jsonl``, millions of rows),
:func:`segment_balancer.druid.snapshot.segments.with_interval_instants` reads Druid's print form
with Spark's own parsing and hands only the other rows to these functions.
"""

from __future__ import annotations

import re

DAY_MS = 86_400_000


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (ISO, year 0 exists)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


# yyyy[-MM[-dd[THH[:mm[:ss[.fff]]][Z|+HH[:mm[:ss[.fff]]]]]]]: groups year, month, day, hour,
# minute, second, fraction, then the offset: Z or its sign, hours, minutes, seconds, fraction.
INSTANT_PATTERN = (
    r"([+-]?\d{1,9})(?:-(\d{1,2})(?:-(\d{1,2})"
    r"(?:T(\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:[.,](\d{1,9}))?)?)?"
    r"(?:(Z)|([+-])(\d{2})(?::?(\d{2})(?::?(\d{2})(?:\.(\d{1,3}))?)?)?)?)?)?)?"
)
_INSTANT = re.compile(INSTANT_PATTERN)


def parse_instant_ms(text: str) -> int:
    """Parse an ISO-8601 instant the way Joda's ``dateTimeParser`` does for Druid, to epoch ms UTC.

    Accepts ``yyyy[-MM[-dd[THH[:mm[:ss[.fff]]][Z|+HH[:mm[:ss]]]]]]`` (year of 1-9 digits, optionally
    signed; no offset means UTC; fractions beyond milliseconds are truncated). Week and ordinal dates
    are not accepted.

    Raises:
        ValueError: malformed text or an out-of-range field.
    """
    if not isinstance(text, str):
        raise ValueError(f"instant must be a string, got {text!r}")
    m = _INSTANT.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not an ISO-8601 instant: {text!r}")
    year = int(m.group(1))
    month, day = int(m.group(2) or 1), int(m.group(3) or 1)
    hh, mi, ss = int(m.group(4) or 0), int(m.group(5) or 0), int(m.group(6) or 0)
    frac = (m.group(7) or "").ljust(3, "0")[:3]
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month) and hh < 24 and mi < 60 and ss < 60):
        raise ValueError(f"field out of range in instant {text!r}")
    ms = _days_from_civil(year, month, day) * DAY_MS + ((hh * 60 + mi) * 60 + ss) * 1000 + int(frac)
    if m.group(9):
        sign = -1 if m.group(9) == "-" else 1
        oh, om, osec = int(m.group(10)), int(m.group(11) or 0), int(m.group(12) or 0)
        ofrac = int((m.group(13) or "").ljust(3, "0"))
        if oh > 23 or om > 59 or osec > 59:
            raise ValueError(f"offset out of range in instant {text!r}")
        ms -= sign * (oh * 3_600_000 + om * 60_000 + osec * 1000 + ofrac)
    return ms


def format_instant_ms(ms: int) -> str:
    """Epoch ms UTC as Druid prints a ``DateTime``: ``yyyy-MM-ddTHH:mm:ss.SSSZ`` (a negative year
    as ``-yyyy``, as Joda prints it)."""
    days, rest = divmod(int(ms), DAY_MS)
    year, month, day = _civil_from_days(days)
    secs, millis = divmod(rest, 1000)
    ytext = f"-{-year:04d}" if year < 0 else f"{year:04d}"
    return f"{ytext}-{month:02d}-{day:02d}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.{millis:03d}Z"
