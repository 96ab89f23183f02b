"""Ports: a port another process holds is refused in one line naming the port and its
setting, by the check ``make airflow`` runs first, by the Spark standalone cluster and by the Spark
Connect server; never a stack trace."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from segment_balancer.common.ports import PORTS, check, taken

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def listening():
    """A port of 127.0.0.1 another process (here: this one) listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    return lines[0]


def test_a_taken_port_is_named_with_its_setting():
    with listening() as port:
        assert taken(port)
        [line] = check({"AIRFLOW_PORT": port})
        assert line == (
            f"port {port} (AIRFLOW_PORT: the Airflow API server) is taken by another process; "
            f"set AIRFLOW_PORT to a free port, e.g. make airflow AIRFLOW_PORT={port + 10}"
        )
    assert not taken(port) and check({"AIRFLOW_PORT": port}) == []
    assert set(PORTS) == {
        "AIRFLOW_PORT",
        "WORKER_LOG_PORT",
        "TRIGGERER_LOG_PORT",
        "SPARK_CONNECT_PORT",
        "STANDALONE_PORT",
    }


def test_every_port_setting_is_in_the_makefile_the_config_and_the_docs():
    """Each setting of ``PORTS`` is a Makefile variable with the same default and a row of
    docs/RUNNING.md's "Ports" table; the log servers' are rendered into airflow.cfg."""
    makefile = (REPO / "Makefile").read_text()
    running = (REPO / "docs" / "RUNNING.md").read_text()
    template = (REPO / "airflow.cfg.template").read_text()
    for name, (default, _) in PORTS.items():
        assert re.search(rf"^{name}\s*\?=\s*{default}$", makefile, re.M), name
        assert re.search(rf"^\| `{name}` \| {default} \|", running, re.M), name
    assert "worker_log_server_port = ${WORKER_LOG_PORT}" in template
    assert "trigger_log_server_port = ${TRIGGERER_LOG_PORT}" in template


def test_make_airflow_refuses_a_taken_log_server_port(tmp_path):
    with listening() as port:
        done = subprocess.run(
            ["make", "--no-print-directory", "-C", str(REPO), "airflow-port", f"TRIGGERER_LOG_PORT={port}"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode != 0
    assert f"error: port {port} (TRIGGERER_LOG_PORT: Airflow's log server of the triggerer) is taken" in done.stderr


def test_make_airflow_refuses_a_taken_port_in_one_line_before_setting_anything_up(tmp_path):
    with listening() as port:
        done = subprocess.run(
            [
                "make",
                "--no-print-directory",
                "-C",
                str(REPO),
                "airflow",
                f"AIRFLOW_PORT={port}",
                f"VAR={tmp_path / 'var'}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode != 0
    assert f"error: port {port} (AIRFLOW_PORT: the Airflow API server) is taken" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "var" / "airflow_home").exists()


def test_the_standalone_cluster_refuses_a_taken_port_in_one_line(tmp_path):
    with listening() as port:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "segment_balancer.spark.standalone",
                "start",
                "--dir",
                str(tmp_path),
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert one_error_line(done.stderr).startswith(
        f"error: Spark standalone cluster not started: port {port} (STANDALONE_PORT: the Spark standalone master"
    )


def test_the_connect_server_refuses_a_taken_port_in_one_line(tmp_path):
    with listening() as port:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "segment_balancer.spark.connect_server",
                "start",
                "--dir",
                str(tmp_path),
                "--port",
                str(port),
                "--timeout",
                "5",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert one_error_line(done.stderr).startswith(
        f"Spark Connect server not started: port {port} (SPARK_CONNECT_PORT: the Spark Connect server"
    )
