"""Stage-3 callbacks and the choice of a server to drop from.

Source: seed 000 stage 3 ("add a callback to schedule unloading the segment … upon successful
loading in the tier where the segment is underreplicated"); ALGORITHM.md "Moves and callbacks".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .state import OpSink


def drop_order(holders, costs: Mapping[str, float], available: Mapping[str, int]) -> list[str]:
    """Holders ordered for dropping: highest start-of-run cost first, then fewer available bytes,
    then the larger server name (the reverse of the placement ranking, ALGORITHM.md "Best servers").

    ``costs``: placement cost per server (a holder without a cost counts as +inf, dropped first);
    ``available``: available bytes per server.
    """

    return sorted(holders, key=lambda name: drop_key(name, costs, available))


def drop_key(name: str, costs: Mapping[str, float], available: Mapping[str, int],
             decommissioning: Collection[str] = ()) -> tuple:
    """Sort key of :func:`drop_order` for one server; with ``decommissioning`` given, those servers
    come first (stage 12, ALGORITHM.md)."""
    return (name not in decommissioning, -costs.get(name, float("inf")), available.get(name, 0), _desc(name))


class _desc(str):
    """A string that sorts in reverse order (for 'larger name first')."""

    def __lt__(self, other):  # type: ignore[override]
        return str.__gt__(self, other)


def add_callbacks(seg: dict, loads: list[tuple[str, str, tuple]], tiers: Mapping[str, dict],
                  sink: OpSink) -> None:
    """Add one dependent DROP per scheduled load where the segment is overreplicated elsewhere.

    ``seg``: ``idx``, ``segment_id``, ``datasource``, ``size_bytes``; ``loads``: (tier, server,
    order) of this step's loads of the segment, in scheduling order; ``tiers``: per tier name,
    ``target`` (int), ``count`` (int, ``count(s, T)`` with every drop so far), ``holders`` (set of
    servers serving it with no drop) and ``drop_order`` (list of servers, first to drop first).
    Mutates ``tiers`` (count and holders) as drops are added. Each DROP goes to the first tier by
    name, other than the load's, that is still overreplicated.
    """
    for load_tier, load_server, order in loads:
        for tier in sorted(tiers):
            state = tiers[tier]
            if tier == load_tier or state["count"] <= state["target"]:
                continue
            source = next((s for s in state["drop_order"] if s in state["holders"]), None)
            if source is None:
                continue
            state["holders"].discard(source)
            state["count"] -= 1
            sink.drop(seg, source, tier, "callback", order[:-1] + (order[-1] + 0.5,), dep_server=load_server)
            break
