"""Validation of a small hand-made plan and of tampered variants, each breaking one check."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from segment_balancer.plan import validation
from segment_balancer.plan.validation import (
    PlanValidationError,
    assignment_chunks,
    load_inputs,
    queue_frame,
    require_valid,
    validate_plan,
)

CHECKS = [
    "known_servers_and_segments",
    "assignment_unique",
    "capacity",
    "no_replicated_load_to_decommissioning",
    "queue_limits",
    "dependencies",
    "partial_loads",
    "well_formed",
]

# M = 10, loading 70 %, decommissioning 10 %, balancing 20 %, decommissioningMax 70 %.
LIMITS = {
    **{str(k): {"queue_type": "loading", "limit": 7, "total": 10} for k in (1, 2, 3, 4)},
    "5": {"queue_type": "decommissioning", "limit": 1, "total": 10},
    "6": {"queue_type": None, "limit": 8, "total": 10},
    "7": {"queue_type": "balancing", "limit": 2, "total": 10},
    **{str(k): {"queue_type": None, "limit": 10, "total": 10} for k in (8, 10, 11)},
    "9": {"queue_type": "decommissioning", "limit": 7, "total": 10},
    **{str(k): {"queue_type": None, "limit": None, "total": None} for k in (12, 13)},
}


def servers():
    return pd.DataFrame(
        {
            "server": ["h1", "h2", "h3", "h4"],
            "host": ["h1:8083", "h2:8083", "h3:8083", "h4:8083"],
            "tier": ["_default_tier"] * 3 + ["hot"],
            "max_size": pd.array([310, 360, 1000, 1000], dtype="int64"),
            "current_size": pd.array([300, 100, 200, 0], dtype="int64"),
            "priority": pd.array([0, 0, 0, 1], dtype="int32"),
            "decommissioning": [False, False, True, False],
            "broadcast_only": [False, False, False, False],
        }
    )


def segments():
    ids = ["s1", "s2", "s3", "s4", "s5"]
    return pd.DataFrame(
        {
            "idx": pd.array([0, 1, 2, 3, None], dtype="Int64"),
            "segment_id": ids,
            "datasource": ["ds"] * 5,
            "start_ms": pd.array([0] * 5, dtype="int64"),
            "end_ms": pd.array([1] * 5, dtype="int64"),
            "version": ["v1"] * 5,
            "partition_num": pd.array([0, 1, 2, 3, 4], dtype="int32"),
            "size_bytes": pd.array([100, 100, 50, 10, 20], dtype="int64"),
            "used": [True, True, True, True, False],
            "overshadowed": [False] * 5,
            "rule_kind": ["load", "load", "load", "broadcast", None],
        }
    )


def replicas():
    # s3 sits in h2's load queue untyped (counts as loading, 50 bytes towards capacity).
    return pd.DataFrame(
        {
            "segment_id": ["s1", "s2", "s3", "s5"],
            "idx": pd.array([0, 1, 2, None], dtype="Int64"),
            "server": ["h1", "h3", "h2", "h1"],
            "tier": ["_default_tier"] * 4,
            "served": [True, True, False, True],
            "queued_load": [False, False, True, False],
            "queue_type": [None, None, None, None],
            "requested_at_ms": pd.array([None, None, 5, None], dtype="Int64"),
            "queued_drop": [False] * 4,
        }
    )


def operations():
    rows = [  # op_id, stage, action, queue_type, segment, server, size, depends_on
        (1, 2, "LOAD", "loading", "s4", "h1", 10, None),
        (2, 2, "LOAD", "loading", "s4", "h2", 10, None),
        (3, 5, "LOAD", "decommissioning", "s2", "h2", 100, None),
        (4, 5, "DROP", None, "s2", "h3", 100, 3),  # move off decommissioning h3
        (5, 7, "LOAD", "balancing", "s1", "h2", 100, None),
        (6, 7, "DROP", None, "s1", "h1", 100, 5),  # balancing move h1 -> h2
        (7, 12, "DROP", None, "s5", "h1", 20, None),  # unused segment
    ]
    df = pd.DataFrame(
        rows, columns=["op_id", "stage", "action", "queue_type", "segment_id", "server", "size_bytes", "depends_on"]
    )
    df["op_id"] = df["op_id"].astype("int64")
    df["stage"] = df["stage"].astype("int8")
    df["size_bytes"] = df["size_bytes"].astype("int64")
    df["depends_on"] = df["depends_on"].astype("Int64")
    df["datasource"] = "ds"
    df["tier"] = "_default_tier"
    df["reason"] = "test"
    df["partial_fingerprint"] = pd.Series([None] * len(df), dtype=object)
    df.loc[df["op_id"] == 1, "partial_fingerprint"] = "v1:58a2cf3e329b55d3"  # a partial load of s4
    return df


def assignment():
    return pd.DataFrame(
        {
            "segment_id": ["s1", "s2", "s3", "s4", "s4"],
            "server": ["h2", "h2", "h2", "h1", "h2"],
            "tier": ["_default_tier"] * 5,
        }
    )


def write_plan(tmp_path, ops=None, assign=None, srv=None, limits=None):
    """Write the valid plan (or the given replacements) to tmp_path/{plan,work}; return both."""
    plan, prepared = tmp_path / "plan", tmp_path / "work" / "prepared"
    plan.mkdir(parents=True, exist_ok=True)
    prepared.mkdir(parents=True, exist_ok=True)
    (operations() if ops is None else ops).to_parquet(plan / "operations.parquet", index=False)
    (assignment() if assign is None else assign).to_parquet(plan / "assignment.parquet", index=False)
    (servers() if srv is None else srv).to_parquet(prepared / "servers.parquet", index=False)
    segments().to_parquet(prepared / "segments.parquet", index=False)
    replicas().to_parquet(prepared / "replicas.parquet", index=False)
    meta = {"now_ms": 10, "stage_limits": LIMITS if limits is None else limits}
    (prepared / "meta.json").write_text(json.dumps(meta))
    return plan, tmp_path / "work"


def failed(report):
    return [c["name"] for c in report["checks"] if not c["success"]]


def check(report, name):
    return next(c for c in report["checks"] if c["name"] == name)


def test_valid_plan_passes_and_report_is_written(tmp_path):
    plan, work = write_plan(tmp_path)
    report = validate_plan(plan, work)
    assert failed(report) == []
    assert report["success"] is True
    assert [c["name"] for c in report["checks"]] == CHECKS
    assert all(c["unexpected_count"] == 0 and c["examples"] == [] for c in report["checks"])
    on_disk = json.loads((plan / "validation.json").read_text())
    assert on_disk["success"] is True and on_disk["gx_version"] == report["gx_version"]
    assert sorted(p.name for p in plan.iterdir()) == ["assignment.parquet", "operations.parquet", "validation.json"]
    assert require_valid(plan, work)["success"] is True


def test_queue_frame_counts_start_queue_as_loading(tmp_path):
    plan, work = write_plan(tmp_path)
    q = queue_frame(load_inputs(plan, work)).set_index(["stage", "server"])
    assert q.loc[(2, "h2"), "count"] == 2  # queued untyped s3 + s4
    assert q.loc[(5, "h2"), ["count", "total_count"]].tolist() == [1, 3]
    assert q.loc[(7, "h2"), ["counted_type", "count", "total_count"]].tolist() == ["balancing", 1, 4]
    assert (2, "h1") in q.index and (5, "h1") not in q.index


def tampered(changes):
    """The valid operations with {(op_id, column): value} applied."""
    ops = operations()
    for (row, col), value in changes.items():
        ops.loc[ops["op_id"] == row, col] = value
    return ops


def variant_cases():
    dup = pd.concat([assignment(), assignment().iloc[[0]]], ignore_index=True)
    srv_small = servers()
    srv_small.loc[srv_small["server"] == "h2", "max_size"] = 359  # 100 + 50 queued + 210 = 360
    srv_drop = servers()
    srv_drop.loc[srv_drop["server"] == "h1", "max_size"] = 309  # 300 + 10; drops don't count
    tight = {**LIMITS, "2": {"queue_type": "loading", "limit": 1, "total": 10}}
    tight_total = {**LIMITS, "7": {"queue_type": "balancing", "limit": 2, "total": 3}}
    forward = operations()  # swap ids: the DROP of s2 becomes op 3, depending on LOAD op 4
    forward.loc[2, "op_id"] = 4
    forward.loc[3, "op_id"] = 3
    forward.loc[3, "depends_on"] = 4
    extra_drop = pd.concat(
        [operations(), operations().iloc[[5]].assign(op_id=8, stage=12, server="h2", depends_on=6)], ignore_index=True
    )
    dup_op = tampered({(7, "op_id"): 6})
    return {
        "unknown_server": ({"ops": tampered({(2, "server"): "ghost"})}, "known_servers_and_segments"),
        "unknown_segment": ({"ops": tampered({(7, "segment_id"): "nope"})}, "known_servers_and_segments"),
        "duplicate_assignment": ({"assign": dup}, "assignment_unique"),
        "capacity_with_queued": ({"srv": srv_small}, "capacity"),
        "capacity_drops_not_subtracted": ({"srv": srv_drop}, "capacity"),
        "load_to_decommissioning": ({"ops": tampered({(5, "server"): "h3"})}, "no_replicated_load_to_decommissioning"),
        "too_many_loading": ({"limits": tight}, "queue_limits"),
        "too_many_total": ({"limits": tight_total}, "queue_limits"),
        "depends_forward": ({"ops": forward}, "dependencies"),
        "depends_on_drop": ({"ops": extra_drop}, "dependencies"),
        "dependent_load": ({"ops": tampered({(2, "depends_on"): 1})}, "dependencies"),
        "drop_with_queue_type": ({"ops": tampered({(7, "queue_type"): "balancing"})}, "well_formed"),
        "load_without_queue_type": ({"ops": tampered({(5, "queue_type"): None})}, "well_formed"),
        "duplicate_op_id": ({"ops": dup_op}, "well_formed"),
        "stage_out_of_range": ({"ops": tampered({(7, "stage"): 14})}, "well_formed"),
        "negative_size": ({"ops": tampered({(7, "size_bytes"): -1})}, "well_formed"),
        "partial_drop": ({"ops": tampered({(7, "partial_fingerprint"): "v1:58a2cf3e329b55d3"})}, "partial_loads"),
        "partial_fingerprint_malformed": ({"ops": tampered({(1, "partial_fingerprint"): "v2:xyz"})}, "partial_loads"),
    }


@pytest.mark.parametrize("case", list(variant_cases()))
def test_tampered_plan_fails_exactly_its_check(tmp_path, case):
    kwargs, expected = variant_cases()[case]
    plan, work = write_plan(tmp_path, **kwargs)
    report = validate_plan(plan, work)
    assert report["success"] is False
    assert failed(report) == [expected]
    broken = check(report, expected)
    assert broken["unexpected_count"] >= 1 and broken["examples"]
    assert json.loads((plan / "validation.json").read_text())["success"] is False


def test_examples_name_the_offending_rows(tmp_path):
    kwargs, _ = variant_cases()["capacity_with_queued"]
    plan, work = write_plan(tmp_path, **kwargs)
    ex = check(validate_plan(plan, work), "capacity")["examples"]
    assert ex == [
        {
            "expectation": "expect_column_pair_values_a_to_be_greater_than_b",
            "columns": ["max_size", "projected_size"],
            "server": "h2",
            "max_size": 359,
            "current_size": 100,
            "queued_bytes": 50,
            "plan_load_bytes": 210,
            "projected_size": 360,
        }
    ]
    kwargs, _ = variant_cases()["too_many_loading"]
    plan, work = write_plan(tmp_path / "q", **kwargs)
    ex = check(validate_plan(plan, work), "queue_limits")["examples"]
    assert [(e["stage"], e["server"], e["count"], e["limit"]) for e in ex] == [(2, "h2", 2, 1)]


def test_broadcast_load_to_decommissioning_server_is_allowed(tmp_path):
    plan, work = write_plan(tmp_path, ops=tampered({(2, "server"): "h3"}))
    assert validate_plan(plan, work)["success"] is True


def test_unlimited_queue_passes(tmp_path):
    limits = {k: {**v, "limit": None, "total": None} for k, v in LIMITS.items()}
    tight_ops = tampered({(1, "server"): "h2"})  # two stage-2 loads on h2, plus the queued one
    srv = servers()
    srv.loc[srv["server"] == "h2", "max_size"] = 370
    plan, work = write_plan(tmp_path, ops=tight_ops, srv=srv, limits=limits)
    assert validate_plan(plan, work)["success"] is True


def test_require_valid_raises_with_failed_checks(tmp_path):
    plan, work = write_plan(tmp_path, assign=pd.concat([assignment()] * 2, ignore_index=True))
    with pytest.raises(PlanValidationError) as err:
        require_valid(plan, work)
    assert "assignment_unique" in str(err.value) and "capacity" not in str(err.value)
    assert err.value.report["success"] is False


def test_missing_stage_limits_is_an_error(tmp_path):
    plan, work = write_plan(tmp_path, limits={"1": LIMITS["1"]})
    with pytest.raises(ValueError, match="stage_limits"):
        validate_plan(plan, work)


def test_great_expectations_set_up_lines_stay_out_of_the_log(caplog):
    """Importing GX (``validation.gx``) logs none of its own INFO set-up lines ("Skipping registering
    function …", some 200 of them), unless its logger's level was set by whoever runs us."""
    import logging

    from segment_balancer.plan.validation import gx

    gx_log = logging.getLogger("great_expectations")
    before = gx_log.level
    try:
        gx_log.setLevel(logging.NOTSET)
        with caplog.at_level(logging.INFO):
            gx()
        assert gx_log.getEffectiveLevel() == logging.WARNING
        gx_log.setLevel(logging.DEBUG)
        gx()
        assert gx_log.level == logging.DEBUG  # a level set before is kept
    finally:
        gx_log.setLevel(before)


def test_assignment_chunks_end_where_a_segments_rows_end(tmp_path):
    """Chunks of 2 rows over s1 ×2, s2 ×3, s3, s4 ×2: no segment's rows are split, every row once."""
    ids = ["s1", "s1", "s2", "s2", "s2", "s3", "s4", "s4"]
    frame = pd.DataFrame({"segment_id": ids, "server": [f"h{i}" for i in range(8)], "tier": ["t"] * 8})
    frame.to_parquet(tmp_path / "a.parquet", index=False)
    chunks = [list(c["segment_id"]) for c in assignment_chunks(tmp_path / "a.parquet", rows=2)]
    assert sum(chunks, []) == ids
    assert all(not set(a) & set(b) for i, a in enumerate(chunks) for b in chunks[i + 1 :])
    assert all(list(c.index) == list(range(len(c))) for c in assignment_chunks(tmp_path / "a.parquet", rows=2))


def test_a_repeat_on_a_chunk_boundary_is_found(tmp_path, monkeypatch):
    """s4 on h2 twice, the two rows in different batches of 2 rows: still one chunk, 2 unexpected."""
    monkeypatch.setattr(validation, "CHUNK_ROWS", 2)
    repeat = pd.DataFrame(
        {
            "segment_id": ["s1", "s2", "s3", "s4", "s4", "s4"],
            "server": ["h2", "h2", "h2", "h1", "h2", "h2"],
            "tier": ["_default_tier"] * 6,
        }
    )
    plan, work = write_plan(tmp_path, assign=repeat)
    report = validate_plan(plan, work)
    assert failed(report) == ["assignment_unique"]
    assert check(report, "assignment_unique")["unexpected_count"] == 2
    assert {(e["segment_id"], e["server"]) for e in check(report, "assignment_unique")["examples"]} == {("s4", "h2")}
    monkeypatch.setattr(validation, "CHUNK_ROWS", 3)
    plan, work = write_plan(tmp_path / "valid", assign=assignment())
    assert validate_plan(plan, work)["success"] is True  # 5 rows in chunks of at most 3


def test_a_large_assignment_out_of_segment_order_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(validation, "CHUNK_ROWS", 2)
    plan, work = write_plan(tmp_path, assign=pd.concat([assignment()] * 2, ignore_index=True))
    with pytest.raises(ValueError, match="assignment.parquet: row 5: segment ids out of order"):
        validate_plan(plan, work)
