"""Bad input in a real DAG run (``dag.test()``): the task that finds it fails at once, without a
retry, with one line naming the file, the row, the value and what was expected, and no traceback;
nothing is published (issue 27, ``segment_balancer_airflow.refusal``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "include/segment_balancer/snapshots/druid_sample"


def test_a_bad_snapshot_fails_resolve_snapshot_at_once_in_one_line(airflow_home, tmp_path, capfd, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__SPARK_MODE", "spark-submit")  # no Connect session to release
    home = tmp_path / "home"  # its own: other tests of this session publish plans under the shared one
    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(home))
    snap = tmp_path / "snap"
    shutil.copytree(SAMPLE, snap)
    rows = json.loads((snap / "servers.json").read_text())
    rows[1]["max_size"] = -5
    (snap / "servers.json").write_text(json.dumps(rows))

    dag = DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"]
    run = dag.test(run_conf={"snapshot": str(snap)})
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    out = capfd.readouterr()
    text = out.out + out.err
    assert run.state == "failed"
    assert tis["resolve_snapshot"].state == "failed" and tis["resolve_snapshot"].try_number == 1
    assert "input refused: servers.json row 1: max_size must be >= 0, got -5" in text
    assert "Traceback" not in text
    assert not (home / "plans").exists()
