"""Faults at every step: a stage killed mid-write and retried, publish killed at every
point, a full disk, two runs publishing at once. The processes that are killed run
``kill_points.py`` (a JVM-free script where they fork; a stage's own local Spark where a stage is
killed); nothing here is mocked but the moment of death."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from druid_sample_plan import SNAPSHOT
from plan_summaries import summary, write_stand_in_operations

from segment_balancer.plan.publish import plan_fingerprint, publish_plan

HERE = Path(__file__).resolve().parent


def run_script(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    return subprocess.run(
        [sys.executable, str(HERE / "kill_points.py"), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


# ---- (a) a stage's application killed mid-write, the task retried: the identical plan -------------------------


@pytest.mark.parametrize("app, nth", [("prepare", 3), ("stage12_unload", 2)])
def test_a_stage_killed_mid_write_then_retried_gives_the_identical_plan(
    app, nth, spark, druid_sample_planned, tmp_path
):
    """The stage's process dies by SIGKILL between writing a table aside and renaming it into place
    (its ``nth`` rename); the retry runs the same application on the same work directory and
    input XCom, as Airflow's retry of the task does, and the run goes on: the plan is the one of
    the uninterrupted CLI run (``druid_sample_planned``), operation for operation."""
    from segment_balancer.plan.validation import require_valid
    from segment_balancer.planner.coordinators import ISSUE7458

    APP_NAMES = list(ISSUE7458.run_apps)
    from segment_balancer.spark.apps import run_app

    work = tmp_path / "work"
    work.mkdir()
    done = run_script("stage", str(SNAPSHOT), str(work), app, str(nth))
    assert done.returncode == -9, done.stderr[-3000:]  # SIGKILL, mid-write
    xcom = json.loads((work / "xcom-in.json").read_text())
    for name in APP_NAMES[APP_NAMES.index(app) :]:  # the retry, then the rest of the run
        xcom = run_app(spark, name, SNAPSHOT, work, xcom)
    require_valid(work / "plan", work)
    out = publish_plan(work / "plan", tmp_path / "plans" / "retried")
    _, _, clean_ops = druid_sample_planned
    pd.testing.assert_frame_equal(pd.read_parquet(out / "operations.parquet"), clean_ops)


# ---- (b) publish killed at any point: LATEST names the old or the new plan, whole ----------------------------


def plan_dir(path: Path, cluster: str, planned_at: str) -> Path:
    """A validated stand-in plan (``plan_summaries.summary``) whose run began at ``planned_at``."""
    path.mkdir(parents=True)
    write_stand_in_operations(path / "operations.parquet", f"ops of {cluster}")
    (path / "assignment.parquet").write_bytes(b"assignment of " + cluster.encode())
    (path / "summary.json").write_text(json.dumps({**summary(cluster=cluster), "planned_at": planned_at}))
    (path / "validation.json").write_text(
        json.dumps({"success": True, "checks": [], "plan_files": plan_fingerprint(path)})
    )
    return path


def test_publish_killed_at_every_step_leaves_latest_on_a_whole_plan(tmp_path):
    old = plan_dir(tmp_path / "old", "old", "2024-01-01T00:00:00.000000Z")
    new = plan_dir(tmp_path / "new", "new", "2024-01-01T01:00:00.000000Z")
    done = run_script("publish", str(old), str(new), str(tmp_path / "records.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    records = json.loads((tmp_path / "records.json").read_text())
    assert len(records) > 10 and all(r["killed"] for r in records[:-1]) and not records[-1]["killed"]
    seen = set()
    for r in records:
        state = r["after_kill"]
        latest = state["latest"]
        assert latest in ("run-old\n", "run-new\n"), r
        named = state["dirs"][latest.strip()]
        assert named["whole"] and named["cluster"] == latest.strip().removeprefix("run-"), r
        # a plan directory is whole or absent, never half-published
        assert all(d["whole"] for d in state["dirs"].values()), r
        assert state["dirs"]["run-old"]["cluster"] == "old", r
        seen.add(latest)
        # and the next run publishes normally
        assert r["after_next"]["latest"] == "run-new\n" and r["after_next"]["dirs"]["run-new"]["whole"], r
    assert seen == {"run-old\n", "run-new\n"}  # killed both before and after LATEST moved


# ---- (c) a full disk: the run fails with that message and publishes nothing ----------------------------------


def test_a_full_disk_fails_the_run_with_its_message_and_publishes_nothing(spark, tmp_path, capsys, monkeypatch):
    """Every rename into the work directory's ``plan`` fails with ENOSPC, as on a full disk: the
    CLI exits 1 naming the error, and nothing appears under the plans directory."""
    from segment_balancer.tools.cli import main

    real = os.replace
    work = tmp_path / "work"

    def full(src, dst, *args, **kwargs):
        if str(dst).startswith(str(work / "plan")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", full)
    code = main(["plan", "--snapshot", str(SNAPSHOT), "--out", str(tmp_path / "plans" / "p"), "--work", str(work)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"error: [Errno {errno.ENOSPC}] No space left on device: '{work / 'plan'}" in err
    assert "Traceback" not in err
    assert not (tmp_path / "plans").exists()


def test_a_full_disk_while_publishing_keeps_the_published_plan(tmp_path, monkeypatch):
    from segment_balancer.plan.publish import PublishError

    root = tmp_path / "plans"
    publish_plan(plan_dir(tmp_path / "old", "old", "2024-01-01T00:00:00Z"), root / "run-old")
    real = os.replace

    def full(src, dst, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(PublishError, match="No space left on device"):
        publish_plan(plan_dir(tmp_path / "new", "new", "2024-01-01T01:00:00Z"), root / "run-new")
    monkeypatch.setattr(os, "replace", real)
    assert (root / "LATEST").read_text() == "run-old\n"
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["LATEST", "run-old"]


# ---- (d) two runs at once: each plan whole, LATEST names the later ------------------------------------------


def test_two_runs_publishing_at_once_each_whole_and_latest_names_the_later(tmp_path):
    """Runs ``a`` and ``b`` of one cluster and snapshot, ``b`` begun later, publish at the same
    moment, twenty times over: both plans are whole and ``LATEST`` names ``b`` every time."""
    a = plan_dir(tmp_path / "a", "a", "2024-01-01T00:00:00.000000Z")
    b = plan_dir(tmp_path / "b", "b", "2024-01-01T00:00:01.000000Z")
    root = tmp_path / "plans"
    for _ in range(2):
        done = run_script("race", str(a), str(b), str(root), "10")
        assert done.returncode == 0, done.stderr[-3000:]
        assert (root / "LATEST").read_text() == "run-b\n"
        for name, plan in (("run-a", a), ("run-b", b)):
            assert plan_fingerprint(root / name) == plan_fingerprint(plan) and (root / name / "report.html").is_file()


def test_latest_names_the_newest_snapshot_then_the_later_run(tmp_path):
    """A backfill of an old snapshot published after the plan of a newer one leaves ``LATEST`` on
    the newer; of two plans of one snapshot the later-begun run's wins, whichever publishes last."""
    root = tmp_path / "plans"

    def plan(name: str, snapshot_time: str, planned_at: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        write_stand_in_operations(path / "operations.parquet", name)
        (path / "assignment.parquet").write_bytes(name.encode())
        (path / "summary.json").write_text(
            json.dumps({**summary(cluster="c", snapshot_time=snapshot_time), "planned_at": planned_at})
        )
        (path / "validation.json").write_text(json.dumps({"success": True, "plan_files": plan_fingerprint(path)}))
        return path

    publish_plan(plan("today", "2024-06-02T00:00:00.000Z", "2024-06-02T00:05:00Z"), root / "today")
    publish_plan(plan("backfill", "2024-06-01T00:00:00.000Z", "2024-06-03T00:00:00Z"), root / "backfill")
    assert (root / "LATEST").read_text() == "today\n"
    publish_plan(plan("later", "2024-06-02T00:00:00.000Z", "2024-06-02T00:06:00Z"), root / "later")
    publish_plan(plan("earlier", "2024-06-02T00:00:00.000Z", "2024-06-02T00:04:00Z"), root / "earlier")
    assert (root / "LATEST").read_text() == "later\n"
    publish_plan(plan("older-release", "2024-06-03T00:00:00.000Z", ""), root / "older-release")
    assert (root / "LATEST").read_text() == "older-release\n"  # a newer snapshot wins, with or without a run start
