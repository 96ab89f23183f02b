"""``make airflow`` stops on Ctrl+C and on SIGTERM: a DAG run's Spark stage running, then SIGINT to
the process group as a terminal sends it, or SIGTERM to make alone; within ``STOP_BUDGET_S`` seconds
no process of the deployment is left and none of its ports is held (``tools/local_airflow.py``).

SIGTERM stops a deployment of its own; Ctrl+C stops the UI tests' deployment (``conftest.py``'s
``deployment``) once they are done: ``conftest.py`` runs that test last, and a deployment started
for it alone would cost the suite one more start."""

from __future__ import annotations

import os
import signal
import time

import psutil
from deployment import DAG_ID, POLL_S, running_deployment
from e2e_snapshots import write_snapshots

from segment_balancer.common.ports import taken
from segment_balancer.tools.local_airflow import STOP_BUDGET_S
from segment_balancer_airflow.branches import STAGE_TASK_IDS

RUN_TIMEOUT = 300


def deployment_processes(var, root: int, since: float) -> list[psutil.Process]:
    """Every process of the deployment: ``root``'s descendants (``make``'s: the supervisor, the
    components, executor workers and task processes, which it keeps as their subreaper), those
    whose command line or environment names its ``var`` directory (the Connect server, started
    apart), and any Airflow process started since ``since`` (epoch s; its environment may be hidden
    by ``setproctitle``) whose parents, up to one of this test process's own ancestors, are all the
    deployment's: not a process of another tree, such as a test suite running beside this one."""
    found = {}
    try:
        for proc in [psutil.Process(root), *psutil.Process(root).children(recursive=True)]:
            found[proc.pid] = proc
    except psutil.NoSuchProcess:
        pass
    for proc in psutil.process_iter():
        try:
            cmdline = " ".join(proc.cmdline())
            named = str(var) in cmdline or str(var) in " ".join(f"{k}={v}" for k, v in proc.environ().items())
            airflow = "airflow" in cmdline and proc.create_time() >= since
        except psutil.Error:
            continue
        if (named or (airflow and _escaped_from(proc, found))) and proc.pid != os.getpid():
            found[proc.pid] = proc
    return [p for p in found.values() if _alive(p)]


def _escaped_from(proc: psutil.Process, deployment: dict[int, psutil.Process]) -> bool:
    """Whether every parent of ``proc``, nearest first, up to the first that is this process or one
    of its ancestors (init, a subreaper above this test), is one of ``deployment``'s processes."""
    own = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    try:
        parents = proc.parents()
    except psutil.Error:
        return False
    for parent in parents:
        if parent.pid in own:
            return True
        if parent.pid not in deployment:
            return False
    return True


def retried(call, tries: int = 5):
    """``call()``, again after 3 s when it fails (SQLite's "database is locked" while another
    component writes answers HTTP 500: a task's XCom write held it 5 s on CI)."""
    for attempt in range(tries):
        try:
            return call()
        except AssertionError:
            if attempt == tries - 1:
                raise
            time.sleep(3)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_while_a_stage_runs(dep, sig: signal.Signals, since: float) -> None:
    """Trigger a run of ``dep`` and, while one of its Spark stages runs, send ``sig`` (SIGINT: to
    make's process group, as Ctrl+C does; else to make alone); check that every process of the
    deployment (:func:`deployment_processes` with ``since``) is gone within the budget, its ports
    free, and its log says it stopped."""
    retried(lambda: dep.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False}))
    run = retried(lambda: dep.request("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": {}}))
    run_id = run["dag_run_id"]
    deadline = time.monotonic() + RUN_TIMEOUT
    while not any(ti["state"] == "running" and ti["task_id"] in STAGE_TASK_IDS for ti in dep.task_instances(run_id)):
        assert time.monotonic() < deadline, f"no stage of {run_id} ran; see {dep.log}"
        time.sleep(POLL_S)
    before = deployment_processes(dep.var, dep.pid, since)
    names = {p.pid: " ".join(p.cmdline()[:4]) for p in before}
    # the components, a task process of the running stage and the Connect server among them
    # (Airflow's processes name themselves: "airflow api_server", "airflow worker -- <task>")
    for part in ("api_server", "scheduler", "dag-processor", "triggerer", "worker --", "connect_server", "java"):
        assert any(part in n for n in names.values()), (part, sorted(names.values()))
    started = time.monotonic()
    if sig is signal.SIGINT:
        os.killpg(dep.pid, signal.SIGINT)
    else:
        os.kill(dep.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(before, timeout=STOP_BUDGET_S)
    took = time.monotonic() - started
    left = deployment_processes(dep.var, dep.pid, since)
    ports = {**dep.ports, "Spark UI": dep.ports["SPARK_CONNECT_PORT"] + 1}
    held = [name for name, port in ports.items() if taken(port)]
    assert not alive and not left, (
        f"left after {took:.1f} s: {[names.get(p.pid, p.pid) for p in alive + left]}; see {dep.log}"
    )
    assert not held, f"ports still held after {took:.1f} s: {held}"
    assert took <= STOP_BUDGET_S
    output = dep.log.read_text()
    assert "stopping every process of this deployment" in output and "stopped in" in output


def test_sigterm_stops_every_process_and_port(tmp_path, artifacts):
    """SIGTERM to make alone, on a deployment of its own, while a stage of a DAG run is running:
    everything the deployment started is gone within the budget, ports free."""
    write_snapshots(tmp_path / "snapshots_src")
    log = artifacts / "deployment-stop-SIGTERM.log"
    since = time.time() - 1
    with running_deployment(tmp_path, tmp_path / "snapshots_src", log) as dep:
        stop_while_a_stage_runs(dep, signal.SIGTERM, since)


def test_ctrl_c_stops_every_process_and_port(deployment, page):
    """Ctrl+C (SIGINT to make's process group) on the UI tests' deployment, after them (``conftest.py``
    orders this test last), while a stage of a DAG run is running: everything the deployment started
    is gone within the budget, ports free. The UI tests' browser page leaves the UI first: its
    polling of a stopped server would fill the console's artifact with refused connections."""
    page.goto("about:blank")
    stop_while_a_stage_runs(deployment, signal.SIGINT, deployment.started - 1)
