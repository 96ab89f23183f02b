"""The plan's counts under the names Druid's Coordinator emits them, so a plan lines up with a
cluster's dashboards.

Source: Druid ``org.apache.druid.server.coordinator.stats.Stats`` (``Segments``, ``Tier``) and the
metrics page of Druid's docs. Only the counts this project has in the same sense get a Druid name:

========================================  =========================================================
``segment/assigned/count``                LOADs of queue type ``loading`` (stages 1–4 and their
                                          revisits), per tier
``segment/assigned/broadcast``            LOADs of broadcast segments (stage 2), per tier
``segment/moved/count``                   moves: LOADs of queue type ``balancing`` or
                                          ``decommissioning`` (each with its dependent DROP), per tier
``segment/dropped/count``                 DROPs of excess replicas and of drop-rule segments
                                          (reasons ``overreplicated``, ``callback``, ``drop_rule``)
``segment/dropped/broadcast``             DROPs of broadcast segments from decommissioning servers
                                          (stage 13)
``segment/unneeded/count``                DROPs of unused and overshadowed segments' replicas
``segment/underReplicated/count``         replicas left to load, Σ max(0, target − count), per tier
``segment/unavailable/count``             used segments whose load rule asks for a replica (tiers
                                          without historicals included) and that have none in any
                                          tier
``tier/historical/count``                 historicals per tier (decommissioning ones included)
``tier/total/capacity``                   Σ ``max_size`` of a tier's historicals, bytes
========================================  =========================================================

Decision metrics (the first six) count the plan's operations, as one Coordinator run would report
its decisions. State metrics are given twice: ``at = "snapshot"`` (what Druid reports for the
snapshot's cluster) and ``at = "plan"`` (once every operation of the plan succeeded).
"""

from __future__ import annotations

import pandas as pd

# The names of Druid 35.0.0's and 38.0.0's ``Stats`` that a Coordinator run emits.
ASSIGNED = "segment/assigned/count"
DROPPED = "segment/dropped/count"
MOVED = "segment/moved/count"
DELETED = "segment/deleted/count"
ASSIGN_SKIPPED = "segment/assignSkipped/count"
DROP_SKIPPED = "segment/dropSkipped/count"
MOVE_SKIPPED = "segment/moveSkipped/count"
UNNEEDED = "segment/unneeded/count"
OVERSHADOWED = "segment/overshadowed/count"
UNAVAILABLE = "segment/unavailable/count"
UNDER_REPLICATED = "segment/underReplicated/count"
DEEP_STORAGE_ONLY = "segment/availableDeepStorageOnly/count"
ASSIGNED_TO_CLONE = "segment/clone/assigned/count"
DROPPED_FROM_CLONE = "segment/clone/dropped/count"
LOAD_QUEUE_COUNT = "segment/loadQueue/count"
LOAD_QUEUE_SIZE = "segment/loadQueue/size"
DROP_QUEUE_COUNT = "segment/dropQueue/count"
QUEUE_ASSIGNED = "segment/loadQueue/assigned"
QUEUE_SUCCESS = "segment/loadQueue/success"
QUEUE_FAILED = "segment/loadQueue/failed"
QUEUE_CANCELLED = "segment/loadQueue/cancelled"
REPLICATION_FACTOR = "tier/replication/factor"
REQUIRED_CAPACITY = "tier/required/capacity"
HISTORICAL_COUNT = "tier/historical/count"
TOTAL_CAPACITY = "tier/total/capacity"
PARTIAL_ASSIGNED = "segment/partial/assigned/count"
PARTIAL_STALE_DROPPED = "segment/partial/staleDropped/count"
PARTIAL_STALE_CANCELLED = "segment/partial/staleCancelled/count"
"""Druid 38.0.0's partial-load reconciliation (``Stats.Segments``, #19374)."""
CLONE_COUNT = "tier/historical/clone/count"
STORAGE_CAPACITY = "tier/storage/capacity"
"""Druid 38.0.0: Σ ``storage_size`` of a tier's managed historicals, bytes."""
ASSIGNED_BROADCAST = "segment/assigned/broadcast"
DROPPED_BROADCAST = "segment/dropped/broadcast"
"""Names of older Druid releases (before 27), which counted broadcast loads and drops apart."""

MOVE_QUEUE_TYPES = ("balancing", "decommissioning")
UNNEEDED_REASONS = ("unused", "overshadowed")
BROADCAST_DROP_REASONS = ("broadcast_on_decommissioning",)


def decision_metric(action: str, queue_type: str | None, reason: str) -> str | None:
    """The Druid metric one operation counts in (None: a move's DROP, counted with its LOAD).

    ``action``: ``LOAD``/``DROP``; ``queue_type``: the LOAD's queue type; ``reason``: the op's reason.
    """
    if action == "LOAD":
        if queue_type in MOVE_QUEUE_TYPES:
            return MOVED
        return ASSIGNED_BROADCAST if reason == "underbroadcast" else ASSIGNED
    if reason in ("decommissioning", "balancing", "to_be_balanced"):
        return None
    if reason in UNNEEDED_REASONS:
        return UNNEEDED
    if reason in BROADCAST_DROP_REASONS:
        return DROPPED_BROADCAST
    return DROPPED


def druid_metrics(
    op_counts: pd.DataFrame,
    servers: pd.DataFrame,
    missing_before: dict[str, int],
    missing_after: dict[str, int],
    unavailable_before: int,
    unavailable_after: int,
    decisions: list[dict] | None = None,
) -> list[dict]:
    """Druid-named metric events of one plan, sorted by metric then tier.

    ``op_counts``: one row per (``tier``, ``action``, ``queue_type``, ``reason``) with ``count``
    (int64); ``servers``: ``prepared/servers.parquet`` (``tier``, ``max_size`` bytes);
    ``missing_*``: ``{tier: replicas left to load}``; ``unavailable_*``: segments with no replica that a load rule wants
    (:func:`segment_balancer.planner.status.unavailable`).
    Returns ``[{"metric", "tier" (absent for cluster-wide ones), "value", "at"}]`` where ``at`` is
    ``plan`` for decisions and ``snapshot``/``plan`` for state metrics. ``decisions``: the decision
    events as a Coordinator run counted them (``{"metric", "tier", "value"}``; the ``druid``
    coordinator's), in place of those ``op_counts`` would give.
    """
    if decisions is not None:
        op_counts = op_counts.iloc[0:0]
    events: dict[tuple, int] = {(e["metric"], e["tier"], "plan"): int(e["value"]) for e in decisions or []}
    for row in op_counts.itertuples(index=False):
        queue_type = None if pd.isna(row.queue_type) else row.queue_type
        metric = decision_metric(row.action, queue_type, row.reason)
        if metric is not None:
            key = (metric, row.tier, "plan")
            events[key] = events.get(key, 0) + int(row.count)
    out = [{"metric": m, "tier": t, "value": v, "at": at} for (m, t, at), v in events.items()]
    for at, missing in (("snapshot", missing_before), ("plan", missing_after)):
        out += [{"metric": UNDER_REPLICATED, "tier": t, "value": int(n), "at": at} for t, n in missing.items()]
    out += [
        {"metric": UNAVAILABLE, "value": int(unavailable_before), "at": "snapshot"},
        {"metric": UNAVAILABLE, "value": int(unavailable_after), "at": "plan"},
    ]
    for tier, part in servers.groupby("tier"):
        out += [
            {"metric": HISTORICAL_COUNT, "tier": tier, "value": len(part), "at": "snapshot"},
            {"metric": TOTAL_CAPACITY, "tier": tier, "value": int(part["max_size"].sum()), "at": "snapshot"},
        ]
    return sorted(out, key=lambda e: (e["metric"], e.get("tier") or "", e["at"] != "snapshot"))
