"""The ``avgShedder`` strategy through the simulator: Druid's ``BalancingStrategiesTest``
added-server cluster with 200 GB historicals, ten runs, each fed the previous run's balancer state.
Its own module so that it runs beside ``test_simulate.py``'s long simulations (pytest-xdist
``--dist loadfile``)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from druid_simulation import historical, per_historical, wiki_segments, write_cluster

from segment_balancer.plan.explain import explain_plan, render_explain
from segment_balancer.tools.simulate import simulate


@pytest.mark.simulation
def test_avg_shedder_sheds_the_added_historical_in_runs_2_and_10(spark, tmp_path):
    """The target: the added-server cluster with 200 GB historicals (four hold 250 segments
    of 500 MB: 62.5 %; a fifth is empty), ``balancerStrategy: "avgShedder"``, default thresholds,
    every operation completing between runs, each run fed the previous run's balancer state.

    Worked by hand from ALGORITHM.md (``tests/planner/test_avg_shedder.py`` has the arithmetic):
    run 1 pairs hist 3 with the empty hist 4 (62.5 points, count 1 < 2): no move; run 2 (count 2)
    sheds 62.5 GB = 125 segments; runs 3–9 pair hist 2 with hist 3 and hist 1 with hist 4 at 31.25
    points, above 15 but not 40: counts 1 … 7 < 8; run 10 (count 8) sheds 31.25 GB from each
    high server, 62 whole segments each: 124."""
    served = {historical(i): [j for j in range(1000) if j % 4 == i] for i in range(4)}
    snap = write_cluster(tmp_path / "snap", wiki_segments(), {**served, historical(4): []}, size_mb=200_000)
    runs = simulate(spark, snap, tmp_path / "sim", 10, {"balancerStrategy": "avgShedder"})
    assert list(runs["balancing_moves"]) == [0, 125, 0, 0, 0, 0, 0, 0, 0, 124]
    assert list(runs["operations"]) == [0, 250, 0, 0, 0, 0, 0, 0, 0, 248]  # a move is a load and a dependent drop
    # usage max − min: 62.5 − 0; then 62.5 − 31.25 (125 of 400 segments' room); after run 10 the
    # untouched hist 0 at 62.5 against 187 segments' 46.75
    assert list(runs["usage_max_minus_min"]) == [62.5] + [31.25] * 8 + [15.75]
    assert per_historical(tmp_path / "sim", 2) == {
        **{historical(i): 250 for i in range(3)},
        historical(3): 125,
        historical(4): 125,
    }
    assert per_historical(tmp_path / "sim", 10) == {
        historical(0): 250,
        historical(1): 188,
        historical(2): 188,
        historical(3): 187,
        historical(4): 187,
    }
    balancer = json.loads((tmp_path / "sim" / "run-009" / "plan" / "summary.json").read_text())["balancer"]
    assert [(p["high"], p["low"], p["difference"], p["hit_count"], p["waiting"]) for p in balancer["pairs"]] == [
        (historical(2), historical(3), 31.25, 7, "shed in 1 more run(s) if the gap stays above 15"),
        (historical(1), historical(4), 31.25, 7, "shed in 1 more run(s) if the gap stays above 15"),
    ]
    state = json.loads((tmp_path / "sim" / "run-010" / "plan" / "balancer_state.json").read_text())
    assert state["pairs"] == []  # both pairs shed: forgotten
    # explain: a segment moved off hist 2, one left on it, one on the unpaired hist 0
    plan = tmp_path / "sim" / "run-010" / "plan"
    ops = pd.read_parquet(plan / "operations.parquet")
    moved = ops[(ops["action"] == "DROP") & (ops["server"] == historical(2))]["segment_id"].iloc[0]
    text = render_explain(explain_plan(plan, moved))
    assert (
        f"moved off {historical(2)} to {historical(3)}: the pair {historical(2)} (62.50 %) with {historical(3)} "
        "(31.25 %), gap 31.25 points, hit count 8; the pair shed 32,505,856,000 of the 32,768,000,000 bytes"
    ) in text
    held = pd.read_parquet(plan / "assignment.parquet")
    stays = sorted(set(held[held["server"] == historical(2)]["segment_id"]) - set(ops["segment_id"]))[0]
    text = render_explain(explain_plan(plan, stays))
    assert "not moved by avgShedder, though its holder was the higher server of a shedding pair" in text
    assert "would take the bytes moved (32505856000) beyond 32768000000" in text
    unpaired = sorted(set(held[held["server"] == historical(0)]["segment_id"]))[0]
    assert f"{historical(0)} was paired with no other historical" in render_explain(explain_plan(plan, unpaired))
