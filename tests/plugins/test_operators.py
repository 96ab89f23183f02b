"""StageSubmitOperator: XCom in -> spark-submit of a real (tiny) PySpark app -> XCom out."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from pyroaring import BitMap

from segment_balancer_airflow.operators import StageSubmitOperator

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.spark_submit


class FakeTI:
    """Just enough of a TaskInstance for the operator: xcom_pull of one upstream task."""

    def __init__(self, xcoms: dict):
        self.xcoms = xcoms
        self.pulled = []

    def xcom_pull(self, task_ids=None, **_):
        self.pulled.append(task_ids)
        return self.xcoms.get(task_ids)


@pytest.fixture
def local_spark(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')


def _operator(tmp_path, **kwargs):
    snapshot = tmp_path / "snap"
    snapshot.mkdir(exist_ok=True)
    return StageSubmitOperator(
        task_id="tiny",
        stage_app="tiny_groups_app",
        apps_dir=HERE,
        snapshot=str(snapshot),
        work=str(tmp_path / "work"),
        **kwargs,
    )


def test_builds_the_stage_application_and_lean_conf(tmp_path):
    op = StageSubmitOperator(
        stage_app="stage03_underreplicated", groups_from="stage02_underbroadcast", snapshot="s", work="w"
    )
    assert op.task_id == "stage03_underreplicated"
    assert op.application.endswith("spark_apps/stage03_underreplicated.py")
    assert Path(op.application).is_file()
    assert op._conn_id == "spark_default"
    assert op.conf["spark.ui.enabled"] == "false"
    assert {"snapshot", "work", "config_file"} <= set(op.template_fields)


def test_groups_go_through_xcom(tmp_path, local_spark):
    """The input groups go to the application as a file and its output groups come back as the
    XCom. On a local master its driver JVM gets C1-only JIT, the serial collector and, once
    ``make venv`` has built it, the class-data-sharing archive (segment_balancer.spark.jvm_archive)."""
    from segment_balancer.spark.jvm_archive import archive_path

    previous = {"groups": {"StillUnreplicated": base64.b64encode(BitMap([1, 5]).serialize()).decode()}, "stage": 1}
    config = tmp_path / "config_overrides.json"
    config.write_text("{}")
    op = _operator(tmp_path, groups_from="stage01", config_file=str(config))
    ti = FakeTI({"stage01": previous})

    result = op.execute({"ti": ti})

    assert ti.pulled == ["stage01"]
    assert result["stage"] == 2
    assert result["groups"]["StillUnreplicated"] == previous["groups"]["StillUnreplicated"]
    assert BitMap.deserialize(base64.b64decode(result["groups"]["Stage2"])) == BitMap(range(0, 30_000, 3))
    work = tmp_path / "work"
    assert json.loads((work / "xcom" / "tiny.in.json").read_text()) == previous
    argv = json.loads((work / "tiny_app_argv.json").read_text())
    assert argv == [
        "--snapshot",
        str(tmp_path / "snap"),
        "--work",
        str(work),
        "--groups-in",
        str(work / "xcom" / "tiny.in.json"),
        "--groups-out",
        str(work / "xcom" / "tiny.out.json"),
        "--refusal-out",
        str(work / "xcom" / "tiny.refused.txt"),
        "--config",
        str(config),
    ]
    assert op.conf["spark.pyspark.python"] == sys.executable
    jvm_args = set(json.loads((work / "tiny_app_jvm.json").read_text()))
    assert {"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"} <= jvm_args
    if archive_path().is_file():
        assert f"-XX:SharedArchiveFile={archive_path()}" in jvm_args


def test_first_stage_has_no_groups_in_and_a_missing_input_fails(tmp_path, local_spark, monkeypatch):
    # a worker started outside the Makefile: no venv on PATH, no PYSPARK_PYTHON, no SPARK_HOME
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    op = _operator(tmp_path, config_file="None")  # a Jinja-rendered empty value
    result = op.execute({"ti": FakeTI({})})
    assert result["stage"] == 1 and list(result["groups"]) == ["Stage1"]
    argv = json.loads((tmp_path / "work" / "tiny_app_argv.json").read_text())
    assert "--groups-in" not in argv and "--config" not in argv

    with pytest.raises(RuntimeError, match="left no groups"):  # the DAG's wiring, not the user's input
        _operator(tmp_path, groups_from="nothing_here").execute({"ti": FakeTI({})})


def test_a_stage_with_nothing_to_schedule_is_not_submitted(tmp_path, monkeypatch):
    """Stage 9 reads only ``StillLoadedOnDecommServers[T]``; with none in its input it hands the
    groups on as they are, records a skipped timing and starts no JVM (a submit to this connection
    would fail: there is no YARN here)."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "yarn"}')
    previous = {"stage": 8, "groups": {"ToBeBalanced[hot]": base64.b64encode(BitMap([3]).serialize()).decode()}}
    op = StageSubmitOperator(
        stage_app="stage09_still_loaded_on_decomm",
        groups_from="stage08_second_revisit",
        snapshot=str(tmp_path / "snap"),
        work=str(tmp_path / "work"),
    )

    result = op.execute({"ti": FakeTI({"stage08_second_revisit": previous})})

    assert result == {"stage": 9, "groups": previous["groups"]}
    timings = json.loads((tmp_path / "work" / "timings.json").read_text())
    assert timings == {"stage09_still_loaded_on_decomm": {"stage": 9, "seconds": 0.0, "skipped": True}}
    assert not (tmp_path / "work" / "xcom" / "stage09_still_loaded_on_decomm.in.json").exists()


def _simulate_operator(tmp_path, **kwargs):
    from segment_balancer_airflow.operators import SimulateSubmitOperator

    return SimulateSubmitOperator(
        snapshot=str(tmp_path / "snap"),
        plan=str(tmp_path / "plans" / "r1"),
        work=str(tmp_path / "work"),
        out=str(tmp_path / "plans" / "r1" / "simulation"),
        apps_dir=HERE / "recording_app",
        **kwargs,
    )


@pytest.mark.parametrize("runs", ["0", "None", "", 0])
def test_simulate_is_skipped_when_no_run_is_asked_for(tmp_path, monkeypatch, runs):
    from airflow.sdk.exceptions import AirflowSkipException

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "yarn"}')  # a submit would fail
    with pytest.raises(AirflowSkipException, match="simulate_runs is 0"):
        _simulate_operator(tmp_path, runs=runs).execute({})
    assert not (tmp_path / "plans").exists()


def test_simulate_submits_the_rendered_params(tmp_path, local_spark):
    """The params as the DAG renders them (strings; an empty loads-per-run renders as "None")."""
    config = tmp_path / "config_overrides.json"
    config.write_text("{}")
    op = _simulate_operator(tmp_path, runs="3", loads_per_run="None", load_failure_rate="0.25", config_file=str(config))
    assert op.application == str(HERE / "recording_app" / "simulate.py")

    assert op.execute({}) == str(tmp_path / "plans" / "r1" / "simulation")

    argv = json.loads((tmp_path / "plans" / "r1" / "simulation" / "argv.json").read_text())
    assert argv == [
        "--snapshot",
        str(tmp_path / "snap"),
        "--plan",
        str(tmp_path / "plans" / "r1"),
        "--work",
        str(tmp_path / "work"),
        "--runs",
        "3",
        "--out",
        str(tmp_path / "plans" / "r1" / "simulation"),
        "--config",
        str(config),
        "--load-failure-rate",
        "0.25",
        "--seed",
        "0",
    ]


def test_a_refused_snapshot_fails_the_task_in_one_line_without_a_retry(tmp_path, local_spark, capfd):
    """``used_segments`` submitted on a snapshot with a segment size of ``"big"``: the application
    exits 2 after writing its refusal, and the operator raises ``InputRefused`` with that one line
    (no retry, no traceback: ``refusal.py``); the driver's stderr holds no Java stack trace either."""
    from bad_inputs import KINDS_BY_NAME, bad_snapshot

    from segment_balancer_airflow.refusal import InputRefused

    snap = bad_snapshot(tmp_path / "snap", KINDS_BY_NAME["segments: size a word"])
    op = StageSubmitOperator(stage_app="used_segments", snapshot=str(snap), work=str(tmp_path / "work"))
    with pytest.raises(InputRefused) as info:
        op.execute({"ti": FakeTI({})})
    assert info.value.message == 'segments.jsonl line 4: size must be a whole number of bytes, got "big"'
    out = capfd.readouterr()
    logged = out.out + out.err  # spark-submit's output, as the hook logs it
    assert "input refused: segments.jsonl line 4" in logged
    assert "Traceback" not in logged and "\tat org.apache" not in logged
