"""``segment_balancer.spark.apps``: the applications of a run (``run_app``) and the skipping of stages with nothing to
schedule (``skip_if_idle``), on the hand-worked ``druid_sample`` plan (tests/test_pipeline.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pyroaring import BitMap

from segment_balancer.planner import groups as G
from segment_balancer.planner.coordinators import ISSUE7458, stage_number
from segment_balancer.planner.groups import group_name
from segment_balancer.planner.stages import stage_module
from segment_balancer.spark.apps import run_app, skip_if_idle
from segment_balancer.spark.stage_run import SparkStageRun as Run

APP_NAMES = list(ISSUE7458.run_apps)

SAMPLE = Path(__file__).resolve().parents[2] / "include" / "segment_balancer" / "snapshots" / "druid_sample"


@pytest.fixture(scope="module")
def planned(druid_sample_planned):
    return druid_sample_planned


def test_druid_sample_skips_exactly_the_stages_with_nothing_to_do(planned):
    """Worked by hand from the plan of tests/test_pipeline.py: no broadcast datasource (2); stages
    1, 3 and 4 place tw03 and ed in full, so the revisits have nothing (6, 8); stage 5 moves ed and
    leaves tw01 to stage 12 (9); stage 7 moves every segment it lists (10); d1, the decommissioning
    historical, holds non-broadcast segments (13). Stages 1, 3, 4, 5, 7, 11 and 12 run."""
    _, summary, _ = planned
    timings = summary["timings_seconds"]
    skipped = {stage_number(n) for n, t in timings.items() if t.get("skipped")}
    assert skipped == {2, 6, 8, 9, 10, 13}
    assert all(timings[n]["seconds"] == 0.0 for n in timings if timings[n].get("skipped"))


@pytest.mark.parametrize("stage", range(1, 12))
def test_a_stage_whose_groups_are_empty_schedules_nothing_and_hands_on_the_same_groups(spark, planned, tmp_path, stage):
    """The claim ``skip_if_idle`` rests on, checked by running the stage for real: with every group
    it reads present but empty, it writes no step and its groups equal what the skip hands on."""
    base, _, _ = planned
    work = tmp_path / "work"
    shutil.copytree(base / "work", work, ignore=shutil.ignore_patterns("plan"))
    module = stage_module(stage)
    tiers = sorted(Run(spark, work).meta["tiers"])
    empty = {}
    for read in module.READS:
        for tier in tiers if read.endswith("[T]") else [None]:
            empty[group_name(read.removesuffix("[T]"), tier)] = BitMap()
    empty["Overreplicated[_default_tier]"] = BitMap([4])  # a group no stage 1–11 reads, carried on
    xcom = {"stage": stage - 1, "groups": G.encode_all(empty)}
    name = APP_NAMES[stage + 1]

    skipped = skip_if_idle(name, work, xcom)
    assert skipped is not None and skipped["stage"] == stage

    run = Run(spark, work)
    run.reset_from(stage)
    steps_before = run.manifest()["steps"]
    groups = G.decode_all(xcom["groups"])
    getattr(module, "start_groups", lambda g: None)(groups)
    module.stage(run, groups)
    assert run.manifest()["steps"] == steps_before
    assert G.encode_all(groups) == skipped["groups"]


def test_stages_with_members_or_without_groups_are_not_skipped(planned, tmp_path):
    base, _, _ = planned
    work = tmp_path / "work"
    shutil.copytree(base / "work", work, ignore=shutil.ignore_patterns("plan"))
    some = {"stage": 8, "groups": G.encode_all({"StillLoadedOnDecommServers[hot]": BitMap([2])})}
    assert skip_if_idle("stage09_still_loaded_on_decomm", work, some) is None
    assert skip_if_idle("stage12_unload", work, {"groups": {}}) is None  # reads the run state
    for name in ("used_segments", "prepare", "assemble"):
        assert skip_if_idle(name, work, {"groups": {}}) is None


def test_a_skipped_stage_forgets_its_earlier_attempt_and_records_its_timing(planned, tmp_path):
    base, _, _ = planned
    work = tmp_path / "work"
    shutil.copytree(base / "work", work, ignore=shutil.ignore_patterns("plan"))
    steps = json.loads((work / "ops" / "manifest.json").read_text())["steps"]
    assert {s["stage"] for s in steps} >= {5, 7, 12}
    skip_if_idle("stage05_decommissioning", work, {"stage": 4, "groups": {}})
    manifest = json.loads((work / "ops" / "manifest.json").read_text())
    assert {s["stage"] for s in manifest["steps"]} == {s["stage"] for s in steps if s["stage"] < 5}
    assert manifest["count"] == sum(int(s["ops"]) for s in manifest["steps"])
    timings = json.loads((work / "timings.json").read_text())
    assert timings["stage05_decommissioning"] == {"stage": 5, "seconds": 0.0, "skipped": True}
    assert "stage07_balancing" not in timings  # later applications' timings are forgotten


def test_stage13_is_idle_only_without_a_broadcast_only_decommissioning_server(planned, tmp_path):
    base, _, _ = planned
    work = tmp_path / "work"
    shutil.copytree(base / "work", work, ignore=shutil.ignore_patterns("plan"))
    servers = work / "prepared" / "servers.parquet"
    xcom = {"stage": 12, "groups": {}}
    assert skip_if_idle("stage13_broadcast_on_decomm", work, xcom) is not None  # d1 holds non-broadcast
    pdf = pd.read_parquet(servers)
    pdf.loc[pdf["server"] == "hist-default-01:8083", "broadcast_only"] = True  # d1
    pdf.to_parquet(servers, index=False)
    assert skip_if_idle("stage13_broadcast_on_decomm", work, xcom) is None


def test_run_app_and_the_skip_agree(spark, planned, tmp_path):
    """``run_app`` skips through the same function, so the CLI and the DAG hand on the same XCom."""
    base, _, _ = planned
    work = tmp_path / "work"
    shutil.copytree(base / "work", work, ignore=shutil.ignore_patterns("plan"))
    xcom = {"stage": 1, "groups": G.encode_all({"StillUnreplicated": BitMap()})}
    assert run_app(spark, "stage02_underbroadcast", base, work, xcom) == {"stage": 2, "groups": xcom["groups"]}


def test_compare_beside_the_run_gives_the_plans_compare_after_it_gives(spark, tmp_path, monkeypatch):
    """A run in Spark (no task on the driver) plans the other coordinator in a thread beside its
    own applications, right after ``prepare``: the published plan, the compared plan and
    ``comparison.json`` are those of the same run compared after it (``compare_alongside`` off)."""
    import threading

    from segment_balancer.plan.fingerprint import fingerprint
    from segment_balancer.spark import apps
    from segment_balancer.spark import session as S
    from segment_balancer.tools import pipeline
    from segment_balancer.tools.pipeline import run_plan

    monkeypatch.setenv(S.DRIVER_TASKS_ENV, "-1")
    started = []
    real = apps.compare_alongside
    monkeypatch.setattr(pipeline, "compare_alongside", lambda *a: started.append(a[2]) or real(*a))
    run_plan(spark, SAMPLE, tmp_path / "beside", work=tmp_path / "w1", compare=True)
    assert started == [tmp_path / "w1"] and not apps._ALONGSIDE
    assert not [t for t in threading.enumerate() if t.name == "compare_coordinators"]
    monkeypatch.setattr(pipeline, "compare_alongside", lambda *a: None)
    run_plan(spark, SAMPLE, tmp_path / "after", work=tmp_path / "w2", compare=True)
    for plan in ("", "compared/druid"):
        assert fingerprint(tmp_path / "beside" / plan) == fingerprint(tmp_path / "after" / plan)
    assert json.loads((tmp_path / "beside" / "comparison.json").read_text()) == json.loads(
        (tmp_path / "after" / "comparison.json").read_text()
    )


def test_a_run_that_fails_beside_the_compared_one_stops_it_and_waits(spark, tmp_path, monkeypatch):
    """The run's own stage 1 fails while the other coordinator plans beside it: the error is the
    run's, the other coordinator's running application is interrupted and no other starts (no plan
    in its fork), and its thread has ended."""
    import threading

    from segment_balancer.spark import apps
    from segment_balancer.spark import session as S
    from segment_balancer.tools import pipeline
    from segment_balancer.tools.pipeline import make_plan

    monkeypatch.setenv(S.DRIVER_TASKS_ENV, "-1")
    real = apps.run_app

    def failing(spark, name, *args):
        if name == "stage01_unreplicated":
            raise OSError("disk full")
        return real(spark, name, *args)

    monkeypatch.setattr(pipeline, "run_app", failing)
    with pytest.raises(OSError, match="disk full"):
        make_plan(spark, SAMPLE, tmp_path / "work", compare=True)
    assert not apps._ALONGSIDE
    assert not [t for t in threading.enumerate() if t.name == "compare_coordinators"]
    assert (tmp_path / "work" / "compared_work" / "druid" / "prepared").is_dir()  # forked after prepare
    assert not (tmp_path / "work" / "compared_work" / "druid" / "plan").exists()


def test_the_compared_plan_runs_beside_a_run_in_spark_up_to_a_size(tmp_path, monkeypatch):
    from segment_balancer.common.files import write_json_atomic
    from segment_balancer.spark import apps
    from segment_balancer.spark import session as S

    write_json_atomic(
        {"per_datasource": {"a": {"visible": 60, "unused": 1}, "b": {"standby": 39}}},
        tmp_path / "timeline" / "summary.json",
    )
    assert not apps.alongside_fits(SAMPLE, tmp_path)  # 100 segments: a small run, on the driver
    monkeypatch.setenv(S.DRIVER_TASKS_ENV, "-1")
    monkeypatch.setattr(apps, "ALONGSIDE_AT_MOST_SEGMENTS", 100)
    assert apps.alongside_fits(SAMPLE, tmp_path)
    monkeypatch.setattr(apps, "ALONGSIDE_AT_MOST_SEGMENTS", 99)
    assert not apps.alongside_fits(SAMPLE, tmp_path)
