"""ISO-8601 instants as Druid (Joda) reads and prints them, in epoch milliseconds UTC.

Python's ``datetime`` and Spark's timestamps stop short of Druid's ``ETERNITY``
(``-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z``, epoch ms ``[-2**62, 2**62 - 1)``),
so the proleptic Gregorian arithmetic is done here on integers (H. Hinnant's civil-date algorithms)
in plain Python (:func:`parse_instant_ms`, :func:`format_instant_ms`: rules, queue entries, the
importer). Over Spark DataFrames (``segments.jsonl``, millions of rows),
:func:`with_interval_instants` reads Druid's print form with Spark's own parsing and hands only the
other rows to those functions.
"""

from __future__ import annotations

import re

import pandas as pd  # module level: the pandas UDF's type hints name it

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
    r"(?:(Z)|([+-])(\d{2})(?::?(\d{2})(?::?(\d{2})(?:\.(\d{1,3}))?)?)?)?)?)?)?")
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
    ms = (_days_from_civil(year, month, day) * DAY_MS + ((hh * 60 + mi) * 60 + ss) * 1000 + int(frac))
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
    return (f"{ytext}-{month:02d}-{day:02d}T{secs // 3600:02d}:{secs // 60 % 60:02d}:"
            f"{secs % 60:02d}.{millis:03d}Z")


# ---- the same over Spark DataFrames -------------------------------------------------------------
# Druid's own print form (``DateTime.toString()`` in UTC) of years 1-9999: nearly every instant of a
# real snapshot. Spark's own timestamp parsing reads it, and it prints back as it is written.
CANONICAL_INSTANT = r"^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"


def _full_range_udf():
    """A pandas UDF (start text, end text) -> struct of ``start_ms``, ``end_ms`` (long, null where
    malformed) and their printed forms, by :func:`parse_instant_ms` and :func:`format_instant_ms`."""
    from pyspark.sql.functions import pandas_udf

    def ms(text):
        try:
            return parse_instant_ms(text)
        except ValueError:
            return None

    @pandas_udf("start_ms long, end_ms long, start_printed string, end_printed string")
    def full_range(start: pd.Series, end: pd.Series) -> pd.DataFrame:
        s, e = [ms(t) for t in start], [ms(t) for t in end]
        return pd.DataFrame({"start_ms": pd.array(s, dtype="Int64"), "end_ms": pd.array(e, dtype="Int64"),
                             "start_printed": [None if m is None else format_instant_ms(m) for m in s],
                             "end_printed": [None if m is None else format_instant_ms(m) for m in e]})

    return full_range


def with_interval_instants(df, start: str, end: str):
    """``df`` plus ``start_ms``, ``end_ms`` (long: epoch ms UTC of the ISO-8601 texts in the string
    columns ``start`` and ``end``, as :func:`parse_instant_ms` reads them; null where malformed or
    out of range, so the caller can name the bad row) and ``start_printed``, ``end_printed``
    (string: those instants as :func:`format_instant_ms` prints them, as Druid's segment ids do).

    Rows whose two instants are in Druid's print form of years 1-9999 (:data:`CANONICAL_INSTANT`)
    take Spark's timestamp parsing and keep their text as printed; only the other rows (the
    eternity interval, offsets, short forms) go through Python (a pandas UDF over those rows
    alone), which reads Druid's whole range. A short plan: a Spark form of the full-range
    arithmetic took seconds of query planning for every read, whatever its size.
    """
    from pyspark.sql import functions as F

    canonical = F.coalesce(F.col(start).rlike(CANONICAL_INSTANT) & F.col(end).rlike(CANONICAL_INSTANT), F.lit(False))
    s_ms, e_ms = F.unix_millis(F.try_to_timestamp(F.col(start))), F.unix_millis(F.try_to_timestamp(F.col(end)))
    fast = df.filter(canonical).select("*", s_ms.alias("start_ms"), e_ms.alias("end_ms"))
    fast = fast.select("*", F.when(F.col("start_ms").isNotNull(), F.col(start)).alias("start_printed"),
                       F.when(F.col("end_ms").isNotNull(), F.col(end)).alias("end_printed"))
    slow = df.filter(~canonical).select("*", _full_range_udf()(F.col(start), F.col(end)).alias("__instants"))
    slow = slow.select(*df.columns, "__instants.*")
    return fast.unionByName(slow)
