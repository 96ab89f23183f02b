"""Balancing kernels (stages 7, 10, 11) on a two-server tier, worked by hand.

Server ``a`` serves segments 0 and 1 (same datasource, adjacent days); ``b`` is empty. With the
default function, B(2 servers, target 1) = 1 + floor(log 2 / log 5) = 1. Whichever segment is drawn
first costs more on ``a`` (its neighbour is there) than on empty ``b`` (0), so its holder ``a`` is
outside the top 1 and it moves to ``b``. The other segment then costs 0 on ``a`` (nothing else
there) and more on ``b``: its holder is in the top 1, so it stays. Exactly one move.
"""

import numpy as np

from segment_balancer.engine.balancing import balance_listed, balance_tier, tier_rng
from segment_balancer.engine.state import StageLimit

from .tiers import tier_run


def model():
    return tier_run("t", [("a", 1000, False, 20), ("b", 1000)],
                    [{"idx": 0, "day": 0, "served": ["a"]}, {"idx": 1, "day": 1, "served": ["a"]}])


def test_one_move_then_the_loop_stops_after_the_window():
    run, visited = model(), set()
    stats = balance_tier(run, np.array([0, 1]), StageLimit(queue_type="balancing"), tier_rng(0, 7, "t"), visited, 100, 80, run.sink, True)
    assert [(o.action, o.server, o.queue_type, o.dep_server) for o in run.sink.ops] == [
        ("LOAD", "b", "balancing", None), ("DROP", "a", None, "b")]
    moved = run.sink.ops[0].idx
    assert run.segment(moved).present() == {"a", "b"} and run.segment(moved).count() == 1
    assert run.segment(moved).serving() == [] and run.segment(1 - moved).serving() == ["a"]
    # 1 success and 99 failures: after 100 iterations at least 80 of the last 100 failed.
    assert stats == {"iterations": 100, "moves": 1}
    assert visited == {0, 1}
    assert not any(g.startswith("ToBeBalanced") for _, g in run.sink.members)


def test_visited_segments_are_not_moved_again():
    run = model()
    balance_tier(run, np.array([0, 1]), StageLimit(queue_type="balancing"), tier_rng(0, 11, "t"), {0, 1}, 100, 80, run.sink, False)
    assert run.sink.ops == []


def test_blocked_destination_records_to_be_balanced_then_stage_10_moves_it():
    run = model()
    blocked = StageLimit(7, "balancing", "balancing", 0, 10)  # no balancing load may be queued
    balance_tier(run, np.array([0, 1]), blocked, tier_rng(0, 7, "t"), set(), 100, 80, run.sink, True)
    assert run.sink.ops == []
    # Both segments, ranked against the unchanged state, have holder a outside top 1.
    assert sorted(run.sink.members) == [(0, "ToBeBalanced[t]"), (1, "ToBeBalanced[t]")]
    stage10 = model()
    moves = balance_listed(stage10, [1, 0], StageLimit(10, "balancing", "all", 10, 10), stage10.sink)
    # Stage 10 in index order: segment 0 moves to b; segment 1 then prefers a (now empty of others).
    assert moves == 1
    assert [(o.action, o.idx, o.server) for o in stage10.sink.ops] == [("LOAD", 0, "b"), ("DROP", 0, "a")]


def test_same_seed_same_draws():
    a = tier_rng(42, 7, "hot").integers(0, 1000, 10)
    b = tier_rng(42, 7, "hot").integers(0, 1000, 10)
    c = tier_rng(42, 7, "cold").integers(0, 1000, 10)
    assert (a == b).all() and not (a == c).all()
