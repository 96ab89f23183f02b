"""Retention of run directories (with their XComs) and task logs, and its settings."""

from __future__ import annotations

import json
import os
import time

import pytest

from segment_balancer_airflow.retention import (
    RUN_MARKER,
    Retention,
    remove_old_logs,
    remove_old_runs,
    remove_run,
    write_run_marker,
)

NOW = time.time()
DAY = 86_400
TASKS = ["used_segments", "assemble"]


def run_dir(runs, name, days_ago, run_id=None, size=100):
    path = runs / name / "work"
    path.mkdir(parents=True)
    (path / "table.parquet").write_bytes(b"x" * size)
    if run_id is not None:
        write_run_marker(runs / name, "segment_balancing", run_id)
        os.utime(runs / name / RUN_MARKER, (NOW - days_ago * DAY,) * 2)
    os.utime(runs / name, (NOW - days_ago * DAY,) * 2)
    return runs / name


def test_settings_defaults_and_from_the_airflow_config(monkeypatch):
    assert Retention.from_airflow_config() == Retention(7, 30, 200, 30)
    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__RETENTION_PLAN_DAYS", "2.5")
    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__RETENTION_PLANS_PER_CLUSTER", "0")
    assert Retention.from_airflow_config() == Retention(7, 2.5, 0, 30)
    for key, bad in (
        ("PLANS_PER_CLUSTER", "1.5"),
        ("LOG_DAYS", "-1"),
        ("WORK_DAYS_AFTER_FAILURE", "a week"),
        ("PLAN_DAYS", "nan"),
    ):
        monkeypatch.setenv(f"AIRFLOW__SEGMENT_BALANCER__RETENTION_{key}", bad)
        with pytest.raises(
            ValueError,
            match=rf"\[segment_balancer\] retention_{key.lower()} = '{bad}': expected a "
            r"number >= 0",
        ):
            Retention.from_airflow_config()
        monkeypatch.delenv(f"AIRFLOW__SEGMENT_BALANCER__RETENTION_{key}")


def test_remove_run_removes_its_directory_and_xcoms_and_nothing_outside(tmp_path):
    runs = tmp_path / "runs"
    path = run_dir(runs, "r1", 0, "manual__1", size=1234)
    deleted = []
    removed = remove_run(path, runs, "segment_balancing", "manual__1", TASKS, lambda *a: deleted.append(a))
    assert (removed.path, removed.reason, removed.bytes) == (
        str(path),
        "published",
        1234 + len(json.dumps({"dag_id": "segment_balancing", "run_id": "manual__1"}, indent=2)),
    )
    assert deleted == [("segment_balancing", "manual__1", TASKS)] and list(runs.iterdir()) == []
    for outside in (runs, tmp_path, runs / ".hidden", runs / "a" / "b"):
        with pytest.raises(ValueError, match="not a run directory right under"):
            remove_run(outside, runs, "segment_balancing", "x", TASKS, lambda *a: None)
    assert runs.is_dir()


def test_old_runs_that_did_not_publish_go_with_their_xcoms(tmp_path):
    runs = tmp_path / "runs"
    run_dir(runs, "failed", 10, "failed_run")
    run_dir(runs, "running", 10, "running_run")
    run_dir(runs, "young", 2, "young_run")
    run_dir(runs, "forgotten", 10, "gone_run")  # Airflow no longer knows the run
    run_dir(runs, "unmarked", 10)  # no run.json: by the directory's age, no XCom to find
    leftover = runs / ".x.old-0123456789ab"
    leftover.mkdir()
    os.utime(leftover, (NOW - 2 * DAY,) * 2)
    states = {"failed_run": "failed", "running_run": "running", "young_run": "failed"}
    deleted = []
    removed = remove_old_runs(runs, 7, TASKS, lambda d, r: states.get(r), NOW, lambda *a: deleted.append(a[1]))
    assert sorted((os.path.basename(r.path), r.reason) for r in removed) == [
        (".x.old-0123456789ab", "leftover"),
        ("failed", "age"),
        ("forgotten", "age"),
        ("unmarked", "age"),
    ]
    assert sorted(deleted) == ["failed_run", "gone_run"]
    assert sorted(p.name for p in runs.iterdir()) == ["running", "young"]
    assert remove_old_runs(runs, 0, TASKS, lambda d, r: None, NOW + 100 * DAY, lambda *a: None) == []  # 0: off


def test_old_task_logs_go(tmp_path):
    logs = tmp_path / "logs"
    for run, days in (("old", 40), ("new", 1)):
        attempt = logs / "dag_id=segment_balancing" / f"run_id={run}" / "task_id=prepare" / "attempt=1.log"
        attempt.parent.mkdir(parents=True)
        attempt.write_text("x" * 50)
        os.utime(attempt, (NOW - days * DAY,) * 2)
    removed = remove_old_logs(logs, 30, NOW)
    assert [(os.path.basename(r.path), r.bytes) for r in removed] == [("run_id=old", 50)]
    assert [p.name for p in (logs / "dag_id=segment_balancing").iterdir()] == ["run_id=new"]
    assert remove_old_logs(logs, 0, NOW + 100 * DAY) == []


def test_the_operations_page_names_every_setting_with_its_default():
    from dataclasses import fields
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md").read_text()
    for f in fields(Retention):
        assert f"| `retention_{f.name}` | {f.default} |" in page, f.name
