"""Balancing stages 7, 10 and 11 in one tier, ranked afresh against the live projected state.

A balancing stage ranks a drawn segment against the projected state that includes every operation
scheduled so far (a moved segment counts on its destination and no longer on its source), so moves
do not herd onto one server.

Source: seed 000 stages 7, 10, 11; ALGORITHM.md stages 7, 10, 11.
"""

from __future__ import annotations

import zlib
from collections import deque

import numpy as np

from ..runstate import SegmentInTier, TierRun
from .state import OpSink, ServerHolder, StageLimit, group_name


def _holders(run: TierRun, seg: SegmentInTier) -> set[str]:
    """Candidate servers serving the segment with no drop of it (decommissioning replicas belong
    to stages 5 and 9)."""
    return {s for s in seg.serving() if s not in run.decommissioning}


def _move(run: TierRun, seg: SegmentInTier, source: str, dest: ServerHolder, reason: str, order: tuple) -> None:
    run.load(seg, dest.server, "balancing", reason, order)
    run.drop(seg, source, reason, order[:-1] + (order[-1] + 0.5,), dep_server=dest.server)


def _try_move(run: TierRun, seg: SegmentInTier, ranking: list[str], b: int,
              limit: StageLimit) -> tuple[str | None, ServerHolder | None]:
    """(worst holder outside top B, best non-holding destination inside top B passing limits)."""
    holders, present = _holders(run, seg), seg.present()
    outside = [name for name in ranking[b:] if name in holders]
    if not outside:
        return None, None
    for name in ranking[:b]:
        if name not in present and run.servers[name].can_load(seg.size_bytes, limit):
            return outside[-1], run.servers[name]
    return outside[-1], None


def tier_rng(seed: int, stage: int, tier: str) -> np.random.Generator:
    """The seeded generator of one tier in one balancing stage: (balancerRandomSeed, stage, crc32(tier))."""
    return np.random.default_rng([int(seed), int(stage), zlib.crc32(tier.encode())])


def balance_tier(run: TierRun, population: np.ndarray, limit: StageLimit, rng: np.random.Generator,
                 visited: set[int], window: int, threshold: int, sink: OpSink, record_to_be_balanced: bool) -> dict:
    """Stage 7 (``record_to_be_balanced``) or stage 11 in one tier.

    ``population``: sorted int64 array of eligible segment indexes (fully replicated or
    underreplicated in the tier at the start of the run, served by a candidate server);
    ``visited``: indexes visited earlier (mutated). Draws with replacement until at least
    ``window`` iterations ran and ``threshold`` of the last ``window`` failed. Returns counts.
    """
    last = deque(maxlen=window)
    iterations = moves = 0
    n = len(population)
    while n:
        if iterations >= window and sum(last) >= threshold:
            break
        iterations += 1
        idx = int(population[int(rng.integers(n))])
        if idx in visited:
            last.append(1)
            continue
        visited.add(idx)
        seg = run.segment(idx)
        source, dest = _try_move(run, seg, run.rank(seg), run.b(seg), limit)
        if source is None or dest is None:
            if source is not None and record_to_be_balanced:
                sink.member(idx, group_name("ToBeBalanced", run.tier))
            last.append(1)
            continue
        _move(run, seg, source, dest, "balancing", (0, run.tier, float(sink.next_seq())))
        moves += 1
        last.append(0)
    return {"iterations": iterations, "moves": moves}


def balance_listed(run: TierRun, indexes, limit: StageLimit, sink: OpSink) -> int:
    """Stage 10 in one tier: for each ToBeBalanced segment (index order), ranked once, move every
    holder outside top ``B`` (worst first) to a server inside top ``B``, as many as pass. A segment
    all of whose such holders got a move leaves ``ToBeBalanced[T]``; the others are written back
    as its members. Returns the number of moves."""
    moves = 0
    for idx in sorted(int(i) for i in indexes):
        seg = run.segment(idx)
        ranking, b = run.rank(seg), run.b(seg)
        holders = _holders(run, seg)
        stuck = False
        for source in [name for name in ranking[b:] if name in holders][::-1]:
            present = seg.present()
            dest = next((run.servers[n] for n in ranking[:b] if n not in present
                         and run.servers[n].can_load(seg.size_bytes, limit)), None)
            if dest is None:
                stuck = True
                break
            _move(run, seg, source, dest, "to_be_balanced", (0, run.tier, float(sink.next_seq())))
            moves += 1
        if stuck:
            sink.member(idx, group_name("ToBeBalanced", run.tier))
    return moves
