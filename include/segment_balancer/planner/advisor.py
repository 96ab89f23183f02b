"""Which Coordinator config to set: Druid's own Coordinator simulated for some runs under candidate
configs, each measured, the Pareto front of the candidates and the one recommended
(``docs/ADVISOR.md``).

A candidate is the snapshot's own config with some of :data:`TUNED_KEYS` changed. Its runs are
:class:`~segment_balancer.planner.druid_coordinator.simulation.CoordinatorSimulation`'s: a run of
the release the cluster runs, then every queued request completed as historicals complete them
(a load fails when the historical lacks the bytes), then the next run one Coordinator period later.
What a candidate's run leaves is measured by :func:`measure_cluster` after its requests completed,
and while they complete (:attr:`RunMeasure.peak_fullest_disk_pct`); whether the cluster is loaded
after a run is what the next run's ``CollectSegmentStats`` counts at its start (Druid's
``segment/unavailable/count`` and ``segment/underReplicated/count``).

Source: issue 51 of this project; the keys and their meanings are Druid 35.0.0's and 38.0.0's
(``CoordinatorDynamicConfig``, ``druid.coordinator.balancer.*``); the Pareto front as in
multi-objective tuning (a candidate no other is at least as good as on every objective and
better on one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from segment_balancer.common.errors import InputError
from segment_balancer.druid import metrics as druid_metric_names
from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
from segment_balancer.planner.druid_coordinator.model import QueueEvent, SegmentAction
from segment_balancer.planner.druid_coordinator.run import ClusterState, CoordinatorRun
from segment_balancer.planner.druid_coordinator.simulation import CoordinatorSimulation
from segment_balancer.planner.druid_coordinator.strategies import STRATEGY_KEY, THRESHOLD_KEY

DYNAMIC_KEYS = (
    "maxSegmentsToMove",
    "replicationThrottleLimit",
    "maxSegmentsInNodeLoadingQueue",
    "smartSegmentLoading",
    "useRoundRobinSegmentAssignment",
)
"""The keys of Druid's dynamic config a candidate may change: what ``POST
/druid/coordinator/v1/config`` sets, in seconds and without a restart. ``balancerComputeThreads``
is not among them: it changes how fast Druid balances, not what it decides."""
RESTART_KEYS = (STRATEGY_KEY, THRESHOLD_KEY)
"""The runtime properties a candidate may change: set in the Coordinator's ``runtime.properties``,
read at its start."""
TUNED_KEYS = DYNAMIC_KEYS + RESTART_KEYS

OBJECTIVES = ("runs_to_loaded", "bytes_moved", "max_minus_min_disk_pct")
"""What the Pareto front is over, each the less the better: runs until nothing is unavailable or
under-replicated, bytes moved, the final widest max − min disk % of a tier."""
DEFAULT_WEIGHTS = {"runs_to_loaded": 0.5, "max_minus_min_disk_pct": 0.3, "bytes_moved": 0.2}
"""How the recommended candidate is chosen among the front: the least sum of each objective,
scaled to 0–1 over the candidates (0 the best), times its weight. Availability first."""

MEASURES = (
    "runs_to_loaded",
    "runs_to_quiet",
    "segments_moved",
    "bytes_moved",
    "max_minus_min_disk_pct",
    "max_minus_min_segments",
    "fullest_disk_pct",
    "peak_max_minus_min_disk_pct",
    "peak_max_minus_min_segments",
    "peak_fullest_disk_pct",
)
"""A candidate's measures over its runs (:func:`candidate_measures`), in ``advice.json``'s order."""


@dataclass(frozen=True)
class Candidate:
    """One config to simulate: ``name``, ``values`` (of :data:`TUNED_KEYS`, Druid's key names: the
    snapshot's own with the candidate's changes), ``current`` (the snapshot's own config)."""

    name: str
    values: Mapping[str, Any]
    current: bool = False


@dataclass
class RunMeasure:
    """What one run of a candidate did and left, once its requests completed: ``run`` (1-based),
    the segments ``unavailable`` and the replicas ``under_replicated`` at the next run's start
    (Druid's counts), the ``moves`` it queued and their ``moved_bytes`` (bytes), the widest
    max − min over the tiers of each historical's disk % (``max_minus_min_disk_pct``, percentage
    points) and segment count, the fullest disk (%), and the fullest disk while its requests
    completed (``peak_fullest_disk_pct``: after each round of requests)."""

    run: int
    unavailable: int
    under_replicated: int
    moves: int
    moved_bytes: int
    max_minus_min_disk_pct: float
    max_minus_min_segments: int
    fullest_disk_pct: float
    peak_fullest_disk_pct: float


@dataclass
class CandidateResult:
    """A candidate's runs: ``start`` (the snapshot as measured before run 1, ``run`` 0) and one
    :class:`RunMeasure` per run."""

    candidate: Candidate
    start: RunMeasure
    runs: list[RunMeasure] = field(default_factory=list)


def measure_cluster(servers: Iterable, decommissioning: Iterable[str]) -> tuple[float, int, float]:
    """``(widest max − min disk % of a tier, widest max − min segment count of a tier, fullest
    disk %)`` over the historicals of ``servers`` (``DruidServer``: ``tier``, ``current_size``,
    ``max_size`` bytes, ``segment_count``), decommissioning ones (hosts or names in
    ``decommissioning``) left out (as ``tools.simulate``'s ``runs.csv`` leaves them out)."""
    leaving = set(decommissioning)
    by_tier: dict[str, list[tuple[float, int]]] = {}
    fullest = 0.0
    for server in servers:
        if server.name in leaving or server.host in leaving:
            continue
        pct = 100.0 * server.current_size / server.max_size if server.max_size > 0 else 0.0
        fullest = max(fullest, pct)
        by_tier.setdefault(server.tier, []).append((pct, server.segment_count))
    disk = max((max(p for p, _ in v) - min(p for p, _ in v) for v in by_tier.values()), default=0.0)
    segments = max((max(n for _, n in v) - min(n for _, n in v) for v in by_tier.values()), default=0)
    return disk, segments, fullest


def _not_loaded(stats) -> tuple[int, int]:
    """Druid's unavailable segments and under-replicated replicas of a run's ``RunStats``."""
    return (
        int(stats.total(druid_metric_names.UNAVAILABLE)),
        int(stats.total(druid_metric_names.UNDER_REPLICATED)),
    )


def simulate_candidate(
    state: ClusterState,
    base: Mapping[str, Any],
    candidate: Candidate,
    *,
    runs: int,
    now_ms: int,
    seed: int = 0,
    restart: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
) -> CandidateResult:
    """``runs`` runs of Druid's Coordinator from ``state`` (consumed) under ``base`` (the snapshot's
    config, Druid's key names, ``druidVersion`` set) with ``candidate``'s values; the first run at
    ``now_ms``, each later one a Coordinator period on. ``seed`` seeds every run's draws, the same
    for every candidate. ``restart``: historicals (names) restarted in a rolling restart: away from
    the inventory for run 1 (its requests to them unanswered), back with what they served once run
    1's requests completed. ``progress(run)`` after each run.

    Raises:
        ValueError: a candidate value Druid's config refuses (the key, the value, what is expected).
    """
    config = {**base, **candidate.values}
    sim = CoordinatorSimulation(state.servers, state.used.values(), state.rules, config, now_ms=now_ms, seed=seed)
    sim.queues = state.queues
    sim.uptime_ms = None  # a running cluster's Coordinator: up longer than millisToWaitBeforeDeleting
    period_ms = _period_ms(config)
    decommissioning = list(config.get("decommissioningNodes") or [])

    def measured(run: int, not_loaded: tuple[int, int], moves: int, moved: int, peak: float) -> RunMeasure:
        disk, segments, fullest = measure_cluster(sim.servers.values(), decommissioning)
        return RunMeasure(run, *not_loaded, moves, moved, disk, segments, fullest, max(peak, fullest))

    away = [sim.servers[name] for name in restart]
    for server in away:
        sim.remove_server(server.name)
    stats = sim.run_cycle()  # its counts are the cluster's as run 1 begins (restarted historicals away)
    result = CandidateResult(candidate, measured(0, _not_loaded(stats), 0, 0, 0.0))
    for run in range(1, runs + 1):
        moves = [
            op.segment.size
            for op in sim.last.operations
            if op.action is SegmentAction.MOVE_TO and op.event is QueueEvent.ASSIGNED
        ]
        peak = [0.0]

        def after_round(peak=peak):
            peak[0] = max(peak[0], measure_cluster(sim.servers.values(), decommissioning)[2])

        sim.load_queued_segments(after_round=after_round)
        if run == 1:
            for server in away:
                sim.add_server(server)
        sim.now_ms += period_ms
        if run < runs:
            stats = sim.run_cycle()
            not_loaded = _not_loaded(stats)
        else:
            not_loaded = _rules_count(sim)
        result.runs.append(measured(run, not_loaded, len(moves), sum(moves), peak[0]))
        if progress is not None:
            progress(run)
    return result


def _rules_count(sim: CoordinatorSimulation) -> tuple[int, int]:
    """What the next run's ``CollectSegmentStats`` would count, without running its other duties
    (its rules queue loads in ``sim``'s queues: only after the last run)."""
    run = CoordinatorRun(sim.state(), druid_config(sim.config), now_ms=sim.now_ms, seed="advisor/last")
    run.prepare()
    run.rules()
    return _not_loaded(run.stats)


def _period_ms(config: Mapping[str, Any]) -> int:
    return druid_config(config).period_ms


def default_candidates(current: Mapping[str, Any], is_38: bool) -> list[Candidate]:
    """The default grid around ``current`` (the snapshot's effective values of :data:`TUNED_KEYS`):
    the snapshot's own first, then each of ``cost`` and ``diskNormalized`` with smart loading
    (round robin on and off; Druid 38's ``utilizationThreshold`` at 0.02 and 0.10 too), and without
    it (``maxSegmentsToMove`` ×½, ×1, ×2, ×4 of the snapshot's, at least 1; the replication and
    queue limits the snapshot's, then ×2); the same values twice are one candidate. At most 16."""
    base = {k: current[k] for k in TUNED_KEYS}
    move = max(1, int(base["maxSegmentsToMove"]))
    changes: list[dict[str, Any]] = []
    for strategy in ("cost", "diskNormalized"):
        for round_robin in (True, False):
            changes.append(
                {STRATEGY_KEY: strategy, "smartSegmentLoading": True, "useRoundRobinSegmentAssignment": round_robin}
            )
        if strategy == "diskNormalized" and is_38:
            changes += [{STRATEGY_KEY: strategy, "smartSegmentLoading": True, THRESHOLD_KEY: t} for t in (0.02, 0.10)]
        for factor in (0.5, 1, 2, 4):
            changes.append(
                {STRATEGY_KEY: strategy, "smartSegmentLoading": False, "maxSegmentsToMove": max(1, int(move * factor))}
            )
        changes.append(
            {
                STRATEGY_KEY: strategy,
                "smartSegmentLoading": False,
                "maxSegmentsToMove": move * 2,
                "replicationThrottleLimit": 2 * int(base["replicationThrottleLimit"]),
                "maxSegmentsInNodeLoadingQueue": 2 * int(base["maxSegmentsInNodeLoadingQueue"]),
            }
        )
    out = [Candidate("current", base, current=True)]
    seen = {_key(base)}
    for change in changes:
        values = {**base, **change}
        if _key(values) in seen:
            continue
        seen.add(_key(values))
        out.append(Candidate(candidate_name(base, values), values))
    return out[:16]


def _key(values: Mapping[str, Any]) -> str:
    return json.dumps(values, sort_keys=True)


def candidate_name(base: Mapping[str, Any], values: Mapping[str, Any]) -> str:
    """A name of ``values`` by what differs from ``base``, in Druid's terms (``current`` for
    nothing): ``diskNormalized, smartSegmentLoading=false, maxSegmentsToMove=50`` and the like."""
    parts = []
    named_order = (STRATEGY_KEY, "smartSegmentLoading", "useRoundRobinSegmentAssignment", THRESHOLD_KEY)
    for key in (*named_order, *(k for k in TUNED_KEYS if k not in named_order)):
        if values.get(key) == base.get(key):
            continue
        value = values[key]
        if key == STRATEGY_KEY:
            parts.append(str(value))
        else:
            shown = json.dumps(value) if isinstance(value, bool) else value
            parts.append(f"{key.rsplit('.', 1)[-1]}={shown}")
    return ", ".join(parts) or "current"


def candidates_from_file(path: Path, current: Mapping[str, Any]) -> list[Candidate]:
    """The candidates of a JSON file: a list of objects, each some of :data:`TUNED_KEYS` (and an
    optional ``name``), applied over ``current``; the snapshot's own config is added first when no
    candidate equals it.

    Raises:
        InputError: not a list of objects, a key not in :data:`TUNED_KEYS` (naming the file, the
            candidate's position and the key).
    """
    try:
        given = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the candidates: {exc}") from None
    if not isinstance(given, list) or not all(isinstance(c, dict) for c in given):
        raise InputError(f"{path}: expected a JSON list of objects (each some of {', '.join(TUNED_KEYS)})")
    base = {k: current[k] for k in TUNED_KEYS}
    out = [Candidate("current", base, current=True)]
    for position, change in enumerate(given, start=1):
        name = change.pop("name", None)
        unknown = sorted(set(change) - set(TUNED_KEYS))
        if unknown:
            raise InputError(
                f"{path}: candidate {position}: {unknown[0]!r} is not a key the advisor changes; "
                f"expected some of {', '.join(TUNED_KEYS)}"
            )
        values = {**base, **change}
        if _key(values) == _key(base):
            continue
        out.append(Candidate(str(name or candidate_name(base, values)), values))
    return out


def candidate_measures(result: CandidateResult) -> dict[str, Any]:
    """The :data:`MEASURES` of ``result``: ``runs_to_loaded`` (the first run after which nothing
    is unavailable or under-replicated, 0 when the snapshot is loaded already, None when no run
    gets there), ``runs_to_quiet`` (the first run that queued no move, None when none), the moves
    and bytes of every run summed, the last run's spreads and fullest disk, and their peaks over
    the runs (the fullest disk's while requests completed)."""
    runs = result.runs
    loaded = [m.run for m in (result.start, *runs) if m.unavailable == 0 and m.under_replicated == 0]
    quiet = [m.run for m in runs if m.moves == 0]
    last = runs[-1] if runs else result.start
    every = [result.start, *runs]
    return {
        "runs_to_loaded": loaded[0] if loaded else None,
        "runs_to_quiet": quiet[0] if quiet else None,
        "segments_moved": sum(m.moves for m in runs),
        "bytes_moved": sum(m.moved_bytes for m in runs),
        "max_minus_min_disk_pct": round(last.max_minus_min_disk_pct, 3),
        "max_minus_min_segments": last.max_minus_min_segments,
        "fullest_disk_pct": round(last.fullest_disk_pct, 3),
        "peak_max_minus_min_disk_pct": round(max(m.max_minus_min_disk_pct for m in runs or every), 3),
        "peak_max_minus_min_segments": max(m.max_minus_min_segments for m in runs or every),
        "peak_fullest_disk_pct": round(max(m.peak_fullest_disk_pct for m in runs or every), 3),
    }


def _objective(row: Mapping[str, Any], name: str, runs: int) -> float:
    """An objective of a candidate's row, the less the better (never loaded: one run past the last)."""
    value = row[name]
    return float(runs + 1 if value is None else value)


def pareto_front(rows: Sequence[Mapping[str, Any]], runs: int) -> list[bool]:
    """Whether each of ``rows`` (candidate measures) is on the Pareto front over :data:`OBJECTIVES`:
    no other row is at least as good on every objective and better on one."""
    points = [tuple(_objective(r, o, runs) for o in OBJECTIVES) for r in rows]

    def dominated(p):
        return any(all(a <= b for a, b in zip(q, p)) and q != p for q in points)

    return [not dominated(p) for p in points]


def recommend(
    rows: Sequence[Mapping[str, Any]], front: Sequence[bool], runs: int, weights: Mapping[str, float] | None = None
) -> int:
    """The index of the recommended row: on the front, the least weighted sum of its objectives each
    scaled to 0–1 over every row (:data:`DEFAULT_WEIGHTS` unless ``weights``); ties to the
    snapshot's own config (``current``), then the earlier row.

    Raises:
        InputError: a weight of an unknown objective or below 0.
    """
    weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
    for name, w in weights.items():
        if name not in OBJECTIVES or w < 0:
            raise InputError(f"weights: {name}={w}: expected weights >= 0 of {', '.join(OBJECTIVES)}")
    scaled = {}
    for name in OBJECTIVES:
        values = [_objective(r, name, runs) for r in rows]
        lo, hi = min(values), max(values)
        scaled[name] = [0.0 if hi == lo else (v - lo) / (hi - lo) for v in values]
    scores = [
        (sum(weights.get(n, 0.0) * scaled[n][i] for n in OBJECTIVES), not rows[i].get("current", False), i)
        for i in range(len(rows))
        if front[i]
    ]
    return min(scores)[2]


def config_diff(current: Mapping[str, Any], chosen: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(POST body, restart keys)``: the dynamic keys whose value ``chosen`` changes, to POST to
    ``/druid/coordinator/v1/config``, and the runtime properties it changes (set in the
    Coordinator's ``runtime.properties``, read at a restart)."""
    body = {k: chosen[k] for k in DYNAMIC_KEYS if chosen.get(k) != current.get(k)}
    restart = {k: chosen[k] for k in RESTART_KEYS if chosen.get(k) != current.get(k)}
    return body, restart


def result_row(result: CandidateResult) -> dict[str, Any]:
    """One candidate's row of ``advice.json``: ``name``, ``config`` (its values of
    :data:`TUNED_KEYS`), ``current``, the :data:`MEASURES` and ``runs`` (every run's
    :class:`RunMeasure`, run 0 the snapshot)."""
    return {
        "name": result.candidate.name,
        "config": dict(result.candidate.values),
        "current": result.candidate.current,
        **candidate_measures(result),
        "runs": [asdict(m) for m in (result.start, *result.runs)],
    }
