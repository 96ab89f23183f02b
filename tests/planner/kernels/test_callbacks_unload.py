"""Stage-3 callbacks and stage-12 unloading, worked by hand (ALGORITHM.md "Moves and callbacks", stage 12)."""

import pandas as pd

from segment_balancer.planner.config import build_config
from segment_balancer.planner.cost import drop_key
from segment_balancer.planner.kernels.callbacks import OverreplicatedTier, ScheduledLoad, add_callbacks
from segment_balancer.planner.kernels.unload import Excess, TierReplicas, couples_tiers, unload_excess, unload_tiers
from segment_balancer.planner.operations import OpOrder
from segment_balancer.planner.runstate import DropCandidate, OpSink, SegmentRef, TierRun, state_frame

NUM_BEST = build_config({}).num_best_servers

SEG = SegmentRef(3, "seg3", "ds", 10)


def test_drop_key_is_highest_cost_then_fewer_bytes_then_larger_name():
    costs = {"a": 5.0, "b": 9.0, "c": 5.0, "d": 5.0}
    avail = {"a": 10, "b": 10, "c": 10, "d": 3}
    # b (cost 9) first; among cost 5, d has fewer bytes; then c before a (larger name first).
    assert sorted("abcd", key=lambda n: drop_key(costs[n], avail[n], n)) == ["b", "d", "c", "a"]
    # Stage 12: a decommissioning server goes first whatever its cost.
    assert sorted("abcd", key=lambda n: drop_key(costs[n], avail[n], n, n == "a"))[0] == "a"


def test_callback_drops_in_first_overreplicated_tier_by_name():
    tiers = {
        "z": OverreplicatedTier(target=1, count=3, drop_order=["z2", "z1", "z3"]),
        "m": OverreplicatedTier(target=1, count=2, drop_order=["m1", "m2"]),
        "a": OverreplicatedTier(target=2, count=2, drop_order=["a1", "a2"]),
    }
    sink = OpSink()
    loads = [ScheduledLoad("t", f"t{i}", OpOrder(3, "t", i)) for i in (1, 2, 3)]
    add_callbacks(SEG, loads, tiers, sink)
    # Tier a is fully replicated; m is over by one -> first drop m1; then z twice: z2, z1.
    assert [(o.server, o.dep_server) for o in sink.ops] == [("m1", "t1"), ("z2", "t2"), ("z1", "t3")]
    assert tiers["z"].count == 1 and tiers["m"].count == 1


def test_callback_never_drops_in_the_loaded_tier():
    tiers = {"t": OverreplicatedTier(target=1, count=2, drop_order=["x"])}
    sink = OpSink()
    add_callbacks(SEG, [ScheduledLoad("t", "y", OpOrder(3, "t", 1))], tiers, sink)
    assert sink.ops == []


def _tier(target, count, costs, decommissioning=()):
    """A tier of unload_excess: candidates with available bytes 0."""
    return TierReplicas(target, count, tuple(DropCandidate(n in decommissioning, c, 0, n) for n, c in costs.items()))


def test_unload_excess_takes_highest_costs_with_per_tier_caps():
    # Targets 1 + 1 = 2; end counts 3 + 2 = 5 -> drop 3. Tier a may lose 2, tier b 1. All five
    # serve it (loaded 5, required 2): 5 - 3 = 2 >= 2, nothing deferred.
    tiers = {"a": _tier(1, 3, {"a1": 1.0, "a2": 7.0, "a3": 3.0}), "b": _tier(1, 2, {"b1": 9.0, "b2": 2.0})}
    sink = OpSink()
    assert unload_excess(SEG, 5, 2, tiers, sink) == 0
    assert sorted((o.tier, o.server) for o in sink.ops) == [("a", "a2"), ("a", "a3"), ("b", "b1")]


def test_unload_excess_only_where_total_exceeds_sum_of_targets():
    # Over in a (2 > 1) but under in b (0 < 1): the total 2 equals the targets' sum: nothing to drop.
    tiers = {"a": _tier(1, 2, {"a1": 0.0, "a2": 0.0}), "b": _tier(1, 0, {})}
    sink = OpSink()
    assert unload_excess(SEG, 2, 2, tiers, sink) == 0 and sink.ops == []


def test_unload_excess_drops_decommissioning_holders_first():
    # Target 1; d9 (decommissioning, cheapest) and a1 serve it: d9 goes first despite its cost.
    tiers = {"a": _tier(1, 2, {"a1": 5.0, "d9": 1.0}, decommissioning={"d9"})}
    sink = OpSink()
    assert unload_excess(SEG, 2, 1, tiers, sink) == 0
    assert [o.server for o in sink.ops] == ["d9"]


def test_unload_excess_defers_a_drop_that_would_leave_fewer_than_required():
    # Target 1 in a: a1 serves, a2 is only loading (count 2, loaded 1); required 1. A drop of a1
    # would leave 0 loaded: deferred. (ALGORITHM.md "Availability": the queued load may fail.)
    tiers = {"a": _tier(1, 2, {"a1": 1.0})}
    sink = OpSink()
    assert unload_excess(SEG, 1, 1, tiers, sink) == 1 and sink.ops == []


def test_unload_excess_target_zero_tier_needs_loaded_at_required_already():
    # Targets hot 1 (h1 only loading), cold 0 (c1 serving: excess). loaded 0 < required 1: the
    # cold drop, which leaves loaded unchanged, still waits. With h1 serving (loaded 1) it goes.
    tiers = {"hot": _tier(1, 1, {}), "cold": _tier(0, 1, {"c1": 0.0})}
    sink = OpSink()
    assert unload_excess(SEG, 0, 1, tiers, sink) == 1 and sink.ops == []
    assert unload_excess(SEG, 1, 1, tiers, sink) == 0 and [o.server for o in sink.ops] == ["c1"]


def test_unload_excess_skips_a_refused_candidate_and_tries_the_next():
    # Targets hot 2 (h1, h3 serve, h2 loading: count 3, cap 1), cold 0 (c1: cap 1); excess 2.
    # required 2, loaded {h1, h3} = 2. Order: h3 (cost 9) before c1 (cost 1): dropping h3 would
    # leave 1 < 2 (refused); c1's drop leaves loaded at 2 (allowed). One drop deferred.
    tiers = {"hot": _tier(2, 3, {"h1": 0.5, "h3": 9.0}), "cold": _tier(0, 1, {"c1": 1.0})}
    sink = OpSink()
    assert unload_excess(SEG, 2, 2, tiers, sink) == 1
    assert [o.server for o in sink.ops] == ["c1"]


# ---- stage 12's running projection (ALGORITHM.md stage 12) ------------------------------------
# One day, 2022-01-01: every pair of segments overlaps the same way, so a same-datasource pair
# costs 2c and a pair of different datasources c (Druid's joint cost, doubled for one datasource);
# only comparisons of these multiples matter below.

DAY_MS, JAN_1 = 86_400_000, 1_640_995_200_000


def tier_run(tier: str, segments: list[tuple], served: dict[str, list[int]], sink: OpSink | None = None) -> TierRun:
    """A TierRun of ``tier``: ``segments`` (idx, datasource, rule kind, target) of one day, each
    served by the servers of ``served`` ({server: [idx]}); servers of 0 bytes, so available
    bytes tie and a cost tie goes to the larger name; ops go to ``sink``."""
    rows = []
    for idx, ds, kind, target in segments:
        base = {
            "tier": tier,
            "idx": idx,
            "segment_id": f"{ds}{idx}",
            "datasource": ds,
            "start_ms": JAN_1,
            "end_ms": JAN_1 + DAY_MS,
            "size_bytes": 0,
        }
        rows.append({**base, "kind": "segment", "target": target, "tier_pos": 0, "rule_kind": kind, "required": 1})
        rows += [
            {**base, "kind": "replica", "server": s, "served": True, "dropping": False}
            for s, held in served.items()
            if idx in held
        ]
    servers = pd.DataFrame(
        [
            {"server": s, "tier": tier, "max_size": 0, "current_size": 0, "priority": 0, "decommissioning": False}
            for s in served
        ]
    )
    return TierRun.from_rows(tier, state_frame(pd.DataFrame(rows)), servers, NUM_BEST, sink=sink)


def excess_of(idx: int, counts: dict[str, tuple[int, int]], loaded: int, required: int = 1) -> Excess:
    return Excess(
        idx, sum(c for _, c in counts.values()) - sum(t for t, _ in counts.values()), loaded, required, counts
    )


def dropped(sink: OpSink) -> list[tuple[int, str]]:
    return [(o.idx, o.server) for o in sink.ops]


def test_each_excess_drop_counts_at_once_for_the_next_segment():
    """Wiki segments 1–3 served by a and b (target 1), koala 4 on a too.
    Segment 1: a holds w2, w3, k4: 2c + 2c + c = 5c; b holds w2, w3: 4c → drop a.
    Segment 2: a holds w3, k4: 3c; b holds w1, w3: 4c → drop b.
    Segment 3: a holds w2, k4: 3c; b holds w1: 2c → drop a.
    Drops a, b, a; a ends with w2 and k4, b with w1 and w3. Ranked once at the start of the stage,
    every drop would go to a (5c against 4c)."""
    segs = [(1, "wiki", "load", 1), (2, "wiki", "load", 1), (3, "wiki", "load", 1), (4, "koala", "load", 1)]
    run = tier_run("t", segs, {"a": [1, 2, 3, 4], "b": [1, 2, 3]})
    sink = run.sink
    unload_tiers({"t": run}, [excess_of(i, {"t": (1, 2)}, loaded=2) for i in (1, 2, 3)], sink)
    assert dropped(sink) == [(1, "a"), (2, "b"), (3, "a")]
    assert [run.segment(i).serving() for i in (1, 2, 3)] == [["b"], ["a"], ["b"]]


def test_a_drop_rule_segment_leaves_the_projection_before_the_next_segment():
    """Koala 0 is under a drop rule and served by a: its DROP is the stage's join's, but it leaves
    a's projection when visited (index 0, before the wiki segments).
    Segment 1: a holds w2, w3: 4c; b the same: 4c, a tie, to the larger name → drop b.
    Segment 2: a holds w1, w3: 4c; b holds w3: 2c → drop a.
    Segment 3: a holds w1: 2c; b holds w2: 2c, a tie → drop b.
    Drops b, a, b (with the koala still counted on a: a, b, a); the koala's drop is not an op here."""
    segs = [(0, "koala", "drop", 0), (1, "wiki", "load", 1), (2, "wiki", "load", 1), (3, "wiki", "load", 1)]
    run = tier_run("t", segs, {"a": [0, 1, 2, 3], "b": [1, 2, 3]})
    unload_tiers({"t": run}, [excess_of(i, {"t": (1, 2)}, loaded=2) for i in (1, 2, 3)], run.sink)
    assert dropped(run.sink) == [(1, "b"), (2, "a"), (3, "b")]


def test_one_excess_across_two_tiers_goes_to_the_costliest_holder_of_either():
    """Rule t1:1, t2:1, t3:1 (t3 has no server): wiki 1 is served twice in t1 (x, y) and twice in
    t2 (p, q): total 4, targets 3, excess 1, so only one of the two overreplicated tiers loses a
    replica and the order across them decides which. In t2, p also serves wiki 2: wiki 1 costs 2c
    there, 0 on x, y and q → drop p. The tiers are coupled (:func:`couples_tiers`)."""
    sink = OpSink()
    t1 = tier_run("t1", [(1, "wiki", "load", 1)], {"x": [1], "y": [1]}, sink)
    t2 = tier_run("t2", [(1, "wiki", "load", 1), (2, "wiki", "load", 1)], {"p": [1, 2], "q": [1]}, sink)
    counts = {"t1": (1, 2), "t2": (1, 2), "t3": (1, 0)}
    assert couples_tiers(1, 4, 2, {"t1": (1, 1), "t2": (1, 1)})
    unload_tiers({"t1": t1, "t2": t2}, [excess_of(1, counts, loaded=4, required=2)], sink)
    assert [(o.tier, o.server) for o in sink.ops] == [("t2", "p")]


def test_which_segments_couple_their_tiers():
    """``couples_tiers(excess, loaded, required, {tier: (target, candidates)})``, by hand."""
    # one tier with candidates: its order alone decides
    assert not couples_tiers(1, 3, 2, {"a": (1, 2), "b": (1, 0)})
    # two candidates, one excess: which tier loses one depends on the order across them
    assert couples_tiers(1, 4, 2, {"a": (1, 1), "b": (1, 1)})
    # both go whatever the order, and 4 − 2 = 2 loaded stay ≥ required 2
    assert not couples_tiers(2, 4, 2, {"a": (1, 1), "b": (1, 1)})
    # both would go, but 3 − 2 = 1 < 2: the availability rule refuses one, the order says which
    assert couples_tiers(2, 3, 2, {"a": (1, 1), "b": (1, 1)})
    # a tier with target 0 does not count against loaded: 2 − 1 ≥ 1, both go
    assert not couples_tiers(2, 2, 1, {"a": (1, 1), "cold": (0, 1)})
