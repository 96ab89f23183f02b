"""The availability cases of ``availability_snapshot.py`` through the CLI, against the plan worked
out by hand there (ALGORITHM.md "Availability", "Inputs", stages 5 and 12)."""

import json
import math

import pandas as pd
import pytest
from availability_snapshot import ID, NAME, UNLISTED, write_snapshot
from invariants import assert_no_drop_costs_availability

from segment_balancer.planner.groups import decode
from segment_balancer.tools.pipeline import run_plan


@pytest.fixture(scope="module")
def planned(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("availability")
    snap = write_snapshot(base / "snapshot")
    summary = run_plan(spark, snap, base / "plan", work=base / "work")
    ops = pd.read_parquet(base / "plan" / "operations.parquet").sort_values("op_id")
    return base, snap, summary, ops


def _rows(ops, stages):
    part = ops[ops.stage.isin(stages)]
    return [
        (
            int(r.stage),
            r.action,
            None if pd.isna(r.queue_type) else r.queue_type,
            NAME[r.segment_id],
            r.server,
            r.reason,
        )
        for r in part.itertuples()
    ]


def test_loads_and_moves_follow_the_hand_worked_plan(planned):
    _, _, _, ops = planned
    assert _rows(ops, range(1, 12)) == [
        (1, "LOAD", "loading", "V2", "hot1", "unreplicated"),
        (3, "LOAD", "loading", "W2", "cold1", "underreplicated"),
        (4, "LOAD", "loading", "V2", "hot0", "to_become_underreplicated"),
        (5, "LOAD", "decommissioning", "Y", "d3", "decommissioning"),
        (5, "DROP", None, "Y", "d1", "decommissioning"),
    ]
    by_id = ops.set_index("op_id")
    y_drop = ops[(ops.action == "DROP") & (ops.segment_id == ID["Y"])].iloc[0]
    assert by_id.loc[int(y_drop.depends_on)].server == "d3"


def test_stage12_drops_only_what_keeps_every_segment_available(planned):
    _, _, _, ops = planned
    assert sorted(_rows(ops, [12])) == sorted(
        [
            (12, "DROP", None, "X", "d1", "overreplicated"),  # the decommissioning excess replica
            (12, "DROP", None, "W1", "cold0", "overshadowed"),  # W2 is served
            (12, "DROP", None, "W1", "cold1", "overshadowed"),
            (12, "DROP", None, "gone", "d3", "unused"),  # not in segments.jsonl
            (12, "DROP", None, "ry_old", "d3", "unused"),
        ]
    )
    assert ops[ops.stage == 12].depends_on.isna().all()
    untouched = {"Q", "G", "V1", "E", "D1", "D2"}
    assert not set(ops.segment_id.map(NAME)) & untouched


def test_summary_counts_deferred_drops_waiting_and_unlisted_segments(planned):
    _, _, summary, _ = planned
    availability = summary["availability"]
    assert (availability["deferred_drops"], availability["deferred_segments"]) == (3, 2)  # Q: 1, G: 2
    assert sorted(NAME[s] for s in availability["deferred_examples"]) == ["G", "Q"]
    assert summary["overshadowed_waiting"] == {
        "segments": 1,
        "served_replicas": 2,
        "per_datasource": {"rx": {"segments": 1, "served_replicas": 2}},
    }
    unlisted = summary["unlisted"]
    assert (unlisted["segments"], unlisted["served_replicas"]) == (3, 2)
    assert unlisted["per_datasource"] == {
        "gone": {"segments": 2, "served_replicas": 1},
        "ry_old": {"segments": 1, "served_replicas": 1},
    }
    assert any(a["kind"] == "unknown_tier" and "ghost" in a["message"] for a in summary["alerts"])
    assert summary["by_reason"]["unused"] == 2 and summary["by_reason"]["overshadowed"] == 2


def test_groups_excess_decommissioning_replica_and_stuck_balancing(planned):
    base, _, _, _ = planned
    groups = {
        g["name"]: {NAME.get(i, i) for i in _ids(base, g)}
        for g in json.loads((base / "plan" / "groups.json").read_text())
    }
    assert groups["ToBecomeNotLoadedOnDecommServers[_default_tier]"] == {"X", "Y"}
    assert groups.get("StillLoadedOnDecommServers[_default_tier]", set()) == set()
    # e1 ranks first for every segment of the eternal tier but has no room: stage 7 lists them,
    # stage 10 cannot move them either, so they stay.
    assert groups["ToBeBalanced[eternal]"] == {"E", "D1", "D2"}


def _ids(base, group):
    segs = pd.read_parquet(base / "work" / "prepared" / "segments.parquet")
    by_idx = dict(zip(segs.idx.dropna().astype(int), segs.loc[segs.idx.notna(), "segment_id"]))
    return [by_idx[i] for i in decode(group["bitset"])]


def test_assignment_keeps_the_waiting_and_deferred_replicas(planned):
    base, _, _, _ = planned
    a = pd.read_parquet(base / "plan" / "assignment.parquet")
    got = {}
    for r in a.itertuples():
        got.setdefault(NAME[r.segment_id], set()).add(r.server)
    assert got["Q"] == {"cold0", "hot0"} and got["G"] == {"cold1", "d2"}
    assert got["V1"] == {"hot0", "hot1"} and got["V2"] == {"hot0", "hot1"}
    assert got["W2"] == {"cold0", "cold1"} and "W1" not in got
    assert got["X"] == {"d2"} and got["Y"] == {"d3"}
    assert "gone" not in got and "ry_old" not in got
    assert got["E"] == got["D1"] == got["D2"] == {"e0"}


def test_no_independent_drop_leaves_a_segment_below_its_required_replicas(planned):
    base, snap, _, ops = planned
    assert assert_no_drop_costs_availability(snap, ops) == 1  # X's drop, checked


def test_eternity_segment_is_read_and_its_costs_are_druids(spark, planned):
    """E has Druid's eternity interval. Its joint cost with a day is 2 × 24² / ln 2 (a day against
    all time: ∫∫ e^(−λ|x−y|) = 24 h × 2/λ, λ = ln 2 / 24 h); in doubles the day's scaled length
    comes out of a difference of two numbers near 3.7e10, so allow 1e-4 relative."""
    from segment_balancer.plan.explain import explain_segment

    base, _, _, _ = planned
    assert ID["E"] == ("all_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z_2019-01-01T00:00:00.000Z")
    day_vs_eternity = 2 * 24**2 / math.log(2)
    out = explain_segment(base / "work", ID["E"])
    assert (out["required"], out["waiting"], out["listed"]) == (1, None, True)
    v1 = explain_segment(base / "work", ID["V1"])
    assert (v1["overshadowed"], v1["waiting"], v1["timeline"]["overshadowed_by"]) == (True, True, [ID["V2"]])
    (tier,) = out["tiers"]
    rows = {s["server"]: s for s in tier["servers"]}
    assert (tier["tier"], tier["target"], tier["b"]) == ("eternal", 1, 1)
    assert rows["e1"]["rank"] == 1 and rows["e1"]["cost"] == 0.0
    assert rows["e1"]["ineligible"] == "not enough room (0 bytes available)"
    assert rows["e0"]["rank"] == 2 and rows["e0"]["ineligible"] == "serves the segment"
    assert rows["e0"]["cost"] == pytest.approx(2 * day_vs_eternity, rel=1e-4)
    adjacent_days = 2 * 0.25 * (24 / math.log(2)) ** 2  # same datasource: doubled
    d1 = {s["server"]: s for s in explain_segment(base / "work", ID["D1"])["tiers"][0]["servers"]}
    assert d1["e0"]["cost"] == pytest.approx(adjacent_days + day_vs_eternity, rel=1e-4)


def test_unlisted_segment_ids_are_parsed_as_druid_does(planned):
    base, _, _, _ = planned
    segs = pd.read_parquet(base / "work" / "prepared" / "segments.parquet").set_index("segment_id")
    old = segs.loc[UNLISTED["ry_old"]]
    assert (old.datasource, old.version, int(old.partition_num), int(old.size_bytes)) == ("ry_old", "v1", 3, 0)
    assert not old.used and not old.listed
    gone = segs.loc[UNLISTED["gone2"]]
    assert (gone.datasource, gone.version, int(gone.end_ms - gone.start_ms)) == (
        "gone",
        "2019-09-01T00:00:00.000Z",
        86_400_000,
    )


def test_explain_tells_why_each_case_was_left_alone(planned):
    """``explain --plan`` on the cases above: the reasons worked out in availability_snapshot.py."""
    from segment_balancer.plan.explain import explain_plan

    base, _, _, _ = planned

    def decisions(name, app):
        stage = next(s for s in explain_plan(base / "plan", ID[name])["stages"] if s["app"] == app)
        return [(d["tier"], d["outcome"], d["detail"]) for d in stage["decisions"]]

    # V1 waits for V2 (overshadowing, served nowhere yet): kept on both holders
    assert decisions("V1", "stage12_unload") == [(None, "waiting", {"servers": ["hot0", "hot1"]})]
    # Q: the only candidate is in cold (target 0) and nothing is loaded yet: 0 < required 1
    ((tier, outcome, detail),) = decisions("Q", "stage12_unload")
    assert (tier, outcome) == (None, "deferred")
    assert (detail["deferred"], detail["loaded"], detail["required"], detail["refused"]) == (
        1,
        0,
        1,
        [["cold", "cold0"]],
    )
    # G: both replicas are excess (its tier is absent) and both drops are refused
    ((_, outcome, detail),) = decisions("G", "stage12_unload")
    assert (outcome, detail["deferred"], detail["loaded"], detail["required"]) == ("deferred", 2, 0, 2)
    assert sorted(detail["refused"]) == [["_default_tier", "d2"], ["cold", "cold1"]]
    # X: stage 5 leaves the decommissioning replica (the tier holds its target without it) for stage 12
    assert decisions("X", "stage05_decommissioning") == [
        ("_default_tier", "excess_on_decomm", {"target": 1, "count": 2, "on_decommissioning": 1})
    ]
    x12 = next(s for s in explain_plan(base / "plan", ID["X"])["stages"] if s["app"] == "stage12_unload")
    assert [(o["action"], o["server"], o["reason"]) for o in x12["operations"]] == [("DROP", "d1", "overreplicated")]
