"""``segment_balancer.spark.tierpass``: a step's kernel pass writes back only the tiers it changed,
its ops reach the op log, and drops decided outside the pass are marked in the tiers they name."""

from __future__ import annotations

import pandas as pd
from workdirs import write_workdir

from segment_balancer.common.files import filesystem
from segment_balancer.planner.runstate import OpSink, SegmentRef
from segment_balancer.spark.state_store import read_tier_state
from segment_balancer.spark.tierpass import commit_with_drops, finish, kernel_pass
from segment_balancer.spark.workdir import OUT_SCHEMA, Run, out_frame

TIERS = {"hot": {"servers": ["h1", "h2"], "segments": [(0, 2, ["h1"])]},
         "cold": {"servers": ["c1"], "segments": [(1, 1, ["c1"])]}}


def _replicas(run, tier):
    fs, base = filesystem(run.work_uri)
    rows = read_tier_state(fs, f"{base}/{run.state_dirs()[tier]}")
    reps = rows[rows["kind"] == "replica"].sort_values("server")
    return [(r.server, r.served, r.load_type, bool(r.dropping)) for r in reps.itertuples()]


def test_a_pass_writes_back_only_the_tier_its_kernel_changed(spark, tmp_path):
    run = Run(spark, write_workdir(tmp_path / "work", TIERS))

    def body(runs, sink):
        if "hot" in runs:
            hot = runs["hot"]
            hot.load(hot.segment(0), "h2", "loading", "underreplicated", (0, "", 0.0))
            sink.member(0, "Loaded[hot]")

    result = kernel_pass(run, 3, "test", ["cold", "hot"], body)
    assert result.state == {"cold": "state/00_prepare/tier=cold", "hot": "state/03_test/tier=hot"}
    assert {name: list(bm) for name, bm in result.members.items()} == {"Loaded[hot]": [0]}
    assert run.state_dirs() == {"cold": "state/00_prepare/tier=cold", "hot": "state/00_prepare/tier=hot"}

    finish(run, 3, "test", result)
    assert run.state_dirs() == result.state  # the manifest commits the step
    ops = pd.read_parquet(run.work / "ops" / "stage_03_test.parquet")
    assert ops[["op_id", "stage", "action", "queue_type", "server", "segment_id"]].values.tolist() == [
        [0, 3, "LOAD", "loading", "h2", "seg0"]]
    assert _replicas(run, "hot") == [("h1", True, None, False), ("h2", False, "loading", False)]


def test_drops_decided_outside_a_pass_are_marked_in_the_tiers_they_name(spark, tmp_path):
    run = Run(spark, write_workdir(tmp_path / "work", TIERS))
    sink = OpSink()
    sink.drop(SegmentRef(1, "seg1", "ds", 10), "c1", "cold", "unused", (1, "", 0.0))
    commit_with_drops(run, 12, "test", spark.createDataFrame(out_frame(sink), OUT_SCHEMA), run.state_dirs())

    assert run.state_dirs() == {"cold": "state/12_test/tier=cold", "hot": "state/00_prepare/tier=hot"}
    assert _replicas(run, "cold") == [("c1", True, None, True)]
    assert _replicas(run, "hot") == [("h1", True, None, False)]
    ops = pd.read_parquet(run.work / "ops" / "stage_12_test.parquet")
    assert ops[["op_id", "action", "server", "segment_id", "reason"]].values.tolist() == [
        [0, "DROP", "c1", "seg1", "unused"]]


def test_a_callbacks_drop_is_marked_dependent_an_unload_drop_is_not(spark, tmp_path):
    """A DROP that waits for a load (``dep_server``: a stage-3 callback) keeps its replica among the
    loaded ones until then (ALGORITHM.md "Terms"); an excess drop of stage 12 does not."""
    tiers = {"hot": {"servers": ["h1", "h2"], "segments": [(0, 1, ["h1", "h2"]), (2, 1, ["h1", "h2"])]}}
    run = Run(spark, write_workdir(tmp_path / "work", tiers))
    sink = OpSink()
    sink.drop(SegmentRef(0, "seg0", "ds", 10), "h1", "hot", "overreplicated", (0, "", 0.0), dep_server="c1")
    sink.drop(SegmentRef(2, "seg2", "ds", 10), "h2", "hot", "overreplicated", (2, "", 0.0))
    commit_with_drops(run, 3, "test", spark.createDataFrame(out_frame(sink), OUT_SCHEMA), run.state_dirs())
    fs, base = filesystem(run.work_uri)
    rows = read_tier_state(fs, f"{base}/{run.state_dirs()['hot']}")
    reps = rows[rows["kind"] == "replica"]
    got = {(r.segment_id, r.server): (bool(r.dropping), bool(r.drop_dependent) if pd.notna(r.drop_dependent) else False)
           for r in reps.itertuples()}
    assert got == {("seg0", "h1"): (True, True), ("seg0", "h2"): (False, False),
                   ("seg2", "h1"): (False, False), ("seg2", "h2"): (True, False)}
