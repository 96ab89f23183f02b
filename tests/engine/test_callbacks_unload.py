"""Stage-3 callbacks and stage-12 unloading, worked by hand (ALGORITHM.md "Moves and callbacks", stage 12)."""

from segment_balancer.engine.callbacks import add_callbacks, drop_order
from segment_balancer.engine.state import OpSink
from segment_balancer.engine.unload import drop_everywhere, unload_excess

SEG = {"idx": 3, "segment_id": "seg3", "datasource": "ds", "size_bytes": 10}


def test_drop_order_is_highest_cost_then_fewer_bytes_then_larger_name():
    costs = {"a": 5.0, "b": 9.0, "c": 5.0, "d": 5.0}
    avail = {"a": 10, "b": 10, "c": 10, "d": 3}
    # b (cost 9) first; among cost 5, d has fewer bytes; then c before a (larger name first).
    assert drop_order(["a", "b", "c", "d"], costs, avail) == ["b", "d", "c", "a"]


def test_callback_drops_in_first_overreplicated_tier_by_name():
    tiers = {
        "z": {"target": 1, "count": 3, "holders": {"z1", "z2", "z3"}, "drop_order": ["z2", "z1", "z3"]},
        "m": {"target": 1, "count": 2, "holders": {"m1", "m2"}, "drop_order": ["m1", "m2"]},
        "a": {"target": 2, "count": 2, "holders": {"a1", "a2"}, "drop_order": ["a1", "a2"]},
    }
    sink = OpSink()
    loads = [("t", "t1", (3, "t", 1.0)), ("t", "t2", (3, "t", 2.0)), ("t", "t3", (3, "t", 3.0))]
    add_callbacks(SEG, loads, tiers, sink)
    # Tier a is fully replicated; m is over by one -> first drop m1; then z twice: z2, z1.
    assert [(o.server, o.dep_server) for o in sink.ops] == [("m1", "t1"), ("z2", "t2"), ("z1", "t3")]
    assert tiers["z"]["count"] == 1 and tiers["m"]["count"] == 1


def test_callback_never_drops_in_the_loaded_tier():
    tiers = {"t": {"target": 1, "count": 2, "holders": {"x"}, "drop_order": ["x"]}}
    sink = OpSink()
    add_callbacks(SEG, [("t", "y", (3, "t", 1.0))], tiers, sink)
    assert sink.ops == []


def _seg(loaded, required):
    return {**SEG, "loaded": loaded, "required": required}


def test_unload_excess_takes_highest_costs_with_per_tier_caps():
    # Targets 1 + 1 = 2; end counts 3 + 2 = 5 -> drop 3. Tier a may lose 2, tier b 1. All five
    # serve it (loaded 5, required 2): 5 - 3 = 2 >= 2, nothing deferred.
    tiers = {
        "a": {"target": 1, "count": 3, "holders": {"a1", "a2", "a3"}, "costs": {"a1": 1.0, "a2": 7.0, "a3": 3.0}},
        "b": {"target": 1, "count": 2, "holders": {"b1", "b2"}, "costs": {"b1": 9.0, "b2": 2.0}},
    }
    sink = OpSink()
    assert unload_excess(_seg(5, 2), tiers, {}, (), sink) == 0
    assert sorted((o.tier, o.server) for o in sink.ops) == [("a", "a2"), ("a", "a3"), ("b", "b1")]


def test_unload_excess_only_where_total_exceeds_sum_of_targets():
    # Over in a (2 > 1) but under in b (0 < 1): the total 2 equals the targets' sum: nothing to drop.
    tiers = {"a": {"target": 1, "count": 2, "holders": {"a1", "a2"}, "costs": {}},
             "b": {"target": 1, "count": 0, "holders": set(), "costs": {}}}
    sink = OpSink()
    assert unload_excess(_seg(2, 2), tiers, {}, (), sink) == 0 and sink.ops == []


def test_unload_excess_drops_decommissioning_holders_first():
    # Target 1; d9 (decommissioning, cheapest) and a1 serve it: d9 goes first despite its cost.
    tiers = {"a": {"target": 1, "count": 2, "holders": {"a1", "d9"}, "costs": {"a1": 5.0, "d9": 1.0}}}
    sink = OpSink()
    assert unload_excess(_seg(2, 1), tiers, {}, {"d9"}, sink) == 0
    assert [o.server for o in sink.ops] == ["d9"]


def test_unload_excess_defers_a_drop_that_would_leave_fewer_than_required():
    # Target 1 in a: a1 serves, a2 is only loading (count 2, loaded 1); required 1. A drop of a1
    # would leave 0 loaded: deferred. (ALGORITHM.md "Availability": the queued load may fail.)
    tiers = {"a": {"target": 1, "count": 2, "holders": {"a1"}, "costs": {"a1": 1.0}}}
    sink = OpSink()
    assert unload_excess(_seg(1, 1), tiers, {}, (), sink) == 1 and sink.ops == []


def test_unload_excess_target_zero_tier_needs_loaded_at_required_already():
    # Targets hot 1 (h1 only loading), cold 0 (c1 serving: excess). loaded 0 < required 1: the
    # cold drop, which leaves loaded unchanged, still waits. With h1 serving (loaded 1) it goes.
    tiers = {"hot": {"target": 1, "count": 1, "holders": set(), "costs": {}},
             "cold": {"target": 0, "count": 1, "holders": {"c1"}, "costs": {}}}
    sink = OpSink()
    assert unload_excess(_seg(0, 1), tiers, {}, (), sink) == 1 and sink.ops == []
    assert unload_excess(_seg(1, 1), tiers, {}, (), sink) == 0 and [o.server for o in sink.ops] == ["c1"]


def test_unload_excess_skips_a_refused_candidate_and_tries_the_next():
    # Targets hot 2 (h1, h3 serve, h2 loading: count 3, cap 1), cold 0 (c1: cap 1); excess 2.
    # required 2, loaded {h1, h3} = 2. Order: h3 (cost 9) before c1 (cost 1): dropping h3 would
    # leave 1 < 2 (refused); c1's drop leaves loaded at 2 (allowed). One drop deferred.
    tiers = {"hot": {"target": 2, "count": 3, "holders": {"h1", "h3"}, "costs": {"h1": 0.5, "h3": 9.0}},
             "cold": {"target": 0, "count": 1, "holders": {"c1"}, "costs": {"c1": 1.0}}}
    sink = OpSink()
    assert unload_excess(_seg(2, 2), tiers, {}, (), sink) == 1
    assert [o.server for o in sink.ops] == ["c1"]


def test_drop_everywhere_visits_servers_in_name_order():
    sink = OpSink()
    drop_everywhere(SEG, {"s2": "t", "s1": "u"}, "drop_rule", sink)
    assert [(o.server, o.tier, o.reason) for o in sink.ops] == [("s1", "u", "drop_rule"), ("s2", "t", "drop_rule")]
