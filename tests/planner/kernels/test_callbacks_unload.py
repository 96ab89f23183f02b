"""Stage-3 callbacks and stage-12 unloading, worked by hand (ALGORITHM.md "Moves and callbacks", stage 12)."""

from segment_balancer.planner.cost import drop_key
from segment_balancer.planner.kernels.callbacks import OverreplicatedTier, ScheduledLoad, add_callbacks
from segment_balancer.planner.kernels.unload import TierReplicas, unload_excess
from segment_balancer.planner.runstate import DropCandidate, OpSink, SegmentRef

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
    loads = [ScheduledLoad("t", f"t{i}", (3, "t", float(i))) for i in (1, 2, 3)]
    add_callbacks(SEG, loads, tiers, sink)
    # Tier a is fully replicated; m is over by one -> first drop m1; then z twice: z2, z1.
    assert [(o.server, o.dep_server) for o in sink.ops] == [("m1", "t1"), ("z2", "t2"), ("z1", "t3")]
    assert tiers["z"].count == 1 and tiers["m"].count == 1


def test_callback_never_drops_in_the_loaded_tier():
    tiers = {"t": OverreplicatedTier(target=1, count=2, drop_order=["x"])}
    sink = OpSink()
    add_callbacks(SEG, [ScheduledLoad("t", "y", (3, "t", 1.0))], tiers, sink)
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
