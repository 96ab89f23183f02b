"""A Spark standalone cluster (one master, one or more workers) on 127.0.0.1, from the installed PySpark.

It proves that the applications run unchanged off a ``local`` master: executors are separate JVMs
with their own Python workers, and share with the driver nothing but the work directory. Used by
``make cluster-demo`` and by the DAG's end-to-end test; a master and a worker bound to 127.0.0.1
need no network. The PySpark wheel ships ``sbin/spark-daemon.sh`` (what ``start-master.sh`` and
``start-worker.sh`` call) but not those two scripts, so the daemons are started through it.

Usage::

    python -m segment_balancer.spark.standalone start --dir DIR [--port 7177] [--workers 1] [--cores N] [--memory 4g]
    python -m segment_balancer.spark.standalone stop --dir DIR

``start`` prints the master URL once every worker has registered. ``DIR`` holds the daemons' logs,
pid files and the workers' directory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from segment_balancer.common.ports import refusal, taken

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


def spark_home() -> Path:
    """The installed PySpark's directory (its ``bin/``, ``sbin/`` and ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass(frozen=True)
class StandaloneCluster:
    """A master on ``HOST:port`` (web UI on ``port + 1``) and ``workers`` workers (web UIs on
    ``port + 2`` onwards), each of ``cores`` cores and ``memory`` (Spark's size syntax), with logs,
    pids and the workers' directory under ``root``."""

    root: Path
    port: int = 7177
    cores: int = os.cpu_count() or 2
    memory: str = "4g"
    workers: int = 1

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui_port(self) -> int:
        return self.port + 1

    def _env(self) -> dict[str, str]:
        return dict(
            os.environ,
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP=HOST,
            SPARK_MASTER_HOST=HOST,
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_PID_DIR=str(self.root / "pids"),
            SPARK_WORKER_DIR=str(self.root / "worker"),
            SPARK_IDENT_STRING="segment_balancer",
        )

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        for sub in ("logs", "pids", "worker"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["bash", str(spark_home() / "sbin" / "spark-daemon.sh"), action, cls, str(instance), *args],
            env=self._env(),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def status(self) -> dict:
        """The master's status (its web UI's ``/json/``: ``aliveworkers``, ``activeapps``,
        ``completedapps``, …); empty when the master does not answer, or answers with no JSON yet
        (its web UI, starting, may reply with an empty body)."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.webui_port}/json/", timeout=2) as resp:
                return json.load(resp)
        except (OSError, ValueError):
            return {}

    def alive_workers(self) -> int:
        """Workers the master reports alive (0 when the master does not answer)."""
        return int(self.status().get("aliveworkers", 0))

    def completed_apps(self) -> list[str]:
        """Names of the applications that ran on the cluster and finished, oldest first."""
        apps = sorted(self.status().get("completedapps", []), key=lambda a: a.get("starttime", 0))
        return [a.get("name", "") for a in apps]

    def start(self, timeout: float = 90.0) -> str:
        """Start the master and the workers; return the master URL once every worker registered.

        Raises ``RuntimeError`` (one line, :func:`segment_balancer.common.ports.refusal`) when the
        master's port or a web UI's is taken; ``TimeoutError`` (with the daemons' log directory) if
        it does not within ``timeout`` seconds; ``CalledProcessError`` if ``spark-daemon.sh`` fails.
        """
        last_ui = self.webui_port + self.workers
        for port in (self.port, *range(self.webui_port, last_ui + 1)):
            if taken(port, HOST):
                raise RuntimeError(
                    refusal("STANDALONE_PORT", self.port, "make cluster-demo")
                    + (
                        ""
                        if port == self.port
                        else f" (its web UIs take {self.webui_port} to {last_ui}; {port} is taken)"
                    )
                )
        self._daemon(
            "start", MASTER_CLASS, 1, "--host", HOST, "--port", str(self.port), "--webui-port", str(self.webui_port)
        )
        for i in range(1, self.workers + 1):
            self._daemon(
                "start",
                WORKER_CLASS,
                i,
                "--host",
                HOST,
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(self.webui_port + i),
                self.master_url,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() >= self.workers:
                return self.master_url
            time.sleep(0.5)
        raise TimeoutError(
            f"{self.alive_workers()} of {self.workers} workers registered with {self.master_url} "
            f"after {timeout:.0f} s; see {self.root / 'logs'}"
        )

    def _worker_pid_files(self) -> dict[int, Path]:
        """``{instance: pid file}`` of the workers started under ``root`` (``spark-daemon.sh`` names
        a daemon's pid file after its class and instance)."""
        files = {}
        for f in (self.root / "pids").glob(f"*{WORKER_CLASS}-*.pid"):
            instance = f.stem.rsplit("-", 1)[1]
            if instance.isdigit():
                files[int(instance)] = f
        return files

    def worker_pids(self) -> list[int]:
        """The pids of the worker JVMs started under ``root`` (their process trees hold the
        executors and their Python workers), by instance; a pid file that cannot be read is left out."""
        pids = []
        for _, f in sorted(self._worker_pid_files().items()):
            try:
                pids.append(int(f.read_text().strip()))
            except (OSError, ValueError):
                continue
        return pids

    def stop(self) -> None:
        """Stop the workers (every one with a pid file under ``root``, however many ``start`` was
        given), then the master (any may already be gone)."""
        instances = sorted(set(self._worker_pid_files()) | set(range(1, self.workers + 1)))
        for cls, instance in [*((WORKER_CLASS, i) for i in instances), (MASTER_CLASS, 1)]:
            subprocess.run(
                ["bash", str(spark_home() / "sbin" / "spark-daemon.sh"), "stop", cls, str(instance)],
                env=self._env(),
                check=False,
                stdout=subprocess.DEVNULL,
            )

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def connection_json(master_url: str) -> str:
    """``AIRFLOW_CONN_SPARK_DEFAULT`` for ``master_url`` (the Spark provider's connection: host
    ``spark://HOST``, port)."""
    host, port = master_url.rsplit(":", 1)
    return json.dumps({"conn_type": "spark", "host": host, "port": int(port)})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m segment_balancer.spark.standalone", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", required=True, type=Path, help="logs, pids and the worker directory")
    parser.add_argument("--port", type=int, default=7177, help="master port (web UI: port + 1, workers' UIs: + 2 on)")
    parser.add_argument("--workers", type=int, default=1, help="workers to start")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="cores of each worker")
    parser.add_argument("--memory", default="4g", help="the worker's memory for executors")
    args = parser.parse_args(argv)
    cluster = StandaloneCluster(args.dir.absolute(), args.port, args.cores, args.memory, args.workers)
    if args.action == "start":
        try:
            print(cluster.start())
        except (RuntimeError, TimeoutError) as exc:
            print(f"error: Spark standalone cluster not started: {exc}", file=sys.stderr)
            return 1
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
