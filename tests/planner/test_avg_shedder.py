"""The avgShedder pairs (ALGORITHM.md "Balancing strategy ``avgShedder``"), worked by hand."""

from __future__ import annotations

import pytest

from segment_balancer.planner.avg_shedder import Usage, next_counts, pair_key, pair_tier

GB, SEG = 1_000_000_000, 500_000_000


def test_highest_pairs_with_lowest_and_an_odd_middle_server_is_unpaired():
    servers = [Usage("a", 90, 100), Usage("b", 10, 100), Usage("c", 50, 100), Usage("d", 70, 100), Usage("e", 20, 100)]
    pairs = pair_tier("t", servers, {})
    # scores: b 10, e 20, c 50, d 70, a 90 -> (a, b) 80, (d, e) 50; c unpaired
    assert [(p.high.server, p.low.server, p.difference) for p in pairs] == [("a", "b", 80.0), ("d", "e", 50.0)]
    assert all(p.hit_count == 1 and not p.sheds for p in pairs)  # count 1 < 2: wait a run
    assert pairs[0].bytes_to_move == 40  # (90·100 − 10·100) / 200


def test_ties_in_score_go_by_name():
    pairs = pair_tier("t", [Usage(n, 50, 100) for n in "dcba"], {})
    assert [(p.high.server, p.low.server) for p in pairs] == [("d", "a"), ("c", "b")]


@pytest.mark.parametrize("used_high, hits", [(65, False), (65.0001, True)])
def test_exactly_the_low_threshold_does_not_hit(used_high, hits):
    [pair] = pair_tier("t", [Usage("h", int(used_high * 10_000), 1_000_000), Usage("l", 500_000, 1_000_000)], {})
    assert (pair.hit_count > 0) is hits  # a difference of exactly 15 points does not hit


def test_exactly_the_high_threshold_sheds_only_by_the_low_count():
    high, low = Usage("h", 90, 100), Usage("l", 50, 100)  # difference exactly 40
    [pair] = pair_tier("t", [high, low], {pair_key("h", "l"): 5})
    assert pair.hit_count == 6 and not pair.sheds  # 40 is not above 40: it waits for the count of 8
    assert pair.waiting == "shed in 2 more run(s) if the gap stays above 15"
    [pair] = pair_tier("t", [high, low], {pair_key("h", "l"): 7})
    assert pair.hit_count == 8 and pair.sheds


def test_unequal_sizes_move_the_bytes_that_equalise_the_percentages():
    # h 300 of 400 (75 %), l 50 of 100 (50 %): x = (300·100 − 50·400) / 500 = 20 -> 280/400 = 70 %, 70/100 = 70 %
    [pair] = pair_tier("t", [Usage("h", 300, 400), Usage("l", 50, 100)], {}, low_threshold=10)
    assert pair.bytes_to_move == 20


def test_the_added_server_cluster_sheds_in_runs_2_and_10():
    """Druid's ``BalancingStrategiesTest`` added-server cluster with 200 GB historicals: four hold
    250 segments of 500 MB (125 GB, 62.5 %), a fifth is empty; every move completes between runs.

    - Run 1: pairs (d, e) 62.5 points and (c, a) 0; (d, e) hits with count 1 < 2: no move.
    - Run 2: (d, e) count 2, 62.5 > 40: sheds x = 125 GB·200 / 400 = 62.5 GB = 125 segments. Forgotten.
    - Runs 3–9: d and e at 31.25 %; pairs (c, d) and (b, e) 31.25 points: above 15, not 40;
      counts 1 … 7 < 8: no move.
    - Run 10: counts 8: both shed x = (125 − 62.5) GB / 2 = 31.25 GB: 62 whole segments each, 124.
    """
    used = {"a": 250 * SEG, "b": 250 * SEG, "c": 250 * SEG, "d": 250 * SEG, "e": 0}
    state: dict = {}
    moves = []
    for _ in range(10):
        pairs = pair_tier("T1", [Usage(s, u, 200 * GB) for s, u in used.items()], state)
        moved = 0
        for p in pairs:
            if p.sheds:
                n = p.bytes_to_move // SEG  # whole segments, none beyond x
                used[p.high.server] -= n * SEG
                used[p.low.server] += n * SEG
                moved += n
        moves.append(moved)
        state = next_counts(pairs)
    assert moves == [0, 125, 0, 0, 0, 0, 0, 0, 0, 124]


def test_a_pair_that_stops_hitting_or_sheds_is_forgotten():
    pairs = pair_tier(
        "t",
        [Usage("h", 90, 100), Usage("l", 10, 100), Usage("x", 51, 100), Usage("y", 50, 100)],
        {pair_key("h", "l"): 1, pair_key("x", "y"): 3},
    )
    assert {p.key: (p.hit_count, p.sheds) for p in pairs} == {("h", "l"): (2, True), ("x", "y"): (0, False)}
    assert next_counts(pairs) == {}
