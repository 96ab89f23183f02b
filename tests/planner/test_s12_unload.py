"""Stage 12's decisions over the run state (``segment_balancer.planner.stages.s12_unload``) on
hand-made arrays, no Spark and no files. Every expected value is worked out by hand from
ALGORITHM.md ("Replica count", "Loaded and required", "Availability", stage 12) and written in the
test's docstring."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from segment_balancer.planner.kernels.unload import Excess
from segment_balancer.planner.runstate import NO_LOAD, RULE_CODES, SegmentTable, TierState
from segment_balancer.planner.stages import s12_unload as s12

LOAD, DROP, NONE = RULE_CODES["load"], RULE_CODES["drop"], -1

# codes 0-3 used (n_used = 4): 0, 1, 3 under a load rule, 2 under a drop rule; 4 unused, 5
# overshadowed (no longer waits), 6 overshadowed and waiting. Fates: 0 none, 1 drop_rule,
# 2 unused, 3 overshadowed, 4 waiting.
TABLE = SegmentTable(
    segment_id=np.array([f"s{c}" for c in range(7)], dtype=object),
    datasource=np.array([0, 0, 1, 0, 1, 0, 0], np.int32),
    start_ms=np.zeros(7, np.int64),
    end_ms=np.ones(7, np.int64),
    size_bytes=np.array([100, 101, 102, 103, 0, 105, 106], np.int64),
    rule=np.array([LOAD, LOAD, DROP, LOAD, NONE, LOAD, LOAD], np.int8),
    required=np.array([2, 1, -1, 1, -1, 2, 2], np.int32),
    fate=np.array([0, 0, 1, 0, 2, 3, 4], np.int8),
    datasources=("ds", "other"),
    n_used=4,
)
H1, H2, H3 = 0, 1, 2
# one row per replica: (code, server, served, load queue code, dropping, dependent)
REPLICAS = [
    (0, H1, True, NO_LOAD, False, False),
    (0, H2, True, NO_LOAD, False, False),
    (0, H3, False, 0, False, False),  # loading
    (1, H1, True, NO_LOAD, True, True),  # a move's source: its drop waits for a load
    (1, H2, True, NO_LOAD, True, False),  # a queued drop
    (1, H3, True, NO_LOAD, False, False),
    (2, H1, True, NO_LOAD, False, False),
    (2, H2, True, NO_LOAD, True, False),
    (3, H2, True, NO_LOAD, False, False),
    (4, H3, True, NO_LOAD, False, False),
    (5, H1, True, NO_LOAD, False, False),
    (6, H2, True, NO_LOAD, False, False),
    (6, H3, True, NO_LOAD, True, False),
]


def tier_state() -> TierState:
    code, server, served, load, dropping, dependent = (np.array(c) for c in zip(*REPLICAS))
    return TierState(
        tier="hot",
        servers=("h1", "h2", "h3"),
        seg_code=np.array([0, 1, 2, 3], np.int64),
        target=np.array([1, 2, 0, 0], np.int32),
        tier_pos=np.zeros(4, np.int32),
        rep_code=code.astype(np.int64),
        rep_server=server.astype(np.int32),
        served=served.astype(bool),
        load=load.astype(np.int8),
        dropping=dropping.astype(bool),
        dependent=dependent.astype(bool),
    )


def test_tally_counts_holders_loaded_and_droppable_replicas_of_load_rule_segments():
    """Segment 0 (target 1): h1, h2 serve, h3 loads: count 3, loaded 2 (a load may fail),
    droppable 2. Segment 1 (target 2): h1's drop is dependent, h2's is not, h3 serves: count 1
    (no dropping replica counts), loaded 2 (h1 serves until its replacement has loaded, and h3),
    droppable 1 (h3). Segment 2 is under a drop rule: no row. Segment 3 (target 0 here): count 1,
    loaded 0 (only tiers with a target count), droppable 1. Over its target here: 0 (3 > 1) and
    3 (1 > 0)."""
    tal = s12.tally(tier_state(), TABLE)
    assert {k: v.tolist() for k, v in tal.items()} == {
        "code": [0, 1, 3],
        "target": [1, 2, 0],
        "count": [3, 1, 1],
        "loaded": [2, 2, 0],
        "droppable": [2, 1, 1],
    }
    assert all(v.dtype == np.int64 for v in tal.values())
    assert s12.over_in_tier(tal).tolist() == [0, 3]


def test_tally_of_keeps_the_asked_segments_and_adds_required():
    """Only segment 3 of codes {3, 9} has a tally row here; its rule asks for 1 replica in all."""
    got = s12.tally_of(tier_state(), TABLE, np.array([9, 3], np.int64))
    assert {k: v.tolist() for k, v in got.items()} == {
        "code": [3],
        "target": [0],
        "count": [1],
        "loaded": [0],
        "droppable": [1],
        "required": [1],
    }


def test_everywhere_drops_are_the_served_replicas_of_drop_rule_unused_and_overshadowed_segments():
    """Drop rule: segment 2 on h1 (h2 already drops it). Unused: segment 4 on h3. Overshadowed
    (no longer waiting): segment 5 on h1. Segment 6 waits: no drop. The used segment's drop sorts
    by its idx (2); the others after every used one (1 << 62), then by id and server."""
    drops = s12.everywhere_drops(tier_state(), TABLE)
    assert {k: v.tolist() for k, v in drops.items()} == {
        "idx": [2, -1, -1],
        "code": [2, 4, 5],
        "segment_id": ["s2", "s4", "s5"],
        "datasource": ["other", "other", "ds"],
        "server": ["h1", "h3", "h1"],
        "size_bytes": [102, 0, 105],
        "reason": ["drop_rule", "unused", "overshadowed"],
        "order_idx": [2, 1 << 62, 1 << 62],
        "order_key": ["s2|h1", "s4|h3", "s5|h1"],
    }
    assert all(drops[c].dtype == np.int64 for c in ("idx", "code", "size_bytes", "order_idx"))


def test_waiting_replicas_are_the_served_ones_with_no_drop():
    """Segment 6 waits: h2 serves it; h3's replica already drops."""
    codes, servers = s12.waiting_replicas(tier_state(), TABLE)
    assert (codes.tolist(), servers.tolist()) == ([6], [H2])


def test_waiting_decisions_one_per_segment_by_id_lowest_idx_servers_sorted():
    idx, ids, servers = s12.waiting_decisions([7, 5, 9], ["s2", "s2", "s1"], ["h2", "h1", "h3"])
    assert (idx, ids, servers) == ([9, 5], ["s1", "s2"], [["h3"], ["h1", "h2"]])
    assert s12.waiting_decisions([], [], []) == ([], [], [])


# (idx, tier, target, count, loaded, droppable, required) per (segment, tier)
TALLIES = [
    (10, "A", 1, 3, 3, 2, 2),
    (10, "B", 1, 1, 1, 1, 2),
    (11, "A", 2, 1, 1, 1, None),
    (11, "B", 0, 2, 0, 1, None),
    (12, "A", 1, 2, 2, 1, 2),
    (12, "B", 1, 2, 2, 2, 2),
    (13, "A", 1, 3, 2, 2, 2),
    (13, "C", 1, 2, 1, 1, 2),
    (14, "A", 2, 2, 2, 2, 2),
    (14, "B", 1, 1, 1, 1, 2),
    (15, "B", 2, 1, 1, 1, 2),
    (15, "A", 1, 2, 2, 2, 2),
]


def tallies() -> pa.Table:
    cols = list(zip(*TALLIES))
    return pa.table(
        {
            "idx": pa.array(cols[0], pa.int64()),
            "tier": pa.array(cols[1], pa.string()),
            "target": pa.array(cols[2], pa.int32()),
            "count": pa.array(cols[3], pa.int64()),
            "loaded": pa.array(cols[4], pa.int64()),
            "droppable": pa.array(cols[5], pa.int64()),
            "required": pa.array(cols[6], pa.int32()),
        }
    )


def test_overreplicated_pairs_and_coupled_tiers():
    """Segment 10: 4 replicas for 2 wanted (excess 2, loaded 4), over in A only: cap min(3 − 1,
    2) = 2. Segment 11: 3 for 2 (excess 1, loaded 1 + 0), over in B only (2 > 0): cap min(2, 1) = 1,
    no required. Segment 12: 4 for 2, over in A and B, caps 1 and 1; dropping both leaves
    4 − 2 = 2 loaded ≥ 2 required, so the order does not matter: not coupled. Segment 13: 5 for 2
    (excess 3, loaded 3), caps A min(2, 2) = 2 and C min(1, 1) = 1; dropping all three would leave
    0 loaded < 2, so which go depends on the order across A and C: coupled. Segments 14 and 15:
    as many replicas as wanted in all (15 has one more than its target in A, one fewer in B): not
    overreplicated. Rows by idx, then tier."""
    over, coupled = s12.overreplicated(tallies())
    assert list(over) == list(s12.OVER_COLUMNS)
    rows = list(zip(*(over[c] for c in s12.OVER_COLUMNS)))
    assert rows == [
        (10, 1, 3, 2, 2, 4, 2, '{"A":[1,3],"B":[1,1]}', "A"),
        (11, 0, 2, 1, 1, 1, None, '{"A":[2,1],"B":[0,2]}', "B"),
        (12, 1, 2, 1, 2, 4, 2, '{"A":[1,2],"B":[1,2]}', "A"),
        (12, 1, 2, 1, 2, 4, 2, '{"A":[1,2],"B":[1,2]}', "B"),
        (13, 1, 3, 2, 3, 3, 2, '{"A":[1,3],"C":[1,2]}', "A"),
        (13, 1, 2, 1, 3, 3, 2, '{"A":[1,3],"C":[1,2]}', "C"),
    ]
    assert coupled == [["A", "C"]]


def test_overreplicated_of_nothing():
    over, coupled = s12.overreplicated(tallies().slice(0, 0))
    assert over == {c: [] for c in s12.OVER_COLUMNS} and coupled == []


def test_task_groups_join_coupled_tiers_over_chains():
    assert s12.task_groups(["A", "B", "C"], []) == [["A"], ["B"], ["C"]]
    assert s12.task_groups(["A", "B", "C"], [["A", "C"]]) == [["A", "C"], ["B"]]
    assert s12.task_groups(["A", "B", "C", "D"], [["A", "B"], ["B", "C"]]) == [["A", "B", "C"], ["D"]]
    assert s12.task_groups(["A", "B", "C", "D"], [["C", "D"], ["A", "D"]]) == [["A", "C", "D"], ["B"]]


def test_excess_items_one_per_segment_from_its_first_row():
    """Segment 12 has two rows (A and B) and is one item; segment 11's missing required is 0."""
    over, _ = s12.overreplicated(tallies())
    b_and_c = {c: [v for v, t in zip(over[c], over["tier"]) if t != "A"] for c in over}
    assert s12.excess_items(b_and_c) == [
        Excess(11, 1, 1, 0, {"A": (2, 1), "B": (0, 2)}),
        Excess(12, 2, 4, 2, {"A": (1, 2), "B": (1, 2)}),
        Excess(13, 3, 3, 2, {"A": (1, 3), "C": (1, 2)}),
    ]
    assert [e.idx for e in s12.excess_items(over)] == [10, 11, 12, 13]


def test_deferred_facts_sum_count_and_first_five_ids():
    facts = s12.deferred_facts(["d", "a", "f", "b", "e", "c"], [1, None, 2, 1, 1, 3])
    assert facts == {"deferred_drops": 8, "deferred_segments": 6, "deferred_examples": ["a", "b", "c", "d", "e"]}
    assert s12.deferred_facts([], []) == {"deferred_drops": 0, "deferred_segments": 0, "deferred_examples": []}
