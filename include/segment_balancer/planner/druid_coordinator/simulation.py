"""Druid's Coordinator run after run on a simulated cluster, as Druid's own coordinator simulations
run it (Druid 35.0.0 ``server/src/test/java/.../coordinator/simulate/``: ``CoordinatorSimulationBuilder``,
``TestServerInventoryView``, ``HttpLoadQueuePeon``; docs/DRUID_COORDINATOR_NOTES.md §9.1).

Between runs, :meth:`CoordinatorSimulation.load_queued_segments` completes the queued requests the
way historicals do: each load queue sends one request at a time in its order (drops, loads,
replicas, moves; newest segment first); a load fails when the historical has not the bytes free; a
drop always succeeds; once a round of requests is answered, their callbacks run (a completed move
queues the drop at its source, sent in a later round). A request to a server that is gone is never
answered. With ``immediate`` loading, every request completes within the run that queued it.
A completed partial load (Druid 38) is announced with the part it asked for, in place of the part a
server held (an additive reload); its bytes count as the whole segment's, since what a historical
keeps of a part is known only once it loaded it.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from segment_balancer.druid.partial_load import PartialLoadProfile
from segment_balancer.druid.rules import Rule
from segment_balancer.druid.timeline import STATUS_OVERSHADOWED, classify_datasource
from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidServer,
    LoadQueue,
    QueuedRequest,
    QueueEvent,
    SegmentAction,
)
from segment_balancer.planner.druid_coordinator.run import ClusterState, RunResult, run_coordinator
from segment_balancer.planner.druid_coordinator.run_stats import RunStats


def overshadowed_ids(segments: Iterable[DataSegment]) -> set[str]:
    """The ids of the used ``segments`` that the timeline of their datasource overshadows."""
    by_datasource: dict[str, list[DataSegment]] = {}
    for segment in segments:
        by_datasource.setdefault(segment.datasource, []).append(segment)
    out: set[str] = set()
    for group in by_datasource.values():
        classified = classify_datasource(pd.DataFrame([s.timeline_row() for s in group]))
        out |= set(classified.loc[classified["status"] == STATUS_OVERSHADOWED, "segment_id"])
    return out


class _Waiting:
    """One load queue's requests not yet sent, in the order it sends them (drops, loads, replicas,
    moves; newest segment first: ``QueuedRequest.queue_order``), as a heap: a request queued since
    (a move's drop, queued by its load's callback) joins it, one no longer queued is passed over."""

    def __init__(self, queue: LoadQueue) -> None:
        """Every request ``queue`` holds now; ``queue.created`` emptied, to list those queued since."""
        self.heap = [(r.queue_order(), i, r) for i, r in enumerate((*queue.to_drop.values(), *queue.to_load.values()))]
        heapq.heapify(self.heap)
        self.count = len(self.heap)
        queue.created.clear()

    def next(self, queue: LoadQueue) -> QueuedRequest | None:
        """The request ``queue`` sends next (still in the queue), taken off the heap; None: none."""
        for request in queue.created:
            heapq.heappush(self.heap, (request.queue_order(), self.count, request))
            self.count += 1
        queue.created.clear()
        while self.heap:
            _, _, request = heapq.heappop(self.heap)
            live = queue.to_drop if request.action is SegmentAction.DROP else queue.to_load
            if live.get(request.segment.id) is request:
                return request
        return None


class CoordinatorSimulation:
    """A cluster of ``servers`` serving what they hold, the ``segments`` marked used, ``rules`` by
    datasource, a dynamic ``config`` (Druid's key names), run by Druid's Coordinator at ``now_ms``.

    ``immediate``: requests complete as soon as the run queues them (Druid's
    ``withImmediateSegmentLoading``). ``seed`` seeds the run's random draws.
    """

    def __init__(
        self,
        servers: Iterable[DruidServer],
        segments: Iterable[DataSegment],
        rules: Mapping[str, list[Rule]],
        config: Mapping[str, Any] | None = None,
        *,
        now_ms: int = 0,
        immediate: bool = False,
        seed: int = 0,
    ):
        self.servers: dict[str, DruidServer] = {s.name: s for s in servers}
        self.used: dict[str, DataSegment] = {s.id: s for s in segments}
        self.rules = dict(rules)
        self.config = dict(config or {})
        self.now_ms = now_ms
        self.immediate = immediate
        self.rng = random.Random(seed)
        self.queues: dict[str, LoadQueue] = {}
        self.gone: set[str] = set()
        self.last: RunResult | None = None
        self.uptime_ms = 0

    # ------------------------------------------------------------------------- the cluster
    def add_server(self, server: DruidServer) -> None:
        """A historical joins (or comes back)."""
        self.servers[server.name] = server
        self.gone.discard(server.name)

    def remove_server(self, name: str) -> None:
        """The server leaves the inventory; requests queued to it are never answered."""
        self.servers.pop(name)
        self.gone.add(name)

    def add_segments(self, segments: Iterable[DataSegment]) -> None:
        """Mark ``segments`` used."""
        for segment in segments:
            self.used[segment.id] = segment

    def mark_unused(self, ids: Iterable[str]) -> None:
        """Mark the segments of ``ids`` unused (Druid's ``deleteSegments``)."""
        for i in ids:
            self.used.pop(i, None)

    def set_config(self, **values: Any) -> None:
        """Change the dynamic config (Druid's key names) for the next runs."""
        self.config.update(values)

    # ------------------------------------------------------------------------------- runs
    def state(self) -> ClusterState:
        """The cluster as the next run sees it (its load queues the simulation's own)."""
        return ClusterState(
            servers=list(self.servers.values()),
            used=self.used,
            rules=self.rules,
            overshadowed=overshadowed_ids(self.used.values()),
            queues=self.queues,
        )

    def run_cycle(self) -> RunStats:
        """One Coordinator run; the segments it marks unused leave the used set. Returns its metrics."""
        state = self.state()
        before_collect = self.load_queued_segments if self.immediate else None
        result = run_coordinator(
            state,
            druid_config(self.config),
            now_ms=self.now_ms,
            rng=self.rng,
            uptime_ms=self.uptime_ms,
            before_collect=before_collect,
        )
        self.mark_unused(result.deleted | result.overshadowed)
        self.last = result
        return result.stats

    def load_queued_segments(self, run_callbacks: bool = True, after_round: Callable[[], None] | None = None) -> None:
        """Complete every queued request, round after round, as historicals answer them.
        ``after_round``: called once each round's requests are answered, before their callbacks."""
        turbo = set(self.config.get("turboLoadingNodes") or [])
        pending = {name: _Waiting(queue) for name, queue in self.queues.items()}
        while True:
            answered = []
            for name, queue in self.queues.items():
                server = self.servers.get(name)
                if server is None:
                    continue
                request = pending[name].next(queue)
                if request is None:
                    continue
                (queue.to_drop if request.action is SegmentAction.DROP else queue.to_load).pop(request.segment.id)
                mode = "TURBO" if name in turbo else "NORMAL"
                if request.action.is_load:
                    if server.max_size - server.current_size < request.segment.size:
                        answered.append((queue, request, QueueEvent.FAILED, mode))
                        continue
                    loaded = request.profile if isinstance(request.profile, PartialLoadProfile) else None
                    if not server.update_profile(request.segment, loaded):
                        server.add(request.segment, loaded)
                else:
                    server.remove(request.segment)
                answered.append((queue, request, QueueEvent.SUCCESS, mode))
            if answered and after_round is not None:
                after_round()
            if not answered:
                return
            for queue, request, event, mode in answered:
                description = f"{request.action.value}: {mode}"
                if run_callbacks:
                    queue.complete(request, event, description)
                else:
                    queue.stats[(event, request.segment.datasource, description)] += 1
