"""A Spark Connect server from the installed PySpark: the Spark that stays up between the stages.

Every application of a plan (stage 0, the thirteen stages, ``assemble``, the simulation) is short;
started as its own ``spark-submit`` each pays a JVM start (about 7 s here) and a cold session before
its first job. A Spark Connect server is one long-lived driver: applications attach to it as clients
(``sc://host:port/;session_id=<uuid>``), so an application costs its work and an attach (0.1 s).
One DAG run keeps one session on it (``segment_balancer_airflow.connect``), so the Python workers
and the session's state stay warm from stage to stage.

The PySpark wheel carries the server's jar but not ``sbin/start-connect-server.sh``; what that
script does is one ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer
spark-internal``, which :class:`ConnectServer` runs in the background, detached, with:

- ``--master``: ``$SPARK_MASTER`` or ``local[*]`` (a ``spark://`` standalone master or ``yarn``
  when configured); on a ``local`` master shuffles get one partition per core and adaptive
  execution is off (:data:`segment_balancer.spark.session.LOCAL_SQL_CONF`); on a cluster master
  Spark's 200 shuffle partitions hold unless ``--conf spark.sql.shuffle.partitions=N`` says the
  cluster's cores (the applications spread their Python tasks over that many partitions: 200 on a
  small cluster cost seconds per shuffle);
- ``--driver-memory``: ``$SEGMENT_BALANCER_CONNECT_MEMORY`` or :data:`DEFAULT_DRIVER_MEMORY` (on a
  local master the driver runs every task, so this bounds the whole plan);
- the gRPC port (``--port``, default :data:`DEFAULT_PORT`) bound to ``--host`` (127.0.0.1), the
  Spark UI on ``--ui-port`` (default: port + 1);
- Python workers on this interpreter (``PYSPARK_PYTHON``): the UDFs of the stages are functions
  of this package, pickled by reference, so the server's Python must import it; their allocators
  set to give freed memory back (:data:`WORKER_MEMORY_ENV`);
- its log, its pid and (when asked) its event log under ``--dir``.

Usage::

    python -m segment_balancer.spark.connect_server start --dir DIR [--port 15002] [--host 127.0.0.1]
        [--master local[*]] [--driver-memory 4g] [--ui-port N] [--event-log] [--conf KEY=VALUE …]
        [--timeout 120] [--stop-with PID]
    python -m segment_balancer.spark.connect_server status --dir DIR [--port 15002]
    python -m segment_balancer.spark.connect_server stop --dir DIR

``start`` returns once the server answers a query (the health check: a session runs a Python
function, which also warms the server's code generation and first Python worker) and prints its
URL; it is a no-op when the server of ``DIR`` already answers on the port; with ``--stop-with PID``
a detached watchdog stops the server when process ``PID`` ends (``make airflow``, ``make demo``).
``status`` exits 0 when the server answers, 1 when not. ``stop`` stops the server of ``DIR`` (TERM, then KILL after a
grace period); nothing is left running.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from segment_balancer.common.files import write_text_atomic
from segment_balancer.common.ports import refusal
from segment_balancer.spark.jvm_archive import local_driver_java_options
from segment_balancer.spark.session import LEAN_CONF, LOCAL_SQL_CONF, port_open

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002
DEFAULT_HOST = "127.0.0.1"
DEFAULT_DRIVER_MEMORY = "4g"
MEMORY_ENV = "SEGMENT_BALANCER_CONNECT_MEMORY"

#: The environment of the server's Python workers (they inherit the server's), unless already set:
#: Arrow buffers from the system allocator, and at most two glibc malloc arenas per process. A
#: worker is reused from stage to stage and keeps what its allocators hold after its largest tier
#: pass; with these it returns freed memory. Measured on a 100k-segment plan: the peak proportional
#: memory of server, workers and client 3.4 GiB instead of 4.3 GiB, the same wall time
#: (benchmarks/README.md).
WORKER_MEMORY_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2"}


def spark_home() -> Path:
    """The installed PySpark's directory (its ``bin/spark-submit`` and ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class ConnectServer:
    """One Spark Connect server: ``root`` holds ``connect-server.log``, ``connect-server.pid`` and
    ``events/`` (the event log, with ``event_log``); gRPC on ``host:port``; the master, the driver
    memory (Spark's size syntax), the Spark UI port (None: ``port + 1``) and extra ``conf``."""

    root: Path
    port: int = DEFAULT_PORT
    host: str = DEFAULT_HOST
    master: str = field(default_factory=lambda: os.environ.get("SPARK_MASTER", "local[*]"))
    driver_memory: str = field(default_factory=lambda: os.environ.get(MEMORY_ENV, DEFAULT_DRIVER_MEMORY))
    ui_port: int | None = None
    event_log: bool = False
    conf: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """``sc://host:port`` (a client adds ``/;session_id=…``)."""
        return f"sc://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / "connect-server.log"

    @property
    def pid_path(self) -> Path:
        return self.root / "connect-server.pid"

    def pid(self) -> int | None:
        """The pid of this directory's server while that process lives, else None."""
        try:
            pid = int(self.pid_path.read_text().strip())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def spark_conf(self) -> dict[str, str]:
        """Every ``--conf`` of the server."""
        conf = {k: v for k, v in LEAN_CONF.items() if k not in ("spark.driver.memory", "spark.ui.enabled")}
        conf.update(
            {
                "spark.connect.grpc.binding.port": str(self.port),
                "spark.connect.grpc.binding.address": self.host,
                "spark.ui.enabled": "true",
                "spark.ui.port": str(self.ui_port or self.port + 1),
                "spark.driver.host": self.host if self._on_this_machine() else "",
                "spark.pyspark.python": sys.executable,
                "spark.pyspark.driver.python": sys.executable,
            }
        )
        if self.master.startswith("local"):
            conf.update(LOCAL_SQL_CONF)
            conf["spark.sql.shuffle.partitions"] = str(max(2, _local_cores(self.master)))
        if self.event_log:
            (self.root / "events").mkdir(parents=True, exist_ok=True)
            conf.update(
                {
                    "spark.eventLog.enabled": "true",
                    "spark.eventLog.dir": f"file://{self.root / 'events'}",
                    "spark.eventLog.compress": "false",
                    "spark.eventLog.rolling.enabled": "false",
                }
            )
        conf.update(self.conf)
        return {k: v for k, v in conf.items() if v != ""}

    def _on_this_machine(self) -> bool:
        """A local master, or a master on this machine's loopback (``make cluster-demo``): the
        driver binds to the loopback host too."""
        return self.master.startswith("local") or any(h in self.master for h in ("127.0.0.1", "localhost"))

    def command(self) -> list[str]:
        """The ``spark-submit`` that runs the server."""
        cmd = [
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--master",
            self.master,
            "--name",
            "segment_balancer.connect",
            "--driver-memory",
            self.driver_memory,
        ]
        if self.master.startswith("local"):
            cmd += ["--driver-java-options", local_driver_java_options()]
        for key, value in self.spark_conf().items():
            cmd += ["--conf", f"{key}={value}"]
        return [*cmd, "spark-internal"]

    def _env(self) -> dict[str, str]:
        python = sys.executable
        env = dict(os.environ, SPARK_HOME=str(spark_home()), PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
        if self._on_this_machine():
            env.setdefault("SPARK_LOCAL_IP", self.host)
        for key, value in WORKER_MEMORY_ENV.items():
            env.setdefault(key, value)
        for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS"):
            env.pop(key, None)
        bin_dir = str(Path(python).parent)
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
        return env

    def healthy(self, timeout: float = 60.0) -> bool:
        """Whether the server answers: its port is open and a new session runs a Python function
        over Arrow within ``timeout`` seconds (the session is released afterwards)."""
        if not port_open(self.host, self.port):
            return False
        try:
            return _probe(self.url, timeout)
        except Exception:  # noqa: BLE001 - any failure of the probe is "not healthy"
            return False

    def start(self, timeout: float = 120.0) -> str:
        """Start the server in the background (detached, its own process group) and return its URL
        once :meth:`healthy`. A server of this directory that already answers is kept.

        Raises ``RuntimeError`` when the port is taken by another process, ``TimeoutError`` (with
        the log's path and its last lines) when the server does not answer within ``timeout``
        seconds or dies first; the server is stopped then.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        if self.pid() is not None and self.healthy():
            return self.url
        if self.pid() is None and port_open(self.host, self.port):
            raise RuntimeError(refusal("SPARK_CONNECT_PORT", self.port) + " (or --port)")
        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {' '.join(self.command())}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                self.command(),
                env=self._env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.root,
            )
        write_text_atomic(f"{proc.pid}\n", self.pid_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if port_open(self.host, self.port):
                if _probe(self.url, max(5.0, deadline - time.monotonic())):
                    return self.url
            time.sleep(0.5)
        self.stop()
        tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
        raise TimeoutError(
            f"the Spark Connect server at {self.url} did not answer within {timeout:.0f} s; "
            f"log {self.log_path}:\n" + "\n".join(tail)
        )

    def stop(self, grace: float = 20.0) -> bool:
        """Stop the server of this directory (its whole process group: the JVM and its Python
        workers): TERM, then KILL after ``grace`` seconds, and wait for it to be gone and its port
        free (at most 30 s more). Returns whether one was running."""
        pid = self.pid()
        self.pid_path.unlink(missing_ok=True)
        if pid is None:
            return False
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
            try:
                os.killpg(pid, sig)
            except OSError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.2)
            if not _alive(pid):
                break
        # the group's last processes (the JVM under its launcher) may hold the port a moment longer
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and port_open(self.host, self.port):
            time.sleep(0.2)
        return True

    def stop_with(self, pid: int) -> None:
        """Stop this server when process ``pid`` ends (a detached watchdog, polling every second):
        ``make airflow`` and ``make demo`` leave nothing running however their shell ends."""
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "segment_balancer.spark.connect_server",
                "watch",
                "--dir",
                str(self.root),
                "--port",
                str(self.port),
                "--pid",
                str(pid),
            ],
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def watch(self, pid: int, every: float = 1.0) -> None:
        """Block until process ``pid`` or this server ends; then stop the server."""
        server = self.pid()
        while server is not None and _alive(pid) and _alive(server) and self.pid() == server:
            time.sleep(every)
        if server is not None and self.pid() == server:
            self.stop()

    def __enter__(self) -> ConnectServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _local_cores(master: str) -> int:
    """The cores of a ``local``, ``local[N]`` or ``local[*]`` master."""
    inner = master[len("local[") : -1] if master.startswith("local[") else "1"
    if inner in ("*", ""):
        return os.cpu_count() or 2
    return int(inner.split(",")[0])


def _probe(url: str, timeout: float) -> bool:
    """Run a tiny Arrow Python function in a fresh session of the server at ``url`` in a child
    process (a Connect client that cannot reach its server retries for minutes: the child is
    killed after ``timeout`` seconds), then release the session (``segment_balancer.spark.session.release``: a health
    check leaves no Python daemon behind). True when it printed the expected answer."""
    code = (
        "import sys; from pyspark.sql.connect.session import SparkSession as S; "
        "s = S.builder.remote(sys.argv[1]).getOrCreate(); "
        "f = lambda it: (b for b in it); "
        "print('answer', s.range(3).mapInArrow(f, 'id long').count()); "
        "from segment_balancer.spark.session import release; release(s)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, url], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and "answer 3" in done.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m segment_balancer.spark.connect_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=["start", "stop", "status", "watch"])
    parser.add_argument("--dir", required=True, type=Path, help="the server's log, pid file and event log")
    parser.add_argument("--port", type=int, default=int(os.environ.get("SPARK_CONNECT_PORT", DEFAULT_PORT)))
    parser.add_argument("--host", default=DEFAULT_HOST, help="address the gRPC port binds to")
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    parser.add_argument("--driver-memory", default=os.environ.get(MEMORY_ENV, DEFAULT_DRIVER_MEMORY))
    parser.add_argument("--ui-port", type=int, help="the Spark UI's port (default: port + 1)")
    parser.add_argument("--event-log", action="store_true", help="write Spark's event log under DIR/events")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of the server (repeatable), e.g. spark.sql.shuffle.partitions=8 "
        "on a cluster master (on a local master it is one per core)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the server to answer")
    parser.add_argument("--stop-with", type=int, metavar="PID", help="with start: stop the server when PID ends")
    parser.add_argument("--pid", type=int, help=argparse.SUPPRESS)  # watch: the process to outlive no longer
    args = parser.parse_args(argv)
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    server = ConnectServer(
        args.dir.absolute(), args.port, args.host, args.master, args.driver_memory, args.ui_port, args.event_log, conf
    )
    if args.action == "start":
        started = time.monotonic()
        try:
            print(server.start(args.timeout))
        except (RuntimeError, TimeoutError) as exc:
            print(f"Spark Connect server not started: {exc}", file=sys.stderr)
            return 1
        print(
            f"Spark Connect server up in {time.monotonic() - started:.1f} s (pid {server.pid()}, "
            f"master {server.master}, driver memory {server.driver_memory}, log {server.log_path})",
            file=sys.stderr,
        )
        if args.stop_with:
            server.stop_with(args.stop_with)
    elif args.action == "watch":
        server.watch(args.pid)
    elif args.action == "stop":
        print("stopped" if server.stop() else "no server was running", file=sys.stderr)
    else:
        up = server.healthy()
        print(f"{server.url}: {'answers' if up else 'does not answer'}")
        return 0 if up else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
