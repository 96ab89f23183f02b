"""``make airflow``'s processes (``tools.local_airflow``): the components as it starts them, and a
log server that listens on 127.0.0.1 only. Stopping the whole deployment on Ctrl+C is
``tests/e2e/test_stop.py``'s."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import psutil

from segment_balancer.tools.local_airflow import components


def test_the_components_skip_their_own_log_servers_which_run_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", "18793")
    monkeypatch.setenv("AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT", "18794")
    parts = {p.name: p for p in components(tmp_path)}
    assert list(parts) == [
        "api-server",
        "scheduler",
        "dag-processor",
        "triggerer",
        "worker-log-server",
        "triggerer-log-server",
    ]
    assert parts["scheduler"].argv[-2:] == ["scheduler", "--skip-serve-logs"]
    assert parts["triggerer"].argv[-2:] == ["triggerer", "--skip-serve-logs"]
    assert parts["worker-log-server"].argv[-3:] == ["log-server", "--port", "18793"]
    assert parts["triggerer-log-server"].argv[-3:] == ["log-server", "--port", "18794"]
    assert {p.log for p in parts.values()} == {tmp_path / f"{name}.log" for name in parts}


def test_a_log_server_listens_on_the_loopback_address_only():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "segment_balancer.tools.local_airflow", "log-server", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        listening = []
        while not listening and time.monotonic() < deadline:
            assert proc.poll() is None, "the log server exited"
            listening = [c.laddr for c in psutil.Process(proc.pid).net_connections() if c.status == "LISTEN"]
            time.sleep(0.3)
        assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", port)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_component_dies_with_the_supervisor_even_by_sigkill():
    """A process started as the supervisor starts its components ends when the supervisor is
    killed outright, where no stop of its own can run."""
    import signal

    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from segment_balancer.tools.local_airflow import _die_with_parent\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
            " preexec_fn=_die_with_parent, start_new_session=True)\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = psutil.Process(int(parent.stdout.readline()))
    assert child.is_running()
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    gone, alive = psutil.wait_procs([child], timeout=10)
    assert gone and not alive
