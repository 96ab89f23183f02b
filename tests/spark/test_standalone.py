"""``segment_balancer.spark.standalone``: the workers a cluster directory started, found by the
pid files ``spark-daemon.sh`` writes (the DAG's end-to-end test starts a real two-worker cluster)."""

from __future__ import annotations

from segment_balancer.spark.standalone import MASTER_CLASS, WORKER_CLASS, StandaloneCluster


def test_worker_pids_are_read_from_the_workers_pid_files_by_instance(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    (pids / f"spark-segment_balancer-{WORKER_CLASS}-2.pid").write_text("4002\n")
    (pids / f"spark-segment_balancer-{WORKER_CLASS}-1.pid").write_text("4001\n")
    (pids / f"spark-segment_balancer-{WORKER_CLASS}-3.pid").write_text("not a pid\n")
    (pids / f"spark-segment_balancer-{MASTER_CLASS}-1.pid").write_text("4000\n")
    cluster = StandaloneCluster(tmp_path, workers=3)
    assert cluster.worker_pids() == [4001, 4002]
    assert StandaloneCluster(tmp_path / "elsewhere").worker_pids() == []
