"""What the ``segment_balancing`` DAG tests (``test_dag_end_to_end.py``, ``test_dag_on_connect.py``)
check of a finished run: its tasks, the plan it published and its plans Asset event."""

from __future__ import annotations

import json
import os
from pathlib import Path

from segment_balancer.planner.coordinators import COORDINATORS
from segment_balancer_airflow.branches import STAGE_TASK_IDS, branch_apps, branch_task_id


def published_by(run_id: str) -> tuple[Path, dict]:
    """The plan directory the DAG run ``run_id`` published and its plans Asset event's extra:
    ``publish_plan`` emitted exactly one event of ``segment_balancer_plans``, its extra naming the
    plan under ``SEGMENT_BALANCER_HOME/plans``; ``LATEST`` names that plan unless an earlier test
    published a plan of a newer snapshot."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    from segment_balancer.plan.publish import plan_order

    with create_session() as session:
        events = (
            session.query(AssetEvent, AssetModel)
            .filter(AssetEvent.asset_id == AssetModel.id)
            .filter(AssetEvent.source_run_id == run_id)
            .all()
        )
        assert [(a.name, e.source_task_id) for e, a in events] == [("segment_balancer_plans", "publish_plan")]
        extra = dict(events[0][0].extra)
    plans = Path(os.environ["SEGMENT_BALANCER_HOME"]) / "plans"
    published = Path(extra["plan_dir"])
    assert published.parent == plans and published.is_dir()
    latest = plans / (plans / "LATEST").read_text().strip()
    assert latest == published or plan_order(latest) > plan_order(published)
    return published, extra


def check_run(run_id: str, run_state: str, states: dict[str, str], conf: dict) -> Path:
    """Check the finished run ``run_id`` of ``segment_balancing`` (its state, ``states`` task id ->
    state, started with params ``conf``): every task succeeded (``simulate`` skipped unless
    ``simulate_runs``, ``advise`` unless ``advise_runs``), ``remove_work`` removed the run's
    directory and stage XComs, the plan and
    its report are published, validated and announced by the plans Asset, and, with
    ``compare_with_druid`` (on by default), the other coordinator's validated plan beside it.
    Without ``compare_with_druid`` the other coordinator's branch is skipped.
    Returns the published plan directory."""
    assert run_state == "success", states
    assert set(states) == {
        "resolve_snapshot",
        *STAGE_TASK_IDS,
        "choose_coordinators",
        "compare",
        "validate_plan",
        "publish_plan",
        "simulate",
        "advise",
        "remove_work",
        "release_spark_session",
    }
    # simulate and advise run only with their runs params, the other coordinator's branch only with
    # compare_with_druid; everything else succeeds
    published, extra = published_by(run_id)
    own = COORDINATORS[json.loads((published / "summary.json").read_text()).get("coordinator", "issue7458")]
    skipped = {t for t, param in (("simulate", "simulate_runs"), ("advise", "advise_runs")) if not conf.get(param)}
    if not conf.get("compare_with_druid", True):
        other = COORDINATORS[own.compared_with]
        skipped |= {branch_task_id(other.name, app) for app in branch_apps(other)}
    assert {t for t, state in states.items() if state != "success"} == skipped, states
    assert {states[t] for t in skipped} <= {"skipped"}, states
    # published: remove_work removed the run's directory and its stage XComs, objects in storage too
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from segment_balancer_airflow.resolve import run_dir_name

    home = Path(os.environ["SEGMENT_BALANCER_HOME"])
    assert not (home / "runs" / run_dir_name(run_id)).exists() and (home / "runs").is_dir()
    with create_session() as session:
        left = {x.task_id for x in session.query(XComModel).filter(XComModel.run_id == run_id)}
    assert left.isdisjoint(STAGE_TASK_IDS) and "resolve_snapshot" in left
    stored = Path(os.environ["AIRFLOW_HOME"]) / "xcom" / "segment_balancing" / run_id
    assert not [p for p in stored.rglob("*") if p.is_file()]
    assert json.loads((published / "validation.json").read_text())["success"] is True
    assert (published / "report.html").is_file()
    # compare_with_druid (on by default): the other coordinator's validated plan of the same snapshot
    # beside the plan, with its report, and the two compared; off, none
    other = own.compared_with
    if conf.get("compare_with_druid", True):
        assert (published / "compared" / other / "report.html").is_file()
        assert json.loads((published / "compared" / other / "validation.json").read_text())["success"] is True
        plans_compared = json.loads((published / "comparison.json").read_text())["plans"]
        assert [p["coordinator"] for p in plans_compared][1] == other
    else:
        assert not (published / "compared").exists() and not (published / "comparison.json").exists()
    summary = json.loads((published / "summary.json").read_text())
    assert extra["cluster"] == summary["cluster"]
    assert (extra["operations"], extra["loads"], extra["unreplicated_after"]) == (
        summary["operations"],
        summary["loads"],
        summary["status_after"]["unreplicated"],
    )
    return published
