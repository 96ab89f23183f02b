"""Shared fixtures: one lean local SparkSession for the whole test run."""

from __future__ import annotations

import logging

import pytest

# Must run before anything imports airflow: points AIRFLOW_HOME etc. at a temporary directory.
from conftest_airflow import airflow_home  # noqa: E402,F401

SLOW_MARKERS = ("spark_submit", "simulation")
"""The markers of the slowest tests (whole DAG runs, several simulated Coordinator runs)."""


def pytest_collection_modifyitems(config, items):
    """The modules with a test marked one of :data:`SLOW_MARKERS` first, then the rest, each in
    collection order: ``make test`` distributes whole modules (``--dist loadfile``) in this order
    (``--no-loadscope-reorder``), so the workers start on the slow modules and the many short ones
    fill in after, rather than one slow module left to the end on one worker."""
    slow = {item.nodeid.split("::")[0] for item in items if any(item.get_closest_marker(m) for m in SLOW_MARKERS)}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)


class SharedGate:
    """One validation process (``segment_balancer.plan.validation_process.ValidationProcess``) for
    every plan a pytest process makes: a child imports Great Expectations once (about 5 s of CPU)
    instead of once per plan. Calling it stands in for ``ValidationProcess()``: a handle whose
    ``validate`` goes to the shared child and whose ``close`` leaves it running; a child that ended
    (killed, out of memory) is replaced at the next call. The gate's own life (start, close, a child
    gone) is tested with the real class (``tests/plan/test_validation_process.py``), and the CLI's
    subprocess tests start one per plan as a user's command does."""

    def __init__(self, real):
        self._real = real
        self._gate = None

    def __call__(self):
        if self._gate is None or not self._gate.running:
            if self._gate is not None:
                self._gate.close()
            self._gate = self._real()
        return _GateHandle(self._gate)

    def close(self) -> None:
        if self._gate is not None:
            self._gate.close()


class _GateHandle:
    """What ``ValidationProcess()`` returns under :class:`SharedGate`: the shared child's
    ``validate``, ``pid`` and ``running``; ``close`` (and leaving the ``with`` block) ends nothing."""

    def __init__(self, gate):
        self._gate = gate

    def validate(self, plan_dir, work_dir) -> dict:
        return self._gate.validate(plan_dir, work_dir)

    @property
    def pid(self) -> int:
        return self._gate.pid

    @property
    def running(self) -> bool:
        return self._gate.running

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


@pytest.fixture(scope="session", autouse=True)
def shared_validation_process():
    """Every ``ValidationProcess()`` the code under test starts in this pytest process is a handle
    on one shared child (:class:`SharedGate`); test modules that import the class itself keep it."""
    from segment_balancer.plan import validation_process

    shared = SharedGate(validation_process.ValidationProcess)
    patch = pytest.MonkeyPatch()
    patch.setattr(validation_process, "ValidationProcess", shared)
    yield shared
    patch.undo()
    shared.close()


@pytest.fixture(scope="session")
def spark():
    from segment_balancer.spark.session import local_session

    session = local_session("segment_balancer_tests")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at exit, into streams pytest has
    # already closed ("--- Logging error ---"): keep it quiet.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def druid_sample_planned(spark, tmp_path_factory):
    """The bundled ``druid_sample`` snapshot planned once by the CLI path (``run_plan``):
    (base dir with ``plan/`` and ``work/``, summary dict, operations frame)."""
    import pandas as pd
    from druid_sample_plan import SNAPSHOT

    from segment_balancer.tools.pipeline import run_plan

    base = tmp_path_factory.mktemp("druid_sample")
    summary = run_plan(spark, SNAPSHOT, base / "plan", work=base / "work")
    return base, summary, pd.read_parquet(base / "plan" / "operations.parquet")


@pytest.fixture(scope="session")
def compaction_planned(spark, tmp_path_factory):
    """The hand-worked snapshot of ``compaction_snapshot.py`` (overwritten, compacted and partially
    compacted data) planned once by the CLI path: (base dir with ``snapshot/``, ``plan/`` and
    ``work/``, summary dict, operations frame)."""
    import pandas as pd
    from compaction_snapshot import write_snapshot

    from segment_balancer.tools.pipeline import run_plan

    base = tmp_path_factory.mktemp("compaction")
    summary = run_plan(spark, write_snapshot(base / "snapshot"), base / "plan", work=base / "work")
    return base, summary, pd.read_parquet(base / "plan" / "operations.parquet")


@pytest.fixture(scope="session")
def generated_planned(spark, tmp_path_factory):
    """The bundled ``generated`` snapshot (20k segments) planned once by the CLI path: (base dir
    with ``plan/``, summary dict, operations frame)."""
    from pathlib import Path

    import pandas as pd

    from segment_balancer.tools.pipeline import run_plan

    snapshot = Path(__file__).resolve().parents[1] / "include" / "segment_balancer" / "snapshots" / "generated"
    base = tmp_path_factory.mktemp("generated")
    summary = run_plan(spark, snapshot, base / "plan")
    return base, summary, pd.read_parquet(base / "plan" / "operations.parquet")


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server (``segment_balancer.spark.connect_server``) on a free port of 127.0.0.1, for
    the tests that run applications as Connect clients; stopped at the end. Clients run in child
    processes: one Python process is either a Connect client or a classic driver (the ``spark``
    fixture's), never both."""
    import socket

    from segment_balancer.spark.connect_server import ConnectServer

    with socket.socket() as s:  # a free port; the Spark UI takes the next one
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ConnectServer(tmp_path_factory.mktemp("connect"), port=port, driver_memory="2g", event_log=True)
    server.start()
    yield server
    server.stop()
