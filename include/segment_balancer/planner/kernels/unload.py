"""Stage 12: unload excess replicas under the availability rule, against the stage's own running
projection.

Source: seed 000 stage 12; ALGORITHM.md stage 12 and "Availability"; Druid
``SegmentLoadingTest.testSegmentsAreDroppedFromFullServersFirst`` (each drop scheduled lowers that
server's cost for the next segment, so excess drops spread over the holders).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from segment_balancer.planner.cost import drop_key
from segment_balancer.planner.operations import OpOrder, Reason
from segment_balancer.planner.runstate import DropCandidate, OpSink, SegmentRef, TierRun

Schedule = Callable[[str, str, tuple], None]
"""``schedule(tier, server, order)``: schedule one excess DROP."""


@dataclass(frozen=True)
class TierReplicas:
    """The segment in one tier at stage 12: ``target``, ``count`` (end-state count, every
    operation of the run succeeded, dependent drops included) and ``candidates`` (the holders
    that serve it with no drop, with their costs against the running projection)."""

    target: int
    count: int
    candidates: tuple[DropCandidate, ...] = ()


@dataclass(frozen=True)
class Excess:
    """A used load-rule segment whose end-state replica total exceeds ``Σ_T target``, as the
    Spark tally of the whole run state gives it: ``excess`` (total count − Σ target),
    ``loaded`` and ``required`` (ALGORITHM.md "Terms") and ``counts`` (``{tier: (target,
    count)}`` for every tier where it has a target or a replica)."""

    idx: int
    excess: int
    loaded: int
    required: int
    counts: Mapping[str, tuple[int, int]]


def unload_excess(
    seg: SegmentRef,
    loaded: int,
    required: int,
    tiers: Mapping[str, TierReplicas],
    sink: OpSink,
    excess: int | None = None,
    schedule: Schedule | None = None,
) -> int:
    """Stage 12 for one replicated segment: drop replicas beyond ``Σ_T target`` while the
    availability rule allows (ALGORITHM.md stage 12 and "Availability").

    ``loaded``: servers of tiers with target > 0 that serve it now with no drop queued or
    scheduled (but a dependent one); ``required``: min(2, Σ of the rule's tieredReplicants, absent
    tiers included); ``tiers``: the segment per tier name; ``excess``: the end-state total minus
    ``Σ_T target`` (computed from ``tiers`` when not given: a caller that holds only some of the
    segment's tiers passes it). At most ``count − target`` holders of each overreplicated tier
    are candidates, in one order across tiers: decommissioning servers first, then highest cost,
    fewer available bytes, larger name. Each is dropped (``schedule``, default ``sink.drop``) only
    if afterwards ``loaded ≥ required`` (a drop from a tier with target 0 leaves ``loaded`` as it
    is, so it needs ``loaded ≥ required`` already); a refused candidate is skipped and the next one
    tried. Returns the number of drops deferred by the rule: min(excess, candidates) − drops
    scheduled, and records them as a ``deferred`` decision in ``sink``.
    """
    if excess is None:
        excess = sum(t.count for t in tiers.values()) - sum(t.target for t in tiers.values())
    if excess <= 0:
        return 0
    if schedule is None:

        def schedule(tier, name, order):
            sink.drop(seg, name, tier, Reason.OVERREPLICATED, order)

    candidates = []
    for tier, state in tiers.items():
        cap = state.count - state.target
        if cap <= 0:
            continue
        keyed = sorted(
            (drop_key(c.cost, c.available_bytes, c.server, c.decommissioning), c.server) for c in state.candidates
        )
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
        schedule(tier, name, OpOrder(seg.idx, tier, sink.next_seq()))
        loaded -= counted
        dropped += 1
    deferred = min(excess, len(candidates)) - dropped
    if deferred > 0:
        sink.decide(
            seg.idx,
            seg.segment_id,
            None,
            "deferred",
            deferred=deferred,
            loaded=loaded,
            required=required,
            refused=refused,
            targets={t: s.target for t, s in sorted(tiers.items())},
            counts={t: s.count for t, s in sorted(tiers.items())},
        )
    return deferred


def unload_tiers(runs: Mapping[str, TierRun], excess: Iterable[Excess], sink: OpSink) -> None:
    """Stage 12's excess drops on the tiers of ``runs`` (one Spark task), each drop counted in the
    running projection at once (ALGORITHM.md stage 12).

    ``excess``: the overreplicated segments with a holder in some tier of ``runs``. Visits, in
    index order, those segments and the drop-rule segments of the tiers: a drop-rule segment's
    served replicas leave the projection (their DROPs are emitted by the stage's join over the
    whole state, not here); an overreplicated segment is decided by :func:`unload_excess` over the
    tiers it has here, ranked against the projection so far, and each drop it schedules leaves the
    projection before the next segment. Unused and overshadowed segments come after every used
    one, so their drops change no decision here.

    The tiers of one task must hold every overreplicated tier of a segment whose drops depend on
    the order across tiers (the caller groups them: :func:`couples_tiers`); for any other segment
    the drops of each tier do not depend on the others, so its tiers may run in different tasks.
    """
    wanted = {e.idx: e for e in excess}
    events, last = set(wanted), max(wanted, default=-1)
    for tier_run in runs.values():
        events.update(int(i) for i in tier_run.segments_with_rule("drop") if i < last)
    for idx in sorted(events):
        item = wanted.get(idx)
        if item is None:
            for tier_run in runs.values():
                if tier_run.has(idx):
                    seg = tier_run.segment(idx)
                    for server in seg.serving():
                        tier_run.count_drop(seg, server)
            continue
        tiers, segs, ref = {}, {}, None
        for tier, (target, count) in sorted(item.counts.items()):
            cands: tuple[DropCandidate, ...] = ()
            tier_run = runs.get(tier)
            if tier_run is not None and count > target and tier_run.has(idx):
                seg = segs[tier] = tier_run.segment(idx)
                ref = ref or SegmentRef(seg.idx, seg.segment_id, seg.datasource, seg.size_bytes)
                cands = tuple(tier_run.drop_candidates(seg, seg.serving()))
            tiers[tier] = TierReplicas(target, count, cands)
        if ref is None:
            continue

        def schedule(tier, name, order, segs=segs):
            runs[tier].drop(segs[tier], name, Reason.OVERREPLICATED, order)

        sink.defer(
            ref, unload_excess(ref, item.loaded, item.required, tiers, sink, excess=item.excess, schedule=schedule)
        )


def couples_tiers(excess: int, loaded: int, required: int, caps: Mapping[str, tuple[int, int]]) -> bool:
    """True when a segment's excess drops depend on the order across its tiers, so its
    overreplicated tiers must be decided in one task (:func:`unload_tiers`).

    ``caps``: ``{tier: (target, candidates)}`` of its overreplicated tiers, ``candidates`` being
    min(count − target, holders serving it with no drop). The order does not matter when at most
    one tier has candidates, or when every candidate is dropped whatever the order: their number
    is at most ``excess`` and dropping all of them keeps ``loaded ≥ required``.
    """
    live = {t: c for t, c in caps.items() if c[1] > 0}
    if len(live) < 2:
        return False
    total = sum(c for _, c in live.values())
    counted = sum(c for target, c in live.values() if target > 0)
    return total > excess or loaded - counted < required
