"""ISO instants over Spark (``instants.with_interval_instants``: Spark's parsing for Druid's print
form, the plain-Python forms for the rest) agree with the plain-Python ones on Druid's whole range."""

import random

import pytest

from segment_balancer.druid.instants import format_instant_ms, parse_instant_ms
from segment_balancer.druid.snapshot.segments import CANONICAL_INSTANT, with_interval_instants

# Druid's Intervals.ETERNITY: JodaUtils.MIN_INSTANT = Long.MIN_VALUE / 2, MAX_INSTANT = Long.MAX_VALUE / 2.
ETERNITY = [("-146136543-09-08T08:23:32.096Z", -(2**62)), ("146140482-04-24T15:36:27.903Z", 2**62 - 1)]


def test_python_forms_print_and_read_druids_eternity():
    for text, ms in ETERNITY:
        assert parse_instant_ms(text) == ms and format_instant_ms(ms) == text


def test_spark_forms_agree_with_python_over_the_whole_range(spark):

    rng = random.Random(7458)
    texts = [t for t, _ in ETERNITY] + [
        "2013-01-01",
        "2013",
        "+2013-02",
        "0",
        "2012-12-31T03:30:00+02:30",
        "0000-01-01T00:00:00.000-05:50:36",
        "2012-12-31T01:00:00.123456Z",
        " 2013-01-01T00:00:00Z ",
        "-0001-12-31T23:59:59.999Z",
        "9999-12-31T23:59:59.999Z",
        "10000-01-01T00:00:00.000Z",
        "2000-02-29",
        "1900-02-29",
        "2012-13-01",
        "2013-02-29",
        "x",
        "2012-12-31T24:00",
        "",
        "2012-12-31T01:00:00.000+24:00",
        # Spark's own parsing takes Druid's print form of years 1-9999; invalid dates and the rest fall through
        "0001-01-01T00:00:00.000Z",
        "1582-10-10T00:00:00.000Z",
        "0000-12-31T23:59:59.999Z",
        "2013-02-29T00:00:00.000Z",
        "2013-01-01T00:00:60.000Z",
        "2013-01-01T24:00:00.000Z",
        "2013-01-01 00:00:00.000Z",
    ]
    millis = [ms for _, ms in ETERNITY] + [0, -1, 1, 86_399_999, -86_400_000]
    # either side of what Spark's timestamps print (years 1-9999), and the Julian/Gregorian switch of 1582
    millis += [-62_135_596_800_001, -62_135_596_800_000, 253_402_300_799_999, 253_402_300_800_000, -12_219_292_800_000]
    millis += [rng.randint(-(2**62), 2**62 - 1) for _ in range(500)] + [
        rng.randint(-(10**13), 10**13) for _ in range(500)
    ]
    texts += [format_instant_ms(ms) for ms in millis]

    def python(text):
        try:
            return parse_instant_ms(text)
        except ValueError:
            return None

    frame = spark.createDataFrame([(t, texts[(i + 1) % len(texts)]) for i, t in enumerate(texts)], "s string, e string")
    rows = with_interval_instants(frame, "s", "e").collect()
    assert len(rows) == len(texts)
    assert {r.s: r.start_ms for r in rows} == {t: python(t) for t in texts}
    assert {r.e: r.end_ms for r in rows} == {t: python(t) for t in texts}
    printed = lambda t: None if python(t) is None else format_instant_ms(python(t))  # noqa: E731
    assert {r.s: r.start_printed for r in rows} == {t: printed(t) for t in texts}
    assert {r.e: r.end_printed for r in rows} == {t: printed(t) for t in texts}
    # both paths were taken: Druid's print form and the rest
    import re

    assert any(re.match(CANONICAL_INSTANT, t) for t in texts) and not all(re.match(CANONICAL_INSTANT, t) for t in texts)


@pytest.mark.parametrize("text, expected", [("1900-02-29", None), ("2000-02-29", 951_782_400_000)])
def test_leap_years(spark, text, expected):

    row = with_interval_instants(spark.createDataFrame([(text, text)], "s string, e string"), "s", "e").first()
    assert row.start_ms == expected
