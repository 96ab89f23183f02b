"""The browser test's deployment: ``make airflow`` in a temporary directory, and a chromium.

Collected only when ``SEGMENT_BALANCER_E2E`` is set (``make e2e`` sets it): ``make test`` does not
collect these tests. Artifacts (screenshots, the deployment's output, the browser console) go to
``$SEGMENT_BALANCER_E2E_ARTIFACTS`` (``make e2e``: ``var/e2e-artifacts``, which git ignores).

The session fixture ``deployment`` is ``deployment.running_deployment`` (``make airflow`` on a free
port under a temporary directory, in its own process group) with the two small snapshots of
``e2e_snapshots.py`` as the only snapshots and the Druid connections on the loopback fake Druid.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from deployment import REPO, running_deployment  # noqa: E402
from e2e_snapshots import write_snapshots  # noqa: E402

ARTIFACTS = Path(os.environ.get("SEGMENT_BALANCER_E2E_ARTIFACTS") or REPO / "var" / "e2e-artifacts")
CHROMIUM = "/usr/bin/chromium"


# Not even collected by `make test` (pytest's testpaths include tests/): only `make e2e` sets this.
if not os.environ.get("SEGMENT_BALANCER_E2E"):
    collect_ignore = ["test_ui.py", "test_report.py", "test_stop.py"]


#: The test that stops the session's ``deployment`` with Ctrl+C (``test_stop.py``): it runs after
#: every other test, which need the deployment running.
STOPS_THE_DEPLOYMENT = "test_stop.py::test_ctrl_c_stops_every_process_and_port"


def pytest_collection_modifyitems(config, items):
    """:data:`STOPS_THE_DEPLOYMENT` last, the others in their order."""
    items.sort(key=lambda item: item.nodeid.endswith(STOPS_THE_DEPLOYMENT))


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
    host, druid_port = druid.url.split("//")[1].split(":")
    env = {
        f"AIRFLOW_CONN_{c}": json.dumps({"conn_type": t, "host": host, "port": int(druid_port)})
        for c, t in (("DRUID_BROKER_DEFAULT", "druid"), ("DRUID_COORDINATOR_DEFAULT", "http"))
    }
    with running_deployment(tmp, tmp / "snapshots_src", artifacts / "deployment.log", env) as dep:
        (artifacts / "deployment.pid").write_text(f"{dep.pid}\n")
        try:
            yield dep
        finally:
            (artifacts / "deployment.pid").unlink(missing_ok=True)


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
    retried: list[str] = field(default_factory=list)
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
        # Creating a backfill while the scheduler writes can meet SQLite's lock (the deployment's
        # metadata DB): Airflow answers 503 ("Database is locked. Backfill creation is not supported
        # on SQLite under concurrent access", api_fastapi/core_api/routes/public/backfills.py) and
        # the UI sends the request again; test_backfill checks the backfill was created, once.
        if "503" in text and url.endswith("/api/v2/backfills"):
            self.retried.append(f"{text} ({url})")
            return
        self.messages.append(f"{text} ({url})")


@pytest.fixture(scope="session")
def console(artifacts):
    c = Console()
    yield c
    (artifacts / "console-errors.txt").write_text(
        "".join(m + "\n" for m in [*c.messages, *(f"(retried by the UI) {r}" for r in c.retried)])
    )


WAIT_MS = 30_000
"""How long an action on the UI or an assertion about it waits (ms), unless it says otherwise."""


@pytest.fixture(scope="session")
def page(browser, deployment, console):
    """One page for the session. Its actions and the assertions on it wait up to
    :data:`WAIT_MS` (playwright's own assertions would give up after 5 s: a page of the UI loading
    beside a DAG run and the suite has taken longer)."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=deployment.base)
    context.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    pg = context.new_page()
    pg.on("console", console.record)
    pg.on("pageerror", lambda exc: console.messages.append(f"page error: {exc}"))
    yield pg
    context.close()
