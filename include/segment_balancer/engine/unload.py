"""Stages 12 (unload excess replicas) and 13 (broadcast segments on decommissioning servers).

Source: seed 000 stages 12–13; ALGORITHM.md stages 12–13.
"""

from __future__ import annotations

from collections.abc import Mapping

from .callbacks import drop_key, drop_order
from .state import OpSink


def unload_excess(seg: dict, tiers: Mapping[str, dict], available: Mapping[str, int], sink: OpSink) -> int:
    """Stage 12 for one replicated segment: drop replicas beyond ``Σ_T target``.

    ``tiers``: per tier name: ``target`` (int), ``count`` (end-state count, every operation of the
    run succeeded, dependent drops included), ``holders`` (servers serving it with no drop) and
    ``costs`` (server → start-of-run placement cost). Drops the highest-cost holders first across
    the overreplicated tiers, at most ``count − target`` from one tier. Returns the number of drops.
    """
    excess = sum(t["count"] for t in tiers.values()) - sum(t["target"] for t in tiers.values())
    if excess <= 0:
        return 0
    candidates = []
    for tier, state in tiers.items():
        cap = state["count"] - state["target"]
        if cap <= 0:
            continue
        ordered = drop_order(state["holders"], state["costs"], available)[:cap]
        candidates += [(drop_key(name, state["costs"], available), name, tier) for name in ordered]
    candidates.sort()
    for _, name, tier in candidates[:excess]:
        sink.drop(seg, name, tier, "overreplicated", (int(seg["idx"]), tier, float(sink.next_seq())))
    return min(excess, len(candidates))


def drop_everywhere(seg: dict, holders: Mapping[str, str], reason: str, sink: OpSink) -> None:
    """Stage 12 for an unused, overshadowed or drop-rule segment: drop it from every server.

    ``holders``: server → tier of every server serving it with no drop (visited in name order).
    """
    for server in sorted(holders):
        sink.drop(seg, server, holders[server], reason, (int(seg.get("idx") or -1), server, float(sink.next_seq())))
