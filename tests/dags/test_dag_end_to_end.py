"""The real DAG, end to end with ``dag.test()``: resolve_snapshot, prepare, the thirteen stage
applications (each a spark-submit), assemble, the Great Expectations gate and publish, on the
bundled ``druid_sample`` snapshot. The plan must be the hand-worked one (see test_pipeline.py), and
identical to the plan the CLI computes in one Spark session (same input, same plan)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from druid_sample_plan import EXPECTED_WITHOUT_BALANCING, SNAPSHOT, rows

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.spark_submit
def test_segment_balancing_dag_publishes_the_hand_worked_plan(airflow_home, druid_sample_planned):
    from airflow.dag_processing.dagbag import DagBag

    from segment_balancer.stages import APP_NAMES

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    run = bag.dags["segment_balancing"].test(run_conf={"snapshot": str(SNAPSHOT)})

    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert set(states) == {"resolve_snapshot", *APP_NAMES, "validate_plan", "publish_plan"}
    assert set(states.values()) == {"success"}

    plans = Path(os.environ["SEGMENT_BALANCER_HOME"]) / "plans"
    published = plans / (plans / "LATEST").read_text().strip()
    ops = pd.read_parquet(published / "operations.parquet")
    assert rows(ops, [1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13]) == EXPECTED_WITHOUT_BALANCING
    assert len(ops[ops.stage == 7]) == 2  # one balancing move (see test_pipeline.py)
    # Determinism: fifteen spark-submits under Airflow give exactly the plan of the one-session CLI.
    pd.testing.assert_frame_equal(ops, druid_sample_planned[2])
    assert json.loads((published / "validation.json").read_text())["success"] is True
    groups = {g["name"]: g["count"] for g in json.loads((published / "groups.json").read_text())}
    assert groups["StillUnreplicated"] == 0
