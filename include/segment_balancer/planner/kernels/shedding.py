"""Stage 7 with ``balancerStrategy: "avgShedder"`` in one tier: usage-pair shedding (ALGORITHM.md
"Balancing strategy ``avgShedder``"; seed 002, Pulsar PIP-364 ``AvgShedder``).

The tier's candidate historicals are scored by their projected usage after stages 1–6 and paired
(:func:`segment_balancer.planner.avg_shedder.pair_tier`, with the hit counts of the previous run).
Each pair that sheds moves from its higher server ``h`` to its lower ``l`` up to the bytes that
would make their scores equal: the segments ``h`` serves, in order of the largest placement-cost
reduction ``cost(h) − cost(l)`` (ties: larger size, then index), each a move (a LOAD on ``l``, a
DROP on ``h`` that depends on it) under the stage-7 limit and capacity. Nothing is random.

Which segments are candidates: those of ``Balanceable[T]`` (the stage-7 population: fully
replicated or underreplicated in the tier at the start of the run, ALGORITHM.md stage 7) that
``h`` serves with no drop. The order of a pair's segments is computed once, when the pair starts
shedding, against the projected state at that moment (after the wider pairs' moves).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from segment_balancer.planner.avg_shedder import Pair, Usage, pair_tier
from segment_balancer.planner.operations import OpOrder, Reason
from segment_balancer.planner.runstate import OpSink, StageLimit, TierRun

REASON = Reason.AVG_SHEDDER
"""The ``reason`` of the moves this strategy schedules (both the LOAD and its dependent DROP)."""


def tier_usages(run: TierRun) -> list[Usage]:
    """The tier's candidate historicals (not decommissioning, ``max_size`` > 0) with their projected
    used bytes (:meth:`TierRun.used_bytes`), by name."""
    used = run.used_bytes()
    return [
        Usage(name, int(used[name]), run.servers[name].max_size)
        for name in run.candidates
        if run.servers[name].max_size > 0
    ]


def shed_tier(
    run: TierRun,
    population: np.ndarray,
    previous: Mapping[tuple[str, str], int],
    limit: StageLimit,
    sink: OpSink,
    *,
    low_threshold: float = 15.0,
    high_threshold: float = 40.0,
    hit_count_low: int = 8,
    hit_count_high: int = 2,
) -> list[dict]:
    """Pair the tier's historicals and shed every pair that sheds (module docstring).

    ``population``: int64 array of the tier's ``Balanceable[T]`` indexes; ``previous``: the hit
    counts of the previous run's balancer state for this tier (by ``avg_shedder.pair_key``);
    ``limit``: the stage-7 load-queue limit; thresholds as the config's ``avgShedder*`` keys.
    Moves go through :meth:`TierRun.move` (queue type ``balancing``, reason :data:`REASON`); every
    candidate segment of a shedding pair gets a decision: ``shed`` (moved) or ``not_shed`` (why
    not), with its cost reduction. Returns one dict per pair (:func:`pair_record`), widest difference first.
    """
    pairs = pair_tier(
        run.tier,
        tier_usages(run),
        previous,
        low_threshold=low_threshold,
        high_threshold=high_threshold,
        hit_count_low=hit_count_low,
        hit_count_high=hit_count_high,
    )
    eligible = np.asarray(population, dtype=np.int64)
    records = []
    for pair in pairs:
        moved = (0, 0)
        if pair.sheds:
            moved = _shed(run, pair, np.intersect1d(run.served_by(pair.high.server), eligible), limit, sink)
        records.append(pair_record(pair, *moved))
    return records


def _shed(run: TierRun, pair: Pair, candidates: np.ndarray, limit: StageLimit, sink: OpSink) -> tuple[int, int]:
    """Move segments of ``candidates`` (served by ``pair.high``) to ``pair.low``, largest cost
    reduction first, up to ``pair.bytes_to_move``; returns (moves, bytes moved)."""
    h, low = pair.high.server, pair.low.server
    reduction: dict[int, float] = {}  # by interval key: h holds every candidate, low none that can move
    ordered = []
    for idx in candidates:
        seg = run.segment(int(idx))
        if seg.key not in reduction:
            costs = run.placement_costs(seg)
            reduction[seg.key] = float(costs[run.pos[h]] - costs[run.pos[low]])
        ordered.append((-reduction[seg.key], -seg.size_bytes, seg.idx))
    ordered.sort()
    dest = run.servers[low]
    moves = moved = 0
    about = {"high": h, "low": low, "bytes_to_move": pair.bytes_to_move}
    for minus_gain, _, idx in ordered:
        seg = run.segment(idx)
        size = seg.size_bytes
        if low in seg.present():
            why = f"{low} already serves or loads it"
        elif moved + size > pair.bytes_to_move:
            why = f"moving its {size} bytes would take the bytes moved ({moved}) beyond {pair.bytes_to_move}"
        else:
            why = dest.refusal(size, limit)
        if why is not None:
            sink.decide(idx, seg.segment_id, run.tier, "not_shed", reason=why, cost_reduction=-minus_gain, **about)
            continue
        run.move(seg, h, low, "balancing", REASON, OpOrder(0, run.tier, sink.next_seq()))
        moves += 1
        moved += size
        sink.decide(
            idx,
            seg.segment_id,
            run.tier,
            "shed",
            reason=f"moved to {low}: {moved} of {pair.bytes_to_move} bytes moved so far",
            cost_reduction=-minus_gain,
            **about,
        )
    return moves, moved


def pair_record(pair: Pair, moves: int = 0, bytes_moved: int = 0) -> dict:
    """One pair as JSON (the plan's ``summary.json`` ``balancer.pairs``, the report, ``explain``):
    ``tier``, ``high``/``low`` (server), ``high_score``/``low_score``/``difference`` (percent of
    ``max_size``, points), ``high_used_bytes``/``low_used_bytes``, ``hit_count``, ``sheds``,
    ``bytes_to_move`` (bytes that would equalise the scores), ``moves`` and ``bytes_moved`` (what
    shedding scheduled), ``waiting`` (what a hitting pair that did not shed waits for)."""
    return {
        "tier": pair.tier,
        "high": pair.high.server,
        "low": pair.low.server,
        "high_score": round(pair.high.score, 6),
        "low_score": round(pair.low.score, 6),
        "difference": round(pair.difference, 6),
        "high_used_bytes": pair.high.used_bytes,
        "low_used_bytes": pair.low.used_bytes,
        "hit_count": pair.hit_count,
        "sheds": pair.sheds,
        "bytes_to_move": pair.bytes_to_move,
        "moves": moves,
        "bytes_moved": bytes_moved,
        "waiting": pair.waiting,
    }
