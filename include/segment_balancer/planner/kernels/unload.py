"""Stage 12: unload excess replicas under the availability rule.

Source: seed 000 stage 12; ALGORITHM.md stage 12 and "Availability".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from segment_balancer.planner.cost import drop_key
from segment_balancer.planner.runstate import OpSink, SegmentRef


@dataclass(frozen=True)
class TierReplicas:
    """The segment in one tier at stage 12: ``target``, ``count`` (end-state count, every
    operation of the run succeeded, dependent drops included) and ``candidates``."""

    target: int
    count: int
    candidates: tuple[DropCandidate, ...] = ()


def unload_excess(seg: SegmentRef, loaded: int, required: int, tiers: Mapping[str, TierReplicas], sink: OpSink) -> int:
    """Stage 12 for one replicated segment: drop replicas beyond ``Σ_T target`` while the
    availability rule allows (ALGORITHM.md stage 12 and "Availability").

    ``loaded``: servers of tiers with target > 0 that serve it now with no drop queued or
    scheduled; ``required``: min(2, Σ of the rule's tieredReplicants, absent tiers included);
    ``tiers``: the segment per tier name. At most ``count − target`` holders of each
    overreplicated tier are candidates, in one order across tiers: decommissioning servers first,
    then highest cost, fewer available bytes, larger name. Each is dropped only if afterwards
    ``loaded ≥ required`` (a drop from a tier with target 0 leaves ``loaded`` as it is, so it needs
    ``loaded ≥ required`` already); a refused candidate is skipped and the next one tried. Returns
    the number of drops deferred by the rule: min(excess, candidates) − drops scheduled.
    """
    excess = sum(t.count for t in tiers.values()) - sum(t.target for t in tiers.values())
    if excess <= 0:
        return 0
    candidates = []
    for tier, state in tiers.items():
        cap = state.count - state.target
        if cap <= 0:
            continue
        keyed = sorted((drop_key(c.cost, c.available_bytes, c.server, c.decommissioning), c.server)
                       for c in state.candidates)
        candidates += [(key, name, tier) for key, name in keyed[:cap]]
    candidates.sort()
    dropped, refused = 0, []
    for _, name, tier in candidates:
        if dropped == excess:
            break
        counted = 1 if tiers[tier].target > 0 else 0
        if loaded - counted < required:
            refused.append([tier, name])
            continue
        sink.drop(seg, name, tier, "overreplicated", (seg.idx, tier, float(sink.next_seq())))
        loaded -= counted
        dropped += 1
    deferred = min(excess, len(candidates)) - dropped
    if deferred > 0:
        sink.decide(seg.idx, seg.segment_id, None, "deferred", deferred=deferred, loaded=loaded, required=required,
                    refused=refused, targets={t: s.target for t, s in sorted(tiers.items())},
                    counts={t: s.count for t, s in sorted(tiers.items())})
    return deferred
