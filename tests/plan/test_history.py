"""Plan history: published plans newest first, each compared with the previous plan of its cluster."""

from __future__ import annotations

import json
import os

from plan_summaries import summary, whatif_record, write_plan_dir

from segment_balancer.plan.history import headline, plan_history, read_plan
from segment_balancer.planner.summary import PlanSummary


def test_headline_numbers_of_a_summary():
    s = summary(
        loads=7, drops=3, moves=2, unreplicated=(4, 1), underreplicated=(6, 2), spread=(9, 3), deferred=5, waiting=8
    )
    s["status_after"]["tiers"]["cold"] = {"underreplicated": 10}  # summed over tiers
    assert headline(PlanSummary.model_validate(s)) == {
        "operations": 10,
        "loads": 7,
        "drops": 3,
        "moves": 2,
        "unreplicated_before": 4,
        "unreplicated_after": 1,
        "underreplicated_before": 6,
        "underreplicated_after": 12,
        "deferred_drops": 5,
        "overshadowed_waiting": 8,
        "max_minus_min_before": {"hot": 9},
        "max_minus_min_after": {"hot": 3},
    }


def test_plans_newest_first_each_compared_with_the_previous_plan_of_its_cluster(tmp_path):
    root = tmp_path / "plans"
    # prod: three plans by snapshot time (written out of order), a what-if between them; and one plan of qa
    write_plan_dir(
        root / "run_c", summary("prod", "2024-01-03T00:00:00.000Z", loads=4, unreplicated=(2, 0), spread=(6, 2))
    )
    write_plan_dir(
        root / "run_a",
        summary(
            "prod",
            "2024-01-01T00:00:00.000Z",
            loads=10,
            drops=2,
            unreplicated=(9, 3),
            underreplicated=(5, 4),
            spread=(12, 5),
        ),
    )
    write_plan_dir(
        root / "run_b",
        summary(
            "prod", "2024-01-02T00:00:00.000Z", loads=6, unreplicated=(3, 1), underreplicated=(4, 1), spread=(8, 4)
        ),
    )
    write_plan_dir(
        root / "whatif",
        summary(
            "prod", "2024-01-02T12:00:00.000Z", loads=50, spread=(8, 1), whatif=whatif_record(decommission=("h1",))
        ),
    )
    write_plan_dir(root / "qa_1", summary("qa", "2024-01-02T06:00:00.000Z", loads=1))
    (root / ".run_d.tmp-1234").mkdir()  # a publish under way
    (root / "LATEST").write_text("run_c\n")
    (root / "broken").mkdir()
    (root / "broken" / "summary.json").write_text("{not json")

    entries = plan_history(root)
    assert [e.name for e in entries] == ["run_c", "whatif", "qa_1", "run_b", "run_a"]
    by = {e.name: e for e in entries}
    assert by["run_a"].previous is None and by["run_a"].diff == {}
    assert by["qa_1"].previous is None
    # run_b - run_a: operations 6 - 12, unreplicated after 1 - 3, underreplicated after 1 - 4, spread 4 - 5
    assert by["run_b"].previous == "run_a"
    assert by["run_b"].diff == {
        "operations": -6,
        "loads": -4,
        "drops": -2,
        "moves": 0,
        "unreplicated_after": -2,
        "underreplicated_after": -3,
        "max_minus_min_after": {"hot": -1},
    }
    # the what-if plan is compared with run_b, but run_c's previous plan is run_b, not the what-if
    assert by["whatif"].whatif and by["whatif"].previous == "run_b"
    assert by["whatif"].diff["operations"] == 44 and by["whatif"].diff["max_minus_min_after"] == {"hot": -3}
    assert by["run_c"].previous == "run_b"
    assert by["run_c"].diff == {
        "operations": -2,
        "loads": -2,
        "drops": 0,
        "moves": 0,
        "unreplicated_after": -1,
        "underreplicated_after": -1,
        "max_minus_min_after": {"hot": -2},
    }
    assert [e.name for e in plan_history(root, cluster="qa")] == ["qa_1"]
    assert plan_history(tmp_path / "nowhere") == []


def test_read_plan_flags_validation_report_and_simulation(tmp_path):
    plan = write_plan_dir(tmp_path / "p", summary(), valid=False)
    entry = read_plan(plan)
    assert (entry.valid, entry.has_report, entry.has_simulation, entry.whatif) == (False, False, False, False)
    (plan / "report.html").write_text("<html></html>")
    (plan / "simulation").mkdir()
    (plan / "simulation" / "report.html").write_text("<html></html>")
    (plan / "validation.json").write_text(json.dumps({"success": True}))
    os.utime(plan / "summary.json", (1_700_000_000, 1_700_000_000))
    entry = read_plan(plan)
    assert (entry.valid, entry.has_report, entry.has_simulation) == (True, True, True)
    assert entry.published_at == "2023-11-14T22:13:20.000Z"
    assert (entry.cluster, entry.snapshot_id, entry.snapshot_time) == (
        "prod",
        "prod@2024-01-01T00:00:00.000Z",
        "2024-01-01T00:00:00.000Z",
    )


def test_snapshot_time_from_the_snapshot_id_of_older_summaries(tmp_path):
    s = summary("prod", "2024-05-06T07:08:09.000Z")
    del s["snapshot_time"]  # summaries written before it was recorded
    assert read_plan(write_plan_dir(tmp_path / "old", s)).snapshot_time == "2024-05-06T07:08:09.000Z"


def test_plans_command(tmp_path, capsys):
    from segment_balancer.tools.cli import main

    root = tmp_path / "plans"
    write_plan_dir(root / "a", summary("prod", "2024-01-01T00:00:00.000Z", loads=3))
    write_plan_dir(root / "b", summary("prod", "2024-01-02T00:00:00.000Z", loads=1))
    assert main(["plans", str(root), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["previous"], p["diff"].get("operations")) for p in listed] == [
        ("b", "a", -2),
        ("a", None, None),
    ]
    assert main(["plans", str(root)]) == 0
    assert "(\N{MINUS SIGN}2)" in capsys.readouterr().out
    assert main(["plans", str(tmp_path / "none")]) == 0
    assert "no plans published yet" in capsys.readouterr().out
