"""``explain --plan``: what a plan did with a segment and why, from the decisions the stages recorded
(``segment_balancer.plan.explain.explain_plan``), on the hand-worked cluster of tests/explain_cluster.py.

Worked by hand (ALGORITHM.md; ``M`` = 10, so loading ≤ floor(10 × 70 %) = 7 for stages 1–4, all
loads ≤ floor(10 × (70 + 10) %) = 8 for stage 6, decommissioning ≤ 1 for stage 5). Index order is
newest first: ``w0``, ``q8`` … ``q1``, ``y0``, ``s1``, ``s0``/``z0``.

- **Capacity** (``w0``): ``t2x`` (150 bytes) has ``z0`` (100 bytes) queued, so 50 bytes are
  available; stage 1 cannot load the 100-byte ``w0`` there, nor can the revisits in 6 and 8. The
  tier has one historical, so top ``B`` is ``[t2x]`` (``B`` is at most the servers of the tier).
- **Full queue** (``q1``): stage 1 loads ``q8`` … ``q2`` on ``t3x``, 7 loading loads; ``q1``
  would be the 8th, over stage 1's limit 7. Stage 6 allows 8 loads of any type: ``q1`` loads there.
- **Availability rule** (``z0``): ``t1`` holds 2 replicas for a target of 1, ``t2`` 1 (queued) for
  1; 3 − 2 = 1 excess. Loaded replicas (served, in tiers with a target) are 2, ``required`` =
  min(2, 1 + 1) = 2, so dropping either ``t1`` replica would leave 1 < 2: stage 12 defers it.
  Its drop candidate is ``t1b`` (equal cost 0 and equal room as ``t1a``: the larger name first).
- **A move** (``s1``): ``a`` is decommissioning; stage 5 moves ``s1`` to the empty ``c`` (see
  tests/test_whatif.py for the costs) — a ``decommissioning`` LOAD on ``c`` and the DROP from
  ``a`` that waits for it.
"""

from __future__ import annotations

import json

import pytest
from explain_cluster import seg, write_cluster

from segment_balancer.plan.explain import PlanExplainError, explain_plan, render_explain


@pytest.fixture(scope="module")
def plan(spark, tmp_path_factory):
    from segment_balancer.tools.pipeline import run_plan

    root = tmp_path_factory.mktemp("explain")
    run_plan(spark, write_cluster(root / "snap"), root / "plan")
    return root / "plan"


def stage_of(answer: dict, app: str) -> dict:
    return next(s for s in answer["stages"] if s["app"] == app)


def test_a_load_stopped_by_capacity_says_which_server_and_how_many_bytes(plan):
    answer = explain_plan(plan, seg("w0"))
    assert answer["tiers"] == {
        "t2": {"target": 1, "count_before": 0, "count_after": 0, "servers_before": [], "servers_after": []}
    }
    for app in ("stage01_unreplicated", "stage06_first_revisit", "stage08_second_revisit"):
        (decision,) = stage_of(answer, app)["decisions"]
        assert decision["outcome"] == "not_loaded"
        assert decision["detail"] == {
            "tiers": {
                "t2": {
                    "target": 1,
                    "count": 0,
                    "b": 1,
                    "tried": [["t2x:8083", "capacity: 50 bytes available, the segment has 100"]],
                }
            }
        }
    assert not any(s["operations"] for s in answer["stages"])


def test_a_load_stopped_by_the_stage_1_queue_limit_then_made_in_stage_6(plan):
    answer = explain_plan(plan, seg("q1"))
    (decision,) = stage_of(answer, "stage01_unreplicated")["decisions"]
    assert decision["outcome"] == "not_loaded"
    assert decision["detail"]["tiers"]["t3"]["tried"] == [
        ["t3x:8083", "load queue full for stage 1: 7 loading loads queued, its limit 7"]
    ]
    six = stage_of(answer, "stage06_first_revisit")
    assert six["decisions"] == []
    assert [(o["action"], o["server"], o["queue_type"], o["reason"], o["depends_on"]) for o in six["operations"]] == [
        ("LOAD", "t3x:8083", "loading", "unreplicated", None)
    ]
    assert six["counts"] == {"t3": 1}
    assert "ToBecomeFullyReplicated[t3]" in six["groups"]
    assert answer["tiers"]["t3"]["servers_after"] == ["t3x:8083"]
    # q2 (loaded in stage 1) has no decision: a stage records only what it left undone
    assert all(not s["decisions"] for s in explain_plan(plan, seg("q2"))["stages"])


def test_a_drop_deferred_by_the_availability_rule(plan):
    answer = explain_plan(plan, seg("z0"))
    assert {t: (v["target"], v["count_before"], v["count_after"]) for t, v in answer["tiers"].items()} == {
        "t1": (1, 2, 2),
        "t2": (1, 1, 1),
    }
    assert answer["required"] == 2
    (decision,) = stage_of(answer, "stage12_unload")["decisions"]
    assert decision["outcome"] == "deferred"
    assert decision["detail"] == {
        "deferred": 1,
        "loaded": 2,
        "required": 2,
        "refused": [["t1", "t1b:8083"]],
        "targets": {"t1": 1, "t2": 1},
        "counts": {"t1": 2, "t2": 1},
    }
    assert "dropping from t1b:8083 [t1] refused: it would leave fewer than 2 loaded replicas" in render_explain(answer)


def test_a_move_off_a_decommissioning_server(plan):
    answer = explain_plan(plan, seg("s1"))
    five = stage_of(answer, "stage05_decommissioning")
    (load, drop) = five["operations"]
    assert (load["action"], load["server"], load["queue_type"], load["reason"]) == (
        "LOAD",
        "c:8083",
        "decommissioning",
        "decommissioning",
    )
    assert (drop["action"], drop["server"], drop["reason"], drop["depends_on"]) == (
        "DROP",
        "a:8083",
        "decommissioning",
        load["op_id"],
    )
    assert five["decisions"] == []
    assert answer["tiers"]["t4"] == {
        "target": 1,
        "count_before": 1,
        "count_after": 1,
        "servers_before": ["a:8083"],
        "servers_after": ["c:8083"],
    }
    text = render_explain(answer)
    assert f"op {load['op_id']}: LOAD on c:8083 [t4] (decommissioning queue), reason decommissioning" in text
    assert f"op {drop['op_id']}: DROP on a:8083 [t4], reason decommissioning, after op {load['op_id']}" in text


def test_druid_metrics_of_the_plan(plan):
    # Hand-counted from the cases above: 8 loads in t3 (7 in stage 1, 1 in stage 6), 2 moves in t4;
    # missing replicas at the snapshot: w0 in t2, q1..q8 in t3; after: w0 only; unavailable: w0, q1..q8.
    metrics = json.loads((plan / "summary.json").read_text())["druid_metrics"]
    got = {(m["metric"], m.get("tier"), m["at"]): m["value"] for m in metrics}
    assert {k: v for k, v in got.items() if k[2] == "plan" and not k[0].startswith("segment/under")} == {
        ("segment/assigned/count", "t3", "plan"): 8,
        ("segment/moved/count", "t4", "plan"): 2,
        ("segment/unavailable/count", None, "plan"): 1,
    }
    assert got[("segment/unavailable/count", None, "snapshot")] == 9
    assert {
        t: (got[("segment/underReplicated/count", t, "snapshot")], got[("segment/underReplicated/count", t, "plan")])
        for t in ("t1", "t2", "t3", "t4")
    } == {"t1": (0, 0), "t2": (1, 1), "t3": (8, 0), "t4": (0, 0)}
    assert got[("tier/historical/count", "t4", "snapshot")] == 3
    assert got[("tier/total/capacity", "t2", "snapshot")] == 150


def test_the_cli_prints_the_answer_and_refuses_unknown_segments(plan, capsys):
    from segment_balancer.tools.cli import main

    assert main(["explain", "--plan", str(plan), "--segment", seg("q1")]) == 0
    out = capsys.readouterr().out
    assert "t3x:8083: load queue full for stage 1: 7 loading loads queued, its limit 7" in out
    assert main(["explain", "--plan", str(plan), "--segment", seg("q1"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["segment_id"] == seg("q1")
    assert main(["explain", "--plan", str(plan), "--segment", "nope"]) == 2
    assert "segment nope is not in the snapshot" in capsys.readouterr().err


def test_a_plan_without_explain_tables_is_refused_clearly(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(PlanExplainError, match="no segments.parquet, decisions.parquet, stage_groups.json"):
        explain_plan(tmp_path, "x")


def test_a_balancing_decision_shows_the_margin_test():
    """``explain --plan`` text of a stage-7 ``no_destination``: both costs and the threshold a
    destination had to beat."""
    from segment_balancer.plan.explain import OUTCOME_TEXT, render_explain

    detail = {
        "target": 1,
        "count": 1,
        "b": 1,
        "top_b": ["b"],
        "trigger": "betterServerInTopB",
        "holders": ["a"],
        "margin": 10.0,
        "costs": {"b": 0.5, "a": 2.0},
        "source": "a",
        "threshold": 1.8,
        "tried": [["b", "load queue full"]],
    }
    report = {
        "segment_id": "s",
        "datasource": "ds",
        "size_bytes": 1,
        "rule_kind": "load",
        "used": True,
        "overshadowed": False,
        "waiting": False,
        "tiers": {},
        "stages": [
            {
                "app": "stage07_balancing",
                "stage": 7,
                "groups": [],
                "counts": {},
                "operations": [],
                "decisions": [
                    {"tier": "t", "outcome": "no_destination", "why": OUTCOME_TEXT["no_destination"], "detail": detail}
                ],
            }
        ],
    }
    text = render_explain(report)
    assert "placement costs: b 0.5, a 2" in text
    assert "margin test: a destination must cost below 1.8 = 2 (holder a) x (1 - 10.0/100)" in text
    assert "    b: load queue full" in text


def test_an_operation_loading_a_part_says_which():
    """A LOAD of a partial-load rule's segment shows its matcher, its parts (the JSON list read back)
    and its fingerprint; any other operation shows none."""
    from segment_balancer.plan.explain import _operation

    base = {"op_id": 3, "action": "LOAD", "tier": "hot", "server": "h1", "queue_type": "loading"}
    base |= {"reason": "unreplicated", "depends_on": None}
    partial = {"partial_matcher": "globProjection", "partial_type": "partialProjection"}
    partial |= {"partial_parts": '["by_lang"]', "partial_fingerprint": "v1:58a2cf3e329b55d3"}
    assert _operation({**base, **partial})["partial"] == {
        "matcher": "globProjection",
        "type": "partialProjection",
        "parts": ["by_lang"],
        "fingerprint": "v1:58a2cf3e329b55d3",
    }
    assert "partial" not in _operation({**base, "partial_fingerprint": None})
