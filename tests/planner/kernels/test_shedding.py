"""Stage 7 with ``balancerStrategy: "avgShedder"`` in one tier (ALGORITHM.md "Balancing strategy
``avgShedder``"), worked by hand.

The tier of :func:`shedder`: ``h`` (max 100 bytes) serves five segments of one datasource,
days 0, 1, 2, 10 and 30, of 25, 20, 10, 5 and 10 bytes (70 bytes: score 70); ``l`` (max 100)
serves one segment of day 200, 10 bytes (score 10). Difference 60 > 40: with a previous hit count
of 1 the pair's count is 2 and it sheds ``x = (70·100 − 10·100) / 200 = 30`` bytes.

Placement costs: on ``l`` every segment of ``h`` costs 0 (day 200 is beyond the 45-day window),
so the cost reduction is the cost on ``h``, the joint costs with the other four (a joint cost falls
by half per day apart): day 1 (1 day from days 0 and 2) > day 2 (1 and 2 days from days 1 and 0,
8 from day 10) > day 0 (1 and 2 days, but 10 from day 10) > day 10 > day 30. So the pair walks
day 1 (20 bytes: moved 20), day 2 (10: moved 30 = x), day 0 (25: beyond x, skipped), day 10 (5:
35 > 30, skipped), day 30 (skipped). In index order it would have moved days 0 and 10 instead.
"""

import json

import numpy as np

from segment_balancer.planner.avg_shedder import pair_key
from segment_balancer.planner.kernels.shedding import REASON, shed_tier, tier_usages
from segment_balancer.planner.operations import OpOrder
from segment_balancer.planner.runstate import StageLimit

from .tiers import ops, tier_run

BALANCING = StageLimit(stage=7, queue_type="balancing")
H_SEGMENTS = [(0, 0, 25), (1, 1, 20), (2, 2, 10), (3, 10, 5), (4, 30, 10)]  # (idx, day, bytes)


def shedder(l_current=10, extra=()):
    segments = [{"idx": i, "day": d, "size": b, "served": ["h"]} for i, d, b in H_SEGMENTS]
    segments.append({"idx": 5, "day": 200, "size": 10, "served": ["l"]})
    return tier_run("t", [("h", 100, False, 70), ("l", 100, False, l_current)], segments + list(extra))


def shed(run, previous=1, limit=BALANCING, population=range(6)):
    return shed_tier(
        run, np.array(list(population)), {pair_key("h", "l"): previous} if previous else {}, limit, run.sink
    )


def test_a_pair_sheds_the_largest_cost_reductions_up_to_the_bytes_that_equalise_it():
    run = shedder()
    [pair] = shed(run)
    assert ops(run.sink) == [
        ("LOAD", "seg1", "l", "balancing", None),
        ("DROP", "seg1", "h", None, "l"),
        ("LOAD", "seg2", "l", "balancing", None),
        ("DROP", "seg2", "h", None, "l"),
    ]
    assert {o.reason for o in run.sink.ops} == {REASON}
    assert (pair["high"], pair["low"], pair["difference"], pair["hit_count"], pair["sheds"]) == (
        "h",
        "l",
        60.0,
        2,
        True,
    )
    assert (pair["bytes_to_move"], pair["moves"], pair["bytes_moved"]) == (30, 2, 30)
    skipped = {
        (idx, outcome, detail["reason"])
        for idx, _, tier, outcome, detail in run.sink.decisions
        if outcome == "not_shed"
    }
    assert skipped == {
        (0, "not_shed", "moving its 25 bytes would take the bytes moved (30) beyond 30"),
        (3, "not_shed", "moving its 5 bytes would take the bytes moved (30) beyond 30"),
        (4, "not_shed", "moving its 10 bytes would take the bytes moved (30) beyond 30"),
    }
    # the cost reductions in the decisions: day 0 ahead of day 10 ahead of day 30, l costs nothing
    gains = {idx: d["cost_reduction"] for idx, _, _, _, d in run.sink.decisions}
    assert gains[1] > gains[2] > gains[0] > gains[3] > gains[4] > 0
    assert [(idx, d["reason"]) for idx, _, _, outcome, d in run.sink.decisions if outcome == "shed"] == [
        (1, "moved to l: 20 of 30 bytes moved so far"),
        (2, "moved to l: 30 of 30 bytes moved so far"),
    ]
    # the scores once both moves succeed: h 40, l 40
    assert tier_usages(run)[0].used_bytes == 40 and tier_usages(run)[1].used_bytes == 40


def test_the_first_hit_waits_for_the_second():
    run = shedder()
    [pair] = shed(run, previous=0)
    assert run.sink.ops == [] and (pair["hit_count"], pair["sheds"], pair["moves"]) == (1, False, 0)
    assert pair["waiting"] == "shed in 1 more run(s) if the gap stays above 40, or 7 if it stays above 15"


def test_a_segment_the_lower_server_holds_is_skipped():
    # segment 1 (day 1) is on l as well: l at 30, h at 70: x = 20; day 1 is skipped, day 2 (10)
    # and then day 10 (5) move (day 0, 25, is beyond)
    segments = [{"idx": i, "day": d, "size": b, "served": ["h", "l"] if i == 1 else ["h"]} for i, d, b in H_SEGMENTS]
    segments.append({"idx": 5, "day": 200, "size": 10, "served": ["l"]})
    run = tier_run("t", [("h", 100, False, 70), ("l", 100, False, 30)], segments)
    [pair] = shed(run)
    assert (pair["difference"], pair["bytes_to_move"]) == (40.0, 20) and not pair["sheds"]  # 40 is not above 40
    [pair] = shed(run, previous=7)  # the low threshold's 8th hit
    assert pair["sheds"] and [o.segment_id for o in run.sink.ops if o.action == "LOAD"] == ["seg2", "seg3"]
    reasons = {idx: d["reason"] for idx, _, _, _, d in run.sink.decisions}
    assert reasons[1] == "l already serves or loads it"


def test_the_stage_limit_stops_the_moves():
    run = shedder()
    limit = StageLimit(stage=7, queue_type="balancing", counted="balancing", cap=1, total_cap=500)
    [pair] = shed(run, limit=limit)
    assert [o.segment_id for o in run.sink.ops if o.action == "LOAD"] == ["seg1"] and pair["moves"] == 1
    reasons = {idx: d["reason"] for idx, _, _, _, d in run.sink.decisions}
    assert reasons[2] == "load queue full for stage 7: 1 balancing loads queued, its limit 1"


def test_capacity_counts_loads_but_not_drops_that_have_not_happened():
    # l serves 90 bytes but 80 of them (segment 6) have a queued drop: its score is 10, its room 10
    queued_drop = {"idx": 6, "day": 300, "size": 80, "served": ["l"], "dropping": ["l"]}
    run = shedder(l_current=90, extra=[queued_drop])
    assert {u.server: u.used_bytes for u in tier_usages(run)} == {"h": 70, "l": 10}
    [pair] = shed(run)
    # day 1 (20 bytes) does not fit into 10 bytes of room; day 2 (10) does; then l is full; day 0
    # (25) would take the bytes moved to 35; day 10 (5) is within x, but l has no room left
    assert [o.segment_id for o in run.sink.ops if o.action == "LOAD"] == ["seg2"] and pair["bytes_moved"] == 10
    reasons = {idx: d["reason"] for idx, _, _, _, d in run.sink.decisions}
    assert reasons[1] == "capacity: 10 bytes available, the segment has 20"
    assert reasons[0] == "moving its 25 bytes would take the bytes moved (10) beyond 30"
    assert reasons[3] == "capacity: 0 bytes available, the segment has 5"


def test_only_the_population_moves_and_the_record_is_json():
    run = shedder()
    [pair] = shed(run, population=[0, 3, 4])  # days 1 and 2 are not balanceable (e.g. overreplicated)
    assert [o.segment_id for o in run.sink.ops if o.action == "LOAD"] == ["seg0", "seg3"]  # 25 + 5 = 30
    assert json.loads(json.dumps(pair)) == pair


def test_used_bytes_follow_queued_loads_and_drops():
    run = tier_run(
        "t",
        [("a", 100, False, 30), ("b", 100, False, 0)],
        [{"idx": 0, "size": 30, "served": ["a"]}, {"idx": 1, "size": 7, "loading": ["b"]}],
    )
    assert run.used_bytes() == {"a": 30, "b": 7}
    run.move(run.segment(0), "a", "b", "balancing", "x", OpOrder(0, "t", 1))
    assert run.used_bytes() == {"a": 0, "b": 37}
    assert list(run.served_by("a")) == [] and list(run.served_by("b")) == []  # a drops it, b only loads it


def test_a_decommissioning_historical_is_never_paired():
    run = tier_run(
        "t",
        [("d", 100, True, 90), ("h", 100, False, 70), ("l", 100, False, 10)],
        [
            {"idx": 0, "size": 70, "served": ["h"]},
            {"idx": 1, "size": 10, "served": ["l"]},
            {"idx": 2, "size": 90, "served": ["d"]},
        ],
    )
    assert [u.server for u in tier_usages(run)] == ["h", "l"]
