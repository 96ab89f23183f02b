"""Stage 12: unload excess replicas under the availability rule.

Source: seed 000 stage 12; ALGORITHM.md stage 12 and "Availability".
"""

from __future__ import annotations

from collections.abc import Mapping

from ..cost import drop_key
from .state import OpSink


def unload_excess(seg: dict, tiers: Mapping[str, dict], sink: OpSink) -> int:
    """Stage 12 for one replicated segment: drop replicas beyond ``Σ_T target`` while the
    availability rule allows (ALGORITHM.md stage 12 and "Availability").

    ``seg``: ``idx``, ``segment_id``, ``datasource``, ``size_bytes``, ``loaded`` (int: servers of
    tiers with target > 0 that serve it now with no drop queued or scheduled) and ``required``
    (int: min(2, Σ of the rule's tieredReplicants, absent tiers included)). ``tiers``: per tier
    name: ``target`` (int), ``count`` (end-state count, every operation of the run succeeded,
    dependent drops included) and ``candidates``: (decommissioning, cost, available bytes,
    server) of every server serving it with no drop, costs against the state at the start of the
    stage. At most ``count − target`` holders of each overreplicated tier are candidates, in one
    order across tiers: decommissioning servers first, then highest cost, fewer available bytes,
    larger name. Each is dropped only if afterwards ``loaded ≥ required`` (a drop from a tier with
    target 0 leaves ``loaded`` as it is, so it needs ``loaded ≥ required`` already); a refused
    candidate is skipped and the next one tried. Returns the number of drops deferred by the rule:
    min(excess, candidates) − drops scheduled.
    """
    excess = sum(t["count"] for t in tiers.values()) - sum(t["target"] for t in tiers.values())
    if excess <= 0:
        return 0
    candidates = []
    for tier, state in tiers.items():
        cap = state["count"] - state["target"]
        if cap <= 0:
            continue
        keyed = sorted((drop_key(cost, avail, name, dec), name) for dec, cost, avail, name in state["candidates"])
        candidates += [(key, name, tier) for key, name in keyed[:cap]]
    candidates.sort()
    loaded, required = int(seg["loaded"]), int(seg["required"])
    dropped = 0
    for _, name, tier in candidates:
        if dropped == excess:
            break
        counted = 1 if tiers[tier]["target"] > 0 else 0
        if loaded - counted < required:
            continue
        sink.drop(seg, name, tier, "overreplicated", (int(seg["idx"]), tier, float(sink.next_seq())))
        loaded -= counted
        dropped += 1
    return min(excess, len(candidates)) - dropped
