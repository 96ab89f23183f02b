"""Replication status of a run state: the start-of-run groups of one tier (:func:`tier_status`),
combined across tiers (:func:`combine`), and the counts the summary reports. Vectorised numpy over
one tier's :class:`~segment_balancer.planner.runstate.TierState`; :mod:`segment_balancer.spark.status`
runs it in one Spark task per tier.

``count(s, T)`` is ALGORITHM.md's: servers of ``T`` that serve ``s`` with no drop of it queued or
scheduled, plus servers of ``T`` with a queued or scheduled load of it.
Source: ALGORITHM.md "Terms"; seed 000 "Terminology".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyroaring import BitMap

from segment_balancer.planner.runstate import NO_LOAD, RULE_CODES, SegmentTable, TierState

GROUP_KINDS = (
    "Underreplicated",
    "FullyReplicated",
    "Overreplicated",
    "ToMoveAwayFromDecommServers",
    "Balanceable",
    "Underbroadcast",
)
"""The per-tier groups at the start of the run (named ``Kind[tier]``), besides ``Unreplicated``."""


def holds(state: TierState) -> np.ndarray:
    """bool (m,): which replicas of ``state`` count in ``count(s, T)`` and the projection: served
    or loading, not dropping."""
    return (state.served | (state.load != NO_LOAD)) & ~state.dropping


def _server_flags(state: TierState, servers: pd.DataFrame, column: str, missing: bool) -> np.ndarray:
    """bool (m,): ``servers[column]`` of every replica's server (``missing`` for a server not there)."""
    flag = dict(zip(servers["server"], servers[column].astype(bool)))
    per_code = np.array([flag.get(name, missing) for name in state.servers] + [missing], dtype=bool)
    return per_code[state.rep_server]


def _per_segment(state: TierState, values: np.ndarray) -> np.ndarray:
    """int64 (n,): ``values`` (m,) of the replicas summed per segment row of ``state``."""
    n = len(state.seg_code)
    pos = np.searchsorted(state.seg_code, state.rep_code)
    mine = pos < n
    mine[mine] = state.seg_code[pos[mine]] == state.rep_code[mine]
    return np.bincount(pos[mine], weights=np.asarray(values, np.int64)[mine], minlength=n).astype(np.int64)


def tier_status(state: TierState, table: SegmentTable, servers: pd.DataFrame) -> dict[str, BitMap]:
    """One tier's start-of-run memberships from its state, vectorised (numpy).

    ``table``: the run's segments; ``servers``: the tier's rows of ``prepared/servers.parquet``
    (``server``, ``decommissioning``, ``broadcast_only`` bool). Returns bitmaps of segment
    indexes keyed by :data:`GROUP_KINDS`, two more for the cross-tier ``Unreplicated``:
    ``targeted`` (load rule, target > 0 here) and ``counted`` (load rule, count > 0 here), and
    ``available`` (load rule asking for some replica, tiers without historicals included:
    ``required`` > 0; count > 0 here), for :func:`unavailable`.
    ``Underreplicated`` here still includes segments unreplicated in every tier
    (:func:`combine` takes them out).

    Per (segment, tier), for used segments under a load rule, with ``count`` the servers that
    serve the segment with no drop or load it: underreplicated when count < target; fully
    replicated when count = target > 0; overreplicated when count > target (target 0 included);
    ``ToMoveAwayFromDecommServers`` when target > 0 and a decommissioning server serves it;
    ``Balanceable`` when target > 0, count <= target and a non-decommissioning server serves it.
    Broadcast segments are ``Underbroadcast`` when fewer servers of the tier than should (all but
    broadcast-only decommissioning ones) serve or load it with no drop.
    Source: ALGORITHM.md "Terms", "Groups", "Broadcast segment"; seed 000 "Terminology".
    """
    held = holds(state)
    serving = state.served & ~state.dropping
    decomm = _server_flags(state, servers, "decommissioning", False)
    should = ~_server_flags(state, servers, "broadcast_only", True)
    count = _per_segment(state, held)
    on_decomm = _per_segment(state, serving & decomm)
    candidate = _per_segment(state, serving & ~decomm)
    have = _per_segment(state, held & should)
    code = state.seg_code
    used = code < table.n_used
    rule = table.rule[code]
    target = state.target.astype(np.int64)

    def members(mask) -> BitMap:
        return BitMap(code[mask].astype(np.uint32))

    load = used & (rule == RULE_CODES["load"])
    out = {
        "targeted": members(load & (target > 0)),
        "counted": members(load & (count > 0)),
        "available": members(load & (table.required[code] > 0) & (count > 0)),
        "Underreplicated": members(load & (target > 0) & (count < target)),
        "FullyReplicated": members(load & (target > 0) & (count == target)),
        "Overreplicated": members(load & (count > target)),
        "ToMoveAwayFromDecommServers": members(load & (target > 0) & (on_decomm > 0)),
        "Balanceable": members(load & (target > 0) & (count <= target) & (candidate > 0)),
    }
    n_should = int((~servers["broadcast_only"].astype(bool)).sum())
    broadcast = used & (rule == RULE_CODES["broadcast"])
    out["Underbroadcast"] = members(broadcast & (have < n_should)) if n_should else BitMap()
    return out


def held_per_server(state: TierState, table: SegmentTable) -> dict[str, tuple[int, int]]:
    """``{server: (segments, bytes)}`` that each server of one tier holds in ``state`` (replicas
    served or loading, with no drop; unused segments included: they take space until dropped)."""
    mine = holds(state)
    servers = state.rep_server[mine]
    n = len(state.servers)
    count = np.bincount(servers, minlength=n)
    size = np.bincount(servers, weights=table.size_bytes[state.rep_code[mine]], minlength=n)
    return {state.servers[i]: (int(count[i]), int(size[i])) for i in np.flatnonzero(count)}


def missing_replicas(state: TierState, table: SegmentTable) -> int:
    """Replicas left to load in one tier: Σ max(0, target − count) over the used load-rule
    segments of ``state`` (unreplicated ones included). Druid reports the same number as
    ``segment/underReplicated/count`` (``SegmentReplicationStatus``: replicas, not segments)."""
    code = state.seg_code
    load = (code < table.n_used) & (table.rule[code] == RULE_CODES["load"]) & (state.target > 0)
    count = _per_segment(state, holds(state))
    return int(np.maximum(state.target.astype(np.int64) - count, 0)[load].sum())


def unavailable(per_tier: dict[str, dict[str, BitMap]], wanted: int) -> int:
    """Used segments with no replica in any tier among the ``wanted`` ones (used segments whose
    load rule asks for some replica, tiers without historicals included): ``wanted`` minus those
    ``available`` in some tier of ``per_tier`` (:func:`tier_status` of every tier). A segment whose
    rule names only tiers without historicals counts here, not in ``Unreplicated`` (no tier of the
    snapshot targets it). Druid's ``segment/unavailable/count`` of the load-rule segments
    (``DruidCoordinator.getDatasourceToUnavailableSegmentCount``, Druid 35.0.0: none loaded and
    some required)."""
    return wanted - len(BitMap.union(BitMap(), *[s["available"] for s in per_tier.values()]))


@dataclass
class Status:
    """Replication status of one run state: ``groups`` (``{name: BitMap}``, as :func:`combine`),
    ``counts`` (``{name: members}``), ``held`` (``{server: (segments, bytes)}``, as
    :func:`held_per_server`), ``missing`` (``{tier: replicas left to load}``, as
    :func:`missing_replicas`) and ``unavailable`` (segments, as :func:`unavailable`)."""

    groups: dict[str, BitMap]
    counts: dict[str, int]
    held: dict[str, tuple[int, int]]
    missing: dict[str, int]
    unavailable: int


def replication_counts(counts: dict[str, int]) -> dict:
    """``{"unreplicated": n, "tiers": {tier: {"underreplicated", "fully_replicated",
    "overreplicated": n}}}`` (used load-rule segments per tier by status; a tier lists only the
    statuses it has) for the plan summary, from the group sizes ``counts`` of a :class:`Status`."""
    names = {
        "Underreplicated": "underreplicated",
        "FullyReplicated": "fully_replicated",
        "Overreplicated": "overreplicated",
    }
    out: dict = {"unreplicated": counts.get("Unreplicated", 0), "tiers": {}}
    for name, n in counts.items():
        kind, _, tier = name.partition("[")
        if kind in names:
            out["tiers"].setdefault(tier[:-1], {})[names[kind]] = n
    return out


def balance(held: dict[str, tuple[int, int]], servers_pdf: pd.DataFrame) -> dict:
    """Per tier: ``servers`` (candidates: not decommissioning) and the max − min over them of the
    segments and of the bytes they hold (``held``: ``{server: (segments, bytes)}`` of a
    :class:`Status`; seed 004 measures)."""
    out = {}
    for tier, part in servers_pdf.groupby("tier"):
        cands = part[~part["decommissioning"].astype(bool)]["server"]
        counts = [held.get(s, (0, 0))[0] for s in cands] or [0]
        sizes = [held.get(s, (0, 0))[1] for s in cands] or [0]
        out[tier] = {
            "servers": len(cands),
            "segments_max_minus_min": max(counts) - min(counts),
            "bytes_max_minus_min": max(sizes) - min(sizes),
        }
    return out


def combine(per_tier: dict[str, dict[str, BitMap]]) -> dict[str, BitMap]:
    """The start-of-run groups from every tier's :func:`tier_status`: ``Unreplicated`` (targeted
    in some tier, counted in none; always present) and ``Kind[tier]`` for each non-empty group of
    :data:`GROUP_KINDS`, ``Underreplicated[tier]`` without the unreplicated segments."""
    targeted = BitMap.union(BitMap(), *[s["targeted"] for s in per_tier.values()])
    counted = BitMap.union(BitMap(), *[s["counted"] for s in per_tier.values()])
    groups = {"Unreplicated": targeted - counted}
    for tier, status in sorted(per_tier.items()):
        for kind in GROUP_KINDS:
            members = status[kind] - groups["Unreplicated"] if kind == "Underreplicated" else status[kind]
            if members:
                groups[f"{kind}[{tier}]"] = members
    return groups


def should_hold_broadcast(servers_pdf):
    """Servers that should hold broadcast segments: all but decommissioning servers holding only
    broadcast segments (ALGORITHM.md "Broadcast segment")."""
    return servers_pdf[~servers_pdf["broadcast_only"]][["server", "tier"]]
