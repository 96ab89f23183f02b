"""The whole pipeline (prepare, stages 1-13, assemble, validation, publish) on the bundled
real-data snapshot ``druid_sample``, with the plan worked out by hand from ALGORITHM.md.

The snapshot (5 real Druid segments of 2013, ``maxSegmentsInNodeLoadingQueue`` 100):

* ``_default_tier``: d1 (decommissioning) serves tw01 and ed; d2 serves tw01, tw02 and wk;
  d3 is empty with a queued load of wk. ``hot`` (priority 10): h1 serves tw01 and tw02; h2 empty.
* rules: twitterstream January 2013 → hot 1 + _default_tier 1; everything else → _default_tier 2.
  (tw = twitterstream day 01/02/03, ed = wikipedia_editstream 2012-12-29/2013-01-10,
  wk = wikipedia 2013-08-01.)

Worked by hand (costs: an empty server, or one with nothing within 45 days, costs 0; same
datasource on adjacent days costs most):

1. tw03 is unreplicated: primary tier hot (priority 10); h2 (cost 0) beats h1 (holds tw02,
   adjacent) → LOAD tw03 on h2.
3. ed has 1 of 2 in _default_tier (on d1). Candidates d2, d3; B(2, 2) = 2. d3 projects only wk
   (August, outside the window) → cost 0 → LOAD ed on d3; now 2 of 2.
4. tw03 (from stage 1) needs 1 in _default_tier; start-of-run ranking: d3 (0) before d2 (tw01,
   tw02 adjacent) → LOAD tw03 on d3.
5. d1 holds ed (index 1) and tw01 (index 4). ed: count 2 (d1, d3 loading) minus 1 on
   decommissioning servers < target 2, so it moves: top 2 = [d3, d2], d3 is already loading it →
   move to d2 (LOAD decommissioning + DROP d1). tw01: count 2 (d1, d2) minus 1 on decommissioning
   servers = target 1: excess, not moved (ToBecomeNotLoadedOnDecommServers), left to stage 12.
7. Draws from numpy's default_rng([seed, 7, crc32(tier)]) over the eligible segments by index. A
   non-holding server of top B moves a holder only when it is strictly cheaper (margin
   ``balancingMinCostReductionPercent`` 0: ``cost(v) < cost(h)``); equal costs never move.
   hot: tw01 and tw02 are eligible (both on h1); h2 projects tw03 (stage 1's load). tw02 costs the
   same on h1 (tw01, the day before) as on h2 (tw03, the day after): the two adjacent-day terms are
   the same floating-point operations, so tw02 never moves. tw01 costs more on h1 (tw02, the day
   after) than on h2 (tw03, two days after): move tw01 h1 → h2, whichever is drawn first (with the
   default seed 0 tw01 is). _default_tier: eligible are wk (idx 0: d2 + d3's queued load = target
   2) and tw02 (idx 3: d2); tw01 is overreplicated and ed is served only by the decommissioning d1.
   tw02 costs the same on d2 (tw01 the day before, ed) as on d3 (tw03 the day after, ed, wk out of
   the window): a tie, so no move (a tie broken by free bytes would move tw02 every run, back and
   forth between runs). wk costs 0 on both and B(2, 2) = 2 covers both: no
   move.
12. tw01 has 1 + 1 targets and ends with d1 and d2 in _default_tier (excess 1, d1 dropped first as
    decommissioning). required = min(2, 1 + 1) = 2. h1's drop is the move's, dependent on h2's
    load, so h1 serves until h2 has loaded and counts; h2 is only loading: loaded =
    {h1, d1, d2} = 3, and dropping d1 leaves 2 = required -> DROP tw01 from d1. (Were h1 not
    counted: loaded 2, and the drop would wait a run.)
"""

import json
import shutil

import pandas as pd
import pytest
from druid_sample_plan import EXPECTED_STAGES_1_TO_5, SNAPSHOT, rows, server, short

from segment_balancer.plan.publish import PublishError, publish_plan
from segment_balancer.plan.validation import PlanValidationError, require_valid
from segment_balancer.planner.coordinators import ISSUE7458
from segment_balancer.tools.pipeline import run_plan


@pytest.fixture(scope="module")
def planned(druid_sample_planned):
    return druid_sample_planned


def test_loading_decommissioning_and_unload_stages_match_the_hand_worked_plan(planned):
    _, summary, ops = planned
    assert rows(ops, [1, 2, 3, 4, 5, 6]) == EXPECTED_STAGES_1_TO_5
    assert rows(ops, [8, 9, 10, 11, 13]) == []
    assert rows(ops, [12]) == [(12, "DROP", None, "tw01", "d1")]  # loaded {h1, d1, d2} = 3 > required 2
    assert summary["availability"]["deferred_drops"] == 0


def test_stage7_moves_tw01_in_hot_and_nothing_that_only_ties(planned):
    _, _, ops = planned
    assert rows(ops, [7]) == [(7, "LOAD", "balancing", "tw01", "h2"), (7, "DROP", None, "tw01", "h1")]


def test_dependent_drops_point_at_their_loads(planned):
    _, _, ops = planned
    by_id = ops.set_index("op_id")
    deps = ops[ops.depends_on.notna()]
    assert len(deps) == 2  # one decommissioning move and one balancing move
    for r in deps.itertuples():
        load = by_id.loc[int(r.depends_on)]
        assert load.action == "LOAD" and load.segment_id == r.segment_id and int(r.depends_on) < r.op_id
    assert ops.op_id.tolist() == list(range(len(ops)))


def test_assignment_is_the_projected_end_state(planned):
    base, _, _ = planned
    a = pd.read_parquet(base / "plan" / "assignment.parquet")
    got = {}
    for r in a.itertuples():
        got.setdefault(short(r.segment_id), set()).add(server(r.server))
    assert got == {
        "tw01": {"h2", "d2"},
        "tw02": {"h1", "d2"},
        "tw03": {"h2", "d3"},
        "ed": {"d2", "d3"},
        "wk": {"d2", "d3"},
    }


def test_summary_reports_groups_status_and_validation(planned):
    base, summary, _ = planned
    assert summary["status_before"]["unreplicated"] == 1 and summary["status_after"]["unreplicated"] == 0
    groups = {g["name"]: g["count"] for g in json.loads((base / "plan" / "groups.json").read_text())}
    assert groups["StillUnreplicated"] == 0
    assert groups["ToBecomeFullyReplicated[hot]"] == 1  # tw03 (target 1 in hot)
    assert groups["ToBecomeNotLoadedOnDecommServers[_default_tier]"] == 2
    assert json.loads((base / "plan" / "validation.json").read_text())["success"] is True
    # assemble writes the summary, so the timings cover prepare and the thirteen stages.
    assert list(summary["timings_seconds"]) == list(ISSUE7458.run_apps)[:-1]


def test_tampered_plan_fails_validation_and_publishes_nothing(planned, tmp_path):
    base, _, _ = planned
    published = base / "plan"
    before = (published / "operations.parquet").read_bytes()
    bad = tmp_path / "bad"
    shutil.copytree(published, bad)
    ops = pd.read_parquet(bad / "operations.parquet")
    ops.loc[ops.action == "LOAD", "server"] = "hist-default-01:8083"  # loads to the decommissioning server
    ops.to_parquet(bad / "operations.parquet", index=False)
    with pytest.raises(PlanValidationError):
        require_valid(bad, base / "work")
    with pytest.raises(PublishError):
        publish_plan(bad, published)
    assert (published / "operations.parquet").read_bytes() == before


def test_explain_ranks_every_server_of_each_tier(spark, planned):
    """tw03 at the start of the run: in hot, h2 is empty (cost 0) and h1 holds tw02, the adjacent
    day of the same datasource (cost > 0); B(2 candidates, target 1) = 1. In _default_tier, d3
    projects only wk (August, outside the 45-day window: cost 0), d2 holds tw01 and tw02, and d1 is
    decommissioning, so not a candidate."""
    from segment_balancer.plan.explain import explain_segment

    base, _, _ = planned
    seg = "twitterstream_2013-01-03T00:00:00.000Z_2013-01-04T00:00:00.000Z_2013-01-04T04:09:13.590Z_v9"
    out = explain_segment(base / "work", seg)
    tiers = {t["tier"]: t for t in out["tiers"]}
    assert set(tiers) == {"hot", "_default_tier"}
    hot = [(server(s["server"]), s["rank"], s["in_top_b"], s["ineligible"]) for s in tiers["hot"]["servers"]]
    # h1: max 1,000,000,000 - 880,560,760 projected = 119,439,240 bytes free < tw03's 411,651,320.
    assert hot == [("h2", 1, True, None), ("h1", 2, False, "not enough room (119439240 bytes available)")]
    assert tiers["hot"]["servers"][0]["cost"] == 0.0 and tiers["hot"]["servers"][1]["cost"] > 0
    default = [
        (server(s["server"]), s["rank"], s["in_top_b"], s["ineligible"]) for s in tiers["_default_tier"]["servers"]
    ]
    assert default == [("d3", 1, True, None), ("d2", 2, False, None), ("d1", None, False, "decommissioning")]
    assert (tiers["hot"]["b"], tiers["_default_tier"]["b"]) == (1, 1)


def test_a_key_of_a_newer_druid_plans_with_a_warning(spark, planned, tmp_path):
    """``coordinator_config.json`` with a key this planner does not know (as a newer Druid release
    would return) plans the same operations as without it; the plan's alerts, and so its report,
    name the key and the closest known one."""
    from segment_balancer.plan.report import REPORT_FILE

    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, snap)
    config = json.loads((snap / "coordinator_config.json").read_text())
    (snap / "coordinator_config.json").write_text(
        json.dumps({**config, "maxSegmentsInNodeLoadQueue": 3, "replicationThrottleLimit": None})
    )
    summary = run_plan(spark, snap, tmp_path / "plan")
    _, _, ops = planned
    again = pd.read_parquet(tmp_path / "plan" / "operations.parquet")
    assert rows(again, range(1, 14)) == rows(ops, range(1, 14)) and len(again) == len(ops) == 8
    [alert] = [a for a in summary["alerts"] if a["kind"] == "unknown_config_key"]
    assert alert["key"] == "maxSegmentsInNodeLoadQueue"
    assert "closest known key: 'maxSegmentsInNodeLoadingQueue'" in alert["message"]
    assert "maxSegmentsInNodeLoadQueue" in (tmp_path / "plan" / REPORT_FILE).read_text()


def test_a_best_servers_function_with_if_var_and_math_max_plans(spark, planned, tmp_path):
    """``numBestServersChoosingFunction`` is JavaScript run by V8: a function with ``var``, ``if``
    and ``Math.max`` plans. On this cluster (at most 4 historicals a tier) it gives B = t, as the
    default t + floor(log5(n)) does for n < 5, so the plan is the default's, operation for operation."""
    function = "function (n, t) { var b = t; if (n >= 5) { b = Math.max(b, t + 1); } return b; }"
    summary = run_plan(spark, SNAPSHOT, tmp_path / "plan", overrides={"numBestServersChoosingFunction": function})
    _, _, ops = planned
    again = pd.read_parquet(tmp_path / "plan" / "operations.parquet")
    assert rows(again, range(1, 14)) == rows(ops, range(1, 14)) and len(again) == len(ops)
    assert summary["config"]["numBestServersChoosingFunction"] == function
