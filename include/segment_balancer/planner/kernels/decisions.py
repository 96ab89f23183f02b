"""What a stage records when it considers a segment and leaves something undone
("explain every decision"): the servers it tried and what stopped each, at the moment it decided.

The kernels call these helpers only on the path where they give up on a segment, so a run that
schedules everything it considers records nothing, and the record of a run is bounded by the
segments its stages considered. The rows travel as ``decision`` rows of a step's output
(:meth:`~segment_balancer.planner.runstate.OpSink.decide`) into the plan's ``decisions.parquet``.

Outcome codes (``outcome`` column), by stage:

=====================  ===========================================================================
``no_target``          1, 6, 8: no tier has a target for the unreplicated segment
``not_loaded``         1, 6, 8: no server of any tier's top ``B`` could take the first replica
``short``              3, 4, 6, 8: the tier still holds fewer replicas than its target
``underbroadcast``     2, 6, 8: some servers that should hold the broadcast segment could not load it
``left_on_decomm``     5, 9: replicas stay on decommissioning servers, no destination took them
``excess_on_decomm``   5, 9: replicas on decommissioning servers not moved: the tier holds its target
                       without them (stage 12 drops them)
``no_destination``     7, 10, 11: the balancing trigger picked a holder to move, no destination took it
``balanced``           7, 11: the drawn segment's trigger picked no holder (nothing to move)
``already_visited``    7, 11: drawn again after an earlier balancing stage visited it
``deferred``           12: drops the availability rule refused (too few loaded replicas would remain)
``waiting``            12: an overshadowed segment keeps its replicas until what overshadows it is served
=====================  ===========================================================================

Source: ALGORITHM.md "Stages", "Load-queue limits", "Capacity", "Availability"; the idea of the
record is Elasticsearch's ``_cluster/allocation/explain`` (seed 004): per node, what decided.
"""

from __future__ import annotations

from collections.abc import Iterable

from segment_balancer.planner.runstate import SegmentInTier, StageLimit, TierRun

HOLDS = "already holds it"
DECOMMISSIONING = "decommissioning"


def refusals(
    run: TierRun, seg: SegmentInTier, names: Iterable[str], limit: StageLimit, present: set[str] | None = None
) -> list[list[str]]:
    """``[[server, why], ...]`` for each of ``names`` in order: why a load of ``seg`` on it is
    refused now (:data:`HOLDS`, capacity, the load queue: :meth:`ServerState.refusal`), or
    ``"could load"`` when nothing stops it. ``present``: servers counted as holding the segment
    (default: the segment's present replicas)."""
    present = seg.present() if present is None else present
    out = []
    for name in names:
        if name in present:
            out.append([name, HOLDS])
            continue
        why = run.servers[name].refusal(seg.size_bytes, limit)
        out.append([name, why or "could load"])
    return out


def top_b_detail(run: TierRun, seg: SegmentInTier, limit: StageLimit, present: set[str] | None = None) -> dict:
    """The detail of a load the stage could not make in ``run``'s tier: ``target``, ``count``,
    ``b`` and ``tried`` (:func:`refusals` over the segment's top ``B``, best first; every other
    candidate server of the tier is outside top ``B``)."""
    top = run.top_b(seg)
    return {"target": seg.target, "count": seg.count(), "b": len(top), "tried": refusals(run, seg, top, limit, present)}
