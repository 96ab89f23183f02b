"""The Spark Connect server and the applications as its clients: the same plan as in process, a
server that does not answer named at once, nothing left running after ``stop``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from segment_balancer.spark.connect_server import ConnectServer
from segment_balancer.spark.session import DRIVER_TASKS_ENV, SparkUnreachable, check_reachable

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    return subprocess.run(
        [sys.executable, "-m", "segment_balancer", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean, **(env or {})},
    )


def test_an_unreachable_server_is_named_at_once():
    """No server on the port: the error names the URL and how to start one, in seconds (the
    client's own retries would take ten minutes)."""
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(SparkUnreachable, match=rf"sc://127.0.0.1:{port}.*connect_server start --port {port}"):
        check_reachable(f"sc://127.0.0.1:{port}/;session_id=0f0e0d0c-0b0a-4909-8807-060504030201")
    assert time.monotonic() - started < 5


def test_conf_settings_reach_the_servers_command_and_a_malformed_one_is_refused(tmp_path, monkeypatch, capsys):
    """``--conf KEY=VALUE`` (repeatable) becomes the server's ``--conf``, a value may hold ``=``;
    one without ``=`` is refused in one line with exit code 2 and no server is started."""
    from segment_balancer.spark import connect_server

    started = []
    monkeypatch.setattr(ConnectServer, "start", lambda self, timeout=120.0: started.append(self) or self.url)
    monkeypatch.setattr(ConnectServer, "pid", lambda self: 4242)
    assert (
        connect_server.main(
            [
                "start",
                "--dir",
                str(tmp_path),
                "--master",
                "spark://127.0.0.1:7177",
                "--conf",
                "spark.sql.shuffle.partitions=4",
                "--conf",
                "spark.x=a=b",
            ]
        )
        == 0
    )
    [server] = started
    command = server.command()
    assert "spark.sql.shuffle.partitions=4" in command and "spark.x=a=b" in command
    assert command[command.index("spark.sql.shuffle.partitions=4") - 1] == "--conf"
    with pytest.raises(SystemExit) as exc:
        connect_server.main(["start", "--dir", str(tmp_path), "--conf", "spark.sql.shuffle.partitions"])
    assert exc.value.code == 2 and len(started) == 1
    assert "--conf 'spark.sql.shuffle.partitions': expected KEY=VALUE" in capsys.readouterr().err


def test_the_cli_fails_on_an_unreachable_remote_with_exit_code_1_naming_it(tmp_path):
    """A server that does not answer is the machine's failure, not the user's input: ``error: ``
    and exit code 1, with the URL and how to start a server."""
    port = _free_port()
    done = _cli(
        "plan",
        "--snapshot",
        str(REPO / "include/segment_balancer/snapshots/druid_sample"),
        "--out",
        str(tmp_path / "plan"),
        "--remote",
        f"sc://127.0.0.1:{port}",
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"error: no Spark Connect server answers at sc://127.0.0.1:{port}" in done.stderr
    assert "input refused" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "plan").exists()


def test_the_cli_on_the_server_gives_the_in_process_plan(connect_server, druid_sample_planned, tmp_path):
    """``plan --remote`` runs every application on the Connect server and publishes exactly the plan
    of the in-process session; every Spark job it ran carries its application's tag."""
    _, summary, ops = druid_sample_planned
    done = _cli(
        "plan",
        "--snapshot",
        str(REPO / "include/segment_balancer/snapshots/druid_sample"),
        "--out",
        str(tmp_path / "plan"),
        "--work",
        str(tmp_path / "work"),
        "--remote",
        connect_server.url,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "plan" / "operations.parquet"), ops)
    remote = json.loads((tmp_path / "plan" / "summary.json").read_text())
    assert remote["status_after"] == summary["status_after"]
    assert remote["druid_metrics"] == summary["druid_metrics"]


def test_the_watchdog_stops_the_server_when_its_owner_ends(tmp_path):
    """``start --stop-with PID`` (make airflow, make demo): the server goes when PID goes."""
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "segment_balancer.spark.connect_server",
        "start",
        "--dir",
        str(tmp_path),
        "--port",
        str(port),
        "--driver-memory",
        "1g",
        "--stop-with",
        str(owner.pid),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    server = ConnectServer(tmp_path, port=port)
    pid = server.pid()
    assert pid is not None
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and server.pid() is not None:
        time.sleep(0.5)
    try:
        assert server.pid() is None, "the server outlived its owner"
    finally:
        server.stop()


# A Connect client that runs the applications from FIRST on, each one's XCom kept in WORK/xcom-<name>.json
# and handed to the next, as the DAG's tasks do; a re-run from the failed application resumes as
# clearing that task does.
RESUMABLE = """
import json, sys
from pathlib import Path
from segment_balancer.planner.coordinators import ISSUE7458

APP_NAMES = list(ISSUE7458.run_apps)
from segment_balancer.spark.apps import run_app
from segment_balancer.spark.session import remote_session
url, snapshot, work, first = sys.argv[1:5]
work = Path(work)
spark = remote_session(url)
apps = APP_NAMES[APP_NAMES.index(first):]
previous = APP_NAMES[APP_NAMES.index(first) - 1] if first != APP_NAMES[0] else None
xcom = json.loads((work / f"xcom-{previous}.json").read_text()) if previous else None
for name in apps:
    print("running", name, flush=True)
    xcom = run_app(spark, name, snapshot, work, xcom)
    (work / f"xcom-{name}.json").write_text(json.dumps(xcom))
print("all done", flush=True)
"""


def test_a_server_killed_mid_run_fails_the_application_soon_and_a_resumed_run_gives_the_same_plan(
    tmp_path, druid_sample_planned
):
    """The server dies while ``stage03`` runs: the client fails within seconds (short retries, not
    the client's ten minutes); after a restart on the same port, running again from the failed
    application on the kept work directory (what clearing the failed task does) assembles exactly
    the plan of an uninterrupted in-process run.

    The restarted server also shows ``start`` and ``stop`` (one server start less for the suite):
    ``start`` again keeps the one that answers, another server on its port is refused naming the
    port, and ``stop`` leaves nothing running (a second ``stop`` has nothing to stop)."""
    from segment_balancer.plan.publish import publish_plan
    from segment_balancer.plan.validation import require_valid
    from segment_balancer.spark.connect_server import _alive

    _, _, ops = druid_sample_planned
    snapshot = REPO / "include/segment_balancer/snapshots/druid_sample"
    work = tmp_path / "work"
    work.mkdir()
    port = _free_port()
    server = ConnectServer(tmp_path / "connect", port=port, driver_memory="1g")
    server.start()
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env[DRIVER_TASKS_ENV] = "-1"  # stage 3's tasks on the server, small as druid_sample is
    try:
        client = subprocess.Popen(
            [sys.executable, "-c", RESUMABLE, server.url, str(snapshot), str(work), "used_segments"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        out = []
        for line in client.stdout:
            out.append(line)
            if line.startswith("running stage03"):
                server.stop(grace=0)  # TERM at once; KILL if it lingers
                killed = time.monotonic()
                break
        rest = client.communicate(timeout=120)[0]
        failed_after = time.monotonic() - killed
        assert client.returncode != 0, "".join(out) + rest
        assert "all done" not in rest
        assert failed_after < 60, f"the client took {failed_after:.0f} s to give up"
        assert not (work / "xcom-stage03_underreplicated.json").exists()

        url = server.start()
        pid = server.pid()
        assert url == f"sc://127.0.0.1:{port}" and pid is not None and server.healthy()
        assert server.start() == url and server.pid() == pid  # already answering: kept
        other = ConnectServer(tmp_path / "other", port=port, driver_memory="1g")
        with pytest.raises(RuntimeError, match=rf"port {port} \(SPARK_CONNECT_PORT: the Spark Connect server"):
            other.start()
        again = subprocess.run(
            [sys.executable, "-c", RESUMABLE, server.url, str(snapshot), str(work), "stage03_underreplicated"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    finally:
        stopped = server.stop()
    assert stopped is True
    assert not _alive(pid) and not server.healthy()
    assert server.stop() is False
    assert "SparkConnectServer" in (tmp_path / "connect" / "connect-server.log").read_text()
    require_valid(work / "plan", work)
    publish_plan(work / "plan", tmp_path / "plan")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "plan" / "operations.parquet"), ops)


def test_the_servers_python_workers_give_freed_memory_back(connect_server):
    """The server's Python workers (which keep their allocators' memory from one stage to the next)
    run with the allocator settings of ``WORKER_MEMORY_ENV``: seen from inside a Python function
    the server runs."""
    from segment_balancer.spark.connect_server import WORKER_MEMORY_ENV

    client = (
        "import json, os, sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
        "names = json.loads(sys.argv[2])\n"
        "def env(batches):\n"
        "    import os, pyarrow as pa\n"
        "    for _ in batches:\n"
        "        yield pa.RecordBatch.from_pydict({'k': names, 'v': [os.environ.get(n) for n in names]})\n"
        "print(json.dumps({r.k: r.v for r in spark.range(1).mapInArrow(env, 'k string, v string').collect()}))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    done = subprocess.run(
        [sys.executable, "-c", client, connect_server.url, json.dumps(sorted(WORKER_MEMORY_ENV))],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == WORKER_MEMORY_ENV


RELEASE_CLIENT = """
import json, sys
from pyspark.sql import SparkSession
from segment_balancer.spark.session import python_workers_id, release, session_python_processes

daemons = session_python_processes  # a session's daemon and its workers

a = SparkSession.builder.remote(sys.argv[1]).create()
b = SparkSession.builder.remote(sys.argv[1]).create()
ids = {"a": python_workers_id(a), "b": python_workers_id(b)}
before = {k: len(daemons(v)) for k, v in ids.items()}
release(b)
import time; time.sleep(2)
after = {k: len(daemons(v)) for k, v in ids.items()}
still = a.range(5).mapInArrow(lambda it: (x for x in it), "id long").count()
release(a)
time.sleep(2)
print(json.dumps({"ids": ids, "before": before, "after": after, "a_still_runs": still,
                  "a_after_release": len(daemons(ids["a"]))}))
"""


def test_a_released_session_leaves_no_python_daemon_and_spares_the_others(connect_server):
    """Spark 4.2 keeps a Connect session's Python daemon after the session is released
    (SPARK-54055): a server that stays up would gather one per DAG run and CLI plan. ``release``
    ends the released session's daemon (and its workers) on this machine, and only that one: another
    session's daemon stays, and that session still runs Python functions."""
    clean = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    done = subprocess.run(
        [sys.executable, "-c", RELEASE_CLIENT, connect_server.url],
        capture_output=True,
        text=True,
        timeout=180,
        env=clean,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["ids"]["a"] and seen["ids"]["b"] and seen["ids"]["a"] != seen["ids"]["b"], seen
    assert seen["before"]["a"] >= 1 and seen["before"]["b"] >= 1, seen  # a daemon (and workers) per session
    assert seen["after"] == {"a": seen["before"]["a"], "b": 0}, seen  # b's ended, a's spared
    assert seen["a_still_runs"] == 5 and seen["a_after_release"] == 0, seen
