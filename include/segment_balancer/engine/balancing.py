"""Balancing stages 7, 10 and 11 in one tier, ranked against the live projected state.

Unlike the loading stages, a balancing stage ranks a segment against the projected state that
includes every operation scheduled so far (ALGORITHM.md "Best servers": a moved segment counts on
its destination and no longer on its source), so moves do not herd onto one server.

Source: seed 000 stages 7, 10, 11; ALGORITHM.md stages 7, 10, 11.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Callable, Mapping

import numpy as np

from .. import cost
from .state import OpSink, ServerHolder, StageLimit, group_name


class TierProjection:
    """What each candidate server of one tier projects: served (no drop) plus loading segments.

    ``segments``: idx → (datasource, start_ms, end_ms). Keeps per-server numpy arrays for the cost
    function and updates them on every move.
    """

    def __init__(self, segments: Mapping[int, tuple[str, int, int]], placement: Mapping[str, set[int]]):
        self.segments = segments
        self.placement = {server: set(idxs) for server, idxs in placement.items()}
        self._arrays: dict[str, tuple] = {}

    def _array(self, server: str):
        if server not in self._arrays:
            idxs = np.array(sorted(self.placement.get(server, ())), dtype=np.int64)
            ds = np.array([self.segments[i][0] for i in idxs], dtype=object)
            start = np.array([self.segments[i][1] for i in idxs], dtype=np.int64)
            end = np.array([self.segments[i][2] for i in idxs], dtype=np.int64)
            self._arrays[server] = (idxs, ds, start, end)
        return self._arrays[server]

    def cost_on(self, idx: int, server: str) -> float:
        """Placement cost of segment ``idx`` on ``server``, leaving the segment itself out."""
        idxs, ds, start, end = self._array(server)
        keep = idxs != idx
        datasource, seg_start, seg_end = self.segments[idx]
        return cost.placement_cost(seg_start, seg_end, datasource, start[keep], end[keep], ds[keep])

    def move(self, idx: int, source: str, dest: str) -> None:
        self.placement.setdefault(dest, set()).add(idx)
        self.placement.get(source, set()).discard(idx)
        self._arrays.pop(source, None)
        self._arrays.pop(dest, None)


def rank_live(idx: int, projection: TierProjection, servers: Mapping[str, ServerHolder]) -> list[str]:
    """Candidate servers ranked best first for segment ``idx`` against the live projection."""
    costs = {name: projection.cost_on(idx, name) for name in servers}
    available = {name: holder.available_bytes for name, holder in servers.items()}
    return cost.rank_servers(costs, available)


def _move(seg: dict, source: str, dest: ServerHolder, projection: TierProjection, holders: set[str],
          present: set[str], sink: OpSink, reason: str, order: tuple) -> None:
    sink.load(seg, dest, "balancing", reason, order)
    sink.drop(seg, source, dest.tier, reason, order[:-1] + (order[-1] + 0.5,), dep_server=dest.server)
    projection.move(int(seg["idx"]), source, dest.server)
    holders.discard(source)
    present.add(dest.server)


def _try_move(seg: dict, ranking: list[str], b: int, holders: set[str], present: set[str],
              servers: Mapping[str, ServerHolder], limit: StageLimit) -> tuple[str | None, ServerHolder | None]:
    """(worst holder outside top B, best non-holding destination inside top B passing limits)."""
    top = ranking[:b]
    outside = [name for name in ranking[b:] if name in holders]
    if not outside:
        return None, None
    for name in top:
        if name not in present and servers[name].can_load(int(seg["size_bytes"]), limit):
            return outside[-1], servers[name]
    return outside[-1], None


def tier_rng(seed: int, stage: int, tier: str) -> np.random.Generator:
    """The seeded generator of one tier in one balancing stage: (balancerRandomSeed, stage, crc32(tier))."""
    return np.random.default_rng([int(seed), int(stage), zlib.crc32(tier.encode())])


def balance_tier(tier: str, population: np.ndarray, seg_rows: Mapping[int, dict], projection: TierProjection,
                 holders: Mapping[int, set[str]], present: Mapping[int, set[str]],
                 servers: Mapping[str, ServerHolder], limit: StageLimit, num_best: Callable[[int, int], int],
                 rng: np.random.Generator, visited: set[int], window: int, threshold: int, sink: OpSink,
                 stage: int, record_to_be_balanced: bool) -> dict:
    """Stage 7 (``record_to_be_balanced``) or stage 11 in one tier.

    ``population``: sorted int64 array of eligible segment indexes (fully replicated or
    underreplicated in the tier at the start of the run, served by a candidate server);
    ``seg_rows``: idx → row (``segment_id``, ``datasource``, ``size_bytes``, ``target``);
    ``holders``: idx → candidate servers serving it with no drop; ``present``: idx → servers
    serving or loading it (never a destination); ``servers``: the tier's candidate servers;
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
        seg = seg_rows[idx]
        ranking = rank_live(idx, projection, servers)
        b = num_best(len(servers), int(seg["target"]))
        source, dest = _try_move(seg, ranking, b, holders[idx], present[idx], servers, limit)
        if source is None or dest is None:
            if source is not None and record_to_be_balanced:
                sink.member(idx, group_name("ToBeBalanced", tier))
            last.append(1)
            continue
        _move(seg, source, dest, projection, holders[idx], present[idx], sink, "balancing",
              (0, tier, float(sink.next_seq())))
        moves += 1
        last.append(0)
    return {"iterations": iterations, "moves": moves}


def balance_listed(tier: str, indexes, seg_rows: Mapping[int, dict], projection: TierProjection,
                   holders: Mapping[int, set[str]], present: Mapping[int, set[str]],
                   servers: Mapping[str, ServerHolder], limit: StageLimit, num_best: Callable[[int, int], int],
                   sink: OpSink) -> int:
    """Stage 10 in one tier: for each ToBeBalanced segment (index order), ranked once, move every
    holder outside top ``B`` (worst first) to a server inside top ``B``, as many as pass. A segment
    all of whose such holders got a move leaves ``ToBeBalanced[T]``; the others are written back
    as its members. Returns the number of moves."""
    moves = 0
    for idx in indexes:
        idx = int(idx)
        seg = seg_rows[idx]
        ranking = rank_live(idx, projection, servers)
        b = num_best(len(servers), int(seg["target"]))
        top = ranking[:b]
        stuck = False
        for source in [name for name in ranking[b:] if name in holders[idx]][::-1]:
            dest = next((servers[n] for n in top if n not in present[idx]
                         and servers[n].can_load(int(seg["size_bytes"]), limit)), None)
            if dest is None:
                stuck = True
                break
            _move(seg, source, dest, projection, holders[idx], present[idx], sink, "to_be_balanced",
                  (0, tier, float(sink.next_seq())))
            moves += 1
        if stuck:
            sink.member(idx, group_name("ToBeBalanced", tier))
    return moves
