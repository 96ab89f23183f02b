"""``simulate --coordinator druid``: Druid 35.0.0's Coordinator run after run through the whole
pipeline (plan, gate, apply), on the clusters of Druid's ``BalancingStrategiesTest``, with Druid's
expected values; and Druid's drop rules, which mark segments unused for a later run to drop."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from druid_simulation import T1, historical, per_historical, wiki_segments, write_cluster

from segment_balancer.tools.simulate import simulate


@pytest.mark.simulation
def test_a_new_cluster_gets_balanced(spark, tmp_path):
    """``testNewClusterGetsBalanced``: five empty historicals, 1000 segments: run 1 assigns all
    1000 (round robin: 200 each) and moves nothing; run 2 does nothing."""
    snap = write_cluster(tmp_path / "snap", wiki_segments(), {historical(i): [] for i in range(5)})
    runs = simulate(spark, snap, tmp_path / "sim", 2, coordinator="druid")
    assert runs.loc[0, "loads"] == 1000 and runs.loc[0, "balancing_moves"] == 0
    assert set(per_historical(tmp_path / "sim", 1).values()) == {200}
    assert runs.loc[1, "operations"] == 0 and bool(runs.loc[1, "stable"])


@pytest.mark.simulation
def test_a_cluster_gets_balanced_when_a_historical_is_added(spark, tmp_path):
    """``testClusterGetsBalancedWhenServerIsAdded``: four historicals with 250 each (round robin)
    and a fifth, empty: after 7 runs each of the five holds 195 to 205 (Druid's range)."""
    served = {historical(i): [j for j in range(1000) if j % 4 == i] for i in range(4)}
    snap = write_cluster(tmp_path / "snap", wiki_segments(), {**served, historical(4): []})
    runs = simulate(spark, snap, tmp_path / "sim", 7, coordinator="druid")
    counts = per_historical(tmp_path / "sim", 7)
    assert sum(counts.values()) == 1000 and all(195 <= n <= 205 for n in counts.values()), counts
    assert runs.loc[0, "balancing_moves"] > 0


@pytest.mark.simulation
def test_a_drop_rule_drops_in_the_next_run(spark, tmp_path):
    """A drop rule only marks the segments unused (``segment/deleted/count``); the next run's
    ``UnloadUnusedSegments`` drops them (``segment/unneeded/count``, duty 4)."""
    segments = wiki_segments(days=2, partitions=5)
    rules = {"wiki": [{"type": "dropForever"}], "_default": [{"type": "loadForever", "tieredReplicants": {T1: 1}}]}
    snap = write_cluster(tmp_path / "snap", segments, {historical(0): list(range(10))}, rules=rules)
    runs = simulate(spark, snap, tmp_path / "sim", 2, coordinator="druid")
    assert runs["drops"].tolist() == [0, 10]
    first = json.loads((tmp_path / "sim" / "run-001" / "plan" / "summary.json").read_text())
    assert first["druid_run"]["marked_unused"] == 10
    deleted = [m for m in first["druid_run"]["metrics"] if m["metric"] == "segment/deleted/count"]
    assert [m["value"] for m in deleted] == [10]
    ops = pd.read_parquet(tmp_path / "sim" / "run-002" / "plan" / "operations.parquet")
    assert set(ops["stage"]) == {4} and set(ops["action"]) == {"DROP"}
    assert per_historical(tmp_path / "sim", 2)[historical(0)] == 0


@pytest.mark.simulation
def test_both_coordinators_run_by_run(spark, tmp_path):
    """``simulate --compare-coordinators`` on SegmentBalancingTest's cluster: ten 500 MB segments of
    one day on hist__1 of two 10,000 MB historicals, hist__2 empty; two runs each, #7458 with the
    move margin 0. Worked by hand: with k segments moved, an unmoved one costs (9 - k)u where it is
    and ku on hist__2 (u: a same-day pair), so both coordinators move while k < 4.5: five moves
    (5 x 500 MB) in run 1, none in run 2, 5 and 5 after: 25 % each, a spread of 0. Nothing is ever
    unavailable or under-replicated: fully loaded from run 1. issue7458 is the simulation's own
    (``sim/``), druid its own directory; one report charts both."""
    from segment_balancer.plan.report import coordinator_summary
    from segment_balancer.tools.simulate import RUN_COLUMNS, simulate_coordinators

    snap = write_cluster(
        tmp_path / "snap", wiki_segments(days=1), {historical(1): list(range(10)), historical(2): []}, size_mb=10_000
    )
    sim = tmp_path / "sim"
    table = simulate_coordinators(spark, snap, sim, 2, {"balancingMinCostReductionPercent": 0})
    assert list(table.columns) == ["coordinator", *RUN_COLUMNS]
    assert list(table["coordinator"]) == ["issue7458", "issue7458", "druid", "druid"]
    assert list(table["moves"]) == [5, 0, 5, 0]
    assert list(table["moved_bytes"]) == [5 * 500 * (1 << 20), 0] * 2
    assert list(table["fullest_usage"]) == [25.0] * 4 and list(table["usage_max_minus_min"]) == [0.0] * 4
    assert per_historical(sim / "coordinators" / "druid", 2) == {historical(1): 5, historical(2): 5}
    assert (
        json.loads((sim / "coordinators" / "druid" / "run-001" / "plan" / "summary.json").read_text())["coordinator"]
        == "druid"
    )
    summary = coordinator_summary(table, sim)
    assert [(c["coordinator"], c["loaded_from"], c["moves"], c["segments_spread"], c["report"]) for c in summary] == [
        ("issue7458", 1, 5, 0, "report.html"),
        ("druid", 1, 5, 0, "coordinators/druid/report.html"),
    ]
    html = (sim / "report.html").read_text()
    assert 'id="sim-coordinators"' in html and 'data-coordinator="druid"' in html
    assert 'href="coordinators/druid/report.html"' in html and "chart-sim-coordinators-fullest-usage" in html


def test_the_coordinator_summary_by_hand():
    """``coordinator_summary``: fully loaded from the first run that starts with nothing unavailable
    or under-replicated (druid: run 3; issue7458: none of its runs), moves and bytes summed, the
    spread and fullest disk of the last run."""
    from segment_balancer.plan.report import coordinator_summary

    rows = [
        ("issue7458", 1, 4, 0, 2, 10, 30.0, 80.0, 3),
        ("issue7458", 2, 0, 1, 1, 5, 20.0, 70.0, 2),
        ("druid", 1, 4, 0, 0, 0, 50.0, 90.0, 6),
        ("druid", 2, 1, 2, 3, 30, 40.0, 85.0, 5),
        ("druid", 3, 0, 0, 1, 10, 35.5, 82.25, 4),
    ]
    columns = [
        "coordinator",
        "run",
        "unreplicated_before",
        "underreplicated_before",
        "moves",
        "moved_bytes",
        "usage_max_minus_min",
        "fullest_usage",
        "segments_max_minus_min",
    ]
    summary = coordinator_summary(pd.DataFrame(rows, columns=columns))
    assert summary == [
        {
            "coordinator": "issue7458",
            "loaded_from": None,
            "moves": 3,
            "moved_bytes": 15,
            "usage_spread": 20.0,
            "fullest_usage": 70.0,
            "segments_spread": 2,
            "report": None,
        },
        {
            "coordinator": "druid",
            "loaded_from": 3,
            "moves": 4,
            "moved_bytes": 40,
            "usage_spread": 35.5,
            "fullest_usage": 82.25,
            "segments_spread": 4,
            "report": None,
        },
    ]
