"""Replication status of a run state: the start-of-run groups of one tier (:func:`tier_status`),
combined across tiers (:func:`combine`), and the counts the summary reports. Pure pandas over one
tier's state rows; :mod:`segment_balancer.spark.status` runs it in one Spark task per tier.

``count(s, T)`` is ALGORITHM.md's: servers of ``T`` that serve ``s`` with no drop of it queued or
scheduled, plus servers of ``T`` with a queued or scheduled load of it.
Source: ALGORITHM.md "Terms"; seed 000 "Terminology".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyroaring import BitMap

from segment_balancer.planner.runstate import holds_mask, replica_flags


GROUP_KINDS = ("Underreplicated", "FullyReplicated", "Overreplicated", "ToMoveAwayFromDecommServers", "Balanceable",
               "Underbroadcast")
"""The per-tier groups at the start of the run (named ``Kind[tier]``), besides ``Unreplicated``."""


def tier_status(rows: pd.DataFrame, servers: pd.DataFrame) -> dict[str, BitMap]:
    """One tier's start-of-run memberships from its state rows, vectorised (pandas/numpy).

    ``rows``: the tier's rows of the run state (:data:`segment_balancer.planner.runstate.STATE_COLUMNS`,
    ``tier`` may be absent); ``servers``: the tier's rows of ``prepared/servers.parquet``
    (``server``, ``decommissioning``, ``broadcast_only`` bool). Returns bitmaps of segment
    indexes keyed by :data:`GROUP_KINDS` and two more for the cross-tier ``Unreplicated``:
    ``targeted`` (load rule, target > 0 here) and ``counted`` (load rule, count > 0 here).
    ``Underreplicated`` here still includes segments unreplicated in every tier
    (:func:`initial_groups` takes them out).

    Per (segment, tier), for used segments (``idx`` >= 0) under a load rule, with ``count`` the
    servers that serve the segment with no drop or load it: underreplicated when count < target
    (and it has a replica in some tier); fully replicated when count = target > 0; overreplicated when count > target (target 0
    included); ``ToMoveAwayFromDecommServers`` when target > 0 and a decommissioning server
    serves it; ``Balanceable`` when target > 0, count <= target and a non-decommissioning server
    serves it. Broadcast segments are ``Underbroadcast`` when fewer servers of the tier than
    should (all but broadcast-only decommissioning ones) serve or load it with no drop.
    Source: ALGORITHM.md "Terms", "Groups", "Broadcast segment"; seed 000 "Terminology".
    """
    seg = rows[rows["kind"] == "segment"]
    rep = rows[(rows["kind"] == "replica") & (rows["idx"] >= 0)]
    srv = servers.set_index("server")
    served, loading, dropping = replica_flags(rep)
    per = pd.DataFrame({"idx": rep["idx"].to_numpy(np.int64), "server": rep["server"].to_numpy(object),
                        "served": served, "load": loading, "drop": dropping}
                       ).groupby(["idx", "server"], sort=False).max().reset_index()
    holds = (per["served"] | per["load"]) & ~per["drop"]
    serving = per["served"] & ~per["drop"]
    decomm = per["server"].map(srv["decommissioning"]).fillna(False).astype(bool)
    should = ~per["server"].map(srv["broadcast_only"]).fillna(True).astype(bool)
    agg = pd.DataFrame({"idx": per["idx"], "count": holds.astype(np.int64), "decomm": (serving & decomm).astype(np.int64),
                        "candidate": (serving & ~decomm).astype(np.int64),
                        "have": (holds & should).astype(np.int64)}).groupby("idx").sum()

    def members(frame, mask) -> BitMap:
        return BitMap(frame.loc[mask, "idx"].to_numpy(np.uint32))

    load = seg[(seg["rule_kind"] == "load") & (seg["idx"] >= 0)]
    load = pd.DataFrame({"idx": load["idx"].to_numpy(np.int64),
                         "target": load["target"].fillna(0).to_numpy(np.int64)}).join(agg, on="idx").fillna(0)
    target, count = load["target"], load["count"]
    out = {
        "targeted": members(load, target > 0),
        "counted": members(load, count > 0),
        "Underreplicated": members(load, (target > 0) & (count < target)),
        "FullyReplicated": members(load, (target > 0) & (count == target)),
        "Overreplicated": members(load, count > target),
        "ToMoveAwayFromDecommServers": members(load, (target > 0) & (load["decomm"] > 0)),
        "Balanceable": members(load, (target > 0) & (count <= target) & (load["candidate"] > 0)),
    }
    n_should = int((~servers["broadcast_only"].astype(bool)).sum())
    bseg = seg[(seg["rule_kind"] == "broadcast") & (seg["idx"] >= 0)]
    bseg = pd.DataFrame({"idx": bseg["idx"].to_numpy(np.int64)}).join(agg, on="idx").fillna(0)
    out["Underbroadcast"] = members(bseg, bseg["have"] < n_should) if n_should else BitMap()
    return out


def held_per_server(rows: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """``{server: (segments, bytes)}`` that each server of one tier holds in the state ``rows``
    (replica rows served or loading, with no drop; unused segments included: they take space
    until dropped)."""
    rep = rows[rows["kind"] == "replica"]
    per = rep[holds_mask(rep)].groupby("server")["size_bytes"].agg(["count", "sum"])
    return {str(k): (int(n), int(b)) for k, (n, b) in per.iterrows()}


def missing_replicas(rows: pd.DataFrame) -> int:
    """Replicas left to load in one tier: Σ max(0, target − count) over the used load-rule
    segments of the state ``rows`` (unreplicated ones included). Druid reports the same number as
    ``segment/underReplicated/count`` (``SegmentReplicationStatus``: replicas, not segments)."""
    seg = rows[(rows["kind"] == "segment") & (rows["rule_kind"] == "load") & (rows["idx"] >= 0)]
    target = pd.Series(seg["target"].fillna(0).to_numpy(np.int64), index=seg["idx"].to_numpy(np.int64))
    target = target[target > 0]
    if target.empty:
        return 0
    rep = rows[(rows["kind"] == "replica") & (rows["idx"] >= 0)]
    held = rep[holds_mask(rep)].groupby("idx")["server"].nunique()
    count = held.reindex(target.index, fill_value=0).to_numpy(np.int64)
    return int(np.maximum(target.to_numpy() - count, 0).sum())


@dataclass
class Status:
    """Replication status of one run state: ``groups`` (``{name: BitMap}``, as :func:`combine`),
    ``counts`` (``{name: members}``), ``held`` (``{server: (segments, bytes)}``, as
    :func:`held_per_server`) and ``missing`` (``{tier: replicas left to load}``, as
    :func:`missing_replicas`)."""

    groups: dict[str, BitMap]
    counts: dict[str, int]
    held: dict[str, tuple[int, int]]
    missing: dict[str, int]


def replication_counts(counts: dict[str, int]) -> dict:
    """``{"unreplicated": n, "tiers": {tier: {"underreplicated", "fully_replicated",
    "overreplicated": n}}}`` (used load-rule segments per tier by status; a tier lists only the
    statuses it has) for the plan summary, from the group sizes ``counts`` of a :class:`Status`."""
    names = {"Underreplicated": "underreplicated", "FullyReplicated": "fully_replicated", "Overreplicated": "overreplicated"}
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
        out[tier] = {"servers": len(cands), "segments_max_minus_min": max(counts) - min(counts),
                     "bytes_max_minus_min": max(sizes) - min(sizes)}
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
