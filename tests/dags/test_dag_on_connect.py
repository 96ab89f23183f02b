"""The real DAG in its default mode, end to end: every application a client of a Spark Connect
server whose master is a Spark standalone cluster (a master and two workers on 127.0.0.1, started from
the installed PySpark by ``segment_balancer.spark.standalone``), on the hand-worked snapshot of
compaction_snapshot.py. There the executors are JVMs and Python workers of their own that share
nothing with the driver but the work directory, so the plan being the CLI's (computed on
``local[*]``) shows the applications run unchanged on a real cluster. Then the bundled ``druid38``
snapshot, both coordinators compared, on the same server. The spark-submit mode is
``test_dag_end_to_end.py``'s; a module of its own, so that pytest-xdist (``--dist loadfile``) runs
the two beside each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from dag_runs import check_run, published_by

from segment_balancer.planner.coordinators import ISSUE7458
from segment_balancer.spark.session import DRIVER_TASKS_ENV


@pytest.fixture(scope="module")
def standalone_connect(tmp_path_factory):
    """A Spark Connect server (event log on) whose master is a standalone cluster on 127.0.0.1 of a
    master and two workers of one core each, so a run's tasks run in two executor JVMs, each with its
    own Python workers; both stopped after the module. Yields (cluster, server)."""
    import socket

    from segment_balancer.spark.connect_server import ConnectServer
    from segment_balancer.spark.standalone import StandaloneCluster

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    cluster = StandaloneCluster(
        tmp_path_factory.mktemp("standalone"), port=free_port(), cores=1, memory="2g", workers=2
    )
    cluster.start()
    server = ConnectServer(
        tmp_path_factory.mktemp("connect"),
        port=free_port(),
        master=cluster.master_url,
        driver_memory="2g",
        event_log=True,
        conf={"spark.executor.memory": "1g", "spark.sql.shuffle.partitions": "2"},
    )
    try:
        server.start()
        yield cluster, server
    finally:
        server.stop()
        cluster.stop()


def connect_env(connect_server, extra: dict | None = None) -> dict:
    """This process's environment for a child that runs the DAG in connect mode on ``connect_server``
    (its ``spark_connect_default``), ``extra`` added."""
    env = {
        **os.environ,
        "AIRFLOW__SEGMENT_BALANCER__SPARK_MODE": "connect",
        "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": json.dumps(
            {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": connect_server.port}
        ),
        **(extra or {}),
    }
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return env


def dags_test(connect_server, conf: dict, extra_env: dict | None = None) -> tuple[str, str, dict[str, str]]:
    """``airflow dags test segment_balancing --conf CONF`` in connect mode on ``connect_server``, in a
    child process (a Connect client cannot share its process with this worker's classic session);
    returns the run's id, state and task states (task id -> state)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    airflow = str(Path(sys.executable).parent / "airflow")
    done = subprocess.run(
        [airflow, "dags", "test", "segment_balancing", "--conf", json.dumps(conf)],
        env=connect_env(connect_server, extra_env),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with create_session() as session:
        run = session.query(DagRun).filter(DagRun.dag_id == "segment_balancing").order_by(DagRun.id.desc()).first()
        states = {ti.task_id: ti.state for ti in run.get_task_instances(session=session)}
        return run.run_id, run.state, states


@pytest.mark.spark_submit
def test_segment_balancing_dag_on_spark_connect_publishes_the_same_plan(
    airflow_home, compaction_planned, standalone_connect
):
    """The default mode: every Spark task of the run is a client of the Connect server, all on the
    run's one session (``run_session_id``), released by the teardown at the end; the server's master
    is the two-worker standalone cluster, and every application's tasks ran in its executors, both of
    them busy over the run. The plan and the two-run simulation are the CLI's, as in spark-submit
    mode; no comparison (``compare_with_druid`` off: nothing here is about it, and the druid38
    test compares)."""
    import re

    from segment_balancer_airflow.connect import run_session_id

    cluster, connect_server = standalone_connect
    base, cli_summary, cli_ops = compaction_planned
    # every application's tasks in the cluster's executors, small as this snapshot is
    env = {DRIVER_TASKS_ENV: "-1"}
    # compare_with_druid off: the druid38 test below and the spark-submit one compare the
    # coordinators through the DAG; this one is about where the run's applications run
    run_id, run_state, states = dags_test(
        connect_server, {"snapshot": str(base / "snapshot"), "simulate_runs": 2, "compare_with_druid": False}, env
    )
    # without the comparison the druid branch shows skipped (and advise, not asked for), everything
    # else succeeded
    assert run_state == "success", states
    assert {t for t, state in states.items() if state != "success"} == {
        "advise",
        "druid.druid_rules",
        "druid.druid_unload",
        "druid.druid_balance",
        "druid.druid_clone",
        "druid.assemble",
    }, states
    assert {states[t] for t in states if t.startswith("druid.") or t == "advise"} == {"skipped"}, states
    published, _ = published_by(run_id)
    pd.testing.assert_frame_equal(pd.read_parquet(published / "operations.parquet"), cli_ops)
    assert not (published / "compared").exists() and not (published / "comparison.json").exists()
    summary = json.loads((published / "summary.json").read_text())
    skipped = {n for n, t in summary["timings_seconds"].items() if t.get("skipped")}
    assert skipped == {n for n, t in cli_summary["timings_seconds"].items() if t.get("skipped")}
    pd.testing.assert_frame_equal(
        pd.read_parquet(published / "simulation" / "run-001" / "plan" / "operations.parquet"), cli_ops
    )

    # Every tagged job of the run's applications ran in the run's one session, its tasks in the
    # standalone cluster's executors ("0" and "1"), never in the driver …
    session_id = run_session_id("segment_balancing", run_id)
    sessions, app_of_stage, executors = set(), {}, {}
    events = [
        json.loads(line)
        for log in (connect_server.root / "events").iterdir()
        for line in open(log, errors="replace")
        if '"SparkListenerJobStart"' in line or '"SparkListenerTaskEnd"' in line
    ]
    for event in events:
        if event["Event"] == "SparkListenerJobStart":
            tags = event["Properties"].get("spark.job.tags", "")
            if app := re.search(r"segment_balancer_app_(\w+)", tags):
                app_of_stage.update(dict.fromkeys(event["Stage IDs"], app.group(1)))
                sessions.update(re.findall(r"Session_([0-9a-f-]{36})", tags))
    for event in events:
        if event["Event"] == "SparkListenerTaskEnd" and event["Stage ID"] in app_of_stage:
            executors.setdefault(app_of_stage[event["Stage ID"]], set()).add(event["Task Info"]["Executor ID"])
    ran = {n for n in ISSUE7458.run_apps if n not in skipped}
    assert ran <= set(executors), executors
    assert all(ids <= {"0", "1"} for ids in executors.values()), executors
    assert set().union(*executors.values()) == {"0", "1"}, executors
    assert cluster.alive_workers() == 2
    assert session_id in sessions
    # … which the teardown released: the id can no longer be attached to.
    probe = (
        "import sys; from pyspark.sql import SparkSession as S; "
        "s = S.builder.remote(sys.argv[1]).getOrCreate(); s.range(1).count()"
    )
    url = f"{connect_server.url}/;session_id={session_id}"
    again = subprocess.run(
        [sys.executable, "-c", probe, url], capture_output=True, text=True, timeout=120, env=connect_env(connect_server)
    )
    assert again.returncode != 0 and "SESSION_CLOSED" in again.stderr, again.stderr[-2000:]


@pytest.mark.spark_submit
def test_segment_balancing_dag_plans_the_druid_38_snapshot(airflow_home, standalone_connect):
    """The bundled ``druid38`` snapshot (a tier alias, partial-load rules, a rule naming a tier
    without historicals) through the DAG on the Connect server, both coordinators
    (``compare_with_druid`` on; the simulation task is the compaction tests'): every task succeeds
    and both plans pass the gate (``check_run``); the plan loads the ``clicks`` part by_country with
    Druid's fingerprint on both tiers of the alias ``hot`` (worked by hand in
    ``tests/test_druid38_plan.py``), says the tier ``archive`` has no historical, and the druid plan
    is Druid 38.0.0's, from the snapshot's servers. Its tasks run as a small run's do (on the
    driver); after the compaction test, whose check of the executors reads the server's event log.
    With ``advise_runs`` 1 the ``advise`` task (on the Connect session) publishes the advice of
    Druid 38's Coordinator beside the plan, ``diskNormalized``'s threshold among the candidates."""
    from test_druid38_plan import ID, SNAPSHOT, projection_fingerprint

    _, connect_server = standalone_connect
    conf = {"snapshot": str(SNAPSHOT), "advise_runs": 1}
    published = check_run(*dags_test(connect_server, conf), conf)
    ops = pd.read_parquet(published / "operations.parquet")
    day0 = ops[ops["segment_id"].isin([ID[("clicks", "2026-09-30", p)] for p in (0, 1)]) & ops["action"].eq("LOAD")]
    assert set(day0["tier"]) == {"hot_blue", "hot_green"}
    assert set(day0["partial_fingerprint"]) == {projection_fingerprint(["by_country"])}
    summary = json.loads((published / "summary.json").read_text())
    assert "archive" in summary["undone"]["tiers"]
    druid = json.loads((published / "compared" / "druid" / "summary.json").read_text())["druid_run"]
    assert (druid["release"], druid["release_from"]) == ("38.0.0", "snapshot")
    advice = json.loads((published / "advice" / "advice.json").read_text())
    assert advice["druid_release"] == "38.0.0" and advice["recommended"]["pareto"]
    assert any("utilizationThreshold" in c["name"] for c in advice["candidates"])
    assert (published / "advice" / "report.html").is_file() and len(advice["issue7458"]["runs"]) == 2
