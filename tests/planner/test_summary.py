"""The typed ``summary.json`` (``segment_balancer.planner.summary``): a real plan's summary is a
``PlanSummary`` and is written as one, with its JSON schema beside it; a summary without
``schema_version`` reads as version 1; a summary that does not fit is refused naming the file and
the field."""

from __future__ import annotations

import json

import pytest
from plan_summaries import summary, write_plan_dir

from segment_balancer.common.errors import InputError
from segment_balancer.planner.summary import (
    SCHEMA_FILE,
    SCHEMA_VERSION,
    SUMMARY_FILE,
    PlanSummary,
    parse_plan_summary,
    read_plan_summary,
)


def test_the_summary_of_a_real_plan_is_a_plan_summary(druid_sample_planned):
    base, returned, _ = druid_sample_planned
    raw = json.loads((base / "plan" / SUMMARY_FILE).read_text())
    model = read_plan_summary(base / "plan")
    assert raw["schema_version"] == model.schema_version == SCHEMA_VERSION == 1
    # the file is the model's JSON, key for key and in order (no key added, none left out)
    assert json.dumps(model.model_dump(mode="json")) == json.dumps(raw)
    assert returned == raw
    assert (model.cluster, model.snapshot_time) == ("druid-sample", "2013-06-01T00:00:00.000Z")
    assert model.operations == model.loads + model.drops == sum(r.count for r in model.by_stage_tier_action)
    assert {r.tier for r in model.servers} == set(model.balance_before) == set(model.balance_after)
    assert model.timings_seconds["used_segments"].started_at == model.planned_at
    cluster_wide = [m for m in model.druid_metrics if m.metric == "segment/unavailable/count"]
    assert cluster_wide and all(m.tier is None for m in cluster_wide)
    assert all("tier" not in m for m in raw["druid_metrics"] if m["metric"] == "segment/unavailable/count")


def test_the_plan_carries_the_models_json_schema(druid_sample_planned):
    base, _, _ = druid_sample_planned
    for plan in (base / "work" / "plan", base / "plan"):  # written by assemble, copied by publish
        assert json.loads((plan / SCHEMA_FILE).read_text()) == PlanSummary.model_json_schema(), plan
    schema = PlanSummary.model_json_schema()
    assert "schema_version" not in schema["required"] and "snapshot_id" in schema["required"]
    assert "bytes" in schema["$defs"]["ServerHoldings"]["properties"]["max_size"]["description"]


def test_a_summary_without_a_schema_version_reads_as_version_1(tmp_path):
    s = summary(loads=3)
    del s["schema_version"]  # a plan published before the version was written
    model = read_plan_summary(write_plan_dir(tmp_path / "old", s))
    assert model.schema_version == 1 and model.loads == 3


def test_keys_a_summary_leaves_out_stay_out():
    """An alert without ``count``, a cluster-wide metric without ``tier``, an application that ran
    (no ``skipped``) and one without ``started_at`` come back as they were: absent, not null."""
    s = summary()
    s["alerts"] = [
        {"kind": "unknown_tier", "message": "tier cold has no historical"},
        {
            "kind": "load_queued_too_long",
            "count": 2,
            "message": "2 loads queued longer than 900 s",
            "examples": ["a on h1", "b on h2"],
        },
    ]
    s["druid_metrics"].append({"metric": "segment/unavailable/count", "value": 0, "at": "plan"})
    s["timings_seconds"]["stage06_first_revisit"] = {"stage": 6, "seconds": 0.0, "skipped": True}
    model = parse_plan_summary(s, "test")
    assert model.alerts[0].count is None and model.timings_seconds["prepare"].skipped is False
    assert model.model_dump(mode="json") == s


def test_a_wrong_type_names_the_file_and_the_field(tmp_path):
    plan = write_plan_dir(tmp_path / "plan", summary())
    s = summary()
    s["status_after"]["unreplicated"] = "none"
    (plan / SUMMARY_FILE).write_text(json.dumps(s))
    with pytest.raises(InputError) as refused:
        read_plan_summary(plan)
    message = str(refused.value)
    assert str(plan / SUMMARY_FILE) in message and "status_after.unreplicated" in message and '"none"' in message
    s = summary()
    s["servers"][1]["max_size"] = [1]
    with pytest.raises(InputError, match=r"summary.json: not a plan summary: servers\[1\]\.max_size"):
        parse_plan_summary(s, plan / SUMMARY_FILE)


def test_missing_unreadable_unknown_and_newer_summaries_are_refused(tmp_path):
    with pytest.raises(InputError, match=f"{tmp_path}: no summary.json"):
        read_plan_summary(tmp_path)
    (tmp_path / SUMMARY_FILE).write_text("{not json")
    with pytest.raises(InputError, match="summary.json: not a plan summary: not JSON"):
        read_plan_summary(tmp_path)
    (tmp_path / SUMMARY_FILE).write_text("[]")
    with pytest.raises(InputError, match="a JSON object expected"):
        read_plan_summary(tmp_path)
    for key, value, field in (
        ("operation_count", 1, "operation_count"),
        ("schema_version", SCHEMA_VERSION + 1, "schema_version"),
    ):
        (tmp_path / SUMMARY_FILE).write_text(json.dumps({**summary(), key: value}))
        with pytest.raises(InputError, match=f"not a plan summary: {field}"):
            read_plan_summary(tmp_path)
    s = summary()
    del s["balancer"]
    (tmp_path / SUMMARY_FILE).write_text(json.dumps(s))
    with pytest.raises(InputError, match="balancer: Field required"):
        read_plan_summary(tmp_path)
