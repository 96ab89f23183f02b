"""Balancing kernels (stages 7, 10, 11), worked by hand.

Two-server tier (``model``): server ``a`` serves segments 0 and 1 (same datasource, adjacent days);
``b`` is empty. With the default function, B(2 servers, target 1) = 1 + floor(log 2 / log 5) = 1.
Whichever segment is drawn first costs more on ``a`` (its neighbour is there) than on empty ``b``
(0), so ``b`` ranks first: it is a non-holding server of top 1 ahead of the holder, and the holder
is outside top 1, so both ``balancingMoveTrigger`` values move it to ``b``. The other segment then
costs 0 on ``a`` (nothing else there) and more on ``b``: its holder ranks first, so it stays.
Exactly one move.

Five-server tier (``second_behind_empty``), where the triggers differ: B(5, 1) = 1 + floor(log 5 /
log 5) = 2. Segment 0 (day 0) is on ``a`` with segment 9 (day 20); ``b``, ``c``, ``d`` each serve a
segment of day 1; ``e`` is empty. Costs of segment 0: ``e`` 0, ``a`` the day-20 term only (self left
out), ``b``/``c``/``d`` the adjacent-day term, far larger. Ranking e, a, b, c, d: the holder ``a`` is
inside top 2, so ``outsideTopB`` never moves it, while ``betterServerInTopB`` moves it to ``e``,
which ranks ahead of it.
"""

import numpy as np
import pytest

from segment_balancer.planner.kernels.balancing import (
    Balancing,
    balance_listed,
    balance_tier,
    movable_holders,
    tier_rng,
)
from segment_balancer.planner.runstate import StageLimit

from .tiers import tier_run


def model():
    return tier_run(
        "t",
        [("a", 1000, False, 20), ("b", 1000)],
        [{"idx": 0, "day": 0, "served": ["a"]}, {"idx": 1, "day": 1, "served": ["a"]}],
    )


TRIGGERS = ["betterServerInTopB", "outsideTopB"]


def second_behind_empty():
    return tier_run(
        "t",
        [("a", 1000), ("b", 1000), ("c", 1000), ("d", 1000), ("e", 1000)],
        [
            {"idx": 0, "day": 0, "served": ["a"]},
            {"idx": 9, "day": 20, "served": ["a"]},
            {"idx": 1, "day": 1, "served": ["b"]},
            {"idx": 2, "day": 1, "served": ["c"]},
            {"idx": 3, "day": 1, "served": ["d"]},
        ],
    )


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_one_move_then_the_loop_stops_after_the_window(trigger):
    run, visited = model(), set()
    stats = balance_tier(
        run,
        np.array([0, 1]),
        tier_rng(0, 7, "t"),
        visited,
        run.sink,
        Balancing(StageLimit(queue_type="balancing"), 100, 80, True, trigger),
    )
    assert [(o.action, o.server, o.queue_type, o.dep_server) for o in run.sink.ops] == [
        ("LOAD", "b", "balancing", None),
        ("DROP", "a", None, "b"),
    ]
    moved = run.sink.ops[0].idx
    assert run.segment(moved).present() == {"a", "b"} and run.segment(moved).count() == 1
    assert run.segment(moved).serving() == [] and run.segment(1 - moved).serving() == ["a"]
    # 1 success and 99 failures: after 100 iterations at least 80 of the last 100 failed.
    assert stats == {"iterations": 100, "moves": 1}
    assert visited == {0, 1}
    assert not any(g.startswith("ToBeBalanced") for _, g in run.sink.members)


def test_visited_segments_are_not_moved_again():
    run = model()
    balance_tier(
        run,
        np.array([0, 1]),
        tier_rng(0, 11, "t"),
        {0, 1},
        run.sink,
        Balancing(StageLimit(queue_type="balancing"), 100, 80, False),
    )
    assert run.sink.ops == []


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_blocked_destination_records_to_be_balanced_then_stage_10_moves_it(trigger):
    run = model()
    blocked = StageLimit(7, "balancing", "balancing", 0, 10)  # no balancing load may be queued
    balance_tier(
        run, np.array([0, 1]), tier_rng(0, 7, "t"), set(), run.sink, Balancing(blocked, 100, 80, True, trigger)
    )
    assert run.sink.ops == []
    # Both segments, ranked against the unchanged state, have holder a outside top 1.
    assert sorted(run.sink.members) == [(0, "ToBeBalanced[t]"), (1, "ToBeBalanced[t]")]
    stage10 = model()
    moves = balance_listed(stage10, [1, 0], StageLimit(10, "balancing", "all", 10, 10), stage10.sink, trigger)
    # Stage 10 in index order: segment 0 moves to b; segment 1 then prefers a (now empty of others).
    assert moves == 1
    assert [(o.action, o.idx, o.server) for o in stage10.sink.ops] == [("LOAD", 0, "b"), ("DROP", 0, "a")]


def test_the_triggers_differ_for_a_holder_second_behind_an_empty_server():
    ranked = second_behind_empty()
    seg = ranked.segment(0)
    assert ranked.rank(seg) == ["e", "a", "b", "c", "d"] and ranked.b(seg) == 2
    ranking, costs = ranked.ranked(seg)
    assert movable_holders(ranked, seg, ranking, costs, 2, "outsideTopB") == []
    assert movable_holders(ranked, seg, ranking, costs, 2, "betterServerInTopB") == ["a"]

    limit = StageLimit(queue_type="balancing")
    moved = second_behind_empty()
    balance_tier(
        moved,
        np.array([0]),
        tier_rng(0, 7, "t"),
        set(),
        moved.sink,
        Balancing(limit, 100, 80, True, "betterServerInTopB"),
    )
    assert [(o.action, o.idx, o.server, o.dep_server) for o in moved.sink.ops] == [
        ("LOAD", 0, "e", None),
        ("DROP", 0, "a", "e"),
    ]
    kept = second_behind_empty()
    balance_tier(
        kept, np.array([0]), tier_rng(0, 7, "t"), set(), kept.sink, Balancing(limit, 100, 80, True, "outsideTopB")
    )
    assert kept.sink.ops == [] and kept.sink.members == []  # not a failed move: nothing to record


def test_stage_10_moves_only_the_holders_the_trigger_selects():
    """Segment 0 of the five-server tier with target 2, held by ``a`` and ``b``: B(5, 2) = 3. Costs:
    ``e`` 0; ``a`` the day-20 term; ``b``, ``c``, ``d`` the adjacent-day term (``b`` its own day-1
    segment, idx 1, with the self term left out). ``current_size`` is 0 everywhere, so the tie goes
    by name: ranking e, a, b, c, d; top 3 = e, a, b. ``betterServerInTopB``: the holders behind
    ``e`` (the best non-holder of top 3) are a and b; b (worst) moves to e, then a has no non-holder
    of top 3 ahead of it (e is now loading), so the segment stays listed. ``outsideTopB``: both
    holders are inside top 3: no move, and the segment leaves the group."""

    def tier():
        return tier_run(
            "t",
            [("a", 1000), ("b", 1000), ("c", 1000), ("d", 1000), ("e", 1000)],
            [
                {"idx": 0, "day": 0, "target": 2, "served": ["a", "b"]},
                {"idx": 9, "day": 20, "served": ["a"]},
                {"idx": 1, "day": 1, "served": ["b"]},
                {"idx": 2, "day": 1, "served": ["c"]},
                {"idx": 3, "day": 1, "served": ["d"]},
            ],
        )

    probe = tier()
    assert probe.rank(probe.segment(0)) == ["e", "a", "b", "c", "d"] and probe.b(probe.segment(0)) == 3
    limit = StageLimit(10, "balancing", "all", 10, 10)
    run = tier()
    assert balance_listed(run, [0], limit, run.sink, "betterServerInTopB") == 1
    assert [(o.action, o.server, o.dep_server) for o in run.sink.ops] == [("LOAD", "e", None), ("DROP", "b", "e")]
    assert run.sink.members == [(0, "ToBeBalanced[t]")]
    run = tier()
    assert balance_listed(run, [0], limit, run.sink, "outsideTopB") == 0
    assert run.sink.ops == [] and run.sink.members == []


def test_same_seed_same_draws():
    a = tier_rng(42, 7, "hot").integers(0, 1000, 10)
    b = tier_rng(42, 7, "hot").integers(0, 1000, 10)
    c = tier_rng(42, 7, "cold").integers(0, 1000, 10)
    assert (a == b).all() and not (a == c).all()


# ---- "better than" is strictly cheaper, by the margin (ALGORITHM.md stage 7) ----------
# Hand-worked costs: the joint cost of two one-day segments of one datasource decays with a 24 h
# half-life of the gap between them, so a neighbour two days after costs exactly a quarter of an
# adjacent one ((1/2)^2), and a neighbour the day before costs what one the day after costs.


def _quarter():
    """X (idx 0, day 10) on a beside Y (day 11); b holds Z (day 13): cost(b) = cost(a) / 4."""
    return tier_run(
        "t",
        [("a", 1000), ("b", 1000)],
        [
            {"idx": 0, "day": 10, "served": ["a"]},
            {"idx": 1, "day": 11, "served": ["a"]},
            {"idx": 2, "day": 13, "served": ["b"]},
        ],
    )


@pytest.mark.parametrize("margin, moves", [(0, True), (70, True), (74.9, True), (75, False), (80, False)])
def test_a_move_needs_the_destination_cheaper_by_the_margin(margin, moves):
    run = _quarter()
    seg = run.segment(0)
    ranking, costs = run.ranked(seg)
    assert ranking == ["b", "a"] and run.b(seg) == 1
    assert costs[run.pos["b"]] == pytest.approx(costs[run.pos["a"]] / 4, rel=1e-12)
    balance_tier(
        run,
        np.array([0]),
        tier_rng(0, 7, "t"),
        set(),
        run.sink,
        Balancing(StageLimit(queue_type="balancing"), 100, 80, True, "betterServerInTopB", margin),
    )
    if moves:  # cost(b) = cost(a) x 0.25 < cost(a) x (1 - margin / 100)
        assert [(o.action, o.server, o.dep_server) for o in run.sink.ops] == [("LOAD", "b", None), ("DROP", "a", "b")]
    else:
        assert run.sink.ops == [] and run.sink.members == []  # nothing better: not a failed move
        [(idx, _, tier, outcome, detail)] = [d for d in run.sink.decisions if d[3] == "balanced"]
        assert (idx, tier, detail["margin"], detail["holders"], detail["top_b"]) == (0, "t", margin, ["a"], ["b"])
        assert detail["costs"]["b"] == pytest.approx(detail["costs"]["a"] / 4, rel=1e-12)


def test_equal_costs_never_move_a_replica_whatever_the_free_bytes():
    """X (day 10) on a beside Y (day 11); b holds W (day 9) and has more room: the costs tie, the
    ranking puts b first (more available bytes), yet nothing moves (a move here would move back the next
    run)."""
    run = tier_run(
        "t",
        [("a", 100), ("b", 1000)],
        [
            {"idx": 0, "day": 10, "served": ["a"]},
            {"idx": 1, "day": 11, "served": ["a"]},
            {"idx": 2, "day": 9, "served": ["b"]},
        ],
    )
    seg = run.segment(0)
    ranking, costs = run.ranked(seg)
    assert costs[run.pos["a"]] == costs[run.pos["b"]] > 0 and ranking == ["b", "a"]
    assert movable_holders(run, seg, ranking, costs, 1, "betterServerInTopB") == []
    assert movable_holders(run, seg, ranking, costs, 1, "outsideTopB") == []
    balance_tier(
        run,
        np.array([0]),
        tier_rng(0, 7, "t"),
        set(),
        run.sink,
        Balancing(StageLimit(queue_type="balancing"), 100, 80, True),
    )
    assert run.sink.ops == []
    # stage 10 on the same segment (listed by an earlier stage 7): no holder is selected, it leaves the group
    assert balance_listed(run, [0], StageLimit(10, "balancing", "all", 10, 10), run.sink) == 0
    assert run.sink.members == []
