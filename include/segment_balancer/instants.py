"""ISO-8601 instants as Druid (Joda) reads and prints them, in epoch milliseconds UTC.

Python's ``datetime`` and Spark's timestamps stop short of Druid's ``ETERNITY``
(``-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z``, epoch ms ``[-2**62, 2**62 - 1)``),
so the proleptic Gregorian arithmetic is done here on integers (H. Hinnant's civil-date algorithms),
once in plain Python (:func:`parse_instant_ms`, :func:`format_instant_ms`: rules, queue entries,
the importer) and once as Spark columns over int64 (:func:`with_instant_ms`,
:func:`with_instant_text`: ``segments.jsonl``, millions of rows). Both accept the same text
(:data:`INSTANT_PATTERN`) and give the same numbers.
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


# ---- the same over Spark DataFrames (int64 arithmetic in the JVM; no Python round-trip per row) ----
# Each step is its own projection over named columns: written as one nested Column, every reuse of
# an intermediate value would copy its whole expression (code past the JVM's 64 KB method limit).
# Instants as Druid prints them in years 1-9999 (nearly every row of a real snapshot) take Spark's
# own timestamp parsing and printing; only the rest go through the regular expression and the civil
# arithmetic (benchmarks/bench_read_segments.py: the full path alone is ~8x slower per row).

# Druid's own print form (``DateTime.toString()`` in UTC) of years 1-9999.
CANONICAL_INSTANT = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
# [0001-01-01T00:00:00.000Z, 10000-01-01T00:00:00.000Z): what Spark's timestamps print as Druid does.
_SPARK_MIN_MS, _SPARK_END_MS = -62_135_596_800_000, 253_402_300_800_000

def _steps(df, steps: list[tuple[str, object]], keep: str, prefix: str):
    """Apply ``(name, column)`` steps one projection each; keep ``keep``, drop the other ``prefix`` columns."""
    for name, col in steps:
        df = df.withColumn(name, col)
    return df.drop(*[n for n, _ in steps if n != keep and n.startswith(prefix)])


def _floor_div(col, divisor: int):
    """``col // divisor`` (floor) of an int64 Column whose magnitude stays below 2**53."""
    from pyspark.sql import functions as F

    return ((col - F.pmod(col, F.lit(divisor))) / F.lit(divisor)).cast("long")


def with_instant_ms(df, text, name: str):
    """``df`` plus column ``name`` (long): the epoch ms UTC of the ISO-8601 string Column ``text``,
    as :func:`parse_instant_ms` reads it (years of 1–9 digits, signed; offsets; fractions truncated
    to ms). Null where the text is malformed or a field is out of range, so the caller can name the
    bad row."""
    from pyspark.sql import functions as F

    p = f"__{name}_"
    c = lambda n: F.col(p + n)  # noqa: E731
    pattern = r"^\s*" + INSTANT_PATTERN + r"\s*$"
    fields = {"y": (1, 0), "mo": (2, 1), "d": (3, 1), "hh": (4, 0), "mi": (5, 0), "ss": (6, 0),
              "oh": (10, 0), "om": (11, 0), "os": (12, 0)}
    steps: list = [(p + "t", text),
                   # Spark parses the form Druid prints (null where it is no valid date: full path)
                   (p + "fast", F.when(c("t").rlike(CANONICAL_INSTANT), F.unix_millis(F.try_to_timestamp(c("t"))))),
                   (p + "ok", c("fast").isNull() & c("t").rlike(pattern))]
    steps += [(p + k, F.when(c("ok"), F.regexp_extract(c("t"), pattern, i))) for k, (i, _) in fields.items()]
    steps += [(p + k, F.when(c("ok"), F.regexp_extract(c("t"), pattern, i)).otherwise(""))
              for k, i in (("frac", 7), ("sign", 9), ("ofrac", 13))]
    steps += [(p + k, F.when(c(k) == "", F.lit(default)).otherwise(c(k).cast("long"))) for k, (_, default) in fields.items()]
    steps += [(p + k, F.when(c(k) == "", F.lit(0)).otherwise(F.rpad(c(k), 3, "0").cast("long"))) for k in ("frac", "ofrac")]
    leap = ((F.pmod(c("y"), F.lit(4)) == 0) & (F.pmod(c("y"), F.lit(100)) != 0)) | (F.pmod(c("y"), F.lit(400)) == 0)
    steps += [
        (p + "dim", F.when(c("mo") == 2, F.when(leap, 29).otherwise(28)).when(c("mo").isin(4, 6, 9, 11), 30).otherwise(31)),
        (p + "valid", c("ok") & c("mo").between(1, 12) & c("d").between(1, c("dim")) & (c("hh") < 24) & (c("mi") < 60)
         & (c("ss") < 60) & (c("oh") <= 23) & (c("om") <= 59) & (c("os") <= 59)),
        # days from civil (H. Hinnant), as _days_from_civil
        (p + "yy", c("y") - F.when(c("mo") <= 2, 1).otherwise(0)),
        (p + "era", _floor_div(c("yy"), 400)),
        (p + "yoe", c("yy") - c("era") * 400),
        (p + "doy", _floor_div(F.lit(153) * (c("mo") + F.when(c("mo") > 2, -3).otherwise(9)) + 2, 5) + c("d") - 1),
        (p + "doe", c("yoe") * 365 + _floor_div(c("yoe"), 4) - _floor_div(c("yoe"), 100) + c("doy")),
        (p + "days", c("era") * 146097 + c("doe") - 719468),
        (name, F.when(c("fast").isNotNull(), c("fast")).when(c("valid"), c("days") * DAY_MS + ((c("hh") * 60 + c("mi")) * 60 + c("ss")) * 1000 + c("frac")
                      - F.when(c("sign") == "-", -1).otherwise(1)
                      * (c("oh") * 3_600_000 + c("om") * 60_000 + c("os") * 1000 + c("ofrac")))),
    ]
    return _steps(df, steps, name, p)


def with_instant_text(df, ms, name: str):
    """``df`` plus column ``name`` (string): the epoch-ms long Column ``ms`` printed as
    :func:`format_instant_ms` prints it (Joda's ``yyyy-MM-ddTHH:mm:ss.SSSZ``, years beyond 9999 in
    full, negative years signed)."""
    from pyspark.sql import functions as F

    p = f"__{name}_"
    c = lambda n: F.col(p + n)  # noqa: E731
    # Spark prints years 1-9999 as Druid does, in the session's time zone: only when that is UTC.
    utc = df.sparkSession.conf.get("spark.sql.session.timeZone") in ("UTC", "Etc/UTC", "GMT", "Z", "+00:00")
    fast = (F.when((c("ms") >= _SPARK_MIN_MS) & (c("ms") < _SPARK_END_MS),
                   F.date_format(F.timestamp_millis(c("ms")), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")) if utc else F.lit(None))
    steps = [
        (p + "ms", ms),
        (p + "fast", fast.cast("string")),
        (p + "rest", F.pmod(c("ms"), F.lit(DAY_MS))),
        # (ms - rest) is a multiple of a day but may exceed 2**53: divide exactly as decimals.
        (p + "z", ((c("ms") - c("rest")).cast("decimal(20,0)") / F.lit(DAY_MS).cast("decimal(20,0)")).cast("long") + 719468),
        # civil from days (H. Hinnant), as _civil_from_days
        (p + "era", _floor_div(c("z"), 146097)),
        (p + "doe", c("z") - c("era") * 146097),
        (p + "yoe", _floor_div(c("doe") - _floor_div(c("doe"), 1460) + _floor_div(c("doe"), 36524)
                               - _floor_div(c("doe"), 146096), 365)),
        (p + "doy", c("doe") - (c("yoe") * 365 + _floor_div(c("yoe"), 4) - _floor_div(c("yoe"), 100))),
        (p + "mp", _floor_div(c("doy") * 5 + 2, 153)),
        (p + "month", F.when(c("mp") < 10, c("mp") + 3).otherwise(c("mp") - 9)),
        (p + "year", c("yoe") + c("era") * 400 + F.when(c("month") <= 2, 1).otherwise(0)),
        (p + "secs", _floor_div(c("rest"), 1000)),
        (name, F.when(c("fast").isNotNull(), c("fast")).otherwise(F.concat(
            F.when(c("year") < 0, "-").otherwise(""), F.format_string("%04d", F.abs(c("year"))),
            F.format_string("-%02d-%02dT%02d:%02d:%02d.%03dZ", c("month"), c("doy") - _floor_div(c("mp") * 153 + 2, 5) + 1,
                            _floor_div(c("secs"), 3600), F.pmod(_floor_div(c("secs"), 60), F.lit(60)),
                            F.pmod(c("secs"), F.lit(60)), F.pmod(c("rest"), F.lit(1000)))))),
    ]
    return _steps(df, steps, name, p)
