"""The ``druid`` coordinator's plan of the bundled ``druid_sample`` snapshot, through the CLI's path
(``run_plan(..., coordinator="druid")``: ``used_segments``, ``prepare``, ``druid_rules`` … ``druid_clone``,
``assemble``, the Great Expectations gate, publish), checked against a run of Druid's Coordinator
worked by hand. The snapshot names no release, so the run is Druid 38.0.0's; Druid 35.0.0's is the
same run here (no tier aliases, no partial-load rules, the ``cost`` strategy, and two tiers, which
the fixed order of 38's drop budget keeps in 35's order).

The cluster: T1, T2, T3 = ``twitterstream`` 2013-01-01, -02, -03 (rule: ``loadByInterval`` January
2013 {hot: 1, _default_tier: 1}); W = ``wikipedia_editstream`` 2012-12-29/2013-01-10T08; K =
``wikipedia`` 2013-08-01 (both ``_default``: {_default_tier: 2}). default-01 (decommissioning) serves
T1, W; default-02 serves T1, T2, K; default-03 serves nothing and has K queued (a REPLICATE: K is
served in its tier); hot-01 serves T1, T2; hot-02 nothing. Smart loading (Druid's default): round
robin, no queue limit.

Rules, newest segment first (K, W, T3, T2, T1); ``_default_tier`` in round-robin order default-03,
default-01, default-02 (most available bytes first), hot: hot-02, hot-01:

- K: projected 2 (served + queued) = required: nothing.
- W: 1 loaded (on the decommissioning server: it counts), 2 required: one REPLICATE, the cursor's
  default-03.
- T3: nothing anywhere: a LOAD (first replica of the tier) on default-02 (the cursor skips
  decommissioning default-01) and a LOAD on hot-02.
- T2: one per tier, as required.
- T1: 3 loaded, 2 required and loadable: a drop budget of 1; ``_default_tier`` first (Java's hash
  order): 2 > 1, the drop from the decommissioning default-01.

Balancing (at most 12 moves: 12 segments served or queued on the cluster, fewer than 100): from
default-01 one pick, W (the seeded draw; its other candidate is T1), which no active server can take
(default-03 is loading it, default-02 lacks the room); among the active ``_default_tier`` servers 6
picks, every one either without a server to go to (K, W) or cheapest where it is (T3, T2, T1:
their days' neighbours are there); in hot, T2 moves from hot-01 to hot-02: its cost is the same
(one adjacent day of twitterstream on each) and hot-02 has more bytes free; T3 (loading on hot-02)
and then T1 find no room.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from druid_sample_plan import SNAPSHOT

from segment_balancer.tools.pipeline import run_plan

D1, D2, D3 = "hist-default-01:8083", "hist-default-02:8083", "hist-default-03:8083"
H1, H2 = "hist-hot-01:8083", "hist-hot-02:8083"


@pytest.fixture(scope="module")
def druid_planned(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("druid_plan")
    summary = run_plan(spark, SNAPSHOT, base / "plan", work=base / "work", coordinator="druid")
    return base, summary, pd.read_parquet(base / "plan" / "operations.parquet")


def test_the_druid_plan_of_the_sample_is_the_run_worked_by_hand(druid_planned):
    _, summary, ops = druid_planned
    got = [
        (
            r.stage,
            r.action,
            r.reason,
            r.datasource,
            r.segment_id[len(r.datasource) + 1 :][:10],  # the interval's first day
            r.server,
            None if pd.isna(r.depends_on) else int(r.depends_on),
        )
        for r in ops.itertuples()
    ]
    assert got == [
        (2, "LOAD", "REPLICATE", "wikipedia_editstream", "2012-12-29", D3, None),
        (2, "LOAD", "LOAD", "twitterstream", "2013-01-03", D2, None),
        (2, "LOAD", "LOAD", "twitterstream", "2013-01-03", H2, None),
        (2, "DROP", "DROP", "twitterstream", "2013-01-01", D1, None),
        (6, "LOAD", "MOVE_TO", "twitterstream", "2013-01-02", H2, None),
        (6, "DROP", "MOVE_FROM", "twitterstream", "2013-01-02", H1, 4),
    ]
    assert ops.loc[ops["reason"] == "MOVE_TO", "queue_type"].tolist() == ["balancing"]
    assert summary["coordinator"] == "druid" and summary["druid_run"]["release"] == "38.0.0"
    assert summary["druid_run"]["max_segments_to_move"] == 12
    decisions = {(e["metric"], e.get("tier")): e["value"] for e in summary["druid_metrics"] if e["at"] == "plan"}
    assert decisions[("segment/assigned/count", "_default_tier")] == 2
    assert decisions[("segment/assigned/count", "hot")] == 1
    assert decisions[("segment/dropped/count", "_default_tier")] == 1
    assert decisions[("segment/moved/count", "hot")] == 1


def test_druid_35_runs_the_sample_alike(spark, tmp_path, druid_planned):
    """``druidVersion`` 35.0.0: the same operations as the run worked by hand, the release recorded."""
    _, _, ops38 = druid_planned
    summary = run_plan(spark, SNAPSHOT, tmp_path / "plan", coordinator="druid", overrides={"druidVersion": "35.0.0"})
    ops35 = pd.read_parquet(tmp_path / "plan" / "operations.parquet")
    assert summary["druid_run"]["release"] == "35.0.0"
    assert ops35.drop(columns=["op_id"]).equals(ops38.drop(columns=["op_id"]))


def test_the_druid_run_reports_druid_skips_and_the_plan_passes_the_gate(druid_planned):
    base, summary, _ = druid_planned
    skipped = {
        (r["server"], r["description"]): r["value"]
        for r in summary["druid_run"]["metrics"]
        if r["metric"] == "segment/moveSkipped/count" and r.get("dataSource") == "twitterstream"
    }
    assert skipped == {(D2, "Optimally placed"): 3, (H2, "No eligible server"): 1, (H1, "No eligible server"): 1}
    assert json.loads((base / "plan" / "validation.json").read_text())["success"]
    assert summary["status_after"]["unreplicated"] == 0


def test_the_issue7458_summary_does_not_name_a_coordinator(druid_sample_planned):
    """A plan of the algorithm of #7458 keeps its summary as it was: no ``coordinator`` key."""
    _, summary, _ = druid_sample_planned
    assert "coordinator" not in summary and "druid_run" not in summary


def test_a_decommissioned_historical_has_its_queued_load_cancelled(spark, tmp_path):
    """What if default-03 were decommissioned too: Druid's first duty cancels its queued load of K
    (a REPLICATE: K is served on default-02); the rules then find K under-replicated with no
    historical able to take it (the other two of the tier are default-01, decommissioning, and
    default-02, which serves K), and W's replica goes to default-02, the only one left with room.
    The plan, CANCEL included, passes the gate; K is no longer projected on default-03."""
    from segment_balancer.tools.whatif import WhatIf

    summary = run_plan(
        spark,
        SNAPSHOT,
        tmp_path / "plan",
        work=tmp_path / "work",
        edits=WhatIf.parse(decommission=[D3]),
        coordinator="druid",
    )
    ops = pd.read_parquet(tmp_path / "plan" / "operations.parquet")
    first = ops.iloc[0]
    assert (first.stage, first.action, first.queue_type, first.reason, first.server) == (
        1,
        "CANCEL",
        "loading",
        "REPLICATE",
        D3,
    )
    assert first.datasource == "wikipedia"
    w = ops[(ops["datasource"] == "wikipedia_editstream") & (ops["action"] == "LOAD")]
    assert w[["reason", "server"]].values.tolist() == [["REPLICATE", D2]]
    skipped = [
        r
        for r in summary["druid_run"]["metrics"]
        if r["metric"] == "segment/assignSkipped/count" and r.get("dataSource") == "wikipedia"
    ]
    assert [(r["description"], r["value"]) for r in skipped] == [("No eligible server", 1)]
    assignment = pd.read_parquet(tmp_path / "plan" / "assignment.parquet")
    on_d3 = assignment[(assignment["server"] == D3) & assignment["segment_id"].str.startswith("wikipedia_2013")]
    assert on_d3.empty
    assert json.loads((tmp_path / "plan" / "validation.json").read_text())["success"]


def test_the_dags_branches_plan_by_the_config_key(spark, tmp_path, druid_planned, druid_sample_planned):
    """The DAG's branches: after stage 0, ``start_branches`` names the run's coordinator (the config
    key ``coordinator``) and, when the run asks for a comparison (the DAG param
    ``compare_with_druid``), the other one, whose work directory it forks; each branch's
    applications and ``assemble`` (``run_app(..., branch=…)``) plan in their own work directory.
    The run's plan is the one ``run_plan`` makes, the compared one the one it makes alone, and
    that is what ``validate_plan`` sets beside the run's."""
    from segment_balancer.plan.compare import place_compared
    from segment_balancer.plan.validation import validate_run
    from segment_balancer.planner.coordinators import ASSEMBLE_APP, COORDINATORS, DUTY_APPS, STAGE0_APPS
    from segment_balancer.spark.apps import planned_branches, run_app, start_branches
    from segment_balancer.spark.workdir import request_compare

    _, _, expected = druid_planned
    for coordinator in ("druid", "issue7458"):
        work, xcom = tmp_path / coordinator, None
        if coordinator == "druid":
            work.mkdir()
            request_compare(work)
        for name in STAGE0_APPS:
            xcom = run_app(spark, name, SNAPSHOT, work, xcom, {"coordinator": coordinator})
        branches = start_branches(work)
        assert branches == (["druid", "issue7458"] if coordinator == "druid" else ["issue7458"])
        for branch in branches:
            groups = xcom
            for name in (*COORDINATORS[branch].applications, ASSEMBLE_APP):
                groups = run_app(spark, name, SNAPSHOT, work, groups, {"coordinator": coordinator}, branch)
        plans = planned_branches(work)
        summary = json.loads((work / "plan" / "summary.json").read_text())
        ops = pd.read_parquet(work / "plan" / "operations.parquet")
        compared = place_compared(work / "plan", work)
        assert validate_run(work / "plan", work)["success"]
        if coordinator == "druid":
            assert plans == {
                "druid": str(work / "plan"),
                "issue7458": str(work / "compared_work" / "issue7458" / "plan"),
            }
            assert summary["coordinator"] == "druid"
            assert set(summary["timings_seconds"]) == {"used_segments", "prepare", *DUTY_APPS}
            pd.testing.assert_frame_equal(ops, expected)
            assert compared == work / "plan" / "compared" / "issue7458"
            pd.testing.assert_frame_equal(pd.read_parquet(compared / "operations.parquet"), druid_sample_planned[2])
            plans = json.loads((work / "plan" / "comparison.json").read_text())["plans"]
            assert [p["coordinator"] for p in plans] == ["druid", "issue7458"]
        else:
            assert plans == {"issue7458": str(work / "plan")}
            assert compared is None and not (work / "plan" / "comparison.json").exists()
            assert "coordinator" not in summary and set(summary["timings_seconds"]).isdisjoint(DUTY_APPS)
            assert not any((work / "groups" / f"{app}.json").exists() for app in DUTY_APPS)
            assert set(ops["reason"]).isdisjoint({"REPLICATE", "MOVE_TO", "MOVE_FROM"})
            pd.testing.assert_frame_equal(ops, druid_sample_planned[2])


def test_compare_plans_the_other_coordinator_beside_the_plan(spark, tmp_path, druid_planned, druid_sample_planned):
    """``run_plan(..., compare=True)``: the plan is the one made alone, the other coordinator's plan
    (the same as when it plans alone) is published beside it under ``compared/druid/`` with its
    report, and ``comparison.json`` measures both."""
    run_plan(spark, SNAPSHOT, tmp_path / "plan", work=tmp_path / "work", compare=True)
    plan = tmp_path / "plan"
    pd.testing.assert_frame_equal(pd.read_parquet(plan / "operations.parquet"), druid_sample_planned[2])
    pd.testing.assert_frame_equal(pd.read_parquet(plan / "compared" / "druid" / "operations.parquet"), druid_planned[2])
    assert (plan / "compared" / "druid" / "report.html").is_file()
    assert json.loads((plan / "compared" / "druid" / "validation.json").read_text())["success"]
    comparison = json.loads((plan / "comparison.json").read_text())
    mine, druid = comparison["plans"]
    assert (mine["coordinator"], druid["coordinator"]) == ("issue7458", "druid")
    hot = druid["tiers"]["hot"]
    # the druid plan of hot: T3 loaded on hot-02 and T2 moved there from hot-01 (worked by hand above)
    assert (hot["loads"], hot["moves"], hot["drops"], hot["cancels"]) == (2, 1, 1, 0)
    assert hot["bytes_moved"] == 435_325_540 and hot["fullest"] == H2
    assert druid["unavailable"] == mine["unavailable"] == 0
    # what stays on the decommissioning default-01: Druid's run drops T1 there and cannot move W
    # (446,027,801 bytes: no active historical takes it); #7458 empties it
    default = {p["coordinator"]: p["tiers"]["_default_tier"] for p in (mine, druid)}
    assert (default["druid"]["left_on_decommissioning"], default["druid"]["bytes_left_on_decommissioning"]) == (
        1,
        446_027_801,
    )
    assert default["issue7458"]["left_on_decommissioning"] == 0
    # each tier's total cost and Elasticsearch balance as their definitions give them, from the
    # assignment joined with the segments by name (the measures read both as codes)
    from segment_balancer.plan.compare import es_weighted_balance
    from segment_balancer.planner.livecost import total_cost

    columns = ["segment_id", "datasource", "start_ms", "end_ms"]
    segments = pd.read_parquet(tmp_path / "work" / "prepared" / "segments.parquet", columns=columns)
    held = pd.read_parquet(plan / "assignment.parquet").merge(segments.drop_duplicates("segment_id"), on="segment_id")
    summary = json.loads((plan / "summary.json").read_text())
    live = {s["server"] for s in summary["servers"] if not s["decommissioning"]}
    assert len(set(held["tier"])) == 2
    for tier, t in held.groupby("tier"):
        cost = total_cost(t["datasource"].to_numpy(object), t["start_ms"], t["end_ms"], t["server"].to_numpy(object))
        assert mine["tiers"][tier]["total_cost"] == cost > 0
        on_live = t[t["server"].isin(live)]
        counts = on_live.groupby(["server", "datasource"]).size().unstack(fill_value=0)
        tier_live = sorted(s["server"] for s in summary["servers"] if s["tier"] == tier and s["server"] in live)
        assert mine["tiers"][tier]["es_weighted_balance"] == es_weighted_balance(
            counts.reindex(tier_live, fill_value=0)
        )
    html = (plan / "report.html").read_text()
    assert 'id="compare"' in html and 'href="compared/druid/report.html"' in html


def test_es_weighted_balance_by_hand():
    """Two historicals, two datasources: [[2, 0], [0, 2]]: equal totals, so each datasource's
    weights are 0.55 x (2 - 1) and 0.55 x (0 - 1): a spread of 1.1; [[1, 1], [1, 1]] is balanced."""
    from segment_balancer.plan.compare import es_weighted_balance

    assert es_weighted_balance(pd.DataFrame([[2, 0], [0, 2]])) == pytest.approx(1.1)
    assert es_weighted_balance(pd.DataFrame([[1, 1], [1, 1]])) == 0.0
    # [[3, 0], [0, 1]]: totals 3 and 1 (0.45 x ±1); d0: 0.55 x (3 - 1.5, 0 - 1.5): 0.45 + 0.825 + 0.45 + 0.825
    assert es_weighted_balance(pd.DataFrame([[3, 0], [0, 1]])) == pytest.approx(2.55)


def test_explain_of_a_druid_plan_lists_the_duties_operations(druid_planned):
    """``explain --plan`` of T2 in the druid plan: held by hot-01 before, by hot-02 after, moved by
    ``BalanceSegments`` (duty 6): the MOVE_TO load, then the drop at the source after it."""
    from segment_balancer.plan.explain import explain_plan

    base, _, ops = druid_planned
    t2 = ops.loc[(ops["reason"] == "MOVE_TO"), "segment_id"].iloc[0]
    report = explain_plan(base / "plan", t2)
    assert (report["tiers"]["hot"]["servers_before"], report["tiers"]["hot"]["servers_after"]) == ([H1], [H2])
    duty = report["stages"][-1]
    assert (duty["app"], duty["stage"]) == ("BalanceSegments", 6)
    assert [(o["action"], o["server"], o["reason"]) for o in duty["operations"]] == [
        ("LOAD", H2, "MOVE_TO"),
        ("DROP", H1, "MOVE_FROM"),
    ]


def test_explain_counts_a_cancelled_load_as_held_before(tmp_path, spark):
    """A CANCEL of a queued load: the server held the segment (loading) before, not after."""
    from segment_balancer.plan.explain import explain_plan
    from segment_balancer.tools.whatif import WhatIf

    run_plan(
        spark,
        SNAPSHOT,
        tmp_path / "plan",
        work=tmp_path / "work",
        edits=WhatIf.parse(decommission=[D3]),
        coordinator="druid",
    )
    ops = pd.read_parquet(tmp_path / "plan" / "operations.parquet")
    k = ops.loc[ops["action"] == "CANCEL", "segment_id"].iloc[0]
    report = explain_plan(tmp_path / "plan", k)
    tier = report["tiers"]["_default_tier"]
    assert tier["servers_before"] == [D2, D3] and tier["servers_after"] == [D2]
    assert report["stages"][-1]["app"] == "PrepareBalancerAndLoadQueues"


def _counting_builds(
    monkeypatch, partial: list | None = None, told: bool | None = None
) -> list[tuple[str, frozenset | None]]:
    """Each ``build_run`` of the ``druid`` applications from here on: (application, tiers); the
    applications whose run holds some segments only (``state.only``) appended to ``partial``.
    ``told``: the ``whole`` each build is told instead of what its task says (False: as a Spark task)."""
    from segment_balancer.spark import druid_plan

    builds, build = [], druid_plan.build_run

    def counting(spec, tiers=None, replicas=None, whole=True):
        builds.append((spec["app"], None if tiers is None else frozenset(tiers)))
        run = build(spec, tiers, replicas, whole if told is None else told)
        if partial is not None and run.state.only is not None:
            partial.append(spec["app"])
        return run

    monkeypatch.setattr(druid_plan, "build_run", counting)
    return builds


@pytest.mark.parametrize("held", [True, False], ids=["held-on-the-driver", "built-per-application"])
def test_the_duty_by_duty_applications_queue_what_one_run_queues(spark, tmp_path, monkeypatch, held):
    """The bundled generated cluster (20k segments, three tiers, lost, decommissioning and added
    historicals, full load queues): the four ``druid_*`` applications queue exactly what one
    ``run_coordinator`` queues on the whole cluster in one piece, in the same order; the run's
    metrics and what every historical holds after it are the same too. Both ways an application
    starts: going on with the run the one before left on the driver (built once, by
    ``druid_rules``), or building the run anew from the prepared tables and replaying what the
    duties before it queued (``druid_balance`` a tier per task, each holding its tier only), as
    a Spark task does; ``druid_rules`` holding only the segments that act (the settled ones apart),
    each tier's ``druid_balance`` only those queued or acted on (the rest as rows),
    ``druid_unload`` and ``druid_clone`` (no clone targets) only the segments they can act on or
    read."""
    from pathlib import Path

    from segment_balancer.planner.coordinators import DRUID
    from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
    from segment_balancer.planner.druid_coordinator.run import run_coordinator
    from segment_balancer.spark import druid_plan
    from segment_balancer.spark.apps import run_app
    from segment_balancer.spark.druid_plan import DRUID_DIR, RUN_FILE, cluster_state, given_config, operation_rows

    partial: list[str] = []
    builds = _counting_builds(monkeypatch, partial, told=None if held else False)
    if not held:
        monkeypatch.setattr(druid_plan, "_take_held", lambda spec: None)
    snapshot = Path(SNAPSHOT).parent / "generated"
    work, xcom = tmp_path / "work", None
    for name in DRUID.run_apps[:-1]:
        xcom = run_app(spark, name, snapshot, work, xcom, {"coordinator": "druid"})
    tiers = sorted(pd.read_parquet(work / "prepared" / "servers.parquet")["tier"].unique())
    if held:
        assert builds == [("druid_rules", None)]
    else:
        assert [a for a, _ in builds] == ["druid_rules", "druid_unload", *["druid_balance"] * 3, "druid_clone"]
        assert sorted(t for a, t in builds if a == "druid_balance") == [frozenset({t}) for t in tiers]
        assert partial == ["druid_rules", "druid_unload", *["druid_balance"] * 3, "druid_clone"]
    assert druid_plan._HELD is None  # the last application lets the run go
    manifest = json.loads((work / "ops" / "manifest.json").read_text())
    logged = pd.concat([pd.read_parquet(work / "ops" / f) for f in manifest["files"]], ignore_index=True)

    meta = json.loads((work / "prepared" / "meta.json").read_text())
    config = druid_config(given_config(snapshot, {"coordinator": "druid"}))
    result = run_coordinator(cluster_state(work, snapshot), config, now_ms=int(meta["now_ms"]))
    decommissioning = {h.name for h in result.holders if h.decommissioning}
    expected = pd.DataFrame(operation_rows(result.operations, decommissioning))

    columns = ["op_id", "stage", "action", "queue_type", "reason", "server", "segment_id", "depends_on"]
    got = logged[columns].astype({"depends_on": "float64"}).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected[columns].astype({"depends_on": "float64"}), check_dtype=False)
    assert {2, 6} <= set(got["stage"]) and (got["reason"] == "MOVE_TO").sum() > 0  # rules and balancing did work

    record = json.loads((work / DRUID_DIR / RUN_FILE).read_text())
    assert record["metrics"] == [{"metric": r.metric, **r.dims, "value": r.value} for r in result.stats.rows()]
    assert record["max_segments_to_move"] == result.max_segments_to_move
    assert record["marked_unused"] == sorted(result.deleted)
    held = pd.read_parquet(work / DRUID_DIR / "assignment.parquet")
    expected_held = sorted((s.id, h.name, h.tier) for h in result.holders for s in h.projected_segments())
    assert list(held.itertuples(index=False, name=None)) == expected_held


def test_a_large_runs_tiers_balance_one_job_after_another_as_in_one(spark, tmp_path, monkeypatch):
    """Above ``BALANCE_TIERS_AT_ONCE_AT_MOST_SEGMENTS`` each tier of ``druid_balance`` is a Spark
    job of its own (one tier's task holds memory at a time): the bundled generated cluster's three
    tiers, so balanced, queue what one job of three tasks queues, with the same record."""
    from pathlib import Path

    from segment_balancer.planner.coordinators import DRUID
    from segment_balancer.spark import druid_plan, session
    from segment_balancer.spark.apps import run_app
    from segment_balancer.spark.druid_plan import DRUID_DIR

    snapshot = Path(SNAPSHOT).parent / "generated"
    monkeypatch.setattr(druid_plan, "_take_held", lambda spec: None)
    jobs: list[list[str]] = []
    run_tasks = session.run_tasks

    def counting(spark, items, fn):
        if items and isinstance(items[0], dict) and items[0].get("app") == "druid_balance":
            jobs.append([item["tier"] for item in items])
        return run_tasks(spark, items, fn)

    monkeypatch.setattr(druid_plan, "run_tasks", counting)

    def balanced(work: Path) -> tuple:
        xcom = None
        for name in DRUID.run_apps[:-1]:
            xcom = run_app(spark, name, snapshot, work, xcom, {"coordinator": "druid"})
        ops = pd.read_parquet(work / "ops" / "stage_06_druid_balance.parquet")
        return ops, json.loads((work / DRUID_DIR / "druid_balance.json").read_text())

    together = balanced(tmp_path / "together")
    monkeypatch.setattr(druid_plan, "BALANCE_TIERS_AT_ONCE_AT_MOST_SEGMENTS", 0)
    apart = balanced(tmp_path / "apart")
    assert len(jobs) == 4 and len(jobs[0]) == 3 and [tiers for tiers in jobs[1:]] == [[t] for t in jobs[0]]
    pd.testing.assert_frame_equal(apart[0], together[0])
    assert apart[1] == together[1]
    assert (apart[0]["reason"] == "MOVE_TO").sum() > 0


def test_a_held_run_goes_on_only_from_the_op_log_it_left(spark, tmp_path, monkeypatch):
    """On the driver an application goes on with the run the application before it left only
    when the op log is the one that application committed: one after the op log changed, or a
    retried application, builds the run again (a retried ``druid_unload`` of the segments it acts
    on only, which it then does not hold)."""
    from segment_balancer.planner.coordinators import DUTY_STAGES
    from segment_balancer.spark import druid_plan
    from segment_balancer.spark.apps import run_app
    from segment_balancer.spark.workdir import Run

    builds = _counting_builds(monkeypatch)
    work, xcom = tmp_path / "work", None
    for name in ("used_segments", "prepare", "druid_rules", "druid_unload"):
        xcom = run_app(spark, name, SNAPSHOT, work, xcom, {"coordinator": "druid"})
    assert builds == [("druid_rules", None)]
    assert druid_plan._HELD is not None and druid_plan._HELD.done == "druid_unload"
    first = pd.read_parquet(work / "druid" / "druid_unload" / "druid_unload.parquet")
    Run(spark, work).reset_from(DUTY_STAGES["unload"])  # the op log the held run left is gone
    run_app(spark, "druid_balance", SNAPSHOT, work, xcom, {"coordinator": "druid"})
    assert [a for a, _ in builds[1:]] == ["druid_balance", "druid_balance"]  # a tier each: built anew
    assert all(t is not None for _, t in builds[1:])
    run_app(spark, "druid_unload", SNAPSHOT, work, xcom, {"coordinator": "druid"})  # retried
    assert builds[-1] == ("druid_unload", None)
    pd.testing.assert_frame_equal(pd.read_parquet(work / "druid" / "druid_unload" / "druid_unload.parquet"), first)
    assert druid_plan._HELD is None


@pytest.mark.parametrize(
    "release, overrides, expected",
    [
        ("35.0.1", None, ("35.0.0", "snapshot")),
        ("38.0.0", None, ("38.0.0", "snapshot")),
        ("34.0.0", None, ("38.0.0", "default")),  # sys.servers has no version column before 35
        ("38.0.0", {"druidVersion": "36.0.1"}, ("35.0.0", "config")),
    ],
)
def test_a_captured_snapshot_plans_with_its_clusters_release(spark, tmp_path, release, overrides, expected):
    """A snapshot captured from a Druid 35 and from a Druid 38 cluster (the fake Druid answering
    ``sys.servers.version`` as each release does) is planned by that release's Coordinator, unless
    ``druidVersion`` says otherwise (36 places segments as 35); a cluster older than 35 tells no
    version, and the newest release plans it."""
    from datetime import UTC, datetime

    import fake_druid as fd

    from segment_balancer.tools.capture import DruidEndpoint, capture

    with fd.fake_druid(release=release) as fake:
        endpoint = DruidEndpoint(fake.url)
        snapshot = capture(endpoint, endpoint, tmp_path / "snaps", "c", now=datetime(2026, 11, 23, tzinfo=UTC))
    summary = run_plan(spark, snapshot, tmp_path / "plan", coordinator="druid", overrides=overrides)
    assert (summary["druid_run"]["release"], summary["druid_run"]["release_from"]) == expected


def test_balance_tier_order_follows_the_servers_not_the_string_hashing():
    """``beta`` and ``gamma`` share a bucket of a 16-slot Java map (``java_string_hash``: buckets 7,
    14 and 14 for alpha, beta, gamma): Java iterates them in the order they were added, which is the
    order of the historicals in ``servers.parquet``, whatever order a Python set would give."""
    from segment_balancer.spark.druid_plan import balance_tier_order

    assert balance_tier_order(["alpha", "beta", "beta", "gamma"]) == ["alpha", "beta", "gamma"]
    assert balance_tier_order(["gamma", "alpha", "beta", "gamma"]) == ["alpha", "gamma", "beta"]


def test_a_druid_plan_is_the_same_under_any_string_hashing(tmp_path):
    """The same snapshot planned by the ``druid`` coordinator in two processes whose string hashing
    orders the set {alpha, beta, gamma} differently (``PYTHONHASHSEED`` 0: beta before gamma; 3:
    gamma before beta) gives the same operations, in the same order."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "e_callbacks_limits"
    plans = []
    for seed in ("0", "3"):
        out = tmp_path / f"seed-{seed}"
        done = subprocess.run(
            [sys.executable, "-m", "segment_balancer", "plan", "--snapshot", str(scenario), "--out", str(out)]
            + ["--coordinator", "druid"],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        plans.append(pd.read_parquet(out / "operations.parquet"))
    pd.testing.assert_frame_equal(plans[0], plans[1])


def test_a_state_of_some_segments_only_refuses_to_clone():
    """``CloneHistoricals`` copies a whole server: a run holding some segments only (the state's
    ``only``, how ``druid_clone`` builds when no clone target is configured) cannot clone."""
    from segment_balancer.druid.rules import Rule
    from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
    from segment_balancer.planner.druid_coordinator.model import DruidServer
    from segment_balancer.planner.druid_coordinator.run import ClusterState, CoordinatorRun

    servers = [DruidServer(name=f"h{i}:8083", tier="t", max_size=10_000) for i in (1, 2)]
    rules = {"_default": [Rule("loadForever", "load", {"t": 1})]}
    for only, clones in ((None, {"h2:8083": "h1:8083"}), (frozenset(), {}), (frozenset(), {"h2:8083": "h1:8083"})):
        state = ClusterState(servers=servers, used={}, rules=rules, only=only)
        run = CoordinatorRun(state, druid_config({"cloneServers": clones}), now_ms=0)
        run.prepare()
        if only is not None and clones:
            with pytest.raises(RuntimeError, match="cannot clone"):
                run.clone()
        else:
            run.clone()
