"""Balancing stages 7, 10 and 11 in one tier, ranked afresh against the live projected state.

A balancing stage ranks a drawn segment against the projected state that includes every operation
scheduled so far (a moved segment counts on its destination and no longer on its source), so moves
do not herd onto one server.

Source: seed 000 stages 7, 10, 11; ALGORITHM.md stages 7, 10, 11.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass

import numpy as np

from segment_balancer.planner.groups import group_name
from segment_balancer.planner.kernels.decisions import refusals
from segment_balancer.planner.operations import OpOrder, Reason
from segment_balancer.planner.runstate import OpSink, SegmentInTier, ServerState, StageLimit, TierRun


def _holders(run: TierRun, seg: SegmentInTier) -> set[str]:
    """Candidate servers serving the segment with no drop of it (decommissioning replicas belong
    to stages 5 and 9)."""
    return {s for s in seg.serving() if s not in run.decommissioning}


def better(run: TierRun, costs: np.ndarray, v: str, h: str, margin: float) -> bool:
    """Whether server ``v`` is better than holder ``h`` for the segment whose placement costs are
    ``costs`` (float64 (S,), servers in name order, :meth:`TierRun.ranked`): strictly cheaper by
    the margin, ``cost(v) < cost(h) x (1 - margin / 100)`` (``margin``:
    ``balancingMinCostReductionPercent``). Equal costs are never better (ALGORITHM.md stage 7)."""
    return bool(costs[run.pos[v]] < costs[run.pos[h]] * (1.0 - margin / 100.0))


def movable_holders(
    run: TierRun, seg: SegmentInTier, ranking: list[str], costs: np.ndarray, b: int, trigger: str, margin: float = 0.0
) -> list[str]:
    """The holders that the balancing trigger moves, worst-ranked first (ALGORITHM.md stage 7).

    ``ranking``: the tier's candidate servers, best first, and ``costs`` their placement costs
    (:meth:`TierRun.ranked`); ``b``: the segment's ``B``. A holder is movable when the best
    non-holding server of top ``B`` is :func:`better` than it; with ``trigger``
    ``"outsideTopB"`` (the seed's first design) only holders outside top ``B`` are. Holders serve
    the segment with no drop of it and are not decommissioning (:func:`_holders`)."""
    holders, present = _holders(run, seg), seg.present()
    best = next((name for name in ranking[:b] if name not in present), None)
    if best is None:
        return []
    candidates = ranking[b:] if trigger == "outsideTopB" else ranking
    return [h for h in candidates if h in holders and better(run, costs, best, h, margin)][::-1]


def _better_open(
    run: TierRun, seg: SegmentInTier, ranking: list[str], costs: np.ndarray, b: int, source: str, margin: float
) -> list[str]:
    """The non-holding servers of top ``B`` better than ``source``, best first."""
    present = seg.present()
    return [name for name in ranking[:b] if name not in present and better(run, costs, name, source, margin)]


def destination(
    run: TierRun,
    seg: SegmentInTier,
    ranking: list[str],
    costs: np.ndarray,
    b: int,
    source: str,
    limit: StageLimit,
    margin: float = 0.0,
) -> ServerState | None:
    """The best-ranked non-holding server of top ``B`` that is :func:`better` than ``source`` and
    passes ``limit`` (queue and capacity), or None."""
    for name in _better_open(run, seg, ranking, costs, b, source, margin):
        if run.servers[name].can_load(seg.size_bytes, limit):
            return run.servers[name]
    return None


def _no_move(
    run: TierRun,
    seg: SegmentInTier,
    ranking: list[str],
    costs: np.ndarray,
    b: int,
    source: str | None,
    limit: StageLimit,
    sink: OpSink,
    trigger: str,
    margin: float,
) -> None:
    """Record why a balancing stage moved nothing of ``seg``: ``balanced`` (the trigger picked no
    holder: ``holders`` and ``top_b``) or ``no_destination`` (``source`` picked, ``tried``: every
    non-holder of top ``B`` better than it and what stopped it). Both carry the margin test:
    ``margin`` (percent) and the placement ``costs`` of the holders and of top ``B``."""
    holders = sorted(_holders(run, seg))
    shown = dict.fromkeys(ranking[:b] + holders)
    detail = {
        "target": seg.target,
        "count": seg.count(),
        "b": b,
        "top_b": ranking[:b],
        "trigger": trigger,
        "holders": holders,
        "margin": margin,
        "costs": {name: float(costs[run.pos[name]]) for name in shown},
    }
    if source is None:
        sink.decide(seg.idx, seg.segment_id, run.tier, "balanced", **detail)
        return
    threshold = float(costs[run.pos[source]]) * (1.0 - margin / 100.0)
    sink.decide(
        seg.idx,
        seg.segment_id,
        run.tier,
        "no_destination",
        source=source,
        threshold=threshold,
        tried=refusals(run, seg, _better_open(run, seg, ranking, costs, b, source, margin), limit),
        **detail,
    )


def tier_rng(seed: int, stage: int, tier: str) -> np.random.Generator:
    """The seeded generator of one tier in one balancing stage: (balancerRandomSeed, stage, crc32(tier))."""
    return np.random.default_rng([int(seed), int(stage), zlib.crc32(tier.encode())])


@dataclass(frozen=True)
class Balancing:
    """How a balancing stage draws and moves, built once per stage from the effective config
    (ALGORITHM.md stages 7 and 11).

    ``limit``: the stage's load-queue limit; ``window`` (``balancingIterationWindow``) and
    ``threshold`` (``balancingFailedIterationThreshold``): iterations; ``record_to_be_balanced``:
    stage 7 (a segment with no destination joins ``ToBeBalanced[T]``), not stage 11; ``trigger``
    (``balancingMoveTrigger``) and ``margin`` (``balancingMinCostReductionPercent``, percent).
    """

    limit: StageLimit
    window: int
    threshold: int
    record_to_be_balanced: bool
    trigger: str = "betterServerInTopB"
    margin: float = 0.0

    @classmethod
    def of(cls, config, limit: StageLimit, record_to_be_balanced: bool) -> Balancing:
        """From an ``EffectiveConfig``."""
        return cls(
            limit,
            config.balancing_iteration_window,
            config.balancing_failed_iteration_threshold,
            record_to_be_balanced,
            config.balancing_move_trigger,
            config.balancing_min_cost_reduction_percent,
        )


def balance_tier(
    run: TierRun, population: np.ndarray, rng: np.random.Generator, visited: set[int], sink: OpSink, how: Balancing
) -> dict:
    """Stage 7 or stage 11 in one tier, as ``how`` says.

    ``population``: sorted int64 array of eligible segment indexes (fully replicated or
    underreplicated in the tier at the start of the run, served by a candidate server);
    ``visited``: indexes visited earlier (mutated); ``rng``: :func:`tier_rng`. Draws with
    replacement until at least ``how.window`` iterations ran and ``how.threshold`` of the last
    ``how.window`` failed. A drawn segment whose trigger (:func:`movable_holders`) selects a holder
    moves its worst-ranked one to :func:`destination`; when no destination passes, the iteration
    fails and (stage 7) the segment joins ``ToBeBalanced[T]``. Returns counts.
    """
    limit, window, threshold = how.limit, how.window, how.threshold
    trigger, margin, record_to_be_balanced = how.trigger, how.margin, how.record_to_be_balanced
    last = deque(maxlen=window)
    iterations = moves = 0
    n = len(population)
    redrawn: dict[int, int] = {}
    while n:
        if iterations >= window and sum(last) >= threshold:
            break
        iterations += 1
        idx = int(population[int(rng.integers(n))])
        if idx in visited:
            redrawn[idx] = redrawn.get(idx, 0) + 1
            last.append(1)
            continue
        visited.add(idx)
        seg = run.segment(idx)
        (ranking, costs), b = run.ranked(seg), run.b(seg)
        movable = movable_holders(run, seg, ranking, costs, b, trigger, margin)
        source = movable[0] if movable else None
        dest = destination(run, seg, ranking, costs, b, source, limit, margin) if source else None
        if dest is None:
            if source is not None and record_to_be_balanced:
                sink.member(idx, group_name("ToBeBalanced", run.tier))
            _no_move(run, seg, ranking, costs, b, source, limit, sink, trigger, margin)
            last.append(1)
            continue
        run.move(seg, source, dest.server, "balancing", Reason.BALANCING, OpOrder(0, run.tier, sink.next_seq()))
        moves += 1
        last.append(0)
    for idx, times in sorted(redrawn.items()):
        sink.decide(idx, run.segment(idx).segment_id, run.tier, "already_visited", times=times)
    return {"iterations": iterations, "moves": moves}


def balance_listed(
    run: TierRun, indexes, limit: StageLimit, sink: OpSink, trigger: str = "betterServerInTopB", margin: float = 0.0
) -> int:
    """Stage 10 in one tier: for each ToBeBalanced segment (index order), ranked once, move every
    holder the stage-7 trigger selects (:func:`movable_holders`), worst first, each to
    :func:`destination`, as many as pass. A segment all of whose such holders got a move leaves
    ``ToBeBalanced[T]``; the others are written back as its members. Returns the number of moves."""
    moves = 0
    for idx in sorted(int(i) for i in indexes):
        seg = run.segment(idx)
        (ranking, costs), b = run.ranked(seg), run.b(seg)
        for source in movable_holders(run, seg, ranking, costs, b, trigger, margin):
            dest = destination(run, seg, ranking, costs, b, source, limit, margin)
            if dest is None:
                sink.member(idx, group_name("ToBeBalanced", run.tier))
                _no_move(run, seg, ranking, costs, b, source, limit, sink, trigger, margin)
                break
            run.move(
                seg, source, dest.server, "balancing", Reason.TO_BE_BALANCED, OpOrder(0, run.tier, sink.next_seq())
            )
            moves += 1
    return moves
