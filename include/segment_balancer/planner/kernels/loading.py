"""Greedy kernels of the loading stages 1–5 and their revisits (stages 6, 8, 9).

Each kernel visits segments in index order over the live state of a tier
(:class:`~segment_balancer.planner.runstate.TierRun`): it ranks a segment the first time a loading stage
considers it in the tier and reuses that top ``B`` afterwards, schedules through ``TierRun.load`` /
``TierRun.drop`` (so the next segment sees every load before it) and writes group memberships to
an :class:`~segment_balancer.planner.runstate.OpSink`.

Source: seed 000 stages 1–6, 8, 9; ALGORITHM.md "Stages" 1–6, 8, 9 and "Best servers".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from segment_balancer.planner.groups import group_name
from segment_balancer.planner.kernels.decisions import refusals, top_b_detail
from segment_balancer.planner.operations import OpOrder, Reason
from segment_balancer.planner.runstate import OpSink, SegmentInTier, ServerState, StageLimit, TierRun


def top_b_attempts(run: TierRun, seg: SegmentInTier) -> Iterator[list[str]]:
    """The segment's top ``B`` to try, then, asked for again (the first fell short) and only when
    every non-holding server of it is full, its new top ``B`` once
    (:meth:`~segment_balancer.planner.runstate.TierRun.rank_again_if_full`)."""
    yield run.top_b(seg)
    if run.rank_again_if_full(seg):
        yield run.top_b(seg)


def best_loadable(run: TierRun, seg: SegmentInTier, limit: StageLimit) -> ServerState | None:
    """The best server of the segment's top ``B`` in ``run`` that does not hold it (serve or load
    it) and passes ``limit`` and capacity, trying a stale top ``B`` ranked again once
    (:func:`top_b_attempts`)."""
    for top_b in top_b_attempts(run, seg):
        present = seg.present()
        for name in top_b:
            server = run.servers[name]
            if name not in present and server.can_load(seg.size_bytes, limit):
                return server
    return None


def primary_tier_order(
    segs: Iterable[tuple[TierRun, SegmentInTier]], tier_priority: Mapping[str, int]
) -> list[tuple[TierRun, SegmentInTier]]:
    """Order the tiers of one unreplicated segment: primary first (ALGORITHM.md stage 1): highest
    server priority, then larger target, then the tier's order in the rule's ``tieredReplicants``."""
    return sorted(segs, key=lambda p: (-int(tier_priority.get(p[0].tier, 0)), -p[1].target, p[1].tier_pos))


def load_unreplicated(
    runs: Mapping[str, TierRun],
    indexes: Iterable[int],
    tier_priority: Mapping[str, int],
    limit: StageLimit,
    sink: OpSink,
) -> None:
    """Stage 1 (and its revisit): one load per unreplicated segment, primary tier first.

    ``runs``: every tier's state; ``indexes``: the segments, visited in ascending order. Each is
    ranked in every tier with target > 0 before the tier is chosen (seed stage 1, step 1).
    Groups written: ``ToBecomeFullyReplicated[T]`` (loaded tier, target 1),
    ``ToBecomeUnderreplicated[T]`` (other tiers, and the loaded tier if its target > 1),
    ``StillUnreplicated``.
    """
    for idx in sorted(int(i) for i in indexes):
        pairs = [(run, run.segment(idx)) for run in runs.values() if run.has(idx)]
        ordered = primary_tier_order([(r, s) for r, s in pairs if s.target > 0], tier_priority)
        if not ordered:
            sink.member(idx, "StillUnreplicated")
            sink.decide(
                idx, pairs[0][1].segment_id if pairs else "", None, "no_target", tiers=sorted(r.tier for r, _ in pairs)
            )
            continue
        for run, seg in ordered:
            run.top_b(seg)
        loaded_tier = None
        for run, seg in ordered:
            server = best_loadable(run, seg, limit)
            if server is not None:
                run.load(seg, server.server, "loading", Reason.UNREPLICATED, OpOrder(idx, "", sink.next_seq()))
                loaded_tier = run.tier
                break
        if loaded_tier is None:
            sink.member(idx, "StillUnreplicated")
            sink.decide(
                idx,
                ordered[0][1].segment_id,
                None,
                "not_loaded",
                tiers={run.tier: top_b_detail(run, seg, limit) for run, seg in ordered},
            )
            continue
        for run, seg in ordered:
            full = run.tier == loaded_tier and seg.target == 1
            sink.member(idx, group_name("ToBecomeFullyReplicated" if full else "ToBecomeUnderreplicated", run.tier))


def load_underreplicated(
    run: TierRun, indexes: Iterable[int], limit: StageLimit, sink: OpSink, still_group: str, reason: str
) -> list[tuple[int, str, tuple]]:
    """Stages 3 and 4 (and their revisits) in one tier: load up to the target from top ``B``.

    Loads go to non-holding servers of top ``B``, best first, until ``count = target`` or no
    server passes; when the segment is still short because every non-holding server of its top
    ``B`` is full, it is ranked again and the new top ``B`` tried once more. Groups written:
    ``ToBecomeFullyReplicated[T]`` or ``still_group[T]``. Returns ``(idx, server, order)`` of every
    load, for the stage-3 callbacks.
    """
    loads = []
    for idx in sorted(int(i) for i in indexes):
        seg = run.segment(idx)
        count = seg.count()
        for top_b in top_b_attempts(run, seg):
            present = seg.present()
            for name in top_b:
                if count >= seg.target:
                    break
                if name in present or not run.servers[name].can_load(seg.size_bytes, limit):
                    continue
                order = OpOrder(idx, run.tier, sink.next_seq())
                run.load(seg, name, "loading", reason, order)
                loads.append((idx, name, order))
                present.add(name)
                count += 1
            if count >= seg.target:
                break
        kind = "ToBecomeFullyReplicated" if count >= seg.target else still_group
        sink.member(idx, group_name(kind, run.tier))
        if count < seg.target:
            loaded_here = [name for i, name, _ in loads if i == idx]
            sink.decide(idx, seg.segment_id, run.tier, "short", loaded=loaded_here, **top_b_detail(run, seg, limit))
    return loads


def load_underbroadcast(
    run: TierRun, indexes: Iterable[int], should: Iterable[str], limit: StageLimit, sink: OpSink
) -> None:
    """Stage 2 (and its revisit) in one tier: load a broadcast segment on every server that should
    hold it (``should``: every historical of the tier except decommissioning servers holding only
    broadcast segments, visited in name order) and does not. Groups written:
    ``ToBecomeFullyBroadcast[T]``, ``StillUnderbroadcast[T]``."""
    should = sorted(should)
    for idx in sorted(int(i) for i in indexes):
        seg = run.segment(idx)
        present = seg.present()
        missing = []
        for name in should:
            if name in present:
                continue
            if run.servers[name].can_load(seg.size_bytes, limit):
                run.load(seg, name, "loading", Reason.UNDERBROADCAST, OpOrder(idx, run.tier, sink.next_seq()))
            else:
                missing.append(name)
        sink.member(idx, group_name("StillUnderbroadcast" if missing else "ToBecomeFullyBroadcast", run.tier))
        if missing:
            sink.decide(idx, seg.segment_id, run.tier, "underbroadcast", tried=refusals(run, seg, missing, limit))


def move_from_decommissioning(run: TierRun, indexes: Iterable[int], limit: StageLimit, sink: OpSink) -> None:
    """Stages 5 and 9 in one tier: move replicas away from decommissioning servers.

    Sources are the decommissioning servers that serve the segment with no drop, in name order. A
    source gets a move — a ``decommissioning`` LOAD on the best server of top ``B`` that does not
    hold the segment and passes the limits, and a DROP on the source that depends on it — only
    while the tier needs the replica: once ``count`` minus the replicas still on decommissioning
    servers reaches ``target``, the remaining sources are excess, left for stage 12. Groups
    written: ``ToBecomeNotLoadedOnDecommServers[T]`` (every source moved or excess),
    ``StillLoadedOnDecommServers[T]``.
    """
    for idx in sorted(int(i) for i in indexes):
        seg = run.segment(idx)
        sources = [s for s in seg.serving() if s in run.decommissioning]
        on_decommissioning, count = len(sources), seg.count()
        left = 0
        for source in sources:
            if count - on_decommissioning >= seg.target:
                # excess: the tier holds its target without the rest
                sink.decide(
                    idx,
                    seg.segment_id,
                    run.tier,
                    "excess_on_decomm",
                    target=seg.target,
                    count=count,
                    on_decommissioning=on_decommissioning,
                )
                break
            dest = best_loadable(run, seg, limit)
            if dest is None:
                left += 1
                continue
            seq = sink.next_seq()
            run.move(seg, source, dest.server, "decommissioning", Reason.DECOMMISSIONING, OpOrder(idx, run.tier, seq))
            on_decommissioning -= 1
        kind = "StillLoadedOnDecommServers" if left else "ToBecomeNotLoadedOnDecommServers"
        sink.member(idx, group_name(kind, run.tier))
        if left:
            sink.decide(idx, seg.segment_id, run.tier, "left_on_decomm", left=left, **top_b_detail(run, seg, limit))
