"""``segment_balancer.spark.state_store``: the replica tally stage 12 reads, worked by hand from
ALGORITHM.md "Terms" (``count(s, T)``, ``loaded(s)``)."""

from __future__ import annotations

import pandas as pd

from segment_balancer.planner.runstate import state_frame
from segment_balancer.spark.state_store import STATE_SCHEMA, replica_tally


def test_a_replica_whose_drop_waits_for_a_load_is_still_loaded(spark):
    """Segment 0, target 2 in t: a serves it with a dependent drop (a move's source), b with a
    queued (independent) drop, c serves it, d is loading it. count = c + d = 2 (no dropping replica
    counts, a load does); loaded = a + c = 2 (a serves until its replacement has loaded; b's drop
    may happen any time; d may fail); droppable = c alone (stage 12 never drops a replica that
    already has a drop, and d serves nothing yet)."""
    seg = {"tier": "t", "idx": 0, "segment_id": "s0", "datasource": "ds", "start_ms": 0, "end_ms": 1, "size_bytes": 1}
    rows = [{**seg, "kind": "segment", "target": 2, "tier_pos": 0, "rule_kind": "load", "required": 2},
            {**seg, "kind": "replica", "server": "a", "served": True, "dropping": True, "drop_dependent": True},
            {**seg, "kind": "replica", "server": "b", "served": True, "dropping": True, "drop_dependent": False},
            {**seg, "kind": "replica", "server": "c", "served": True, "dropping": False},
            {**seg, "kind": "replica", "server": "d", "served": False, "load_type": "loading", "dropping": False}]
    state = spark.createDataFrame(state_frame(pd.DataFrame(rows)), STATE_SCHEMA)
    [row] = replica_tally(state).collect()
    assert (row["idx"], row["tier"], row["target"], row["count"], row["loaded"], row["required"]) == (0, "t", 2, 2, 2, 2)
    assert row["droppable"] == 1
