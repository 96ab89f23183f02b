"""The bundled ``generated`` snapshot (about 20,000 segments, ``sample.generate_snapshot``) planned
through the CLI: the availability invariant over every independent drop, and what the plan does
with the cases of real clusters the generator adds (``sample._real_cluster_cases``)."""

import pandas as pd
import pytest
from invariants import assert_no_drop_costs_availability

from segment_balancer.tools.pipeline import run_plan
from segment_balancer.tools.sample import SNAPSHOTS_DIR, UNEXPORTED

GENERATED = SNAPSHOTS_DIR + "/generated"


@pytest.fixture(scope="module")
def planned(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("generated")
    summary = run_plan(spark, GENERATED, base / "plan", work=base / "work")
    return base, summary, pd.read_parquet(base / "plan" / "operations.parquet")


def test_no_independent_drop_costs_availability(planned):
    base, summary, ops = planned
    checked = assert_no_drop_costs_availability(GENERATED, ops)
    assert checked > 0  # the generated cluster has overreplicated segments that do get dropped


def test_killed_segment_still_served_is_dropped_as_unused(planned):
    _, summary, ops = planned
    drops = ops[ops.segment_id == UNEXPORTED[0]]
    assert set(zip(drops.action, drops.server, drops.reason)) == {
        ("DROP", f"{n}:8083", "unused") for n in UNEXPORTED[1]
    }
    assert summary["unlisted"]["per_datasource"] == {"wikipedia": {"segments": 1, "served_replicas": 2}}


def test_all_granularity_segment_moves_off_the_decommissioning_server(planned):
    """countries (eternity, _default_tier 2) is on hist-default-01 and the decommissioning
    hist-default-04: count 2 − 1 on decommissioning < 2, so stage 5 (or 9) moves it."""
    _, _, ops = planned
    countries = ops[
        ops.segment_id.str.startswith("countries_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z")
    ]
    moves = countries[countries.stage.isin([5, 9])]
    assert list(moves.action) == ["LOAD", "DROP"]
    assert moves.iloc[1].server == "hist-default-04:8083" and moves.iloc[1].depends_on == moves.iloc[0].op_id


def test_reindexed_day_not_loaded_keeps_its_old_version(planned):
    """The newest re-ingested orders day has its new version served nowhere: the old version
    waits (no drop of it), and the new one is loaded."""
    _, summary, ops = planned
    waiting = summary["overshadowed_waiting"]["per_datasource"]
    assert waiting["orders"]["segments"] == 1 and waiting["orders"]["served_replicas"] >= 1
    overshadowed_drops = ops[ops.reason == "overshadowed"]
    assert (overshadowed_drops.datasource == "orders").sum() > 0  # the five served days' old versions go
    assert summary["status_after"]["unreplicated"] <= summary["status_before"]["unreplicated"]
