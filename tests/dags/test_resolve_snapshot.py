"""resolve_snapshot (first task of segment_balancing), called directly on tmp directories."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def resolve():
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"]
    return dag.get_task("resolve_snapshot").python_callable


@pytest.fixture
def root(tmp_path):
    for name, when in (("old", "2024-01-01T00:00:00Z"), ("new", "2024-06-01T00:00:00Z")):
        (tmp_path / "snaps" / name).mkdir(parents=True)
        (tmp_path / "snaps" / name / "snapshot.json").write_text(json.dumps({"snapshot_time": when}))
    return tmp_path / "snaps"


def _call(resolve, root, monkeypatch, tmp_path, snapshot="", overrides=None, logical_date=None,
          run_after=datetime(2030, 1, 1, tzinfo=timezone.utc), run_id="manual__2024-07-01T00:00:00+00:00"):
    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(tmp_path / "home"))
    params = {"snapshot": snapshot, "snapshots_root": str(root), "config_overrides": overrides or {}}
    return resolve(params=params, run_id=run_id, logical_date=logical_date,
                   dag_run=SimpleNamespace(run_after=run_after))


def test_by_date_then_run_after(resolve, root, monkeypatch, tmp_path):
    by_logical = _call(resolve, root, monkeypatch, tmp_path, logical_date=datetime(2024, 3, 1, tzinfo=timezone.utc))
    assert Path(by_logical["snapshot"]).name == "old"
    manual = _call(resolve, root, monkeypatch, tmp_path)  # no logical_date: run_after (2030)
    assert Path(manual["snapshot"]).name == "new"


def test_param_wins_and_names_resolve_under_the_root(resolve, root, monkeypatch, tmp_path):
    assert Path(_call(resolve, root, monkeypatch, tmp_path, snapshot="old")["snapshot"]).name == "old"
    assert _call(resolve, root, monkeypatch, tmp_path, snapshot=str(root / "new"))["snapshot"] == str(root / "new")
    with pytest.raises(FileNotFoundError, match="not a snapshot directory"):
        _call(resolve, root, monkeypatch, tmp_path, snapshot="missing")


def test_fresh_work_dir_config_and_paths(resolve, root, monkeypatch, tmp_path):
    first = _call(resolve, root, monkeypatch, tmp_path, overrides={"maxSegmentsInNodeLoadingQueue": 7})
    home = tmp_path / "home"
    safe = "manual__2024-07-01T00_00_00_00_00"
    assert first["work"] == str(home / "runs" / safe / "work")
    assert first["plan_dir"] == str(home / "runs" / safe / "work" / "plan")
    assert first["publish_dir"] == str(home / "plans" / safe)
    assert json.loads(Path(first["config_file"]).read_text()) == {"maxSegmentsInNodeLoadingQueue": 7}
    (Path(first["work"]) / "leftover").write_text("x")
    again = _call(resolve, root, monkeypatch, tmp_path)  # re-running the run starts clean
    assert again["work"] == first["work"] and not (Path(again["work"]) / "leftover").exists()
    assert json.loads(Path(again["config_file"]).read_text()) == {}
