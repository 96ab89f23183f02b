"""``druid_snapshot_capture`` with ``dag.test()`` against the loopback fake Druid (tests/fake_druid.py),
through the connections ``druid_broker_default`` and ``druid_coordinator_default``: the capture lands
under ``snapshots_root/<cluster>/<time>/``, emits the Asset ``segment_balancing`` is scheduled on, is
what a planning run picks next, and old captures are pruned; a failing Druid fails the task and
leaves the root as it was."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fake_druid as fd

REPO = Path(__file__).resolve().parents[2]


def connect(monkeypatch, fake) -> None:
    host, port = fake.url.split("//")[1].split(":")
    for conn_id, conn_type in (("DRUID_BROKER_DEFAULT", "druid"), ("DRUID_COORDINATOR_DEFAULT", "http")):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id}", json.dumps({"conn_type": conn_type, "host": host, "port": int(port)})
        )


def run_capture_dag(root: Path, retry_delay: timedelta | None = None, **conf):
    """``dag.test()`` of the capture DAG; ``retry_delay`` replaces the tasks' (a minute) so that a
    failing task's retry does not keep the test waiting."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    dag = bag.dags["druid_snapshot_capture"]
    if retry_delay is not None:
        for t in dag.tasks:
            t.retry_delay = retry_delay
    run = dag.test(run_conf={"snapshots_root": str(root), "cluster": "prod", **conf})
    return run, {ti.task_id: ti.state for ti in run.get_task_instances()}


def test_a_capture_lands_emits_the_asset_and_is_planned_on_next(airflow_home, tmp_path, monkeypatch):
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    from segment_balancer.druid.snapshot.loader import load_cluster_version
    from segment_balancer_airflow.snapshots import pick_snapshot

    root = tmp_path / "snapshots"
    old = root / "prod" / "2020-01-01T00-00-00Z"
    old.mkdir(parents=True)
    (old / "snapshot.json").write_text(json.dumps({"snapshot_time": "2020-01-01T00:00:00.000Z", "cluster": "prod"}))

    with fd.fake_druid() as fake:
        connect(monkeypatch, fake)
        run, states = run_capture_dag(root, keep=1)

    assert run.state == "success" and states == {"capture": "success", "prune": "success"}, states
    [captured] = list((root / "prod").iterdir())  # keep=1: the 2020 capture was pruned
    assert captured != old and (captured / "servers.json").is_file() and (captured / "segments.jsonl.gz").is_file()
    meta = json.loads((captured / "snapshot.json").read_text())
    assert meta["cluster"] == "prod" and meta["druid_version"] == "38.0.0"  # the fake is a Druid 38 cluster
    assert load_cluster_version(captured) == "38.0.0"
    assert pick_snapshot(root, datetime.now(UTC)) == captured
    with create_session() as session:
        events = (
            session.query(AssetEvent, AssetModel)
            .filter(AssetEvent.asset_id == AssetModel.id)
            .filter(AssetEvent.source_run_id == run.run_id)
            .all()
        )
    assert [(a.name, e.source_task_id) for e, a in events] == [("segment_balancer_snapshots", "capture")]


def test_a_failing_druid_fails_the_capture_and_leaves_nothing(airflow_home, tmp_path, monkeypatch):
    root = tmp_path / "snapshots"
    root.mkdir()
    with fd.fake_druid(fail_status={"server_segments": 500}) as fake:
        connect(monkeypatch, fake)
        run, states = run_capture_dag(root, retry_delay=timedelta(seconds=1))
        asked = [body for _, _, body in fake.requests if "server_segments" in json.dumps(body)]
    # tried twice (retries 1), the failing query each time
    assert len(asked) == 2, asked
    assert run.state == "failed" and states["capture"] == "failed", states
    assert list(root.iterdir()) == []
