"""The browser test's deployment: ``make airflow`` in a temporary directory, and a chromium.

Collected only when ``SEGMENT_BALANCER_E2E`` is set (``make e2e`` sets it): ``make test`` does not
collect these tests. Artifacts (screenshots, the deployment's output, the browser console) go to
``$SEGMENT_BALANCER_E2E_ARTIFACTS`` (``make e2e``: ``var/e2e-artifacts``, which git ignores).

The session fixture ``deployment`` runs ``make airflow VAR=<tmp>/var AIRFLOW_PORT=<free port>
SNAPSHOTS=<tmp>/snapshots_src`` in its own process group, with the two small snapshots of
``e2e_snapshots.py`` as the only snapshots, waits until the scheduler, DAG processor and triggerer
are healthy and ``segment_balancing`` is parsed, and kills the process group at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_snapshots import write_snapshots  # noqa: E402

ARTIFACTS = Path(os.environ.get("SEGMENT_BALANCER_E2E_ARTIFACTS") or REPO / "var" / "e2e-artifacts")
CHROMIUM = "/usr/bin/chromium"
DAG_ID = "segment_balancing"
START_TIMEOUT = 240  # seconds: db migrate + airflow standalone + first parse


# Not even collected by `make test` (pytest's testpaths include tests/): only `make e2e` sets this.
if not os.environ.get("SEGMENT_BALANCER_E2E"):
    collect_ignore = ["test_ui.py", "test_report.py"]


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
    _token: str | None = field(default=None, repr=False)

    def token(self, fresh: bool = False) -> str:
        if self._token is None or fresh:
            self._token = self.request("POST", "/auth/token", {"username": "admin", "password": self.password},
                                       auth=False)["access_token"]
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
            "task_instances"]

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
            time.sleep(5)


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
        time.sleep(2)
    raise AssertionError(f"deployment not ready after {START_TIMEOUT} s (last: {last!r}); see {dep.log}")


def _password(var: Path) -> str:
    return json.loads((var / "airflow_home" / "simple_auth_manager_passwords.json.generated").read_text())["admin"]


def _clean_env() -> dict[str, str]:
    """This process's environment without what ``tests/conftest_airflow.py`` set for the unit tests
    (AIRFLOW_HOME, AIRFLOW__* overrides, SEGMENT_BALANCER_HOME...): the deployment gets its settings
    from the Makefile and the rendered airflow.cfg only."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "SEGMENT_BALANCER_", "PYSPARK_"))
           and k not in ("AIRFLOW_HOME", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VAR", "REPO", "AIRFLOW_PORT")}
    # The log servers of the task runner and triggerer listen on fixed ports (8793, 8794) by
    # default: free ones, so the test runs beside another deployment on this machine.
    env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"] = str(free_port())
    env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"] = str(free_port())
    return env


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    return ARTIFACTS


@pytest.fixture(scope="session")
def druid():
    """The loopback fake Druid of tests/fake_druid.py (its default small cluster), for the capture DAG."""
    sys.path.insert(0, str(REPO / "tests"))
    import fake_druid

    with fake_druid.fake_druid() as fake:
        yield fake


@pytest.fixture(scope="session")
def deployment(tmp_path_factory, artifacts, druid):
    """``make airflow`` on a free port under a temporary directory, its Druid connections pointed at
    the fake Druid; killed (process group) at the end."""
    tmp = tmp_path_factory.mktemp("e2e")
    write_snapshots(tmp / "snapshots_src")
    port = free_port()
    log = artifacts / "deployment.log"
    cmd = ["make", "--no-print-directory", "-C", str(REPO), "airflow",
           f"VAR={tmp / 'var'}", f"AIRFLOW_PORT={port}", f"SNAPSHOTS={tmp / 'snapshots_src'}",
           f"SPARK_CONNECT_PORT={free_port()}"]
    with open(log, "wb") as out:
        host, druid_port = druid.url.split("//")[1].split(":")
        env = {**_clean_env(), **{f"AIRFLOW_CONN_{c}": json.dumps({"conn_type": t, "host": host, "port": int(druid_port)})
                                  for c, t in (("DRUID_BROKER_DEFAULT", "druid"), ("DRUID_COORDINATOR_DEFAULT", "http"))}}
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    (artifacts / "deployment.pid").write_text(f"{proc.pid}\n")
    dep = Deployment(base=f"http://127.0.0.1:{port}", var=tmp / "var", password="", log=log)
    try:
        _wait_ready(dep, proc)
        yield dep
    finally:
        _stop(proc)
        (artifacts / "deployment.pid").unlink(missing_ok=True)


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


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield b
        b.close()


@dataclass
class Console:
    """Error-level console messages and failed page loads of the Airflow UI."""

    messages: list[str] = field(default_factory=list)
    logged_in: bool = False

    def record(self, msg) -> None:
        if msg.type != "error":
            return
        url = (msg.location or {}).get("url", "")
        text = msg.text
        if "favicon" in url or "favicon" in text:
            return
        # Before login the UI asks for /ui/config and is answered 401, which sends it to the login
        # page: that is how the simple auth manager's login works, not an error of the page.
        if not self.logged_in and "401" in text and url.endswith("/ui/config"):
            return
        self.messages.append(f"{text} ({url})")


@pytest.fixture(scope="session")
def console(artifacts):
    c = Console()
    yield c
    (artifacts / "console-errors.txt").write_text("".join(m + "\n" for m in c.messages))


@pytest.fixture(scope="session")
def page(browser, deployment, console):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=deployment.base)
    context.set_default_timeout(30_000)
    pg = context.new_page()
    pg.on("console", console.record)
    pg.on("pageerror", lambda exc: console.messages.append(f"page error: {exc}"))
    yield pg
    context.close()
