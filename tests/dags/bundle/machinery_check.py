"""Test-only DAG (bundle ``test-dags``): two tiny stages hand groups through XCom.

Used by tests/dags/test_airflow_machinery.py: ``dag.test()`` needs its DAG in a DAG bundle.
Trigger conf: ``{"snapshot": DIR, "work": DIR}``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import dag, task

from segment_balancer_airflow.operators import StageSubmitOperator

TINY_APPS = Path(__file__).resolve().parents[2] / "plugins"


@dag(
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=UTC),
    tags=["test"],
    default_args={"retries": 0},
    params={"snapshot": "", "work": ""},
    doc_md=__doc__,
)
def machinery_check():
    common = {
        "stage_app": "tiny_groups_app",
        "apps_dir": TINY_APPS,
        "snapshot": "{{ params.snapshot }}",
        "work": "{{ params.work }}",
    }
    first = StageSubmitOperator(task_id="first", **common)
    second = StageSubmitOperator(task_id="second", groups_from="first", **common)

    @task
    def check(groups: dict) -> int:
        assert list(groups["groups"]) == ["Stage1", "Stage2"], groups
        return groups["stage"]

    first >> second >> check(second.output)


machinery_check()
