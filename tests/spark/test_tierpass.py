"""``segment_balancer.spark.tierpass``: a step writes only its ops and the top ``B`` it cached, and
the next step rebuilds every tier from the start state and the op log, drops decided outside the
pass included."""

from __future__ import annotations

import json

import pandas as pd
from workdirs import write_workdir

from segment_balancer.common.files import filesystem
from segment_balancer.planner.operations import OpOrder
from segment_balancer.planner.runstate import Op, OpSink, SegmentRef
from segment_balancer.spark.stage_run import SparkStageRun as Run
from segment_balancer.spark.state_store import read_tier
from segment_balancer.spark.tierpass import finish, kernel_pass, write_out
from segment_balancer.spark.workdir import out_frame, output_rel

TIERS = {
    "hot": {"servers": ["h1", "h2"], "segments": [(0, 2, ["h1"])]},
    "cold": {"servers": ["c1"], "segments": [(1, 1, ["c1"])]},
}


def _replicas(run, tier):
    """(server, served, load type, dropping, dependent) of every replica of ``tier`` now."""
    state = read_tier(run.work_uri, run.state_spec(), tier, run.server_names)
    rows = state.rows(run_table(run))
    reps = rows[rows["kind"] == "replica"].sort_values(["segment_id", "server"])
    return [
        (r.segment_id, r.server, bool(r.served), r.load_type, bool(r.dropping), bool(r.drop_dependent))
        for r in reps.itertuples()
    ]


def _commit(run, stage, step, sink):
    """Commit ``sink``'s ops as one step's output, as a stage does with drops it decided outside a
    tier pass."""
    fs, base = filesystem(run.work_uri)
    write_out(fs, f"{base}/{output_rel(stage, step)}", out_frame(sink))
    run.write_ops(stage, step, output_rel(stage, step))


def run_table(run):
    from segment_balancer.spark.state_store import read_segment_table

    return read_segment_table(run.work_uri)


def test_a_step_writes_its_ops_and_top_b_and_the_next_step_sees_them(spark, tmp_path):
    run = Run(spark, write_workdir(tmp_path / "work", TIERS))

    def body(runs, sink):
        if "hot" in runs:
            hot = runs["hot"]
            seg = hot.segment(0)
            assert hot.top_b(seg) == ["h1", "h2"]  # target 2 of 2 servers: both, equal costs, by name
            hot.load(seg, "h2", "loading", "underreplicated", OpOrder(0, "", 0))
            sink.member(0, "Loaded[hot]")

    result = kernel_pass(run, 3, "test", ["cold", "hot"], body)
    assert result.topb == {"hot": "state/03_test/tier=hot/topb.arrow"}
    assert {name: list(bm) for name, bm in result.members.items()} == {"Loaded[hot]": [0]}
    assert _replicas(run, "hot") == [("seg0", "h1", True, None, False, False)]  # not committed yet

    finish(run, 3, "test", result)
    ops = pd.read_parquet(run.work / "ops" / "stage_03_test.parquet")
    assert ops[["op_id", "stage", "action", "queue_type", "server", "segment_id", "code"]].values.tolist() == [
        [0, 3, "LOAD", "loading", "h2", "seg0", 0]
    ]
    assert _replicas(run, "hot") == [
        ("seg0", "h1", True, None, False, False),
        ("seg0", "h2", False, "loading", False, False),
    ]
    assert _replicas(run, "cold") == [("seg1", "c1", True, None, False, False)]
    assert read_tier(run.work_uri, run.state_spec(), "hot", run.server_names).topb == {0: ["h1", "h2"]}

    # the next step's tasks see it: the load counts on h2, the top B is reused
    def look(runs, sink):
        hot, seg = runs["hot"], runs["hot"].segment(0)
        return [
            {
                "kind": "over",
                "tier": "hot",
                "detail": json.dumps(
                    {
                        "count": seg.count(),
                        "topb": seg.topb,
                        "loading": hot.servers["h2"].loads["loading"],
                        "projected": hot.servers["h2"].projected_size,
                    }
                ),
            }
        ]

    result = kernel_pass(run, 4, "look", ["hot"], look)
    assert run.pass_rows(result, "over") == [{"count": 2, "topb": ["h1", "h2"], "loading": 1, "projected": 10}]
    assert result.topb == {}


def test_drops_decided_outside_a_pass_count_from_the_next_step_on(spark, tmp_path):
    run = Run(spark, write_workdir(tmp_path / "work", TIERS))
    sink = OpSink()
    sink.drop(SegmentRef(1, "seg1", "ds", 10), "c1", "cold", "unused", OpOrder(1, "", 0))
    _commit(run, 12, "test", sink)

    assert _replicas(run, "cold") == [("seg1", "c1", True, None, True, False)]
    assert _replicas(run, "hot") == [("seg0", "h1", True, None, False, False)]
    ops = pd.read_parquet(run.work / "ops" / "stage_12_test.parquet")
    assert ops[["op_id", "action", "server", "segment_id", "reason"]].values.tolist() == [
        [0, "DROP", "c1", "seg1", "unused"]
    ]


def test_a_callbacks_drop_is_marked_dependent_an_unload_drop_is_not(spark, tmp_path):
    """A DROP that waits for a load (``dep_server``: a stage-3 callback) keeps its replica among the
    loaded ones until then (ALGORITHM.md "Terms"); an excess drop of stage 12 does not."""
    tiers = {
        "hot": {"servers": ["h1", "h2"], "segments": [(0, 1, ["h1", "h2"]), (2, 1, ["h1", "h2"])]},
        "cold": {"servers": ["c1"], "segments": [(0, 1, [])]},
    }
    run = Run(spark, write_workdir(tmp_path / "work", tiers))
    sink = OpSink()
    seg0 = SegmentRef(0, "seg0", "ds", 10)
    sink.ops.append(
        Op("LOAD", 0, "seg0", "ds", "cold", "c1", 10, "underreplicated", OpOrder(0, "", 0), queue_type="loading")
    )
    sink.drop(seg0, "h1", "hot", "callback", OpOrder(0, "", 0, after=1), dep_server="c1")
    sink.drop(SegmentRef(2, "seg2", "ds", 10), "h2", "hot", "overreplicated", OpOrder(2, "", 0))
    _commit(run, 3, "test", sink)
    assert _replicas(run, "hot") == [
        ("seg0", "h1", True, None, True, True),
        ("seg0", "h2", True, None, False, False),
        ("seg2", "h1", True, None, False, False),
        ("seg2", "h2", True, None, True, False),
    ]
    assert _replicas(run, "cold") == [("seg0", "c1", False, "loading", False, False)]


def test_a_pass_counts_its_extra_rows_and_its_callbacks_join_the_steps_ops(spark, tmp_path):
    """A pass says how many extra rows of each kind its kernels returned; with no ``over`` row (no
    segment overreplicated in another tier) there are no stage-3 callbacks to decide. With one, the
    load of the segment in one tier gets a dependent DROP where it is overreplicated (seed 000 stage
    3), committed with the step's own ops and depending on the load."""
    tiers = {
        "hot": {"servers": ["h1", "h2"], "segments": [(0, 2, ["h1"])]},
        "cold": {"servers": ["c1", "c2"], "segments": [(0, 1, ["c1", "c2"])]},
    }
    run = Run(spark, write_workdir(tmp_path / "work", tiers))

    def load(runs, sink):
        if "hot" in runs:
            runs["hot"].load(runs["hot"].segment(0), "h2", "loading", "underreplicated", OpOrder(0, "", 0))

    result = kernel_pass(run, 3, "quiet", ["cold", "hot"], load)
    assert result.extra == {}
    assert run.callback_drops(result) == 0

    def load_and_over(runs, sink):
        load(runs, sink)
        if "cold" in runs:  # seg0 has 2 replicas in cold for a target of 1: c2 drops first
            detail = json.dumps({"count": 2, "drop_order": ["c2", "c1"]})
            return [{"kind": "over", "idx": 0, "tier": "cold", "target": 1, "detail": detail}]
        return None

    result = kernel_pass(run, 3, "loud", ["cold", "hot"], load_and_over)
    assert result.extra == {"over": 1}
    assert run.callback_drops(result) == 1
    finish(run, 3, "loud", result)
    ops = pd.read_parquet(run.work / "ops" / "stage_03_loud.parquet")
    assert ops[["op_id", "action", "server", "segment_id", "reason", "depends_on"]].astype(object).values.tolist() == [
        [0, "LOAD", "h2", "seg0", "underreplicated", pd.NA],
        [1, "DROP", "c2", "seg0", "callback", 0],
    ]
    assert _replicas(run, "cold") == [("seg0", "c1", True, None, False, False), ("seg0", "c2", True, None, True, True)]


def test_a_file_being_written_in_a_pass_directory_is_never_read(tmp_path, monkeypatch):
    """Stage 3's callbacks tasks read the pass directory while a sibling task writes its file into
    it: ``write_out`` writes under a hidden name first (which a dataset read skips), then moves it
    into place, so a reader sees the file whole or not at all."""
    import pyarrow.parquet as pq

    from segment_balancer.spark.workdir import read_output

    fs, base = filesystem(str(tmp_path))
    sink = OpSink()
    sink.ops.append(
        Op("LOAD", 0, "s0", "ds", "hot", "h1", 10, "underreplicated", OpOrder(0, "", 0), queue_type="loading")
    )
    written_at = []
    real_write = pq.write_table

    def record(table, where, **kwargs):
        written_at.append(where)
        # while this file is being written, a reader of the directory sees only the whole ones
        assert read_output(str(tmp_path), "pass", ["segment_id"], "op").num_rows == 1
        real_write(table, where, **kwargs)

    write_out(fs, f"{base}/pass/task-0.parquet", out_frame(sink))
    monkeypatch.setattr(pq, "write_table", record)
    write_out(fs, f"{base}/pass/callbacks-00000.parquet", out_frame(sink))
    assert written_at[0].rsplit("/", 1)[1].startswith(".callbacks-00000.parquet.tmp-")
    assert sorted(p.name for p in (tmp_path / "pass").iterdir()) == ["callbacks-00000.parquet", "task-0.parquet"]
    assert read_output(str(tmp_path), "pass", ["segment_id"], "op").num_rows == 2
