"""Stage-3 callbacks: one dependent DROP per load where the segment is overreplicated elsewhere.

Source: seed 000 stage 3 ("add a callback to schedule unloading the segment … upon successful
loading in the tier where the segment is underreplicated"); ALGORITHM.md "Moves and callbacks".
"""

from __future__ import annotations

from collections.abc import Mapping

from .state import OpSink


def add_callbacks(seg: dict, loads: list[tuple[str, str, tuple]], tiers: Mapping[str, dict], sink: OpSink) -> None:
    """Add one dependent DROP per scheduled load where the segment is overreplicated elsewhere.

    ``seg``: ``idx``, ``segment_id``, ``datasource``, ``size_bytes``; ``loads``: (tier, server,
    order) of this step's loads of the segment, in scheduling order; ``tiers``: per overreplicated
    tier name, ``target`` (int), ``count`` (int, ``count(s, T)`` at the start of the stage) and
    ``drop_order`` (servers serving it with no drop, first to drop first: the tier's ranking at the
    start of the stage reversed, :meth:`segment_balancer.runstate.TierRun.drop_order`). Mutates
    ``tiers`` as drops are added. Each DROP goes to the first tier by name, other than the load's,
    that is still overreplicated; it is recorded in ``sink`` and applied to that tier's state when
    the stage writes it (it counts there from the next stage on).
    """
    for load_tier, load_server, order in loads:
        for tier in sorted(tiers):
            state = tiers[tier]
            if tier == load_tier or state["count"] <= state["target"] or not state["drop_order"]:
                continue
            source = state["drop_order"].pop(0)
            state["count"] -= 1
            sink.drop(seg, source, tier, "callback", order[:-1] + (order[-1] + 0.5,), dep_server=load_server)
            break
