"""The replica tally stage 12 reads (``segment_balancer.planner.stages.s12_unload.tally``), worked by hand from
ALGORITHM.md "Terms" (``count(s, T)``, ``loaded(s)``)."""

from __future__ import annotations

import pandas as pd

from segment_balancer.planner.runstate import state_frame, tables_from_rows
from segment_balancer.planner.stages.s12_unload import tally


def test_a_replica_whose_drop_waits_for_a_load_is_still_loaded():
    """Segment 0, target 2 in t: a serves it with a dependent drop (a move's source), b with a
    queued (independent) drop, c serves it, d is loading it. count = c + d = 2 (no dropping replica
    counts, a load does); loaded = a + c = 2 (a serves until its replacement has loaded; b's drop
    may happen any time; d may fail); droppable = c alone (stage 12 never drops a replica that
    already has a drop, and d serves nothing yet). Segment 1 (a drop rule) has no tally."""
    seg = {"tier": "t", "idx": 0, "segment_id": "s0", "datasource": "ds", "start_ms": 0, "end_ms": 1, "size_bytes": 1}
    other = {**seg, "idx": 1, "segment_id": "s1"}
    rows = [
        {**seg, "kind": "segment", "target": 2, "tier_pos": 0, "rule_kind": "load", "required": 2},
        {**seg, "kind": "replica", "server": "a", "served": True, "dropping": True, "drop_dependent": True},
        {**seg, "kind": "replica", "server": "b", "served": True, "dropping": True, "drop_dependent": False},
        {**seg, "kind": "replica", "server": "c", "served": True, "dropping": False},
        {**seg, "kind": "replica", "server": "d", "served": False, "load_type": "loading", "dropping": False},
        {**other, "kind": "segment", "target": 0, "tier_pos": 0, "rule_kind": "drop"},
        {**other, "kind": "replica", "server": "a", "served": True, "dropping": False},
    ]
    table, states = tables_from_rows(state_frame(pd.DataFrame(rows)))
    got = {k: v.tolist() for k, v in tally(states["t"], table).items()}
    assert got == {"code": [0], "target": [2], "count": [2], "loaded": [2], "droppable": [1]}
