"""The TCP ports a deployment opens, each a setting (docs/RUNNING.md "Ports"), and the one-line refusal of a
port already taken, before anything starts.

``python -m segment_balancer.common.ports AIRFLOW_PORT=8080 [NAME=PORT …]`` exits 1 with one line
per taken port, e.g. ``port 8080 (AIRFLOW_PORT: the Airflow API server) is taken by another
process; set AIRFLOW_PORT to a free port, e.g. make airflow AIRFLOW_PORT=8081``; 0 when all are free.
"""

from __future__ import annotations

import errno
import socket
import sys

#: Every port setting, its default and what listens on it (the Makefile's variables).
PORTS: dict[str, tuple[int, str]] = {
    "AIRFLOW_PORT": (8080, "the Airflow API server"),
    "WORKER_LOG_PORT": (8793, "Airflow's log server of task processes"),
    "TRIGGERER_LOG_PORT": (8794, "Airflow's log server of the triggerer"),
    "SPARK_CONNECT_PORT": (
        15002,
        "the Spark Connect server (its Spark UI on the next port, or the first free one after)",
    ),
    "STANDALONE_PORT": (
        7177,
        "the Spark standalone master (its web UI on the next port, the worker's on the one after)",
    ),
}
HOST = "127.0.0.1"


def loopback_host() -> str:
    """:data:`HOST`, as Airflow's ``[core] hostname_callable``: the host a task instance records,
    where the API server reaches the log servers bound to it."""
    return HOST


def taken(port: int, host: str = HOST) -> bool:
    """Whether ``host:port`` cannot be bound now (another process listens there). Bound as servers
    bind (``SO_REUSEADDR``), so a port in ``TIME_WAIT`` counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def refusal(setting: str, port: int, target: str = "make airflow") -> str:
    """The one line that says port ``port`` of ``setting`` is taken and what to do."""
    what = PORTS.get(setting, (None, "a service"))[1]
    return (
        f"port {port} ({setting}: {what}) is taken by another process; set {setting} to a free port, "
        f"e.g. {target} {setting}={port + 10}"
    )


def check(settings: dict[str, int], host: str = HOST) -> list[str]:
    """The refusals (:func:`refusal`) of the ports of ``settings`` (``{setting: port}``) that are taken."""
    return [refusal(name, port) for name, port in settings.items() if taken(port, host)]


def main(argv: list[str] | None = None) -> int:
    settings: dict[str, int] = {}
    for arg in sys.argv[1:] if argv is None else argv:
        name, _, value = arg.partition("=")
        if not value.isdigit() or not 0 < int(value) < 65536:
            print(f"error: {name} must be a port number 1-65535, got {value!r}", file=sys.stderr)
            return 2
        settings[name] = int(value)
    problems = check(settings)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
