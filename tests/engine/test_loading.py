"""Loading kernels (stages 1-5) on hand-made rows; expected ops worked out from ALGORITHM.md."""

from segment_balancer.engine.loading import (
    load_underbroadcast, load_unreplicated, load_underreplicated, move_from_decommissioning)
from segment_balancer.engine.state import OpSink, ServerHolder, StageLimit

UNLIMITED = StageLimit()


def servers(*specs):
    """specs: (name, tier, free_bytes)."""
    return {n: ServerHolder(n, t, max_size=free, projected_size=0) for n, t, free in specs}


def row(idx, tier, target, ranking, count=0, present=(), b=None, size=10, **extra):
    return {"idx": idx, "segment_id": f"seg{idx}", "datasource": "ds", "size_bytes": size, "tier": tier,
            "target": target, "count": count, "present": set(present), "ranking": list(ranking),
            "b": len(ranking) if b is None else b, **extra}


def ops(sink):
    return [(o.action, o.segment_id, o.server, o.queue_type, o.dep_server) for o in sink.ops]


def test_stage1_primary_tier_is_highest_priority_then_falls_back():
    srv = servers(("hot1", "hot", 100), ("cold1", "cold", 100))
    # seg0: hot has priority 10 -> primary; seg1: hot1 is full for seg1 (size 200) -> cold.
    seg0 = [row(0, "hot", 1, ["hot1"], tier_priority=10, tier_pos=1),
            row(0, "cold", 2, ["cold1"], tier_priority=0, tier_pos=0)]
    seg1 = [row(1, "hot", 1, ["hot1"], size=95, tier_priority=10, tier_pos=0),
            row(1, "cold", 1, ["cold1"], size=95, tier_priority=0, tier_pos=1)]
    sink = OpSink()
    load_unreplicated([seg0, seg1], srv, UNLIMITED, sink, stage=1)
    # seg0 -> hot1 (10 bytes, 90 left); seg1 (95 bytes) no longer fits hot1 -> cold1.
    assert ops(sink) == [("LOAD", "seg0", "hot1", "loading", None), ("LOAD", "seg1", "cold1", "loading", None)]
    assert sorted(sink.members) == sorted([
        (0, "ToBecomeFullyReplicated[hot]"), (0, "ToBecomeUnderreplicated[cold]"),
        (1, "ToBecomeUnderreplicated[hot]"), (1, "ToBecomeFullyReplicated[cold]")])


def test_stage1_ties_in_priority_go_to_larger_target_then_rule_order():
    srv = servers(("a1", "a", 100), ("b1", "b", 100), ("c1", "c", 100))
    seg = [row(0, "a", 1, ["a1"], tier_priority=0, tier_pos=0),
           row(0, "b", 2, ["b1"], tier_priority=0, tier_pos=2),
           row(0, "c", 2, ["c1"], tier_priority=0, tier_pos=1)]
    sink = OpSink()
    load_unreplicated([seg], srv, UNLIMITED, sink, stage=1)
    assert ops(sink) == [("LOAD", "seg0", "c1", "loading", None)]  # target 2 beats 1; c before b in the rule


def test_stage1_nothing_passes_leaves_segment_still_unreplicated():
    srv = servers(("a1", "a", 5))
    sink = OpSink()
    load_unreplicated([[row(0, "a", 1, ["a1"], tier_priority=0, tier_pos=0)]], srv, UNLIMITED, sink, stage=1)
    assert sink.ops == [] and sink.members == [(0, "StillUnreplicated")]


def test_stage3_loads_best_non_holders_of_top_b_until_target():
    srv = servers(("s1", "t", 100), ("s2", "t", 100), ("s3", "t", 100), ("s4", "t", 100))
    # target 3, count 1 (on s1), top B = 3 of ranking [s1, s2, s4, s3]: s2 and s4 get loads, s3 is outside B.
    r = row(0, "t", 3, ["s1", "s2", "s4", "s3"], count=1, present={"s1"}, b=3)
    sink = OpSink()
    loads = load_underreplicated([r], srv, UNLIMITED, sink, "StillUnderreplicated", "underreplicated")
    assert ops(sink) == [("LOAD", "seg0", "s2", "loading", None), ("LOAD", "seg0", "s4", "loading", None)]
    assert [s for _, s in loads] == ["s2", "s4"]
    assert sink.members == [(0, "ToBecomeFullyReplicated[t]")]


def test_stage3_typed_limit_stops_loading_and_keeps_segment_underreplicated():
    srv = servers(("s1", "t", 100), ("s2", "t", 100))
    srv["s1"].loads["loading"] = 7
    limit = StageLimit("loading", 7, 10)  # M = 10, loadingMinPercent 70
    sink = OpSink()
    load_underreplicated([row(0, "t", 2, ["s1", "s2"])], srv, limit, sink, "StillUnderreplicated", "underreplicated")
    assert ops(sink) == [("LOAD", "seg0", "s2", "loading", None)]
    assert sink.members == [(0, "StillUnderreplicated[t]")]


def test_stage2_loads_broadcast_on_every_should_server_in_name_order():
    srv = servers(("b", "t", 100), ("a", "t", 100), ("c", "t", 5))
    r = row(0, "t", 0, [], present={"b"}, should=["c", "b", "a"])
    sink = OpSink()
    load_underbroadcast([r], srv, UNLIMITED, sink)
    assert ops(sink) == [("LOAD", "seg0", "a", "loading", None)]  # c has no room
    assert sink.members == [(0, "StillUnderbroadcast[t]")]


def test_stage5_moves_each_decommissioning_replica_with_a_dependent_drop():
    srv = servers(("s1", "t", 100), ("s2", "t", 100), ("s3", "t", 100))
    # Replicas on decommissioning d1 and d2 (sources in name order) and on s1; top B = [s1, s3, s2].
    r = row(0, "t", 3, ["s1", "s3", "s2"], count=3, present={"d1", "d2", "s1"}, decommissioning_holders=["d2", "d1"])
    sink = OpSink()
    move_from_decommissioning([r], srv, UNLIMITED, sink)
    assert ops(sink) == [("LOAD", "seg0", "s3", "decommissioning", None), ("DROP", "seg0", "d1", None, "s3"),
                         ("LOAD", "seg0", "s2", "decommissioning", None), ("DROP", "seg0", "d2", None, "s2")]
    assert sink.members == [(0, "ToBecomeNotLoadedOnDecommServers[t]")]
    assert srv["s3"].loads["decommissioning"] == 1


def test_stage5_no_destination_keeps_segment_on_decommissioning_server():
    # Target 2: s1 and d1 hold it, so d1's replica is needed, but s1 (the only candidate) holds it.
    srv = servers(("s1", "t", 100))
    r = row(0, "t", 2, ["s1"], count=2, present={"d1", "s1"}, decommissioning_holders=["d1"])
    sink = OpSink()
    move_from_decommissioning([r], srv, UNLIMITED, sink)
    assert sink.ops == [] and sink.members == [(0, "StillLoadedOnDecommServers[t]")]


def test_stage5_leaves_a_replica_the_tier_does_not_need_for_stage12():
    # Target 1, held by s1 and decommissioning d1: count 2 - 1 on decommissioning = target, so d1's
    # replica is excess: no move, and the segment counts as done with decommissioning servers.
    srv = servers(("s1", "t", 100), ("s2", "t", 100))
    r = row(0, "t", 1, ["s2", "s1"], count=2, present={"d1", "s1"}, decommissioning_holders=["d1"])
    sink = OpSink()
    move_from_decommissioning([r], srv, UNLIMITED, sink)
    assert sink.ops == [] and sink.members == [(0, "ToBecomeNotLoadedOnDecommServers[t]")]


def test_stage5_moves_only_as_many_decommissioning_replicas_as_the_tier_needs():
    # Target 2 with d1, d2 (decommissioning, name order) and s1 serving: count 3 - 2 = 1 < 2, so
    # d1's replica moves to the best non-holder s2; then 3 - 1 = 2 = target: d2's is excess.
    srv = servers(("s1", "t", 100), ("s2", "t", 100), ("s3", "t", 100))
    r = row(0, "t", 2, ["s2", "s1", "s3"], count=3, present={"d1", "d2", "s1"}, decommissioning_holders=["d2", "d1"])
    sink = OpSink()
    move_from_decommissioning([r], srv, UNLIMITED, sink)
    assert ops(sink) == [("LOAD", "seg0", "s2", "decommissioning", None), ("DROP", "seg0", "d1", None, "s2")]
    assert sink.members == [(0, "ToBecomeNotLoadedOnDecommServers[t]")]
