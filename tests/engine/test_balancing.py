"""Balancing kernels (stages 7, 10, 11) on a two-server tier, worked by hand.

Server ``a`` serves segments 0 and 1 (same datasource, adjacent days); ``b`` is empty. With the
default function, B(2 servers, target 1) = 1 + floor(log 2 / log 5) = 1. Whichever segment is drawn
first costs more on ``a`` (its neighbour is there) than on empty ``b`` (0), so its holder ``a`` is
outside the top 1 and it moves to ``b``. The other segment then costs 0 on ``a`` (nothing else
there) and more on ``b``: its holder is in the top 1, so it stays. Exactly one move.
"""

import numpy as np

from segment_balancer.config import build_config
from segment_balancer.engine.balancing import TierProjection, balance_listed, balance_tier, tier_rng
from segment_balancer.engine.state import OpSink, ServerHolder, StageLimit

DAY = 86_400_000
NUM_BEST = build_config({}).num_best_servers


def model():
    segs = {0: ("ds", 0, DAY), 1: ("ds", DAY, 2 * DAY)}
    rows = {i: {"idx": i, "segment_id": f"seg{i}", "datasource": "ds", "size_bytes": 10, "target": 1} for i in segs}
    proj = TierProjection(segs, {"a": {0, 1}})
    holders = {0: {"a"}, 1: {"a"}}
    present = {0: {"a"}, 1: {"a"}}
    servers = {n: ServerHolder(n, "t", max_size=1000, projected_size=20 if n == "a" else 0) for n in ("a", "b")}
    return rows, proj, holders, present, servers


def test_one_move_then_the_loop_stops_after_the_window():
    rows, proj, holders, present, servers = model()
    sink, visited = OpSink(), set()
    stats = balance_tier("t", np.array([0, 1]), rows, proj, holders, present, servers, StageLimit(),
                         NUM_BEST, tier_rng(0, 7, "t"), visited, 100, 80, sink, 7, True)
    assert [(o.action, o.server, o.queue_type, o.dep_server) for o in sink.ops] == [
        ("LOAD", "b", "balancing", None), ("DROP", "a", None, "b")]
    moved = sink.ops[0].idx
    assert proj.placement["b"] == {moved} and proj.placement["a"] == {1 - moved}
    # 1 success and 99 failures: after 100 iterations at least 80 of the last 100 failed.
    assert stats == {"iterations": 100, "moves": 1}
    assert visited == {0, 1}
    assert not any(g.startswith("ToBeBalanced") for _, g in sink.members)


def test_visited_segments_are_not_moved_again():
    rows, proj, holders, present, servers = model()
    sink = OpSink()
    balance_tier("t", np.array([0, 1]), rows, proj, holders, present, servers, StageLimit(),
                 NUM_BEST, tier_rng(0, 11, "t"), {0, 1}, 100, 80, sink, 11, False)
    assert sink.ops == []


def test_blocked_destination_records_to_be_balanced_then_stage_10_moves_it():
    rows, proj, holders, present, servers = model()
    sink = OpSink()
    blocked = StageLimit("balancing", 0, 10)  # no balancing load may be queued
    balance_tier("t", np.array([0, 1]), rows, proj, holders, present, servers, blocked,
                 NUM_BEST, tier_rng(0, 7, "t"), set(), 100, 80, sink, 7, True)
    assert sink.ops == []
    # Both segments, ranked against the unchanged state, have holder a outside top 1.
    assert sorted(sink.members) == [(0, "ToBeBalanced[t]"), (1, "ToBeBalanced[t]")]
    sink10 = OpSink()
    moves = balance_listed("t", [0, 1], rows, proj, holders, present, servers, StageLimit(None, None, 10), NUM_BEST, sink10)
    # Stage 10 in index order: segment 0 moves to b; segment 1 then prefers a (now empty of others).
    assert moves == 1
    assert [(o.action, o.idx, o.server) for o in sink10.ops] == [("LOAD", 0, "b"), ("DROP", 0, "a")]


def test_same_seed_same_draws():
    a = tier_rng(42, 7, "hot").integers(0, 1000, 10)
    b = tier_rng(42, 7, "hot").integers(0, 1000, 10)
    c = tier_rng(42, 7, "cold").integers(0, 1000, 10)
    assert (a == b).all() and not (a == c).all()
