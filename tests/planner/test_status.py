"""Start-of-run groups (segment_balancer.planner.status): one tier's memberships from its state rows and
the cross-tier ``Unreplicated``, on a hand-worked cluster.

Tier ``hot``: h1 decommissioning, h2 and h3 candidates, h4 decommissioning and holding only
broadcast segments (so it should not hold broadcast segments). Tier ``cold``: c1. Worked by hand
from ALGORITHM.md "Terms" (``count`` = serving with no drop, plus loading):

| idx | rule | hot target | hot replicas | hot count | groups in hot |
|---|---|---|---|---|---|
| 0 | load | 2 | h2, h3 served | 2 | FullyReplicated, Balanceable |
| 1 | load | 2 | h1 served | 1 | Underreplicated, ToMoveAwayFromDecommServers |
| 2 | load | 2 (cold 1, served on c1) | none | 0 | Underreplicated |
| 3 | load | 1 | h2 served, h3 loading | 2 | Overreplicated |
| 4 | load | 0 | h2 served | 1 | Overreplicated |
| 5 | load | 2 | h2 served + dropping, h3 loading | 1 | Underreplicated (no candidate serves it) |
| 6 | load | 1 (cold 1) | none (cold: none) | 0 | none: Unreplicated |
| 7 | broadcast | 0 | h2, h3 served | - | Underbroadcast (3 should: h1, h2, h3) |
| 8 | broadcast | 0 | h1, h2, h3 served | - | none |

plus a replica of an unused segment (idx -1) on h2, which counts nowhere.
"""

from __future__ import annotations

import pandas as pd
from pyroaring import BitMap

from segment_balancer.planner.runstate import state_frame, tables_from_rows
from segment_balancer.planner.status import combine, unavailable
from segment_balancer.planner.status import tier_status as status_of_state


def tier_status(rows, servers):
    """:func:`status_of_state` of the one tier of ``rows``."""
    table, states = tables_from_rows(rows)
    [state] = states.values() if states else [None]
    return status_of_state(state, table, servers)


SERVERS = pd.DataFrame(
    [
        {"server": "h1", "tier": "hot", "decommissioning": True, "broadcast_only": False},
        {"server": "h2", "tier": "hot", "decommissioning": False, "broadcast_only": False},
        {"server": "h3", "tier": "hot", "decommissioning": False, "broadcast_only": False},
        {"server": "h4", "tier": "hot", "decommissioning": True, "broadcast_only": True},
        {"server": "c1", "tier": "cold", "decommissioning": False, "broadcast_only": False},
    ]
)


def rows(tier, segments, replicas):
    """State rows: ``segments`` (idx, rule, target), ``replicas`` (idx, server, served, load, drop)."""
    out = [
        {
            "kind": "segment",
            "idx": i,
            "segment_id": f"s{i}",
            "datasource": "d",
            "start_ms": 0,
            "end_ms": 1,
            "size_bytes": 1,
            "target": t,
            "tier_pos": 0,
            "rule_kind": rule,
            "required": 1,
        }
        for i, rule, t in segments
    ]
    out += [
        {
            "kind": "replica",
            "idx": i,
            "segment_id": f"s{i}",
            "datasource": "d",
            "start_ms": 0,
            "end_ms": 1,
            "size_bytes": 1,
            "server": s,
            "served": served,
            "load_type": "loading" if load else None,
            "dropping": drop,
        }
        for i, s, served, load, drop in replicas
    ]
    return state_frame(pd.DataFrame(out).assign(tier=tier))


HOT = rows(
    "hot",
    [
        (0, "load", 2),
        (1, "load", 2),
        (2, "load", 2),
        (3, "load", 1),
        (4, "load", 0),
        (5, "load", 2),
        (6, "load", 1),
        (7, "broadcast", 0),
        (8, "broadcast", 0),
    ],
    [
        (0, "h2", True, False, False),
        (0, "h3", True, False, False),
        (1, "h1", True, False, False),
        (3, "h2", True, False, False),
        (3, "h3", False, True, False),
        (4, "h2", True, False, False),
        (5, "h2", True, False, True),
        (5, "h3", False, True, False),
        (7, "h2", True, False, False),
        (7, "h3", True, False, False),
        (8, "h1", True, False, False),
        (8, "h2", True, False, False),
        (8, "h3", True, False, False),
        (-1, "h2", True, False, False),
    ],
)
COLD = rows(
    "cold",
    [(2, "load", 1), (6, "load", 1), (7, "broadcast", 0), (8, "broadcast", 0)],
    [(2, "c1", True, False, False), (7, "c1", True, False, False), (8, "c1", True, False, False)],
)


def test_one_tier_memberships_worked_by_hand():
    hot = tier_status(HOT, SERVERS[SERVERS.tier == "hot"])
    assert {k: sorted(v) for k, v in hot.items()} == {
        "targeted": [0, 1, 2, 3, 5, 6],
        "counted": [0, 1, 3, 4, 5],
        "available": [0, 1, 3, 4, 5],  # every segment here asks for a replica (required 1)
        "Underreplicated": [1, 2, 5, 6],
        "FullyReplicated": [0],
        "Overreplicated": [3, 4],
        "ToMoveAwayFromDecommServers": [1],
        "Balanceable": [0],
        "Underbroadcast": [7],
    }


def test_unreplicated_is_targeted_somewhere_and_counted_nowhere():
    per_tier = {
        "hot": tier_status(HOT, SERVERS[SERVERS.tier == "hot"]),
        "cold": tier_status(COLD, SERVERS[SERVERS.tier == "cold"]),
    }
    groups = combine(per_tier)
    # 2 has no replica in hot but one in cold: underreplicated in hot, not unreplicated.
    assert groups["Unreplicated"] == BitMap([6])
    assert sorted(groups["Underreplicated[hot]"]) == [1, 2, 5]
    assert sorted(groups["FullyReplicated[cold]"]) == [2]
    # empty groups are left out: nothing is underbroadcast or overreplicated in cold
    assert "Underbroadcast[cold]" not in groups and "Overreplicated[cold]" not in groups
    assert sorted(groups) == [
        "Balanceable[cold]",
        "Balanceable[hot]",
        "FullyReplicated[cold]",
        "FullyReplicated[hot]",
        "Overreplicated[hot]",
        "ToMoveAwayFromDecommServers[hot]",
        "Underbroadcast[hot]",
        "Underreplicated[hot]",
        "Unreplicated",
    ]


def test_a_tier_where_every_server_is_broadcast_only_wants_no_broadcast_replica():
    servers = SERVERS[SERVERS.server == "h4"]
    status = tier_status(rows("hot", [(7, "broadcast", 0)], []), servers)
    assert not status["Underbroadcast"]


def test_unavailable_counts_the_segments_no_tier_holds_among_those_a_rule_wants():
    """Of hot's and cold's segments, 6 is held nowhere (unreplicated); a load-rule segment whose
    rule names only a tier without historicals has no state row in any tier: with 10 wanted
    segments (0-6 here and three such), 0-5 are held somewhere, so 10 - 6 = 4 are unavailable:
    6 and the three."""
    per_tier = {
        "hot": tier_status(HOT, SERVERS[SERVERS.tier == "hot"]),
        "cold": tier_status(COLD, SERVERS[SERVERS.tier == "cold"]),
    }
    assert sorted(BitMap.union(*[s["available"] for s in per_tier.values()])) == [0, 1, 2, 3, 4, 5]
    assert unavailable(per_tier, 10) == 4
    assert unavailable({}, 3) == 3  # no tier at all (no historical): every wanted segment


def test_a_load_rule_of_no_replica_wants_none():
    """A segment whose load rule asks for no replica (``required`` 0) that a server holds is not
    ``available``: it counts in neither side of :func:`unavailable`."""
    table_rows = rows("hot", [(0, "load", 0)], [(0, "h2", True, False, False)])
    table_rows.loc[table_rows["kind"] == "segment", "required"] = 0
    assert not tier_status(table_rows, SERVERS[SERVERS.tier == "hot"])["available"]
