"""The bad-input corpus (``bad_inputs.py``): every kind is refused by the CLI and by the
DAG's task that reads it, in one line naming the file, the row or key, the offending value and what
was expected; exit code 2, no traceback, nothing written under the plans directory.

The DAG side runs each task's own code path: ``resolve_snapshot`` (the DAG's first task) for the
small files and the overrides, before any work directory; the stage applications wrapped as their
operators wrap them (``refusal.refusing_bad_input``) for the segment and replica files, which Spark
reads (one kind of each file: the applications are the CLI's own). ``tests/dags/test_refusal.py``
runs a real ``dag.test()`` and reads its log.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from bad_inputs import KINDS, Kind, bad_snapshot

from segment_balancer.tools.cli import main
from segment_balancer_airflow.refusal import InputRefused

REPO = Path(__file__).resolve().parents[1]
SMALL = [k for k in KINDS if not k.spark]
SPARK = [k for k in KINDS if k.spark]


def test_the_corpus_has_at_least_forty_kinds_over_every_input():
    assert len(KINDS) >= 40
    files = {k.file.removesuffix(".gz") for k in KINDS if k.file} | {"overrides" for k in KINDS if k.file is None}
    assert files >= {
        "servers.json",
        "load_queues.json",
        "rules.json",
        "coordinator_config.json",
        "snapshot.json",
        "segments.jsonl",
        "server_segments.json",
        "server_segments.jsonl",
        "overrides",
    }


def check_message(message: str, kind: Kind, source: str) -> None:
    """One line: ``source`` (the file, or where the override came from) first, then the needles."""
    assert "\n" not in message.strip(), message
    assert message.startswith(source), (message, source)
    for needle in kind.needles:
        assert needle in message, (needle, message)


def run_cli(kind: Kind, tmp_path: Path, capsys) -> str:
    """Plan the bad snapshot with the CLI (in process, on the tests' Spark session); returns the
    one error line after checking the exit code, the absence of a traceback and of any plan."""
    snap = bad_snapshot(tmp_path / "snap", kind)
    plans = tmp_path / "plans"
    argv = ["plan", "--snapshot", str(snap), "--out", str(plans / "p"), "--work", str(tmp_path / "work")]
    if kind.overrides is not None:
        (tmp_path / "overrides.json").write_text(json.dumps(kind.overrides))
        argv += ["--config", str(tmp_path / "overrides.json")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert not plans.exists()
    errors = [line for line in err.splitlines() if line.startswith("input refused: ")]
    assert len(errors) == 1, err
    return errors[0].removeprefix("input refused: ")


@pytest.fixture(scope="module")
def resolve():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"].get_task("resolve_snapshot").python_callable


def run_resolve(resolve, kind: Kind, tmp_path: Path, monkeypatch) -> str:
    """The DAG's first task on the bad snapshot; returns its refusal after checking nothing was made."""
    from airflow.dag_processing.dagbag import DagBag

    snap = bad_snapshot(tmp_path / "dag-snap", kind)
    home = tmp_path / "home"
    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(home))
    params = {
        **DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"].params.dump(),
        "snapshot": str(snap),
        "snapshots_root": str(tmp_path),
        "config_overrides": kind.overrides,
    }
    with pytest.raises(InputRefused) as info:
        resolve(
            params=params,
            run_id="manual__bad",
            logical_date=None,
            dag_run=SimpleNamespace(run_after=datetime(2030, 1, 1, tzinfo=UTC), dag_id="segment_balancing"),
        )
    assert str(info.value) == "input refused: " + info.value.message
    assert not home.exists()  # no work directory, no plan
    return info.value.message


@pytest.mark.parametrize("kind", SMALL, ids=[k.name for k in SMALL])
def test_small_files_and_overrides_are_refused_before_any_spark_job(kind, tmp_path, capsys, resolve, monkeypatch):
    cli = run_cli(kind, tmp_path, capsys)
    check_message(cli, kind, kind.file or f"--config {tmp_path / 'overrides.json'}")
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())
    dag = run_resolve(resolve, kind, tmp_path, monkeypatch)
    check_message(dag, kind, kind.file or "param config_overrides")
    if kind.file is not None:
        assert dag.replace(str(tmp_path / "dag-snap"), str(tmp_path / "snap")) == cli


def run_stage_tasks(spark, snap: Path, work: Path) -> str:
    """``used_segments`` then ``prepare`` as their DAG operators run them; returns the refusal."""
    from segment_balancer.spark.apps import run_app
    from segment_balancer_airflow.refusal import refusing_bad_input

    with pytest.raises(InputRefused) as info:
        with refusing_bad_input():
            xcom = run_app(spark, "used_segments", snap, work, None, None)
            run_app(spark, "prepare", snap, work, xcom, None)
    return info.value.message


#: Spark kinds also run as the DAG's stage tasks (the same applications as the CLI's, wrapped as
#: their operators wrap them): one of each file, rather than all, to spare the test time.
AS_DAG_TASKS = {
    "segments: interval of one part",
    "segments: truncated gzip",
    "replicas: unknown server",
    "queues: unknown reference",
}


@pytest.mark.parametrize("kind", SPARK, ids=[k.name for k in SPARK])
def test_segment_and_replica_files_are_refused_by_the_first_spark_task(
    kind, spark, tmp_path, capsys, resolve, monkeypatch
):
    cli = run_cli(kind, tmp_path, capsys)
    check_message(cli, kind, kind.file)
    if kind.name in AS_DAG_TASKS:
        # the DAG: resolve_snapshot finds the files and passes; the stage task that reads them refuses
        monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(tmp_path / "home"))
        dag = run_stage_tasks(spark, tmp_path / "snap", tmp_path / "dag-work")
        assert dag == cli
        assert not (tmp_path / "dag-work" / "plan").exists()


def test_every_dag_task_kind_is_a_spark_kind():
    assert AS_DAG_TASKS <= {k.name for k in SPARK}


def test_a_missing_segments_file_is_refused_by_the_first_task(tmp_path, capsys, resolve, monkeypatch):
    kind = Kind(
        "segments: missing",
        "segments.jsonl",
        ("file is missing", "expected segments.jsonl or segments.jsonl.gz"),
        lambda snap: (snap / "segments.jsonl.gz").unlink(),
    )
    check_message(run_cli(kind, tmp_path, capsys), kind, kind.file)
    check_message(run_resolve(resolve, kind, tmp_path, monkeypatch), kind, kind.file)
