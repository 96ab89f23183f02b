"""livecost: the closed-form live placement cost equals Druid's pair-by-pair sum (cost.placement_cost)."""

from __future__ import annotations

import numpy as np
import pytest
from test_cost import DRUID_PLACEMENT_COSTS, druid_placement_cluster

from segment_balancer.planner.cost import ETERNITY_END_MS, ETERNITY_START_MS, joint_cost, placement_cost
from segment_balancer.planner.livecost import IntervalKeys, TierCosts, total_cost

HOUR, DAY = 3_600_000, 86_400_000
T0 = 1_640_995_200_000  # 2022-01-01


def _tier(datasource, start, end, n_servers):
    keys, key_of = IntervalKeys.build(np.asarray(datasource, dtype=object), np.asarray(start), np.asarray(end))
    return keys, key_of, TierCosts(keys, n_servers)


@pytest.mark.parametrize("which, expected", DRUID_PLACEMENT_COSTS)
def test_druid_compute_placement_cost_values(which, expected):
    """Druid's CostBalancerStrategyTest.testComputePlacementCost: the segment is on one of the three
    servers, whose self cost is subtracted (``holders``)."""
    segments, server_of = druid_placement_cluster()
    intervals = segments + [(ETERNITY_START_MS, ETERNITY_END_MS)]
    keys, key_of, tier = _tier(["wiki"] * len(intervals), [s for s, _ in intervals], [e for _, e in intervals], 3)
    tier.add_many(server_of, key_of[:-1])
    key = key_of[-1] if which is None else key_of[which]
    holders = np.zeros(3, bool)
    if which is not None:
        holders[server_of[which]] = True
    np.testing.assert_allclose(tier.costs(key, holders), expected, rtol=1e-9, atol=1e-6)


def _random_universe(rng, n):
    """n intervals of mixed granularity (minutes to years, a few zero-length, eternity) over ~2 years,
    in three datasources."""
    gran = rng.choice(
        [HOUR, DAY, 7 * DAY, 31 * DAY, 365 * DAY, 15 * 60_000, 0], n, p=[0.4, 0.3, 0.1, 0.08, 0.04, 0.06, 0.02]
    )
    start = T0 + rng.integers(0, 730, n) * DAY + rng.integers(0, 24, n) * HOUR
    end = start + gran
    ds = rng.choice(np.array(["wiki", "clicks", "orders"], dtype=object), n)
    start[:2], end[:2] = ETERNITY_START_MS, ETERNITY_END_MS
    return ds, start, end


def _reference(tier_rows, key, keys, holders_server=None):
    """Pair-by-pair costs per server: ``tier_rows`` lists (server, key) of projected segments."""
    out = []
    for server in range(tier_rows["n"]):
        rows = [k for s, k in tier_rows["rows"] if s == server]
        if holders_server is not None and server in holders_server:
            rows.remove(key)
        rows = np.asarray(rows, dtype=np.int64)
        out.append(
            placement_cost(
                keys.start_ms[key],
                keys.end_ms[key],
                keys.datasources[keys.datasource[key]],
                keys.start_ms[rows],
                keys.end_ms[rows],
                np.asarray(keys.datasources, dtype=object)[keys.datasource[rows]],
            )
        )
    return np.array(out)


def test_random_tiers_match_druids_formula_after_loads_and_drops():
    rng = np.random.default_rng(7458)
    ds, start, end = _random_universe(rng, 400)
    keys, key_of, tier = _tier(ds, start, end, 6)
    rows = [(int(rng.integers(6)), int(k)) for k in rng.choice(key_of, 900)]
    tier.add_many(np.array([s for s, _ in rows]), np.array([k for _, k in rows]))
    # live changes: 200 loads one by one, 150 drops of present segments
    for _ in range(200):
        s, k = int(rng.integers(6)), int(rng.choice(key_of))
        tier.add(s, k, +1)
        rows.append((s, k))
    for j in sorted(rng.choice(len(rows), 150, replace=False).tolist(), reverse=True):
        s, k = rows.pop(j)
        tier.add(s, k, -1)
    state = {"n": 6, "rows": rows}
    for key in rng.choice(len(keys), 60, replace=False):
        held = {s for s, k in rows if k == key}
        holders = np.array([s in held for s in range(6)])
        want = _reference(state, int(key), keys, held)
        np.testing.assert_allclose(tier.costs(int(key), holders), want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(tier.costs(int(key)), _reference(state, int(key), keys), rtol=1e-9, atol=1e-9)


def test_window_edges_are_druids():
    """A day ending exactly 45 days before the segment starts is outside the window; one ending
    1 ms later is inside (Joda overlaps, [start - 45 d, end + 45 d)); likewise after the end."""
    a0 = T0 + 100 * DAY
    starts = [a0, a0 - 46 * DAY, a0 - 46 * DAY + 1, a0 + DAY + 45 * DAY - 1, a0 + DAY + 45 * DAY]
    keys, key_of, tier = _tier(["wiki"] * 5, starts, [s + DAY for s in starts], 2)
    tier.add_many(np.array([0, 0, 1, 1]), key_of[[1, 2, 3, 4]])
    got = tier.costs(int(key_of[0]))
    inside = [joint_cost(a0, a0 + DAY, "wiki", [starts[i]], [starts[i] + DAY], ["wiki"])[0] for i in (2, 3)]
    assert inside[0] > 0 and inside[1] > 0
    assert got[0] == pytest.approx(inside[0], rel=1e-9)  # day 1 (ends at a0 - 45 d) left out
    assert got[1] == pytest.approx(inside[1], rel=1e-9)  # day 4 (starts at a1 + 45 d) left out


def test_a_drop_of_an_absent_segment_is_refused():
    keys, key_of, tier = _tier(["wiki"], [T0], [T0 + DAY], 1)
    with pytest.raises(ValueError, match="no projected segment"):
        tier.add(0, int(key_of[0]), -1)


def test_total_cost_sums_the_joint_cost_of_every_pair_on_each_server():
    """Server a holds wiki and koala of 2022-01-01 and wiki of the next day; b holds that next-day
    wiki again (a pair needs two segments on one server: b adds nothing). By hand: the three pairs
    on a, each by Druid's formula (``joint_cost``), and moving the koala to b removes its two."""
    day, jan1 = 86_400_000, 1_640_995_200_000
    ds = np.array(["wiki", "koala", "wiki", "wiki"], dtype=object)
    start = np.array([jan1, jan1, jan1 + day, jan1 + day])
    end = start + day

    def pair(i, j):
        return float(joint_cost(start[[i]], end[[i]], ds[[i]], start[[j]], end[[j]], ds[[j]])[0])

    on_a = np.array(["a", "a", "a", "b"], dtype=object)
    assert total_cost(ds, start, end, on_a) == pytest.approx(pair(0, 1) + pair(0, 2) + pair(1, 2), rel=1e-12)
    koala_on_b = np.array(["a", "b", "a", "b"], dtype=object)
    assert total_cost(ds, start, end, koala_on_b) == pytest.approx(pair(0, 2) + pair(1, 3), rel=1e-12)
    assert total_cost(ds[:0], start[:0], end[:0], on_a[:0]) == 0.0


@pytest.mark.parametrize("lengths", ["granularities", "many"])
def test_the_overlapping_keys_of_every_key_are_those_a_pairwise_check_finds(lengths):
    """``TierCosts``' overlap lists (what a segment's cost sums over) against every pair checked
    by Joda's ``overlaps`` (``b0 < a1 and b1 > a0``), in the order the sums take them: the keys of
    at most 31 days by start (ties by key), then the longer ones by key. Hours, days, months,
    years and zero-length keys; or over 32 distinct lengths (searched by ranges of lengths)."""
    rng = np.random.default_rng(7)
    n = 600
    start = rng.integers(0, 24 * 400, n).astype(np.int64) * 3_600_000
    if lengths == "granularities":
        length = rng.choice([0, 3_600_000, 86_400_000, 31 * 86_400_000, 366 * 86_400_000], n)
    else:
        length = rng.integers(0, 60 * 86_400_000, n)
    datasource = np.array([f"ds{d}" for d in rng.integers(0, 3, n)], dtype=object)
    keys, _ = IntervalKeys.build(datasource, start, start + length.astype(np.int64))
    costs = TierCosts(keys, 2)
    s, e = keys.start_ms, keys.end_ms
    short = [j for j in np.argsort(s, kind="stable") if e[j] - s[j] <= TierCosts.SHORT_SPAN_MS]
    long_ = [j for j in range(len(keys)) if e[j] - s[j] > TierCosts.SHORT_SPAN_MS]
    for a in range(len(keys)):
        expected = [b for b in short + long_ if s[b] < e[a] and e[b] > s[a]]
        got = costs._over[costs._offsets[a] : costs._offsets[a + 1]].tolist()
        assert got == expected, a
    assert len(costs._over) > 2 * len(keys)  # keys do overlap others: the lists are not trivial
