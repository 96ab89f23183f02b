"""A throw-away ``make airflow`` deployment on a free port, for the browser test and the benchmarks.

:func:`running_deployment` runs ``make airflow VAR=<tmp>/var AIRFLOW_PORT=<free port>
SNAPSHOTS=<dir>`` in its own process group with a clean environment, waits until the scheduler,
DAG processor and triggerer are healthy and ``segment_balancing`` is parsed, yields a
:class:`Deployment` (base URL, ``var`` directory, admin password, a REST client) and kills the
process group at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "segment_balancing"
START_TIMEOUT = 240  # seconds: db migrate + the components' start + first parse
#: seconds between two polls of the deployment for what a test waits for (a REST call of a few ms)
POLL_S = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Deployment:
    """A running ``make airflow``: its base URL, ``var`` directory, admin password and a REST client."""

    base: str
    var: Path
    password: str
    log: Path
    pid: int = 0
    ports: dict[str, int] = field(default_factory=dict)
    started: float = 0.0  # epoch seconds, just before `make airflow` started
    _token: str | None = field(default=None, repr=False)

    def token(self, fresh: bool = False) -> str:
        if self._token is None or fresh:
            self._token = self.request(
                "POST", "/auth/token", {"username": "admin", "password": self.password}, auth=False
            )["access_token"]
        return self._token

    def request(self, method: str, path: str, body: dict | None = None, auth: bool = True):
        """JSON in, JSON out; a 401 gets one retry with a fresh token."""
        import urllib.error
        import urllib.request

        for attempt in (0, 1):
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if auth:
                headers["Authorization"] = f"Bearer {self.token(fresh=attempt == 1)}"
            data = None if body is None else json.dumps(body).encode()
            req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and auth and attempt == 0:
                    continue
                raise AssertionError(f"{method} {path}: HTTP {exc.code} {exc.read()[:500]!r}") from exc

    def get(self, path: str):
        return self.request("GET", path)

    def runs(self, dag_id: str = DAG_ID) -> list[dict]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=run_after")["dag_runs"]

    def task_instances(self, run_id: str) -> list[dict]:
        from urllib.parse import quote

        return self.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances?limit=100")[
            "task_instances"
        ]

    def wait_for_runs(self, run_ids: list[str], timeout: float, dag_id: str = DAG_ID) -> list[dict]:
        """Poll until every run in ``run_ids`` is finished; fails on a failed one or on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            runs = {r["dag_run_id"]: r for r in self.runs(dag_id)}
            states = {rid: runs.get(rid, {}).get("state") for rid in run_ids}
            failed = [rid for rid, s in states.items() if s == "failed"]
            assert not failed, f"runs failed: {failed}; see {self.log} and {self.var}/airflow_home/logs"
            if all(s == "success" for s in states.values()):
                return [runs[rid] for rid in run_ids]
            assert time.monotonic() < deadline, f"runs not finished after {timeout:.0f} s: {states}"
            time.sleep(POLL_S)


def _wait_ready(dep: Deployment, proc: subprocess.Popen) -> None:
    """Health of scheduler, dag_processor, triggerer; then the DAG parsed (REST API with a JWT)."""
    import urllib.request

    deadline = time.monotonic() + START_TIMEOUT
    last = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"`make airflow` exited with {proc.returncode}; see {dep.log}"
        try:
            with urllib.request.urlopen(dep.base + "/api/v2/monitor/health", timeout=5) as resp:
                health = json.loads(resp.read())
            last = health
            if all(health.get(c, {}).get("status") == "healthy" for c in ("scheduler", "dag_processor", "triggerer")):
                if not dep.password:
                    dep.password = _password(dep.var)
                dag = dep.get(f"/api/v2/dags/{DAG_ID}")
                last = dag
                if dag.get("last_parsed_time") and not dag.get("has_import_errors"):
                    return
        except (OSError, ValueError, AssertionError, KeyError) as exc:
            last = exc
        time.sleep(POLL_S)
    raise AssertionError(f"deployment not ready after {START_TIMEOUT} s (last: {last!r}); see {dep.log}")


def _password(var: Path) -> str:
    return json.loads((var / "airflow_home" / "simple_auth_manager_passwords.json.generated").read_text())["admin"]


def _clean_env() -> dict[str, str]:
    """This process's environment without what ``tests/conftest_airflow.py`` set for the unit tests
    (AIRFLOW_HOME, AIRFLOW__* overrides, SEGMENT_BALANCER_HOME...): the deployment gets its settings
    from the Makefile and the rendered airflow.cfg only."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "SEGMENT_BALANCER_", "PYSPARK_"))
        and k not in ("AIRFLOW_HOME", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VAR", "REPO", "AIRFLOW_PORT")
    }
    return env


@contextmanager
def running_deployment(tmp: Path, snapshots: Path, log: Path, env: dict[str, str] | None = None):
    """``make airflow`` under ``tmp`` with the snapshots of ``snapshots``, its output in ``log``,
    ``env`` added to its clean environment; yields the ready :class:`Deployment`, stops it after."""
    ports = {
        name: free_port() for name in ("AIRFLOW_PORT", "SPARK_CONNECT_PORT", "WORKER_LOG_PORT", "TRIGGERER_LOG_PORT")
    }
    cmd = [
        "make",
        "--no-print-directory",
        "-C",
        str(REPO),
        "airflow",
        f"VAR={tmp / 'var'}",
        f"SNAPSHOTS={snapshots}",
        *(f"{name}={port}" for name, port in ports.items()),
    ]
    started = time.time()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**_clean_env(), **(env or {})},
            start_new_session=True,
        )
    dep = Deployment(
        base=f"http://127.0.0.1:{ports['AIRFLOW_PORT']}",
        var=tmp / "var",
        password="",
        log=log,
        pid=proc.pid,
        ports=ports,
        started=started,
    )
    try:
        _wait_ready(dep, proc)
        yield dep
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group (make, airflow standalone and its components, task processes,
    spark-submits), SIGKILL to what is left after 30 s."""
    pgid = proc.pid  # start_new_session: the group is the one make leads
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
