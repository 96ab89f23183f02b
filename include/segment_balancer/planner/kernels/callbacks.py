"""Stage-3 callbacks: one dependent DROP per load where the segment is overreplicated elsewhere.

Source: seed 000 stage 3 ("add a callback to schedule unloading the segment … upon successful
loading in the tier where the segment is underreplicated"); ALGORITHM.md "Moves and callbacks".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from segment_balancer.planner.operations import OpOrder, Reason
from segment_balancer.planner.runstate import OpSink, SegmentRef


@dataclass(frozen=True)
class ScheduledLoad:
    """A LOAD this step scheduled: its ``tier``, ``server`` and scheduling ``order`` key."""

    tier: str
    server: str
    order: OpOrder


@dataclass
class OverreplicatedTier:
    """A tier where the segment is overreplicated at the start of the stage: ``target``,
    ``count`` (``count(s, T)``) and ``drop_order`` (servers serving it with no drop, first to drop
    first: the tier's ranking reversed, :meth:`segment_balancer.planner.runstate.TierRun.drop_order`).
    ``add_callbacks`` takes from ``drop_order`` and lowers ``count`` as it drops."""

    target: int
    count: int
    drop_order: list[str]


def add_callbacks(
    seg: SegmentRef, loads: list[ScheduledLoad], tiers: Mapping[str, OverreplicatedTier], sink: OpSink
) -> None:
    """Add one dependent DROP per scheduled load where the segment is overreplicated elsewhere.

    ``loads``: this step's loads of ``seg``, in scheduling order; ``tiers``: the segment's
    overreplicated tiers by name (mutated as drops are added). Each DROP goes to the first tier by
    name, other than the load's, that is still overreplicated; it is recorded in ``sink`` and
    applied to that tier's state when the stage commits (it counts there from the next stage on).
    """
    for load in loads:
        for tier in sorted(tiers):
            state = tiers[tier]
            if tier == load.tier or state.count <= state.target or not state.drop_order:
                continue
            source = state.drop_order.pop(0)
            state.count -= 1
            sink.drop(seg, source, tier, Reason.CALLBACK, load.order.then(), dep_server=load.server)
            break
