"""Tests of segment_balancer.planner.cost against Druid's CostBalancerStrategyTest and hand calculations.

Expected values marked "Druid" come from apache/druid
server/src/test/java/org/apache/druid/server/coordinator/balancer/CostBalancerStrategyTest.java
(and the older coordinator/CostBalancerStrategyTest.java); Druid asserts them with DELTA = 1e-6.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from java_random import JavaRandom

from segment_balancer.planner.cost import (
    ETERNITY_END_MS,
    ETERNITY_START_MS,
    drop_key,
    exact_sum,
    exact_sums,
    interval_cost,
    joint_cost,
    placement_cost,
    rank_key,
    rank_servers,
)

HOUR = 3_600_000
DAY = 24 * HOUR
LAM = math.log(2) / 24.0  # Druid's lambda, per hour (24 h half-life)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def plus(start_ms: int, granularity: str) -> int:
    """Joda ``granularity.increment``: calendar months/years clamp to the month's last day."""
    if granularity == "HOUR":
        return start_ms + HOUR
    if granularity == "DAY":
        return start_ms + DAY
    offset = pd.DateOffset(months=1) if granularity == "MONTH" else pd.DateOffset(years=1)
    return int((pd.Timestamp(start_ms, unit="ms") + offset).value // 1_000_000)


def interval(start_ms: int, granularity: str) -> tuple[int, int]:
    if granularity == "ALL":
        return ETERNITY_START_MS, ETERNITY_END_MS
    return start_ms, plus(start_ms, granularity)


# ---------------------------------------------------------------- intervalCost (Druid, testIntervalCost)


@pytest.mark.parametrize(
    "x1, y0, y1, expected",
    [
        (1, 1, 2, 0.3995764),  # no overlap [0,1) [1,2)
        (1, -1, 0, 0.3995764),  # no overlap [0,1) [-1,0)
        (1, 0, 1, 0.7357589),  # exact overlap
        (2, 0, 2, 2.270671),
        (2, 1, 3, 1.681908),  # partial overlap
        (2, 1, 2, 1.135335),
        (2, 0, 1, 1.135335),
        (3, 1, 2, 1.534912),
    ],
)
def test_interval_cost_druid_values(x1, y0, y1, expected):
    assert float(interval_cost(x1, y0, y1)) == pytest.approx(expected, abs=1e-6)


def test_interval_cost_closed_forms_by_hand():
    # Disjoint [0,1) and [1,2): integral of e^(x-y) = (1 - e^-1)^2.
    assert float(interval_cost(1, 1, 2)) == pytest.approx((1 - math.exp(-1)) ** 2, rel=1e-12)
    # Identical [0,b): 2 (b + e^-b - 1); b = 2 gives 2 (1 + e^-2).
    assert float(interval_cost(2, 0, 2)) == pytest.approx(2 * (1 + math.exp(-2)), rel=1e-12)
    # Empty intervals cost nothing (Druid's early return).
    assert float(interval_cost(0, 1, 2)) == 0.0
    assert float(interval_cost(1, 3, 3)) == 0.0


def test_interval_cost_additivity_and_broadcasting():
    # Druid testIntervalCostAdditivity: cost is additive in Y and in X.
    assert float(interval_cost(1, 1, 3)) == pytest.approx(
        float(interval_cost(1, 1, 2) + interval_cost(1, 2, 3)), abs=1e-6
    )
    assert float(interval_cost(3, 1, 2)) == pytest.approx(
        float(interval_cost(1, 0, 1) + interval_cost(1, 1, 2) + interval_cost(1, 1, 2)), abs=1e-6
    )
    got = interval_cost(2, np.array([1.0, 1.0, 0.0]), np.array([3.0, 2.0, 1.0]))
    assert got.shape == (3,)
    np.testing.assert_allclose(got, [1.681908, 1.135335, 1.135335], atol=1e-6)


# ---------------------------------------------------------------- joint cost (Druid, testJointSegmentsCost)

X_START = ms("2012-10-24T00:00:00")  # CreateDataSegments' default start


@pytest.mark.parametrize(
    "gx, gy, gap_ms, expected",
    [
        ("HOUR", "HOUR", 0, 1.980884),
        ("HOUR", "HOUR", DAY, 1.000070),
        ("HOUR", "DAY", 0, 35.110275),
        ("DAY", "DAY", 0, 926.232308),
        ("DAY", "DAY", DAY, 599.434267),
        ("DAY", "DAY", 7 * DAY, 9.366160),
        ("DAY", "MONTH", 0, 2125.100840),
        ("MONTH", "MONTH", 0, 98247.576470),
        ("MONTH", "MONTH", 7 * DAY, 79719.068161),
        ("MONTH", "YEAR", 0, 100645.313535),
        ("YEAR", "YEAR", 0, 1208453.347454),
        ("YEAR", "YEAR", 7 * DAY, 1189943.571325),
        # testJointSegmentsCostAllGranularity
        ("HOUR", "ALL", 0, 138.516732),
        ("DAY", "ALL", 0, 3323.962523),
        ("MONTH", "ALL", 0, 103043.057744),
        ("YEAR", "ALL", 0, 1213248.808913),
    ],
)
def test_joint_cost_druid_values(gx, gy, gap_ms, expected):
    xs, xe = interval(X_START, gx)
    ys, ye = interval(xs + gap_ms, gy)
    got = float(joint_cost(xs, xe, "wiki", [ys], [ye], ["wiki"])[0])
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-6)


def test_joint_cost_by_hand():
    # Two adjacent hours, same datasource: x1 = lam, Y = [lam, 2 lam); disjoint formula gives
    # (1 - e^-lam)^2, scaled by 1/lam^2 and doubled: 2 (1 - e^-lam)^2 / lam^2 (= 1.980884, Druid).
    hand = 2 * (1 - math.exp(-LAM)) ** 2 / LAM**2
    got = float(joint_cost(0, HOUR, "a", [HOUR], [2 * HOUR], ["a"])[0])
    assert got == pytest.approx(hand, rel=1e-12)
    # A day with itself: 2 (b + e^-b - 1) with b = 24 lam = ln 2, so e^-b = 1/2:
    # 2 * 2 (ln2 - 1/2) / lam^2 = 4 * 576 (ln2 - 0.5) / ln2^2 = 926.2323 (Druid: 926.232308).
    hand_day = 4 * 576 * (math.log(2) - 0.5) / math.log(2) ** 2
    assert float(joint_cost(0, DAY, "a", [0], [DAY], ["a"])[0]) == pytest.approx(hand_day, rel=1e-12)


def test_same_datasource_doubles_and_symmetry():
    xs, xe = interval(ms("2010-01-01T00:00:00"), "DAY")
    ys, ye = interval(ms("2010-01-01T00:00:00"), "MONTH")
    same = joint_cost(xs, xe, "wiki", [ys, ys], [ye, ye], ["wiki", "koala"])
    assert same[0] == 2 * same[1]  # exact: multiplying by 2 is exact
    # Druid testJointSegmentsCostSymmetry
    back = float(joint_cost(ys, ye, "wiki", [xs], [xe], ["wiki"])[0])
    assert back == pytest.approx(float(same[0]), abs=1e-6)


def test_eternity_self_cost():
    # Druid testJointSegmentsCostAllGranularity: 3.548e14 <= cost <= 3.549e14.
    cost = float(
        joint_cost(ETERNITY_START_MS, ETERNITY_END_MS, "ds", [ETERNITY_START_MS], [ETERNITY_END_MS], ["ds"])[0]
    )
    assert 3.548e14 <= cost <= 3.549e14


@pytest.mark.parametrize(
    "gx, gy, gap_ms",
    [
        ("HOUR", "HOUR", HOUR + 45 * DAY),
        ("HOUR", "DAY", HOUR + 45 * DAY),
        ("DAY", "DAY", DAY + 45 * DAY),
        ("DAY", "MONTH", DAY + 45 * DAY),
        ("MONTH", "MONTH", 30 * DAY + 45 * DAY),
        ("YEAR", "YEAR", 365 * DAY + 45 * DAY),
    ],
)
def test_joint_cost_negligible_after_45_days(gx, gy, gap_ms):
    # Druid testJointSegmentsCostWith45DayGap: expected 0 within DELTA 1e-6.
    xs, xe = interval(X_START, gx)
    ys, ye = interval(xs + gap_ms, gy)
    assert abs(float(joint_cost(xs, xe, "wiki", [ys], [ye], ["wiki"])[0])) < 1e-6


# ---------------------------------------------------------------- placement cost


def test_placement_cost_window():
    seg = (10 * DAY, 11 * DAY)
    # A day ending 50 days before the segment starts: outside [start - 45 d, end + 45 d).
    far = (-41 * DAY, -40 * DAY)
    assert float(joint_cost(*seg, "a", [far[0]], [far[1]], ["a"])[0]) > 0  # tiny but not zero
    assert placement_cost(*seg, "a", [far[0]], [far[1]], ["a"]) == 0.0
    # Half-open window: ending exactly at start - 45 d is out, 1 ms later is in.
    assert placement_cost(*seg, "a", [-36 * DAY], [-35 * DAY], ["a"]) == 0.0
    assert placement_cost(*seg, "a", [-36 * DAY], [-35 * DAY + 1], ["a"]) > 0.0
    # Starting exactly at end + 45 d is out.
    assert placement_cost(*seg, "a", [56 * DAY], [57 * DAY], ["a"]) == 0.0
    assert placement_cost(*seg, "a", [], [], []) == 0.0


def test_placement_cost_sum_by_hand():
    # Day [0, 1d) placed on a server with the same day of the same datasource (926.2323, see above)
    # and of another datasource (half of it): 1.5 * 926.2323.
    hand_day = 4 * 576 * (math.log(2) - 0.5) / math.log(2) ** 2
    got = placement_cost(0, DAY, "a", [0, 0], [DAY, DAY], ["a", "b"])
    assert got == pytest.approx(1.5 * hand_day, rel=1e-12)


def test_placement_cost_order_and_grouping_independent():
    rng = random.Random(7)
    starts = np.array([rng.randrange(-60, 60) * HOUR * 7 for _ in range(300)], dtype=np.int64)
    ends = starts + np.array([rng.choice([HOUR, DAY, 7 * DAY]) for _ in range(300)], dtype=np.int64)
    dss = np.array([rng.choice(["a", "b", "c"]) for _ in range(300)], dtype=object)
    base = placement_cost(0, DAY, "a", starts, ends, dss)
    for _ in range(5):
        perm = np.array(rng.sample(range(300), 300))
        assert placement_cost(0, DAY, "a", starts[perm], ends[perm], dss[perm]) == base  # bitwise
    # The same multiset given as (interval, datasource) rows with counts: bitwise equal.
    frame = pd.DataFrame({"s": starts, "e": ends, "d": dss}).value_counts().reset_index(name="n")
    grouped = placement_cost(0, DAY, "a", frame["s"], frame["e"], frame["d"], proj_count=frame["n"])
    assert grouped == base


def test_exact_sum_is_exactly_rounded():
    # 1e16 + 1 + 1 - 1e16 = 2 exactly; naive left-to-right float sum gives 0 or 4.
    assert exact_sum([1e16, 1.0, 1.0, -1e16]) == 2.0
    # counts: 0.1 * 3 as an exact product, then minus one 0.1: exactly rounded 0.2.
    assert exact_sum([0.1], counts=[3], minus=[0.1]) == math.fsum([0.1, 0.1])
    assert math.copysign(1.0, exact_sum([0.5], minus=[0.5])) == 1.0  # +0.0, never -0.0


def test_exact_sums_are_each_group_exactly_rounded():
    """Group by group, the float nearest the rational sum (``Fraction``), over magnitudes from 1e-40
    to 1e15 in one group, integer-valued ties, counts up to 5,000 and a subtracted term."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 12))
        m = int(rng.integers(0, 200))
        terms = rng.random(m) * 10.0 ** rng.integers(-40, 15, m)
        if trial % 5 == 0:
            terms = np.round(terms * 1e6)
        counts = rng.integers(1, 5000, m) if trial % 2 else None
        group = rng.integers(0, n, m)
        minus = rng.random(n) * 10.0 ** rng.integers(-3, 12, n) * (rng.random(n) < 0.5)
        got = exact_sums(terms, counts, group, n, minus)
        for g in range(n):
            rows = np.flatnonzero(group == g)
            exact = sum(
                (Fraction(float(terms[i])) * (1 if counts is None else int(counts[i])) for i in rows), Fraction(0)
            ) - Fraction(float(minus[g]))
            assert got[g] == float(exact), (trial, g)
            assert math.copysign(1.0, got[g]) == 1.0 or got[g] < 0
    assert exact_sums([1e16, 1.0, 1.0, -1e16], None, [0, 0, 0, 0], 2) == [2.0, 0.0]
    assert exact_sums([0.1, 0.1], [3, 1], [1, 0], 2, minus=[0.1, 0.1]) == [0.0, math.fsum([0.1, 0.1])]


def test_exact_gathered_sums_are_each_group_exactly_rounded():
    """Group by group, the float nearest the rational sum (``Fraction``) of shared values gathered
    by index times counts, less ``minus``: values from 1e-40 to 1e15 (the integer slices), from
    1e-300 (past 16 slices: the fallback), negative ones and zeros, counts from 0 to 5,000, empty
    groups; and the rows times counts past what the slices' float sums keep exact (the fallback)."""
    from segment_balancer.planner.cost import exact_gathered_sums

    rng = np.random.default_rng(11)
    for trial in range(300):
        n, v, m = int(rng.integers(1, 12)), int(rng.integers(1, 40)), int(rng.integers(0, 200))
        values = rng.random(v) * 10.0 ** rng.integers(-300 if trial % 10 == 0 else -40, 15, v)
        if trial % 3 == 0:
            values[rng.integers(0, v, 2)] = 0.0
        if trial % 4 == 0:
            values = values * np.where(rng.random(v) < 0.5, -1.0, 1.0)
        index = rng.integers(0, v, m)
        counts = rng.integers(0, 5000, m)
        group = np.sort(rng.integers(0, n, m))
        minus = rng.random(n) * 10.0 ** rng.integers(-3, 12, n) * (rng.random(n) < 0.5)
        got = exact_gathered_sums(values, index, counts, group, n, minus)
        for g in range(n):
            rows = np.flatnonzero(group == g)
            exact = sum((Fraction(float(values[index[i]])) * int(counts[i]) for i in rows), Fraction(0))
            assert got[g] == float(exact - Fraction(float(minus[g]))), (trial, g)
            assert math.copysign(1.0, got[g]) == 1.0 or got[g] < 0
    many = 40_000  # one group's rows times its largest count past 2**27
    values, counts = np.array([0.1, 3e-9]), np.full(many, 4_000)
    expected = float(Fraction(0.1) * 4_000 * (many // 2) + Fraction(3e-9) * 4_000 * (many // 2))
    assert exact_gathered_sums(values, np.arange(many) % 2, counts, np.zeros(many, int), 2) == [expected, 0.0]


def test_exact_wide_sums_are_each_row_exactly_rounded():
    """Row by row, the float nearest the rational sum (``Fraction``) of the values times the counts
    at some columns of a wider matrix (counts elsewhere left out), its rows picked in any order,
    less ``minus``: values from 1e-40 to 1e15, negative ones and zeros, counts from 0 to 5,000 with
    zero rows; None (the caller sums another way) past 16 slices, with no non-zero value or no row,
    and where a picked row's weight reaches 2**27."""
    from segment_balancer.planner.cost import exact_wide_sums

    def wide(values, counts, minus=None):
        counts = np.asarray(counts, dtype=np.float64)
        return exact_wide_sums(
            values, np.arange(len(values)), counts, list(range(len(counts))), counts.sum(axis=1), minus
        )

    rng = np.random.default_rng(12)
    for trial in range(300):
        n, v = int(rng.integers(1, 12)), int(rng.integers(1, 40))
        values = rng.random(v) * 10.0 ** rng.integers(-40, 15, v)
        if trial % 3 == 0:
            values[rng.integers(0, v, 2)] = 0.0
        if trial % 4 == 0:
            values = values * np.where(rng.random(v) < 0.5, -1.0, 1.0)
        counts = rng.integers(0, 5000, (n, v)) * (rng.random((n, v)) < 0.7)
        if trial % 5 == 0:
            counts[rng.integers(0, n)] = 0
        minus = rng.random(n) * 10.0 ** rng.integers(-3, 12, n) * (rng.random(n) < 0.5)
        # the counts at shuffled columns of a wider matrix whose other columns hold counts too
        width, height = v + int(rng.integers(0, 30)), n + int(rng.integers(0, 4))
        columns = rng.permutation(width)[:v]
        rows = rng.permutation(height)[:n].tolist()
        matrix = rng.integers(0, 5000, (height, width)).astype(np.float64)
        matrix[np.ix_(rows, columns)] = counts
        got = exact_wide_sums(values, columns, matrix, rows, matrix.sum(axis=1), minus)
        if not values.any():
            assert got is None
            continue
        for g in range(n):
            exact = sum((Fraction(float(values[i])) * int(counts[g, i]) for i in range(v)), Fraction(0))
            assert got[g] == float(exact - Fraction(float(minus[g]))), (trial, g)
            assert math.copysign(1.0, got[g]) == 1.0 or got[g] < 0
    assert wide(np.array([1e-300, 1e10]), np.ones((2, 2))) is None  # past 16 slices
    assert wide(np.array([]), np.ones((2, 0))) is None
    assert wide(np.array([0.1]), np.ones((0, 1))) is None
    assert wide(np.array([0.1, 0.2]), np.array([[2.0**26, 2.0**26], [1.0, 1.0]])) is None
    assert wide(np.array([0.1, 0.2]), np.array([[2.0**26, 2.0**26 - 1], [1.0, 1.0]])) == [
        float(Fraction(0.1) * 2**26 + Fraction(0.2) * (2**26 - 1)),
        float(Fraction(0.1) + Fraction(0.2)),
    ]


def test_java_random_port():
    # First values of `new java.util.Random(100).nextInt(3)` printed by OpenJDK 17.
    r = JavaRandom(100)
    assert "".join(str(r.next_int(3)) for _ in range(20)) == "11101022111221002022"


def druid_placement_cluster():
    """The cluster of Druid's testComputePlacementCost: 230 'wiki' segments on 3 servers."""
    segments = []  # (start_ms, end_ms) in CreateDataSegments order: interval-major, then partition
    start = ms("2022-01-01T00:00:00")
    for _ in range(10):
        segments += [(start, start + DAY)] * 10
        start += DAY
    start = ms("2022-03-01T00:00:00")
    for _ in range(10):
        end = plus(start, "MONTH")
        segments += [(start, end)] * 10
        start = end
    segments += [(ms("2023-01-01T00:00:00"), ms("2024-01-01T00:00:00"))] * 30
    rnd = JavaRandom(100)
    server_of = [rnd.next_int(3) for _ in segments]
    return segments, np.array(server_of)


# Druid's testComputePlacementCost: (index of the placed segment in druid_placement_cluster, or
# None for an ALL-granularity segment; its cost on servers 0, 1, 2).
DRUID_PLACEMENT_COSTS = [
    (0, [5191.500804, 8691.392080, 6418.467818]),  # daySegments.get(0)
    (100, [301935.940609, 301935.940606, 304333.677669]),  # monthSegments.get(0)
    (200, [8468764.380437, 12098919.896931, 14501440.169452]),  # yearSegments.get(0)
    (None, [1.1534173737329768e7, 1.6340633534241956e7, 1.9026400521582970e7]),  # ALL
]


@pytest.mark.parametrize("which, expected", DRUID_PLACEMENT_COSTS)
def test_placement_cost_druid_values(which, expected):
    segments, server_of = druid_placement_cluster()
    seg = (ETERNITY_START_MS, ETERNITY_END_MS) if which is None else segments[which]
    for server, want in enumerate(expected):
        # Druid subtracts the self cost when the server holds the segment: leave it out instead.
        rows = [i for i in range(len(segments)) if server_of[i] == server and i != which]
        starts = np.array([segments[i][0] for i in rows], dtype=np.int64)
        ends = np.array([segments[i][1] for i in rows], dtype=np.int64)
        got = placement_cost(*seg, "wiki", starts, ends, np.full(len(rows), "wiki", dtype=object))
        assert got == pytest.approx(want, rel=1e-9, abs=1e-6)


# ---------------------------------------------------------------- ranking order


def test_rank_servers_ties():
    # c and b tie on cost 1.0: b has more available bytes -> first. a and d tie on cost and bytes:
    # smaller name first. e is cheapest.
    costs = {"a": 2.0, "b": 1.0, "c": 1.0, "d": 2.0, "e": 0.0}
    available = {"a": 10, "b": 20, "c": 10, "d": 10, "e": 0}
    assert rank_servers(costs, available) == ["e", "b", "c", "a", "d"]
    # Dropping is the ranking reversed.
    assert sorted(costs, key=lambda n: drop_key(costs[n], available[n], n)) == ["d", "a", "c", "b", "e"]
    assert rank_key(1.0, 5, "x") < rank_key(1.0, 4, "a") < rank_key(1.0, 4, "b") < rank_key(1.5, 99, "a")


def test_rank_servers_errors():
    with pytest.raises(ValueError, match="available"):
        rank_servers({"a": 1.0}, {})
    with pytest.raises(ValueError, match="NaN"):
        rank_servers({"a": float("nan")}, {"a": 1})
