"""``segment_balancer.spark.workdir``: the op log numbers a step's ops in scheduling order across
steps, resolves a dependent drop to its load, and a retried stage forgets its steps."""

from __future__ import annotations

import json

from workdirs import write_workdir

from segment_balancer.common.files import filesystem
from segment_balancer.planner.operations import OpOrder
from segment_balancer.planner.runstate import Op, OpSink
from segment_balancer.spark.tierpass import write_out
from segment_balancer.spark.workdir import Run, out_frame, output_rel, reset_manifest

TIERS = {"hot": {"servers": ["h1", "h2"], "segments": [(0, 1, ["h1"]), (1, 2, [])]}}


def _op(action, idx, server, order, **kw):
    return Op(action, idx, f"seg{idx}", "ds", "hot", server, 10, "test", order, **kw)


def _write(run, spark, stage, step, ops):
    sink = OpSink()
    sink.ops += ops
    fs, base = filesystem(run.work_uri)
    write_out(fs, f"{base}/{output_rel(stage, step)}", out_frame(sink))
    return run.write_ops(stage, step, output_rel(stage, step))


def test_ops_are_numbered_in_scheduling_order_and_a_dependent_drop_names_its_load(spark, tmp_path):
    run = Run(spark, write_workdir(tmp_path / "work", TIERS))
    # written out of order, as parallel tasks would: their OpOrder decides
    n = _write(
        run,
        spark,
        5,
        "decommissioning",
        [
            _op("DROP", 0, "h1", OpOrder(5, "", 0, after=1), dep_server="h2"),
            _op("LOAD", 0, "h2", OpOrder(5, "", 0), queue_type="decommissioning"),
            _op("LOAD", 1, "h1", OpOrder(1, "", 0), queue_type="loading"),
        ],
    )
    assert n == 3
    assert _write(run, spark, 7, "balancing", [_op("LOAD", 1, "h2", OpOrder(0, "", 0), queue_type="balancing")]) == 1

    ops = run.ops().toPandas().sort_values("op_id")
    assert ops[["op_id", "stage", "action", "segment_id", "server"]].values.tolist() == [
        [0, 5, "LOAD", "seg1", "h1"],
        [1, 5, "LOAD", "seg0", "h2"],
        [2, 5, "DROP", "seg0", "h1"],
        [3, 7, "LOAD", "seg1", "h2"],
    ]
    assert ops.set_index("op_id").loc[2, "depends_on"] == 1
    assert ops.set_index("op_id")["depends_on"].drop(2).isna().all()


def test_a_retried_stage_forgets_its_steps_and_later_ones(spark, tmp_path):
    run = Run(spark, write_workdir(tmp_path / "work", TIERS))
    _write(run, spark, 5, "decommissioning", [_op("LOAD", 1, "h1", OpOrder(1, "", 0), queue_type="loading")])
    _write(run, spark, 7, "balancing", [_op("LOAD", 1, "h2", OpOrder(0, "", 0), queue_type="balancing")])
    reset_manifest(run.work, 7)
    manifest = json.loads((run.work / "ops" / "manifest.json").read_text())
    assert manifest["files"] == ["stage_05_decommissioning.parquet"]
    assert manifest["count"] == 1
    assert [s["stage"] for s in manifest["steps"]] == [5]
    # the next attempt of stage 7 numbers from where stage 5 ended
    _write(run, spark, 7, "balancing", [_op("LOAD", 1, "h2", OpOrder(0, "", 0), queue_type="balancing")])
    assert sorted(run.ops().toPandas()["op_id"]) == [0, 1]
