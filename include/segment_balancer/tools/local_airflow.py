"""``make airflow``'s processes, started together and stopped together: Airflow's API server,
scheduler, DAG processor and triggerer, their two log servers bound to 127.0.0.1, and (when the
Makefile started it for this deployment) the Spark Connect server.

``python -m segment_balancer.tools.local_airflow run [--verbose] [--connect-dir DIR --connect-port PORT]``
``python -m segment_balancer.tools.local_airflow log-server --port PORT``

It replaces ``airflow standalone``, which binds its log servers to every address and, on Ctrl+C,
waits on its components without end while task processes (each in a process group of its own)
outlive it. Here every component runs in a session of its own with its output in
``$AIRFLOW_HOME/logs/deployment/<component>.log`` (also on the terminal with ``--verbose``); this
process is the child subreaper of all of them, so that what a component leaves behind (executor
workers, task processes, their ``spark-submit`` JVMs) stays in its process tree. On SIGINT, SIGTERM
or SIGHUP, or when a component exits on its own, every process of the tree gets SIGTERM, what is
left after :data:`STOP_GRACE_S` seconds SIGKILL, and the Connect server is stopped meanwhile:
within :data:`STOP_BUDGET_S` seconds nothing is left and no port is held. Should this process end
without that (a SIGKILL), every component gets SIGKILL from the kernel (``PR_SET_PDEATHSIG``).
Exit code 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP), 1 when a component failed.

The ports are the settings of ``segment_balancer.common.ports`` (``AIRFLOW_PORT``,
``WORKER_LOG_PORT``, ``TRIGGERER_LOG_PORT``), read here from Airflow's configuration, which the
Makefile renders from them.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil
import uvicorn
from airflow.configuration import conf

from segment_balancer.common.ports import HOST
from segment_balancer.spark.connect_server import ConnectServer

STOP_GRACE_S = 8.0
"""Seconds between SIGTERM and SIGKILL to what is left of the deployment."""
CONNECT_STOP_GRACE_S = 5.0
"""Seconds the Connect server gets between SIGTERM and SIGKILL."""
STOP_BUDGET_S = 15.0
"""Seconds within which a stop leaves no process and no port behind (checked by the e2e test)."""
HEALTHY = ("scheduler", "dag_processor", "triggerer")
"""The components ``/api/v2/monitor/health`` reports, all healthy when the deployment is ready."""
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


@dataclass
class Component:
    """One process of the deployment: its name, command line and output file."""

    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen | None = None


def components(log_dir: Path) -> list[Component]:
    """The deployment's processes: Airflow's four components (the scheduler and the triggerer
    without the log servers they would bind to every address) and the two log servers on
    127.0.0.1, at the ports of ``[logging] worker_log_server_port`` and ``trigger_log_server_port``."""
    airflow = [sys.executable, "-m", "airflow"]
    me = [sys.executable, "-m", "segment_balancer.tools.local_airflow", "log-server", "--port"]
    specs = [
        ("api-server", [*airflow, "api-server"]),
        ("scheduler", [*airflow, "scheduler", "--skip-serve-logs"]),
        ("dag-processor", [*airflow, "dag-processor"]),
        ("triggerer", [*airflow, "triggerer", "--skip-serve-logs"]),
        ("worker-log-server", [*me, str(conf.getint("logging", "worker_log_server_port"))]),
        ("triggerer-log-server", [*me, str(conf.getint("logging", "trigger_log_server_port"))]),
    ]
    return [Component(name, argv, log_dir / f"{name}.log") for name, argv in specs]


def serve_logs(port: int) -> None:
    """Airflow's log server (``airflow.utils.serve_logs``) on ``127.0.0.1:port`` only; blocks."""
    uvicorn.run(
        "airflow.utils.serve_logs.log_server:get_app",
        host=HOST,
        port=port,
        log_config=None,
        access_log=False,
    )


class Deployment:
    """The running processes of :func:`components`, and the Connect server to stop with them."""

    def __init__(self, parts: list[Component], verbose: bool = False, connect: tuple[Path, int] | None = None):
        self.parts = parts
        self.verbose = verbose
        self.connect = connect
        self.signal: int | None = None
        self._wake = threading.Event()

    # ------------------------------------------------------------------------------ starting
    def start(self) -> None:
        """Each component in a session of its own, this process their child subreaper."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        for part in self.parts:
            part.log.parent.mkdir(parents=True, exist_ok=True)
            out = open(part.log, "ab")  # noqa: SIM115 - kept open by the child
            part.process = subprocess.Popen(
                part.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.verbose else out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            out.close()
            if self.verbose:
                threading.Thread(target=self._echo, args=(part, part.log), daemon=True).start()

    def catch_signals(self) -> None:
        """From now on SIGINT, SIGTERM and SIGHUP end :meth:`wait` (a signal while the components
        start is seen as soon as it begins)."""
        for sig in _EXIT_CODES:
            signal.signal(sig, self._on_signal)

    def _echo(self, part: Component, log: Path) -> None:
        with open(log, "ab") as out:
            for line in part.process.stdout:
                out.write(line)
                out.flush()
                sys.stdout.write(f"{part.name:>20} | {line.decode(errors='replace')}")
                sys.stdout.flush()

    # ------------------------------------------------------------------------------ waiting
    def wait(self, base_url: str) -> int:
        """Until a signal or a component's exit; prints when the deployment is ready. Returns the
        exit code of the stop."""
        self.catch_signals()
        ready = False
        while self.signal is None:
            failed = next((p for p in self.parts if p.process.poll() is not None), None)
            if failed is not None:
                tail = failed.log.read_text(errors="replace").splitlines()[-20:]
                print(f"{failed.name} exited with code {failed.process.returncode}; the last lines of {failed.log}:")
                print("\n".join(f"  {line}" for line in tail))
                return 1
            if not ready and _healthy(base_url):
                ready = True
                print(f"ready: {base_url} (Ctrl+C stops every process of this deployment)", flush=True)
            self._wake.wait(1.0 if ready else 2.0)
        return _EXIT_CODES[self.signal]

    def _on_signal(self, signum, _frame) -> None:
        self.signal = signum
        self._wake.set()

    # ------------------------------------------------------------------------------ stopping
    def stop(self) -> list[str]:
        """SIGTERM to every process of the tree, SIGKILL after :data:`STOP_GRACE_S` seconds to what
        is left, the Connect server stopped meanwhile; returns the processes that had to be killed
        (``name (pid)``)."""
        for sig in _EXIT_CODES:
            signal.signal(sig, signal.SIG_IGN)
        stopper = None
        if self.connect is not None:
            server = ConnectServer(self.connect[0], port=self.connect[1])
            stopper = threading.Thread(target=server.stop, kwargs={"grace": CONNECT_STOP_GRACE_S})
            stopper.start()
        me = psutil.Process()
        for proc in me.children(recursive=True):
            _send(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and _reap(me):
            time.sleep(0.2)
        killed = []
        for _ in range(3):  # what a dying process started meanwhile is a child of this one too
            left = me.children(recursive=True)
            if not left:
                break
            for proc in left:
                killed.append(f"{_name(proc)} ({proc.pid})")
                _send(proc, signal.SIGKILL)
            time.sleep(0.2)
            _reap(me)
        if stopper is not None:
            stopper.join()
        return killed


def _die_with_parent() -> None:
    """In a component, before it starts: SIGKILL when this process ends, however it ends (a
    SIGKILL to it included), so that no component outlives the deployment."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _send(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except psutil.Error:
        pass


def _reap(me: psutil.Process) -> list[psutil.Process]:
    """Collect the exit status of every finished child; the processes still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return [p for p in me.children(recursive=True) if _running(p)]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()[:3]) or proc.name()
    except psutil.Error:
        return "?"


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/api/v2/monitor/health", timeout=3) as resp:
            health = json.loads(resp.read())
    except (OSError, ValueError):
        return False
    return all(health.get(c, {}).get("status") == "healthy" for c in HEALTHY)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m segment_balancer.tools.local_airflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start the deployment and stop it on SIGINT, SIGTERM or SIGHUP")
    run.add_argument("--verbose", action="store_true", help="the components' output on the terminal too")
    run.add_argument("--connect-dir", type=Path, help="the Connect server to stop with the deployment")
    run.add_argument("--connect-port", type=int)
    logs = sub.add_parser("log-server", help="Airflow's log server on 127.0.0.1")
    logs.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "log-server":
        serve_logs(args.port)
        return 0

    log_dir = Path(conf.get("logging", "base_log_folder")) / "deployment"
    base_url = f"http://{conf.get('api', 'host')}:{conf.getint('api', 'port')}"
    connect = (args.connect_dir, args.connect_port) if args.connect_dir else None
    deployment = Deployment(components(log_dir), verbose=args.verbose, connect=connect)
    print(f"starting Airflow: the output of each component in {log_dir}/", flush=True)
    code = 1
    deployment.catch_signals()
    try:
        deployment.start()
        code = deployment.wait(base_url)
    except KeyboardInterrupt:  # Ctrl+C before the handlers were in place
        code = _EXIT_CODES[signal.SIGINT]
    finally:
        print("stopping every process of this deployment", flush=True)
        started = time.monotonic()
        killed = deployment.stop()
        took = time.monotonic() - started
        print(
            f"stopped in {took:.1f} s" + (f"; killed after {STOP_GRACE_S:.0f} s: {', '.join(killed)}" if killed else "")
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
