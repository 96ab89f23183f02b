"""What meta.json reports beside the tables: alerts and counts from stage 0's findings."""

from __future__ import annotations

from segment_balancer.druid.rules import Rule
from segment_balancer.planner.snapshot_alerts import Findings, alerts, unlisted_counts, waiting_counts

NOTHING = Findings(0, [], 0, [], 0, [], [], [], [])


def test_no_finding_no_alert_but_the_small_files():
    rules = {"_default": [Rule("loadForever", "load", {"hot": 1, "cold": 1})]}
    kinds = [a["kind"] for a in alerts(rules, {"hot"}, {"h9"}, {"h1"}, NOTHING, 900_000)]
    assert kinds == ["unknown_tier", "unknown_decommissioning_node"]
    assert [a["kind"] for a in alerts({}, set(), set(), set(), NOTHING, 900_000)] == ["no_historical"]


def test_findings_alerts_and_counts():
    found = Findings(
        stale_n=7,
        stale=[
            {"segment_id": "b", "server": "h2", "requested_at_ms": 2},
            {"segment_id": "a", "server": "h1", "requested_at_ms": 1},
        ],
        norule_n=1,
        norule=[{"idx": 3, "segment_id": "c"}],
        nothing_n=0,
        nothing=[],
        unlisted=[
            {"datasource": "z", "segments": 1, "replicas": 0},
            {"datasource": "y", "segments": 2, "replicas": 3},
        ],
        unlisted_ids=["u2", "u1"],
        waiting=[{"datasource": "w", "segments": 1, "replicas": 2}],
    )
    out = alerts({}, {"t"}, set(), {"h1"}, found, 900_000)
    assert [a["kind"] for a in out] == ["load_queued_too_long", "no_rule_matches"]
    assert out[0]["examples"] == ["a on h1", "b on h2"]
    assert out[0]["message"] == "7 loads queued longer than 900 s"
    assert unlisted_counts(found) == {
        "segments": 3,
        "served_replicas": 3,
        "per_datasource": {
            "y": {"segments": 2, "served_replicas": 3},
            "z": {"segments": 1, "served_replicas": 0},
        },
        "examples": ["u1", "u2"],
    }
    assert waiting_counts(found)["per_datasource"] == {"w": {"segments": 1, "served_replicas": 2}}
