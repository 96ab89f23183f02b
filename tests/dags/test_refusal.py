"""Bad input in a real DAG run (``dag.test()``): the task that finds it fails at once, without a
retry, with one line naming the file, the row, the value and what was expected, and no traceback;
nothing is published (``segment_balancer_airflow.refusal``)."""

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


def test_a_run_that_does_not_fit_on_the_disk_is_refused_before_it_starts(airflow_home, tmp_path, capfd, monkeypatch):
    """resolve_snapshot estimates the run's bytes from the snapshot and refuses in one line, naming
    the path, the free bytes and the estimate, with no retry and before any work directory."""
    import shutil as shutil_module
    from collections import namedtuple

    from airflow.dag_processing.dagbag import DagBag

    from segment_balancer_airflow.disk import estimate_run_bytes

    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__SPARK_MODE", "spark-submit")
    home = tmp_path / "home"
    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(home))
    usage = namedtuple("usage", "total used free")
    real = shutil_module.disk_usage
    monkeypatch.setattr(
        shutil_module,
        "disk_usage",
        lambda p: usage(10**12, 10**12 - 1000, 1000) if str(p).startswith(str(tmp_path)) else real(p),
    )
    dag = DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"]
    run = dag.test(run_conf={"snapshot": str(SAMPLE)})
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    out = capfd.readouterr()
    text = out.out + out.err
    estimate = estimate_run_bytes(SAMPLE, compare=True)  # compare_with_druid is on by default
    assert run.state == "failed"
    assert tis["resolve_snapshot"].state == "failed" and tis["resolve_snapshot"].try_number == 1
    assert (
        f"no room: {tmp_path} has 0.00 GiB (1,000 bytes) free, and a run on {SAMPLE} is estimated to write "
        f"{estimate / 2**30:.2f} GiB ({estimate:,} bytes) there"
    ) in text
    assert "Traceback" not in text and not home.exists()
