"""Placement-cost ranking of one segment, pair by pair in plain Python (``explain``, and the
reference the live closed form of :mod:`.livecost` is checked against).

Source: ALGORITHM.md, section "Best servers (top B)"; Druid ``CostBalancerStrategy``
(``computePlacementCost``, ``orderServersByPlacementCost``). Costs come from ``cost.py``, summed
exactly (``math.fsum``) and leaving the segment itself out.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from segment_balancer.planner.cost import exact_sum, in_cost_window, joint_cost, rank_servers


def server_costs(segment: Mapping, tier_projected: pd.DataFrame, candidates) -> dict[str, float]:
    """Placement cost of ``segment`` on each server of ``candidates`` (plain Python, exact sums).

    Args:
        segment: mapping with ``idx`` (int or None), ``datasource`` (str), ``start_ms``, ``end_ms``
            (int epoch ms).
        tier_projected: pandas DataFrame (server str, idx int or null, datasource str, start_ms,
            end_ms int64): what each server of the tier projects now. Rows whose ``idx`` equals the
            segment's are the segment itself and are left out.
        candidates: iterable of server names.

    Returns:
        dict server -> cost (0.0 for a server with nothing in the window).
    """
    costs = {server: 0.0 for server in candidates}
    if tier_projected.empty or not costs:
        return costs
    seg_idx = segment.get("idx")
    if seg_idx is None:  # a segment outside the used set (overshadowed, unused) has no replica to leave out
        is_self = np.zeros(len(tier_projected), dtype=bool)
    else:
        is_self = (tier_projected["idx"] == seg_idx).fillna(False).to_numpy(bool)
    keep = (
        in_cost_window(segment["start_ms"], segment["end_ms"], tier_projected["start_ms"], tier_projected["end_ms"])
        & tier_projected["server"].isin(list(costs)).to_numpy(bool)
        & ~is_self
    )
    rows = tier_projected[keep]
    if rows.empty:
        return costs
    terms = joint_cost(
        segment["start_ms"],
        segment["end_ms"],
        segment["datasource"],
        rows["start_ms"],
        rows["end_ms"],
        rows["datasource"],
    )
    for server, ix in rows.groupby("server", sort=False).indices.items():
        costs[server] = exact_sum(terms[ix])
    return costs


def rank_one(segment: Mapping, tier_projected: pd.DataFrame, servers: pd.DataFrame) -> tuple[list[str], list[float]]:
    """Rank the candidate servers of one tier for one segment (plain Python; ``explain``).

    Args:
        segment: mapping with ``idx``, ``datasource``, ``start_ms``, ``end_ms`` (see ``server_costs``).
        tier_projected: pandas DataFrame (server, idx, datasource, start_ms, end_ms) of the tier.
        servers: pandas DataFrame (server str, available_bytes int64, decommissioning bool) of the
            tier; decommissioning servers are not candidates.

    Returns:
        (servers best first, their costs in the same order), the order of ``cost.rank_servers``.
    """
    cands = servers[~servers["decommissioning"].astype(bool)]
    available = dict(zip(cands["server"], (int(v) for v in cands["available_bytes"])))
    costs = server_costs(segment, tier_projected, available)
    order = rank_servers(costs, available)
    return order, [costs[s] for s in order]
