"""The unusual-snapshot corpus (``unusual_snapshots.py``): every shape is a snapshot Druid accepts,
so both coordinators plan it through the CLI's path (``tools.pipeline.run_plan``; ``coordinator``
``druid`` as ``plan --coordinator druid`` gives it) and publish a plan the Great Expectations gate
passed, never an internal error; and the plan says what it could not do (``summary.json``'s
``undone`` and alerts, and the report), with values worked by hand below.

Each snapshot is planned once per coordinator per module (:func:`planned`), on the tests' one
Spark session. Common facts: four segments W1-W4 of ``wiki`` (100 bytes), Druid's default rule
``loadForever {_default_tier: 2}`` unless the shape says otherwise; ``maxSegmentsInNodeLoadingQueue``
500 (the default).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from unusual_snapshots import ID, NAME, SHAPES, write_snapshot

from segment_balancer.planner.undone import CAUSES, NO_HISTORICAL_HOW, NO_ROOM_HOW

COORDINATORS = ("issue7458", "druid")
NO_HISTORICAL = CAUSES["no_historical"]
NOTHING_LEFT = {
    "underreplicated": 0,
    "missing_replicas": 0,
    "on_decommissioning": 0,
    "spread_segments": 0,
    "stopped_by": {},
    "runs_to_finish": 0,
    "runs_how": "nothing left to load",
}
"""The ``undone`` row of a tier the plan leaves with nothing to do."""


def tier_without_historicals(segments: int, replicas: int) -> dict:
    """The ``undone`` row of a tier a rule names that has no historical: ``segments`` ask for it,
    ``replicas`` of them in all; none loads, and no number of runs helps."""
    return {
        "underreplicated": segments,
        "missing_replicas": replicas,
        "on_decommissioning": 0,
        "spread_segments": 0,
        "stopped_by": {NO_HISTORICAL: segments},
        "runs_to_finish": None,
        "runs_how": NO_HISTORICAL_HOW,
    }


@pytest.fixture(scope="module")
def planned(spark, tmp_path_factory):
    """``planned(shape, coordinator)``: (summary dict, operations frame, plan directory) of the
    shape's snapshot planned by ``run_plan``, once per module; the work directory is kept beside
    the plan (``<coordinator>-work``)."""
    from segment_balancer.tools.pipeline import run_plan

    base = tmp_path_factory.mktemp("unusual")
    done: dict[tuple[str, str], tuple] = {}

    def plan(name: str, coordinator: str):
        if (name, coordinator) not in done:
            snapshot = base / name / "snapshot"
            if not snapshot.exists():
                write_snapshot(snapshot, SHAPES[name])
            out = base / name / coordinator
            summary = run_plan(spark, snapshot, out, work=base / name / f"{coordinator}-work", coordinator=coordinator)
            assert json.loads((out / "validation.json").read_text())["success"] is True
            assert (out / "report.html").is_file()
            done[(name, coordinator)] = (summary, pd.read_parquet(out / "operations.parquet"), out)
        return done[(name, coordinator)]

    return plan


def both(planned, name: str):
    """The two coordinators' plans of shape ``name``: ``{coordinator: (summary, ops, plan dir)}``."""
    return {c: planned(name, c) for c in COORDINATORS}


def kinds(summary: dict) -> list[str]:
    return [a["kind"] for a in summary["alerts"]]


def unavailable_metric(summary: dict) -> tuple[int, int]:
    """``segment/unavailable/count`` at the snapshot and once the plan succeeded."""
    values = {m["at"]: m["value"] for m in summary["druid_metrics"] if m["metric"] == "segment/unavailable/count"}
    return values["snapshot"], values["plan"]


def moves(ops: pd.DataFrame) -> list[tuple]:
    """``(segment, LOAD's server, DROP's server)`` of every move (a DROP that depends on a LOAD)."""
    loads = ops.set_index("op_id")
    return [
        (NAME[d.segment_id], loads.loc[int(d.depends_on), "server"], d.server)
        for d in ops[ops["depends_on"].notna()].itertuples()
    ]


def test_every_shape_is_a_snapshot_druid_accepts(tmp_path):
    """The loaders of the small files take every shape (nothing is refused as bad input, as the
    CLI and the DAG's ``resolve_snapshot`` check before any Spark job)."""
    from segment_balancer.planner.small_inputs import read_small_inputs

    for name, shape in SHAPES.items():
        read_small_inputs(write_snapshot(tmp_path / name, shape), None)
    assert set(SHAPES) == {
        "empty",
        "new",
        "no_historical",
        "every_historical_down",
        "tier_down",
        "tier_decommissioning",
        "only_holder_decommissioning",
        "full",
        "max_size_0",
        "absent_tier",
        "unknown_decommissioning",
        "no_rules",
        "drop_everything",
    }


def test_empty_cluster(planned):
    """No segment, no server: nothing to do and nothing missing; the alerts say there is no
    historical and that the default rule's tier has none."""
    for summary, ops, _ in both(planned, "empty").values():
        assert ops.empty
        assert summary["undone"] == {"unavailable": 0, "tiers": {}}
        assert kinds(summary) == ["no_historical", "unknown_tier"]


def test_new_cluster_drops_an_unused_segment_it_still_serves(planned):
    """Historicals up, nothing ingested: no used segment. h1 still serves ``gone``, which no
    ``segments.jsonl`` lists (unused): it is dropped, by stage 12 (reason ``unused``) and by Druid's
    ``UnloadUnusedSegments`` (duty 4)."""
    plans = both(planned, "new")
    for summary, ops, _ in plans.values():
        assert [(NAME[r.segment_id], r.action, r.server) for r in ops.itertuples()] == [("gone", "DROP", "h1")]
        assert summary["undone"] == {"unavailable": 0, "tiers": {"_default_tier": NOTHING_LEFT}}
        assert summary["alerts"] == []
    assert plans["issue7458"][1][["stage", "reason"]].values.tolist() == [[12, "unused"]]
    assert plans["druid"][1][["stage", "reason"]].values.tolist() == [[4, "DROP"]]


@pytest.mark.parametrize("name", ["no_historical", "every_historical_down"])
def test_no_historical_leaves_every_segment_unavailable_and_says_why(planned, name):
    """servers.json lists no historical (none at all; only a broker and a peon, which serves W1:
    a replica of a server that is no historical counts nowhere). Nothing can be loaded: the four
    segments, two replicas each wanted on ``_default_tier``, are unavailable before and after."""
    for summary, ops, plan in both(planned, name).values():
        assert ops.empty
        assert summary["undone"] == {"unavailable": 4, "tiers": {"_default_tier": tier_without_historicals(4, 8)}}
        assert kinds(summary) == ["no_historical", "unknown_tier"]
        assert unavailable_metric(summary) == (4, 4)
        report = (plan / "report.html").read_text()
        assert NO_HISTORICAL in report and "servers.json lists no historical server" in report


def test_explain_answers_for_a_segment_of_a_cluster_without_historicals(planned):
    """``explain --snapshot`` of W1 with no historical at all: a load-rule segment (two replicas
    required) with no tier of the cluster to rank servers in."""
    from segment_balancer.plan.explain import explain_segment

    _, _, plan = planned("no_historical", "issue7458")
    answer = explain_segment(plan.parent / "issue7458-work", ID["W1"])
    assert (answer["rule_kind"], answer["required"], answer["tiers"]) == ("load", 2, [])


def test_a_tier_down_is_what_is_missing(planned):
    """The rule wants one replica in hot and one in cold; cold's historicals are gone. hot's one
    historical serves all four: hot is fully replicated, cold misses 4 replicas of 4 segments.
    Nothing is unavailable and nothing can be done."""
    for summary, ops, _ in both(planned, "tier_down").values():
        assert ops.empty
        assert summary["status_after"]["tiers"] == {"hot": {"fully_replicated": 4}}
        assert summary["undone"] == {
            "unavailable": 0,
            "tiers": {"cold": tier_without_historicals(4, 4), "hot": NOTHING_LEFT},
        }
        assert kinds(summary) == ["unknown_tier"]


def test_a_tier_all_decommissioning_keeps_its_replicas(planned):
    """d1 and d2, the tier's only historicals, are both decommissioning and both serve W1-W4 (the
    target, 2): there is no historical to move them to, and dropping would leave a segment below
    its target. No operation; the 8 replicas stay on decommissioning historicals, and no number of
    runs moves them. issue7458's stages 5 and 9 record why (an empty top B: no candidate); the
    druid coordinator records no decisions."""
    plans = both(planned, "tier_decommissioning")
    for coordinator, (summary, ops, _) in plans.items():
        assert ops.empty
        row = summary["undone"]["tiers"]["_default_tier"]
        assert (row["on_decommissioning"], row["underreplicated"], row["runs_to_finish"]) == (8, 0, None)
        assert row["runs_how"] == "no live historical in the tier"
        assert row["stopped_by"] == ({CAUSES["no_candidate"]: 4} if coordinator == "issue7458" else {})


def test_the_only_holder_decommissioning_moves_its_segments_first(planned):
    """d1 (decommissioning) is the only holder of W1 and W2 (rule: one replica). h2 is the only
    historical left: both move there, newest first (W2, then W1), the drop at d1 waiting for the
    load. issue7458: stage 5, queue type decommissioning; Druid: ``BalanceSegments`` (duty 6) moves
    off decommissioning servers first, MOVE_TO and MOVE_FROM."""
    plans = both(planned, "only_holder_decommissioning")
    for summary, ops, _ in plans.values():
        assert moves(ops) == [("W2", "h2", "d1"), ("W1", "h2", "d1")]
        assert set(ops.loc[ops.action == "LOAD", "queue_type"]) == {"decommissioning"}
        assert summary["undone"] == {"unavailable": 0, "tiers": {"_default_tier": NOTHING_LEFT}}
    assert set(plans["issue7458"][1]["stage"]) == {5}
    assert set(plans["druid"][1]["stage"]) == {6}
    assert set(plans["druid"][1]["reason"]) == {"MOVE_TO", "MOVE_FROM"}


def test_a_full_tier_loads_nothing(planned):
    """h1 (max 200 bytes) serves W1 and W2: full; h2 (max 100) serves W3 and W4: over. Each
    segment has one replica of its two: 4 under-replicated, 4 replicas missing; no room anywhere,
    so no load and no move, and more runs do not help. issue7458's decisions name capacity;
    without decisions (druid), no live historical has a free byte says the same."""
    plans = both(planned, "full")
    for summary, ops, _ in plans.values():
        assert ops.empty
        row = summary["undone"]["tiers"]["_default_tier"]
        assert (row["underreplicated"], row["missing_replicas"], row["runs_to_finish"]) == (4, 4, None)
        assert summary["undone"]["unavailable"] == 0
    assert plans["issue7458"][0]["undone"]["tiers"]["_default_tier"]["stopped_by"] == {CAUSES["capacity"]: 4}
    assert plans["druid"][0]["undone"]["tiers"]["_default_tier"]["runs_how"] == NO_ROOM_HOW


def test_a_historical_of_max_size_0_takes_nothing(planned):
    """h1 has max_size 0 and the rule wants one replica of W1 and W2, which nothing serves: both
    stay unavailable (unreplicated: counted in ``unavailable``, not as under-replicated), 2
    replicas missing, for good."""
    plans = both(planned, "max_size_0")
    for summary, ops, _ in plans.values():
        assert ops.empty
        assert summary["undone"]["unavailable"] == 2 and unavailable_metric(summary) == (2, 2)
        row = summary["undone"]["tiers"]["_default_tier"]
        assert (row["underreplicated"], row["missing_replicas"], row["runs_to_finish"]) == (0, 2, None)
    assert plans["issue7458"][0]["undone"]["tiers"]["_default_tier"]["stopped_by"] == {CAUSES["capacity"]: 2}


def test_a_rule_naming_only_a_tier_without_historicals_loads_nothing_and_says_why(planned):
    """The only rule wants 2 replicas in ``nosuchtier`` (a typo): nothing serves W1-W4 and no
    tier of the cluster is asked for them. The plan loads nothing; every segment is unavailable,
    and ``undone`` says it is ``nosuchtier``'s 8 replicas, stopped by its having no historical;
    ``_default_tier``, with its two idle historicals, has nothing to do. So does the report."""
    for summary, ops, plan in both(planned, "absent_tier").values():
        assert ops.empty
        assert summary["undone"] == {
            "unavailable": 4,
            "tiers": {"_default_tier": NOTHING_LEFT, "nosuchtier": tier_without_historicals(4, 8)},
        }
        assert summary["alerts"] == [
            {
                "kind": "unknown_tier",
                "message": "tier nosuchtier is named by a rule but has no historical server; left out of every sum",
            }
        ]
        assert unavailable_metric(summary) == (4, 4)
        report = (plan / "report.html").read_text()
        assert 'data-tier="nosuchtier"' in report and NO_HISTORICAL in report


def test_decommissioning_an_unknown_server_changes_nothing(planned):
    """decommissioningNodes names ghost:8083, which is no historical: an alert; h1 and h2 both
    serve W1 and W2 (target 2): nothing to do."""
    for summary, ops, _ in both(planned, "unknown_decommissioning").values():
        assert ops.empty
        assert kinds(summary) == ["unknown_decommissioning_node"]
        assert summary["undone"] == {"unavailable": 0, "tiers": {"_default_tier": NOTHING_LEFT}}


def test_no_rule_at_all_leaves_segments_where_they_are(planned):
    """``_default`` is empty and ``wiki`` has no rule: no segment matches a rule (an alert for the
    four); h1 keeps W1 and W2, W3 and W4 stay unserved; no rule wants a replica, so nothing is
    counted unavailable."""
    for summary, ops, _ in both(planned, "no_rules").values():
        assert ops.empty
        [alert] = summary["alerts"]
        assert (alert["kind"], alert["count"]) == ("no_rule_matches", 4)
        assert summary["undone"] == {"unavailable": 0, "tiers": {"_default_tier": NOTHING_LEFT}}


def test_a_datasource_whose_rules_drop_everything(planned):
    """``wiki``'s own rule is ``dropForever``. issue7458 drops every served replica of W1 and W2
    (stage 12, reason ``drop_rule``); Druid's ``RunRules`` marks the two segments unused in the
    metadata, and a later run drops them: no operation in this one."""
    plans = both(planned, "drop_everything")
    summary, ops, _ = plans["issue7458"]
    assert sorted((NAME[r.segment_id], r.server, r.stage, r.reason) for r in ops.itertuples()) == [
        ("W1", "h1", 12, "drop_rule"),
        ("W1", "h2", 12, "drop_rule"),
        ("W2", "h1", 12, "drop_rule"),
        ("W2", "h2", 12, "drop_rule"),
    ]
    summary, ops, _ = plans["druid"]
    assert ops.empty and summary["druid_run"]["marked_unused"] == 2
    for summary, _, _ in plans.values():
        assert summary["undone"] == {"unavailable": 0, "tiers": {"_default_tier": NOTHING_LEFT}}
