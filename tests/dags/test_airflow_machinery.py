"""The machinery the end-to-end DAG test relies on: ``dag.test()`` against the test AIRFLOW_HOME
(fixture ``airflow_home``), the Spark connection from the environment, and the object-storage XCom
backend carrying segment groups from one ``StageSubmitOperator`` to the next.

The DAG is ``bundle/machinery_check.py`` (bundle ``test-dags``, see conftest_airflow.py): the two
stages run the tiny app of tests/plugins/.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest
from pyroaring import BitMap

BUNDLE = Path(__file__).resolve().parent / "bundle"


@pytest.mark.spark_submit
def test_dag_test_hands_groups_through_object_storage_xcom(airflow_home, tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(BUNDLE))
    assert bag.import_errors == {}
    work = tmp_path / "work"
    work.mkdir()

    run = bag.dags["machinery_check"].test(run_conf={"snapshot": str(tmp_path), "work": str(work)})

    assert run.state == "success", run.state
    tis = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert tis == {"first": "success", "second": "success", "check": "success"}
    # the second stage got the first one's groups from XCom and added its own
    handed = json.loads((work / "xcom" / "second.in.json").read_text())
    returned = json.loads((work / "xcom" / "second.out.json").read_text())
    assert handed["stage"] == 1 and list(returned["groups"]) == ["Stage1", "Stage2"]
    assert BitMap.deserialize(base64.b64decode(returned["groups"]["Stage1"])) == BitMap(range(0, 30_000, 3))
    # values above the 16 KiB threshold went to gzip files under $AIRFLOW_HOME/xcom
    stored = [json.loads(gzip.decompress(p.read_bytes())) for p in (airflow_home / "xcom").rglob("*.gz")]
    assert returned in stored  # two groups: above the threshold
    assert handed not in stored  # one group (~11 KiB): stayed in the DB
