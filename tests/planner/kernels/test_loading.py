"""Loading kernels (stages 1-5) on hand-made tiers; expected ops worked out from ALGORITHM.md.

Cached top-B lists (``topb``) stand for a ranking an earlier stage made; where a test leaves them
out, the kernel ranks at first visit against the live state.
"""

from segment_balancer.planner.kernels.loading import (
    load_underbroadcast,
    load_underreplicated,
    load_unreplicated,
    move_from_decommissioning,
)
from segment_balancer.planner.operations import OpOrder
from segment_balancer.planner.runstate import OpSink, StageLimit

from .tiers import ops, tier_run

UNLIMITED = StageLimit(queue_type="loading")  # no queue limit: only capacity


def test_stage1_primary_tier_is_highest_priority_then_falls_back():
    sink = OpSink()
    # seg0: hot has priority 10 -> primary; seg1 (95 bytes) no longer fits hot1 after seg0 -> cold.
    hot = tier_run(
        "hot",
        [("hot1", 100)],
        [
            {"idx": 0, "target": 1, "topb": ["hot1"], "tier_pos": 1},
            {"idx": 1, "target": 1, "topb": ["hot1"], "size": 95},
        ],
        sink=sink,
    )
    cold = tier_run(
        "cold",
        [("cold1", 100)],
        [
            {"idx": 0, "target": 2, "topb": ["cold1"]},
            {"idx": 1, "target": 1, "topb": ["cold1"], "size": 95, "tier_pos": 1},
        ],
        sink=sink,
    )
    load_unreplicated({"cold": cold, "hot": hot}, [1, 0], {"hot": 10, "cold": 0}, UNLIMITED, sink)
    assert ops(sink) == [("LOAD", "seg0", "hot1", "loading", None), ("LOAD", "seg1", "cold1", "loading", None)]
    assert sorted(sink.members) == sorted(
        [
            (0, "ToBecomeFullyReplicated[hot]"),
            (0, "ToBecomeUnderreplicated[cold]"),
            (1, "ToBecomeUnderreplicated[hot]"),
            (1, "ToBecomeFullyReplicated[cold]"),
        ]
    )


def test_stage1_ties_in_priority_go_to_larger_target_then_rule_order():
    sink = OpSink()
    runs = {
        "a": tier_run("a", [("a1", 100)], [{"idx": 0, "target": 1, "tier_pos": 0}], sink=sink),
        "b": tier_run("b", [("b1", 100)], [{"idx": 0, "target": 2, "tier_pos": 2}], sink=sink),
        "c": tier_run("c", [("c1", 100)], [{"idx": 0, "target": 2, "tier_pos": 1}], sink=sink),
    }
    load_unreplicated(runs, [0], {}, UNLIMITED, sink)
    assert ops(sink) == [("LOAD", "seg0", "c1", "loading", None)]  # target 2 beats 1; c before b in the rule


def test_stage1_ranks_in_every_tier_before_choosing_and_caches_top_b():
    sink = OpSink()
    runs = {
        "a": tier_run("a", [("a1", 100), ("a2", 100)], [{"idx": 0}], sink=sink),
        "b": tier_run("b", [("b1", 100)], [{"idx": 0, "tier_pos": 1}], sink=sink),
    }
    load_unreplicated(runs, [0], {}, UNLIMITED, sink)
    # Empty servers cost 0 and have equal room: the smaller name first. Tier b was ranked too
    # (seed stage 1, step 1), although the load went to a.
    assert runs["a"].segment(0).topb == ["a1"] and runs["b"].segment(0).topb == ["b1"]
    assert ops(sink) == [("LOAD", "seg0", "a1", "loading", None)]


def test_stage1_nothing_passes_leaves_segment_still_unreplicated():
    sink = OpSink()
    runs = {"a": tier_run("a", [("a1", 5)], [{"idx": 0}], sink=sink)}
    load_unreplicated(runs, [0], {}, UNLIMITED, sink)
    assert sink.ops == [] and sink.members == [(0, "StillUnreplicated")]


def test_ranking_at_first_visit_sees_the_loads_before_it():
    # Ten segments of the same day onto two empty servers, B = 1: each load raises the cost of its
    # server for the next one, so they alternate (ALGORITHM.md "When a segment is ranked").
    sink = OpSink()
    run = tier_run("t", [("s1", 10_000), ("s2", 10_000)], [{"idx": i, "day": 0} for i in range(10)], sink=sink)
    load_unreplicated({"t": run}, range(10), {}, UNLIMITED, sink)
    assert [o.server for o in sink.ops] == ["s1", "s2"] * 5


def test_stage3_loads_best_non_holders_of_top_b_until_target():
    # target 3, held on s1, cached top B = [s1, s2, s4]: s2 and s4 get loads; s3 is outside B.
    run = tier_run(
        "t",
        [("s1", 100), ("s2", 100), ("s3", 100), ("s4", 100)],
        [{"idx": 0, "target": 3, "topb": ["s1", "s2", "s4"], "served": ["s1"]}],
    )
    loads = load_underreplicated(run, [0], UNLIMITED, run.sink, "StillUnderreplicated", "underreplicated")
    assert ops(run.sink) == [("LOAD", "seg0", "s2", "loading", None), ("LOAD", "seg0", "s4", "loading", None)]
    assert [s for _, s, _ in loads] == ["s2", "s4"]
    assert run.sink.members == [(0, "ToBecomeFullyReplicated[t]")]
    assert run.segment(0).count() == 3 and run.servers["s2"].loads["loading"] == 1


def test_stage3_typed_limit_stops_loading_and_keeps_segment_underreplicated():
    run = tier_run("t", [("s1", 100), ("s2", 100)], [{"idx": 0, "target": 2, "topb": ["s1", "s2"]}])
    run.servers["s1"].loads["loading"] = 7
    limit = StageLimit(3, "loading", "loading", 7, 10)  # M = 10, loadingMinPercent 70
    load_underreplicated(run, [0], limit, run.sink, "StillUnderreplicated", "underreplicated")
    assert ops(run.sink) == [("LOAD", "seg0", "s2", "loading", None)]
    assert run.sink.members == [(0, "StillUnderreplicated[t]")]


def test_stage2_loads_broadcast_on_every_should_server_in_name_order():
    run = tier_run(
        "t",
        [("b", 100), ("a", 100), ("c", 5)],
        [{"idx": 0, "target": 0, "rule_kind": "broadcast", "served": ["b"]}],
        ranked=False,
    )
    load_underbroadcast(run, [0], ["c", "b", "a"], UNLIMITED, run.sink)
    assert ops(run.sink) == [("LOAD", "seg0", "a", "loading", None)]  # c has no room
    assert run.sink.members == [(0, "StillUnderbroadcast[t]")]


def test_stage5_moves_each_decommissioning_replica_with_a_dependent_drop():
    # Replicas on decommissioning d1 and d2 (sources in name order) and on s1; top B = [s1, s3, s2].
    run = tier_run(
        "t",
        [("s1", 100), ("s2", 100), ("s3", 100), ("d1", 100, True), ("d2", 100, True)],
        [{"idx": 0, "target": 3, "topb": ["s1", "s3", "s2"], "served": ["d2", "d1", "s1"]}],
    )
    move_from_decommissioning(run, [0], UNLIMITED, run.sink)
    assert ops(run.sink) == [
        ("LOAD", "seg0", "s3", "decommissioning", None),
        ("DROP", "seg0", "d1", None, "s3"),
        ("LOAD", "seg0", "s2", "decommissioning", None),
        ("DROP", "seg0", "d2", None, "s2"),
    ]
    assert run.sink.members == [(0, "ToBecomeNotLoadedOnDecommServers[t]")]
    assert run.servers["s3"].loads["decommissioning"] == 1
    assert run.segment(0).serving() == ["s1"] and run.segment(0).count() == 3


def test_stage5_no_destination_keeps_segment_on_decommissioning_server():
    # Target 2: s1 and d1 hold it, so d1's replica is needed, but s1 (the only candidate) holds it.
    run = tier_run(
        "t", [("s1", 100), ("d1", 100, True)], [{"idx": 0, "target": 2, "topb": ["s1"], "served": ["d1", "s1"]}]
    )
    move_from_decommissioning(run, [0], UNLIMITED, run.sink)
    assert run.sink.ops == [] and run.sink.members == [(0, "StillLoadedOnDecommServers[t]")]


def test_stage5_leaves_a_replica_the_tier_does_not_need_for_stage12():
    # Target 1, held by s1 and decommissioning d1: count 2 - 1 on decommissioning = target, so d1's
    # replica is excess: no move, and the segment counts as done with decommissioning servers.
    run = tier_run(
        "t",
        [("s1", 100), ("s2", 100), ("d1", 100, True)],
        [{"idx": 0, "target": 1, "topb": ["s2"], "served": ["d1", "s1"]}],
    )
    move_from_decommissioning(run, [0], UNLIMITED, run.sink)
    assert run.sink.ops == [] and run.sink.members == [(0, "ToBecomeNotLoadedOnDecommServers[t]")]


def test_stage5_moves_only_as_many_decommissioning_replicas_as_the_tier_needs():
    # Target 2 with d1, d2 (decommissioning, name order) and s1 serving: count 3 - 2 = 1 < 2, so
    # d1's replica moves to the best non-holder s2; then 3 - 1 = 2 = target: d2's is excess.
    run = tier_run(
        "t",
        [("s1", 100), ("s2", 100), ("s3", 100), ("d1", 100, True), ("d2", 100, True)],
        [{"idx": 0, "target": 2, "topb": ["s2", "s1"], "served": ["d2", "d1", "s1"]}],
    )
    move_from_decommissioning(run, [0], UNLIMITED, run.sink)
    assert ops(run.sink) == [("LOAD", "seg0", "s2", "decommissioning", None), ("DROP", "seg0", "d1", None, "s2")]
    assert run.sink.members == [(0, "ToBecomeNotLoadedOnDecommServers[t]")]


def test_top_b_is_reused_unless_the_experiment_switch_is_off():
    """Empty a and b, B(2, 1) = 1: segment 0 ranks a first (cost 0 on both, same bytes, name).
    Once segment 1 (the next day) is loaded on a, segment 0 costs more there: reused, its top B
    stays [a] (ALGORITHM.md "When a segment is ranked"); with topBReuse false it is ranked afresh: [b]."""
    for reuse, expected in ((True, ["a"]), (False, ["b"])):
        run = tier_run("t", [("a", 1000), ("b", 1000)], [{"idx": 0, "day": 0}, {"idx": 1, "day": 1}], reuse_top_b=reuse)
        assert run.top_b(run.segment(0)) == ["a"]
        run.load(run.segment(1), "a", "loading", "underreplicated", OpOrder(0, "t", 0))
        assert run.top_b(run.segment(0)) == expected, reuse


# ---- a stale top B is ranked again (ALGORITHM.md "Best servers") -------------------------


def _stale(a_max=15, limit_cap=None):
    """Segment 0 (10 bytes, target 1, no replica) whose cached top B is [a]; a has 5 bytes free
    (max ``a_max``, 10 used), b is empty with 1000. Both project nothing near the segment: cost 0,
    so a fresh ranking puts b first (more available bytes)."""
    run = tier_run("t", [("a", a_max, False, 10), ("b", 1000)], [{"idx": 0, "topb": ["a"]}])
    limit = StageLimit(3, "loading", "loading", limit_cap, None) if limit_cap is not None else StageLimit(3, "loading")
    return run, limit


def test_a_cached_top_b_without_room_is_ranked_again_and_the_stage_tries_once_more():
    run, limit = _stale()
    loads = load_underreplicated(run, [0], limit, run.sink, "StillUnderreplicated", "underreplicated")
    assert [(idx, server) for idx, server, _ in loads] == [(0, "b")]
    assert run.segment(0).topb == ["b"]  # the new ranking replaces the cached one
    assert run.sink.members == [(0, "ToBecomeFullyReplicated[t]")]


def test_a_cached_top_b_whose_queue_is_full_is_not_ranked_again():
    """a has room but its load queue is full for the stage: queues free up only in a later run, so
    the cached top B stands and the segment stays short."""
    run, _ = _stale(a_max=1000)
    run.servers["a"].loads["loading"] = 1
    limit = StageLimit(3, "loading", "loading", 1, None)
    loads = load_underreplicated(run, [0], limit, run.sink, "StillUnderreplicated", "underreplicated")
    assert loads == [] and run.segment(0).topb == ["a"]
    assert run.sink.members == [(0, "StillUnderreplicated[t]")]


def test_stage_1_ranks_a_stale_top_b_again_in_the_tier_before_falling_back():
    run, limit = _stale()
    load_unreplicated({"t": run}, [0], {"t": 0}, StageLimit(1, "loading"), run.sink)
    assert [(o.action, o.server) for o in run.sink.ops] == [("LOAD", "b")]
