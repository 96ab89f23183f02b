"""``segment_balancer.planner.advisor``: a candidate's runs measured, the Pareto front, the
recommendation and the config to POST, on clusters small enough to check by hand."""

import json

import pytest

from segment_balancer.common.errors import InputError
from segment_balancer.druid.rules import Rule
from segment_balancer.planner import advisor
from segment_balancer.planner.druid_coordinator.model import DruidServer, LoadQueue
from segment_balancer.planner.druid_coordinator.run import ClusterState
from segment_balancer.planner.druid_coordinator.strategies import STRATEGY_KEY, THRESHOLD_KEY
from tests.planner.druid_coordinator.coordinator_sim import NOW, T1, historical, segments

BASE = {"druidVersion": "38.0.0", "coordinatorPeriodMillis": 60_000}
CURRENT = {
    "maxSegmentsToMove": 100,
    "replicationThrottleLimit": 500,
    "maxSegmentsInNodeLoadingQueue": 500,
    "smartSegmentLoading": True,
    "useRoundRobinSegmentAssignment": True,
    STRATEGY_KEY: "cost",
    THRESHOLD_KEY: 0.05,
}


def _state(servers, used, replicas: int) -> ClusterState:
    rules = {"wiki": [Rule("loadForever", "load", {T1: replicas})]}
    return ClusterState(
        servers=servers,
        used={s.id: s for s in used},
        rules=rules,
        queues={s.name: LoadQueue(s.name) for s in servers},
    )


def test_four_unloaded_segments_are_loaded_by_run_1_and_spread_two_and_two():
    """Two empty historicals of 10,000 MB and four 500 MB segments of one datasource, one replica
    each: all four unavailable at the start; run 1 loads them, the cost strategy puts two on each
    (adjacent days cost the most together), so both disks are 1,000 MB of 10,000 MiB used."""
    used = segments("wiki", 4, 1)
    servers = [historical(1, T1, 10_000), historical(2, T1, 10_000)]
    result = advisor.simulate_candidate(
        _state(servers, used, 1), BASE, advisor.Candidate("current", CURRENT, True), runs=2, now_ms=NOW
    )
    assert (result.start.unavailable, result.start.under_replicated) == (4, 4)
    first = result.runs[0]
    assert (first.unavailable, first.under_replicated, first.moves) == (0, 0, 0)
    assert first.max_minus_min_segments == 0
    assert first.fullest_disk_pct == pytest.approx(100 * 1_000_000_000 / (10_000 << 20))
    measures = advisor.candidate_measures(result)
    assert measures["runs_to_loaded"] == 1
    assert measures["runs_to_quiet"] == 1
    assert (measures["segments_moved"], measures["bytes_moved"]) == (0, 0)


def test_a_cluster_too_small_for_its_replicas_is_never_loaded():
    """Two historicals of 1,000 MiB hold two 500 MB segments each: four segments wanting two
    replicas (eight) get four. Druid's ``RunRules`` visits the segments newest first and gives each
    its primary and its replica before the next one's primary, so the two newest take every byte:
    two segments unavailable, four replicas missing, run after run."""
    used = segments("wiki", 4, 1)
    servers = [historical(1, T1, 1_000), historical(2, T1, 1_000)]
    result = advisor.simulate_candidate(
        _state(servers, used, 2), BASE, advisor.Candidate("current", CURRENT, True), runs=3, now_ms=NOW
    )
    assert [(m.unavailable, m.under_replicated) for m in result.runs] == [(2, 4)] * 3
    assert advisor.candidate_measures(result)["runs_to_loaded"] is None
    assert result.runs[-1].fullest_disk_pct == pytest.approx(100 * 1_000_000_000 / (1_000 << 20))


def test_measure_cluster_spreads_by_tier_and_leaves_decommissioning_historicals_out():
    a = DruidServer("a", "hot", 100, curr_size=10)
    b = DruidServer("b", "hot", 100, curr_size=70)
    c = DruidServer("c", "cold", 200, curr_size=20)
    d = DruidServer("d", "cold", 100, curr_size=99)  # decommissioning: in neither spread nor fullest
    assert advisor.measure_cluster([a, b, c, d], ["d"]) == (60.0, 0, 70.0)


ROWS = [
    {"name": "current", "current": True, "runs_to_loaded": 3, "bytes_moved": 100, "max_minus_min_disk_pct": 40.0},
    {"name": "a", "runs_to_loaded": 2, "bytes_moved": 300, "max_minus_min_disk_pct": 10.0},
    {"name": "b", "runs_to_loaded": 2, "bytes_moved": 300, "max_minus_min_disk_pct": 20.0},  # a beats it
    {"name": "c", "runs_to_loaded": None, "bytes_moved": 0, "max_minus_min_disk_pct": 50.0},
]


def test_the_front_keeps_what_no_other_beats_on_every_objective():
    assert advisor.pareto_front(ROWS, runs=5) == [True, True, False, True]


def test_the_recommendation_weighs_the_scaled_objectives():
    """Scaled over the rows (never loaded counts as run 6): current (3-2)/4=0.25, 100/300, 30/40;
    a 0, 1, 0; c 1, 0, 1. Default weights .5/.2/.3: current .125+.067+.225=.417, a .2, c .8: a.
    Weighting bytes alone: c (0)."""
    front = advisor.pareto_front(ROWS, runs=5)
    assert ROWS[advisor.recommend(ROWS, front, 5)]["name"] == "a"
    assert ROWS[advisor.recommend(ROWS, front, 5, {"bytes_moved": 1.0})]["name"] == "c"
    with pytest.raises(InputError, match="spread"):
        advisor.recommend(ROWS, front, 5, {"spread": 1.0})


def test_a_tie_goes_to_the_snapshots_own_config():
    rows = [dict(ROWS[1], current=False), dict(ROWS[1], name="current", current=True)]
    assert advisor.recommend(rows, [True, True], 5) == 1


def test_the_diff_splits_the_post_body_from_the_keys_that_need_a_restart():
    chosen = {**CURRENT, "maxSegmentsToMove": 400, STRATEGY_KEY: "diskNormalized"}
    body, restart = advisor.config_diff(CURRENT, chosen)
    assert body == {"maxSegmentsToMove": 400}
    assert restart == {STRATEGY_KEY: "diskNormalized"}


def test_the_default_grid_starts_with_the_snapshots_own_and_has_no_twice():
    grid = advisor.default_candidates(CURRENT, is_38=True)
    assert grid[0].current and grid[0].values == CURRENT
    assert 1 < len(grid) <= 16
    assert len({json.dumps(c.values, sort_keys=True) for c in grid}) == len(grid)
    assert "diskNormalized, utilizationThreshold=0.02" in [c.name for c in grid]
    assert all(c.values[THRESHOLD_KEY] == 0.05 for c in advisor.default_candidates(CURRENT, is_38=False))


def test_a_candidates_file_names_the_bad_key(tmp_path):
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps([{"maxSegmentsToMove": 5}, {"maxSegmentToMove": 5}]))
    with pytest.raises(InputError, match=r"candidate 2: 'maxSegmentToMove' is not a key"):
        advisor.candidates_from_file(path, CURRENT)
    path.write_text(json.dumps([{"name": "five", "maxSegmentsToMove": 5}, {}]))
    names = [c.name for c in advisor.candidates_from_file(path, CURRENT)]
    assert names == ["current", "five"]
