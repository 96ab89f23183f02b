"""``segment_balancer.spark.apps``: the applications of a run (``run_app``) and the skipping of stages with nothing to
schedule (``skip_if_idle``), on the hand-worked ``druid_sample`` plan (tests/test_pipeline.py)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from pyroaring import BitMap

from segment_balancer.planner import groups as G
from segment_balancer.planner.groups import group_name
from segment_balancer.planner.stages import APP_NAMES, stage_module, stage_number
from segment_balancer.spark.apps import run_app, skip_if_idle
from segment_balancer.spark.stage_run import SparkStageRun as Run


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
