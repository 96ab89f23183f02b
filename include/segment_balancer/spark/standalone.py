"""A Spark standalone cluster (one master, one worker) on 127.0.0.1, from the installed PySpark.

It proves that the applications run unchanged off a ``local`` master: executors are separate JVMs
with their own Python workers, and share with the driver nothing but the work directory. Used by
``make cluster-demo`` and by the DAG's end-to-end test; a master and a worker bound to 127.0.0.1
need no network. The PySpark wheel ships ``sbin/spark-daemon.sh`` (what ``start-master.sh`` and
``start-worker.sh`` call) but not those two scripts, so the daemons are started through it.

Usage::

    python -m segment_balancer.spark.standalone start --dir DIR [--port 7177] [--cores N] [--memory 4g]
    python -m segment_balancer.spark.standalone stop --dir DIR

``start`` prints the master URL once the worker has registered. ``DIR`` holds the daemons' logs,
pid files and the worker's directory.
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
    """A master on ``HOST:port`` (web UI on ``port + 1``) and one worker of ``cores`` cores and
    ``memory`` (Spark's size syntax), with logs, pids and the worker directory under ``root``."""

    root: Path
    port: int = 7177
    cores: int = os.cpu_count() or 2
    memory: str = "4g"

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui_port(self) -> int:
        return self.port + 1

    def _env(self) -> dict[str, str]:
        return dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=HOST, SPARK_MASTER_HOST=HOST,
                    SPARK_LOG_DIR=str(self.root / "logs"), SPARK_PID_DIR=str(self.root / "pids"),
                    SPARK_WORKER_DIR=str(self.root / "worker"), SPARK_IDENT_STRING="segment_balancer")

    def _daemon(self, action: str, cls: str, *args: str) -> None:
        for sub in ("logs", "pids", "worker"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        subprocess.run(["bash", str(spark_home() / "sbin" / "spark-daemon.sh"), action, cls, "1", *args],
                       env=self._env(), check=True, stdout=subprocess.DEVNULL)

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
        """Start the master and the worker; return the master URL once the worker registered.

        Raises ``RuntimeError`` (one line, :func:`segment_balancer.common.ports.refusal`) when the
        master's port or a web UI's is taken; ``TimeoutError`` (with the daemons' log directory) if
        it does not within ``timeout`` seconds; ``CalledProcessError`` if ``spark-daemon.sh`` fails.
        """
        for port in (self.port, self.webui_port, self.webui_port + 1):
            if taken(port, HOST):
                raise RuntimeError(refusal("STANDALONE_PORT", self.port, "make cluster-demo")
                                   + ("" if port == self.port else f" (its web UIs take {self.webui_port} and "
                                                                   f"{self.webui_port + 1}; {port} is taken)"))
        self._daemon("start", MASTER_CLASS, "--host", HOST, "--port", str(self.port),
                     "--webui-port", str(self.webui_port))
        self._daemon("start", WORKER_CLASS, "--host", HOST, "--cores", str(self.cores), "--memory", self.memory,
                     "--webui-port", str(self.webui_port + 1), self.master_url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() >= 1:
                return self.master_url
            time.sleep(0.5)
        raise TimeoutError(f"no worker registered with {self.master_url} after {timeout:.0f} s; "
                           f"see {self.root / 'logs'}")

    def stop(self) -> None:
        """Stop the worker, then the master (either may already be gone)."""
        for cls in (WORKER_CLASS, MASTER_CLASS):
            subprocess.run(["bash", str(spark_home() / "sbin" / "spark-daemon.sh"), "stop", cls, "1"],
                           env=self._env(), check=False, stdout=subprocess.DEVNULL)

    def __enter__(self) -> "StandaloneCluster":
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
    parser = argparse.ArgumentParser(prog="python -m segment_balancer.spark.standalone", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", required=True, type=Path, help="logs, pids and the worker directory")
    parser.add_argument("--port", type=int, default=7177, help="master port (web UI: port + 1, worker UI: + 2)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--memory", default="4g", help="the worker's memory for executors")
    args = parser.parse_args(argv)
    cluster = StandaloneCluster(args.dir.absolute(), args.port, args.cores, args.memory)
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
