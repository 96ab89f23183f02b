"""Druid's balancing duty, one run (Druid 35.0.0 ``BalanceSegments``, ``TierSegmentBalancer``,
``ReservoirSegmentSampler``; docs/DRUID_COORDINATOR_NOTES.md §4).

The reservoir's draws come from the run's seeded generator where Druid's are unseeded. Candidates are
visited server by server in the tier's order: first the segments a server is loading (in load-queue
order, where Druid's is a hash order of segment ids), then, when the tier has no move in progress,
those it serves (:func:`served_in_druid_order`; on a run that does not hold them all, the same
draws on their rows: :func:`pick_unheld_segments`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from segment_balancer.druid import metrics as m
from segment_balancer.planner.druid_coordinator.assigner import StrategicSegmentAssigner
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    SegmentAction,
    ServerHolder,
    java_concurrent_map_capacity,
    java_hash_order,
)
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.segments_to_move import (
    ProjectedServer,
    max_segments_to_move_per_tier,
    segments_to_move_in_tier,
)
from segment_balancer.planner.druid_coordinator.strategies import CostStrategy
from segment_balancer.planner.druid_coordinator.unheld import UnheldServed, candidate_rows, reservoir


@dataclass(frozen=True)
class Pick:
    """A segment the sampler picked and the server it would move from."""

    holder: ServerHolder
    segment: DataSegment


def pick_movable_segments(
    sources: list[ServerHolder],
    most: int,
    segments_of: Callable[[ServerHolder], Iterable[DataSegment]],
    broadcast_datasources: set[str],
    rng: random.Random,
) -> list[Pick]:
    """Up to ``most`` segments drawn uniformly from the candidates of ``sources`` (reservoir sampling,
    one pass; broadcast datasources and segments moving away left out). With no more candidates than
    ``most`` there is no draw: all, in pass order."""
    if most == 0 or not sources:
        return []
    picked: list[Pick] = []
    seen = 0
    for holder in sources:
        for segment in segments_of(holder):
            if segment.datasource in broadcast_datasources or holder.action_on(segment) is SegmentAction.MOVE_FROM:
                continue
            if seen < most:
                picked.append(Pick(holder, segment))
            else:
                slot = rng.randrange(seen + 1)
                if slot < most:
                    picked[slot] = Pick(holder, segment)
            seen += 1
    return picked


def pick_unheld_segments(
    sources: list[ServerHolder],
    most: int,
    unheld: UnheldServed,
    broadcast_datasources: set[str],
    rng: random.Random,
) -> list[Pick]:
    """:func:`pick_movable_segments` over the served segments of ``sources`` in
    :func:`served_in_druid_order`, on the rows of a run that does not hold them all (``unheld``):
    the same candidates, draws and picks, each picked segment made an object then."""
    if most == 0 or not sources:
        return []
    holders, rows = candidate_rows(
        unheld, sources, broadcast_datasources, lambda h, s: h.action_on(s) is SegmentAction.MOVE_FROM
    )
    kept = reservoir(len(rows), most, rng)
    return [Pick(sources[holders[k]], unheld.segment(int(rows[k]))) for k in kept.tolist()]


def served_in_druid_order(holder: ServerHolder) -> list[DataSegment]:
    """A server's served segments in the order Druid's balancer walks them: datasource by
    datasource in the server's ``ConcurrentHashMap`` order of their names (Java's hash order; the
    order they first came), each datasource's newest first (where Druid's order is a hash order of
    segment ids)."""
    by_datasource: dict[str, list[DataSegment]] = {}
    for segment in holder.served_segments():
        by_datasource.setdefault(segment.datasource, []).append(segment)
    order = java_hash_order(by_datasource, java_concurrent_map_capacity(len(by_datasource)))
    return [s for ds in order for s in sorted(by_datasource[ds], key=DataSegment.newest_first)]


def projected_server(holder: ServerHolder) -> ProjectedServer:
    """What Druid's ``SegmentToMoveCalculator`` reads of a historical: its projected segments
    (``ServerHolder.getProjectedSegmentCounts``, Druid 35.0.0 and 38.0.0: served, plus queued
    loads, less queued drops and segments marked to drop for a move away, ``MOVE_FROM``), per
    datasource and their bytes, the sum of those segments' sizes; and its ``max_size``. Not
    :attr:`ServerHolder.size_used` (Druid's ``getSizeUsed``), which keeps a move's source bytes
    until the move is done."""
    return ProjectedServer(
        holder.projected_per_datasource(),
        bytes=sum(segment.size for segment in holder.projected_segments()) + holder.unheld_bytes,
        max_size=holder.max_size,
    )


@dataclass
class TierBalancer:
    """Balancing of one tier (Druid ``TierSegmentBalancer``): first off decommissioning servers, then
    among the active ones, at most ``max_to_move`` picks."""

    tier: str
    holders: list[ServerHolder]
    max_to_move: int
    assigner: StrategicSegmentAssigner
    stats: RunStats
    smart: bool
    used: Callable[[DataSegment], DataSegment | None]
    broadcast_datasources: set[str]
    rng: random.Random
    unheld: UnheldServed | None = None

    def __post_init__(self):
        self.decommissioning = [h for h in self.holders if h.decommissioning]
        self.active = [h for h in self.holders if not h.decommissioning]
        self.moving = sum(h.moving_segments for h in self.active)

    def run(self) -> None:
        from_decommissioning = 0
        if self.decommissioning and self.active:
            from_decommissioning = min(sum(h.projected_segment_count for h in self.decommissioning), self.max_to_move)
        self._move_from(self.decommissioning, from_decommissioning)
        self._move_from(self.active, self._active_to_move(self.max_to_move - from_decommissioning))

    def _active_to_move(self, most: int) -> int:
        if len(self.active) < 2:
            return 0
        if not self.smart:
            return most
        return segments_to_move_in_tier([projected_server(h) for h in self.active], most)

    def _move_from(self, sources: list[ServerHolder], n: int) -> None:
        if n <= 0 or not sources or not self.active:
            return
        picks = pick_movable_segments(sources, n, ServerHolder.loading_segments, self.broadcast_datasources, self.rng)
        moved = self._move(picks, n)
        if self.moving <= 0:
            rest = n - moved
            if self.unheld is not None:
                picks = pick_unheld_segments(sources, rest, self.unheld, self.broadcast_datasources, self.rng)
            else:
                picks = pick_movable_segments(
                    sources, rest, served_in_druid_order, self.broadcast_datasources, self.rng
                )
            self._move(picks, rest)

    def _move(self, picks: list[Pick], most: int) -> int:
        moved = 0
        for pick in picks[: max(0, most)]:
            segment = self.used(pick.segment)
            if segment is None:
                self.stats.add(
                    m.MOVE_SKIPPED,
                    1,
                    tier=self.tier,
                    dataSource=pick.segment.datasource,
                    description="Segment is unused",
                )
                continue
            moved += self.assigner.move(segment, pick.holder, self.active)
        return moved


def served_and_queued(cluster: DruidCluster) -> int:
    """The segments served and queued on every managed historical of ``cluster``: what smart
    loading sizes the balancer's moves by (``BalanceSegments``)."""
    return sum(h.server.segment_count + len(h.actions) for hs in cluster.managed.values() for h in hs)


def balance_segments(
    cluster: DruidCluster,
    assigner: StrategicSegmentAssigner,
    stats: RunStats,
    *,
    smart: bool,
    max_segments_to_move: int,
    balancer_threads: int,
    period_ms: int,
    used: Callable[[DataSegment], DataSegment | None],
    broadcast_datasources: set[str],
    rng: random.Random | None = None,
    seed: str | None = None,
    strategy: Callable[[random.Random], object] | None = None,
    segments_and_actions: int | None = None,
    tiers: Iterable[str] | None = None,
    unheld: UnheldServed | None = None,
) -> int:
    """Druid ``BalanceSegments``: one maximum for every tier (with smart loading, from
    ``segments_and_actions``, :func:`served_and_queued` when None; else ``maxSegmentsToMove``),
    then each tier of ``tiers`` (None: every tier). The draws: ``rng`` for every tier; or, with
    ``seed``, each tier its own generator ``Random("<seed>/balance/<tier>")`` and its own strategy
    made from it by ``strategy`` (the run's :func:`~.strategies.make_strategy` of a generator; None:
    ``cost``), so that a tier balanced alone draws what it draws among the others. ``unheld``: the
    served segments a run built for balancing does not hold (:mod:`.unheld`). Returns that
    maximum."""
    if smart:
        if segments_and_actions is None:
            segments_and_actions = served_and_queued(cluster)
        most = max_segments_to_move_per_tier(segments_and_actions, balancer_threads, period_ms)
    else:
        most = max_segments_to_move
    if most <= 0:
        return 0
    wanted = None if tiers is None else set(tiers)
    for tier, holders in cluster.managed.items():
        if wanted is not None and tier not in wanted:
            continue
        tier_rng = rng
        if seed is not None:
            tier_rng = random.Random(f"{seed}/balance/{tier}")
            assigner.strategy = (strategy or CostStrategy)(tier_rng)
        TierBalancer(tier, holders, most, assigner, stats, smart, used, broadcast_datasources, tier_rng, unheld).run()
    return most
