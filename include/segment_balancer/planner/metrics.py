"""A plan's operations and states counted under the names Druid's Coordinator emits them
(``druid.metrics``: which count takes which name), for the plan's ``summary.json``.

Source: Druid ``org.apache.druid.server.coordinator.stats.Stats`` (35.0.0, 38.0.0).
"""

from __future__ import annotations

import pandas as pd

from segment_balancer.druid.metrics import (
    ASSIGNED,
    ASSIGNED_BROADCAST,
    DROPPED,
    DROPPED_BROADCAST,
    HISTORICAL_COUNT,
    MOVED,
    TOTAL_CAPACITY,
    UNAVAILABLE,
    UNDER_REPLICATED,
    UNNEEDED,
)
from segment_balancer.planner.operations import MOVE_REASONS, UNNEEDED_REASONS, Action, Reason

MOVE_QUEUE_TYPES = ("balancing", "decommissioning")
"""The queue types of a move's LOAD."""


def decision_metric(action: str, queue_type: str | None, reason: str) -> str | None:
    """The Druid metric one operation counts in (None: a move's DROP, counted with its LOAD).

    ``action``: ``LOAD``/``DROP``; ``queue_type``: the LOAD's queue type; ``reason``: the op's reason.
    """
    if action == Action.LOAD:
        if queue_type in MOVE_QUEUE_TYPES:
            return MOVED
        return ASSIGNED_BROADCAST if reason == Reason.UNDERBROADCAST else ASSIGNED
    if reason in MOVE_REASONS:
        return None
    if reason in UNNEEDED_REASONS:
        return UNNEEDED
    if reason == Reason.BROADCAST_ON_DECOMMISSIONING:
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
