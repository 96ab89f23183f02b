"""The segment_balancer_retention DAG in a real run (``dag.test()``): what failed runs left, old
plans and old task logs go; published plans it must keep and young runs stay."""

from __future__ import annotations

import os
import time
from pathlib import Path

from plan_summaries import summary, write_plan_dir

REPO = Path(__file__).resolve().parents[2]
DAY = 86_400


def aged(path: Path, days: float) -> Path:
    then = time.time() - days * DAY
    os.utime(path, (then, then))
    return path


def test_the_retention_dag_removes_what_is_old_and_keeps_what_is_needed(airflow_home, tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from segment_balancer_airflow.retention import RUN_MARKER, write_run_marker

    home = tmp_path / "home"
    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(home))
    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__RETENTION_PLANS_PER_CLUSTER", "2")
    # runs: one that failed 10 days ago (Airflow no longer knows it), one of today
    for name, days in (("failed", 10), ("today", 0)):
        (home / "runs" / name / "work").mkdir(parents=True)
        write_run_marker(home / "runs" / name, "segment_balancing", f"manual__{name}")
        aged(home / "runs" / name / RUN_MARKER, days)
    # plans of prod, newest first: p4 (LATEST), p3, p2 (40 days), p1 (40 days, beyond the 2 newest)
    plans = home / "plans"
    for name, day, days in (("p1", 1, 40), ("p2", 2, 40), ("p3", 3, 1), ("p4", 4, 0)):
        write_plan_dir(plans / name, summary("prod", f"2024-01-0{day}T00:00:00.000Z"))
        aged(plans / name / "summary.json", days)
    (plans / "LATEST").write_text("p4\n")
    # task logs: a run of 40 days ago and one of today
    logs = airflow_home / "logs" / "dag_id=segment_balancing"
    for run, days in (("old", 40), ("new", 0)):
        attempt = logs / f"run_id={run}" / "attempt=1.log"
        attempt.parent.mkdir(parents=True)
        attempt.write_text("log")
        aged(attempt, days)

    dag = DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancer_retention"]
    run = dag.test()

    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert sorted(p.name for p in (home / "runs").iterdir()) == ["today"]
    assert sorted(p.name for p in plans.iterdir()) == ["LATEST", "p3", "p4"]
    assert sorted(p.name for p in logs.iterdir()) == ["run_id=new"]
    removed = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in run.get_task_instances()}
    assert [(Path(r["path"]).name, r["reason"]) for r in removed["remove_old_plans"]] == [("p2", "age"), ("p1", "age")]
    assert [Path(r["path"]).name for r in removed["remove_old_runs"]] == ["failed"]
