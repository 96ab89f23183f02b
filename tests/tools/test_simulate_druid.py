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
