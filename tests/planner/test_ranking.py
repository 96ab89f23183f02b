"""Tests of segment_balancer.planner.ranking: the pair-by-pair ranking of one segment (``explain``), and the
hand example and random clusters that ``test_runstate`` checks the live ranking against."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from segment_balancer.planner.cost import ETERNITY_END_MS, ETERNITY_START_MS
from segment_balancer.planner.ranking import rank_one

HOUR = 3_600_000
DAY = 24 * HOUR
T = 1_640_995_200_000  # 2022-01-01T00:00:00Z
LN2 = math.log(2)

# Hand values (lambda = ln2 / 24 per hour, so a day is b = ln 2 in lambda units; costs scale 1/lambda^2
# = 576 / ln2^2):
# - a day with the same day, same datasource: 2 * 2 (b + e^-b - 1) / lambda^2 = 4 * 576 (ln2 - 1/2) / ln2^2
C_SAME_DAY = 4 * 576 * (LN2 - 0.5) / LN2**2  # 926.2323...
# - a day with the next day, other datasource: (1 - e^-b)^2 / lambda^2 = (1/2)^2 * 576 / ln2^2
C_NEXT_DAY_OTHER_DS = 144 / LN2**2  # 299.7171...

SEGMENTS = {  # idx: (datasource, start_ms, end_ms)
    1: ("a", T, T + DAY),  # X
    2: ("a", T, T + DAY),  # Y: another partition of X's time chunk
    3: ("b", T, T + DAY),  # Z
    4: ("b", T, T + DAY),  # Z2
    5: ("a", T + 50 * DAY, T + 51 * DAY),  # W: 50 days after X, outside the 45-day window
    6: ("b", T + DAY, T + 2 * DAY),  # V: the next day
}
PROJECTED = [  # (server, tier, idx)
    ("s1", "hot", 1),
    ("s1", "hot", 2),  # s1: X itself + Y           -> C_SAME_DAY for X
    ("s2", "hot", 2),  # s2: Y                      -> C_SAME_DAY for X
    ("s3", "hot", 3),
    ("s3", "hot", 4),  # s3: 2 x (other ds, 1/2 C)  -> C_SAME_DAY for X
    ("s4", "hot", 5),  # s4: W, 50 days away        -> 0
    ("s6", "hot", 1),
    ("s6", "hot", 3),  # s6 is decommissioning: never a candidate
    ("c1", "cold", 6),  # c1: V, next day, other ds  -> C_NEXT_DAY_OTHER_DS
    ("c2", "cold", 1),
]
SERVERS = [  # (server, tier, available_bytes, decommissioning)
    ("s1", "hot", 100, False),
    ("s2", "hot", 200, False),
    ("s3", "hot", 300, False),
    ("s4", "hot", 300, False),
    ("s5", "hot", 300, False),  # empty
    ("s6", "hot", 1000, True),
    ("c1", "cold", 10, False),
    ("c2", "cold", 10, True),
    ("e1", "empty", 10, True),
]

EXPECTED = {
    # X on hot: s1, s2, s3 tie on C_SAME_DAY (s1 without X itself): more bytes first (s3 300, s2 200,
    # s1 100); s4 and s5 tie on 0 and 300 bytes: smaller name first.
    (1, "hot"): (["s4", "s5", "s3", "s2", "s1"], [0.0, 0.0, C_SAME_DAY, C_SAME_DAY, C_SAME_DAY]),
    # Y on hot: s2 holds only Y itself -> 0; s1 holds X -> C_SAME_DAY.
    (2, "hot"): (["s4", "s5", "s2", "s3", "s1"], [0.0, 0.0, 0.0, C_SAME_DAY, C_SAME_DAY]),
    (1, "cold"): (["c1"], [C_NEXT_DAY_OTHER_DS]),
    (1, "empty"): ([], []),
}


def plain_rank(segments, projected, servers, idx, tier):
    ds, start, end = segments[idx]
    tier_projected = pd.DataFrame(
        [(server, i, *segments[i]) for server, t, i in projected if t == tier],
        columns=["server", "idx", "datasource", "start_ms", "end_ms"],
    )
    tier_servers = pd.DataFrame(
        [(s, a, d) for s, t, a, d in servers if t == tier],
        columns=["server", "available_bytes", "decommissioning"],
    )
    segment = {"idx": idx, "datasource": ds, "start_ms": start, "end_ms": end}
    return rank_one(segment, tier_projected, tier_servers)


def test_rank_one_hand_example():
    for (idx, tier), (servers, costs) in EXPECTED.items():
        got_servers, got_costs = plain_rank(SEGMENTS, PROJECTED, SERVERS, idx, tier)
        assert got_servers == servers
        assert got_costs == pytest.approx(costs, rel=1e-12)
    # The three C_SAME_DAY costs are exact ties (order independent exact sums).
    _, costs = plain_rank(SEGMENTS, PROJECTED, SERVERS, 1, "hot")
    assert costs[2] == costs[3] == costs[4]


def test_rank_one_for_a_segment_outside_the_used_set():
    """``explain`` of an overshadowed or unused segment: it has no idx, so nothing is left out as
    "itself". A same-day segment of datasource "a" (like X) against hot: s1 holds X and Y, so
    2 x C_SAME_DAY; s2 holds Y and s3 holds Z and Z2, so C_SAME_DAY each; s4 (W, 50 days away) and
    s5 (empty) are 0."""
    ds, start, end = SEGMENTS[1]
    tier_projected = pd.DataFrame(
        [(server, i, *SEGMENTS[i]) for server, t, i in PROJECTED if t == "hot"],
        columns=["server", "idx", "datasource", "start_ms", "end_ms"],
    )
    tier_servers = pd.DataFrame(
        [(s, a, d) for s, t, a, d in SERVERS if t == "hot"], columns=["server", "available_bytes", "decommissioning"]
    )
    order, costs = rank_one(
        {"idx": None, "datasource": ds, "start_ms": start, "end_ms": end}, tier_projected, tier_servers
    )
    assert order == ["s4", "s5", "s3", "s2", "s1"]
    assert costs == pytest.approx([0.0, 0.0, C_SAME_DAY, C_SAME_DAY, 2 * C_SAME_DAY], rel=1e-12)


def random_cluster(seed: int):
    rng = random.Random(seed)
    segments = {}
    for i in range(80):
        gran = rng.choice([HOUR, DAY, DAY, 7 * DAY, 30 * DAY, 365 * DAY, None])
        start = T + rng.randrange(-400, 400) * DAY + rng.choice([0, 6 * HOUR])
        if gran is None:
            segments[i] = (rng.choice("ab"), ETERNITY_START_MS, ETERNITY_END_MS)
        else:
            segments[i] = (rng.choice("abc"), start, start + gran)
    # Copies of time chunks (partitions), so chunk sharing and counts are exercised.
    for i in range(80, 120):
        segments[i] = (segments[i - 80][0], segments[i - 80][1], segments[i - 80][2])
    servers = [(f"h{k}", "hot", rng.choice([5, 10]), k == 4) for k in range(6)]
    projected = []
    for i in segments:
        for server, _, _, _ in rng.sample(servers, rng.choice([0, 1, 2, 3])):
            projected.append((server, "hot", i))
    return segments, projected, servers
