"""Where a plan's time goes: JVM starts, Spark jobs and wall per application, for the DAG and the CLI.

Two kinds of run, each in a child process whose whole process tree is watched (every 0.2 s: peak
resident memory, every 2 s proportional memory, and every ``java`` process that appears, i.e. JVM starts):

- ``dag``: ``airflow dags test segment_balancing`` on a bundled snapshot, in a fresh Airflow home
  (``make airflow-home VAR=<tmp>``), in the ``--mode`` given: ``connect`` (a Spark Connect server
  started by this script before the run, as ``make demo`` does; its start is reported apart) or
  ``spark-submit`` (one JVM per application). Wall per task from the Airflow DB; the run's wall is
  the DAG run's start to end (trigger to published plan).
- ``cli``: ``python -m segment_balancer plan`` on ``druid_sample`` or a generated snapshot of N
  segments (``generate --segments N``, cached under ``--cache``), ``--mode connect`` (against a
  warm server: the script plans ``druid_sample`` once first) or ``local`` (in process).

Spark jobs are counted in Spark's event log (the server's, or the in-process driver's and each
spark-submit's through ``SPARK_CONF_DIR``) and attributed to applications by their job tag
(``segment_balancer.spark.apps.job_tag``). In ``connect`` mode the memory is the client's tree plus the
server's (the server's Python workers included). Usage::

    .venv/bin/python benchmarks/bench_overhead.py dag [--snapshots druid_sample generated] [--mode connect]
    .venv/bin/python benchmarks/bench_overhead.py cli [--sizes druid_sample 20000 100000] [--mode connect]

(1M on request: ``cli --sizes 1000000``.) Prints a table of runs and a table of seconds / jobs per
application; the output for this machine is kept in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "include" / "segment_balancer" / "snapshots"
sys.path.insert(0, str(ROOT / "include"))

from segment_balancer.common.files import replace_path, sibling_tmp  # noqa: E402
from segment_balancer.planner.coordinators import ASSEMBLE_APP, ISSUE7458, STAGE0_APPS  # noqa: E402

APP_NAMES = list(ISSUE7458.run_apps)

TAG = re.compile(r"segment_balancer_app_(\w+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Watch:
    """Samples a process tree (and optional extra trees) until the root ends: the peak of the sum of
    resident sizes (RSS: a forked Python worker's shared pages counted once per worker, an upper
    bound), the peak of the sum of proportional sizes (PSS: shared pages split between the
    processes sharing them, what the tree really occupies), and the pids of every ``java`` process
    seen."""

    PSS_EVERY = 2.0
    """Seconds between PSS samples: reading a JVM's memory map stalls it, so far less often than RSS."""

    def __init__(self, extra_pids: list[int] | None = None, var: Path | None = None):
        self.extra = [psutil.Process(p) for p in extra_pids or []]
        self.peak, self.peak_pss, self.jvms, self.pss_at = 0, 0, set(), 0.0

    def processes(self, proc: psutil.Process):
        """Yield ``(p, top, rss, pss)`` for every live process of the watched trees at this instant
        (``top``: the root of ``p``'s tree; ``pss`` is None between PSS samples)."""
        with_pss = time.monotonic() - self.pss_at >= self.PSS_EVERY
        if with_pss:
            self.pss_at = time.monotonic()
        for top in [proc, *self.extra]:
            try:
                tree = [top, *top.children(recursive=True)]
            except psutil.Error:
                continue
            for p in tree:
                try:
                    if with_pss:
                        info = p.memory_full_info()
                        yield p, top, info.rss, info.pss
                    else:
                        yield p, top, p.memory_info().rss, None
                except psutil.Error:
                    pass

    def sample(self, proc: psutil.Process) -> None:
        total, pss = 0, 0
        for p, top, rss, p_pss in self.processes(proc):
            total, pss = total + rss, pss + (p_pss or 0)
            try:
                if p.name() == "java" and top is proc:
                    self.jvms.add(p.pid)
            except psutil.Error:
                pass
        self.peak, self.peak_pss = max(self.peak, total), max(self.peak_pss, pss)

    def run(self, cmd: list[str], env: dict, log: Path, timeout: float) -> int:
        with open(log, "wb") as out:
            child = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
            proc, started = psutil.Process(child.pid), time.monotonic()
            while child.poll() is None:
                self.sample(proc)
                if time.monotonic() - started > timeout:
                    child.kill()
                    child.wait()
                    return -9
                time.sleep(0.2)
        return child.returncode


def jobs_per_app(events: Path, since_ms: int = 0) -> Counter:
    """Spark jobs started at or after ``since_ms`` in the event logs under ``events``, per
    application tag (``None``: untagged)."""
    counts: Counter = Counter()
    for log in events.rglob("*"):
        if not log.is_file():
            continue
        for line in open(log, errors="replace"):
            if '"SparkListenerJobStart"' not in line:
                continue
            event = json.loads(line)
            if event.get("Submission Time", 0) < since_ms:
                continue
            tag = TAG.search(event.get("Properties", {}).get("spark.job.tags", "") or "")
            counts[tag.group(1) if tag else None] += 1
    return counts


def event_conf(events: Path, conf_dir: Path, extra: dict[str, str] | None = None) -> None:
    """``spark-defaults.conf`` in ``conf_dir``: the event log under ``events``, and ``extra``."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
        "spark.eventLog.compress false\nspark.eventLog.rolling.enabled false\n"
        + "".join(f"{k} {v}\n" for k, v in (extra or {}).items())
    )


#: ``cluster`` mode: the standalone cluster's workers (one core each) and their executors' heap.
CLUSTER_WORKERS, CLUSTER_WORKER_MEMORY, CLUSTER_CONF = 2, "8g", {"spark.executor.memory": "6g"}


def start_cluster(tmp: Path):
    """A standalone cluster of :data:`CLUSTER_WORKERS` workers of one core each, started (the caller
    stops it) and its start in seconds."""
    from segment_balancer.spark.standalone import StandaloneCluster

    cluster = StandaloneCluster(
        tmp / "standalone", port=_free_port(), cores=1, memory=CLUSTER_WORKER_MEMORY, workers=CLUSTER_WORKERS
    )
    started = time.monotonic()
    cluster.start()
    return cluster, time.monotonic() - started


def observe(mode: str, tmp: Path, env: dict, server, watch=Watch) -> tuple[Path, Watch]:
    """Where the run's Spark event log goes, and the watch (of class ``watch``) over its processes:
    the server's log and tree in connect mode; else a fresh event-log directory (``SPARK_CONF_DIR``
    set in ``env``)."""
    if mode == "connect":
        return server.root / "events", watch([server.pid()])
    events = tmp / "events"
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir(parents=True)
    event_conf(events, tmp / "conf", CLUSTER_CONF if mode == "cluster" else {})
    env["SPARK_CONF_DIR"] = str(tmp / "conf")
    return events, watch(server.worker_pids() if mode == "cluster" else [])


def cli_plan(snapshot: Path, mode: str, tmp: Path, server) -> tuple[Path, Path, dict, list[str]]:
    """``(work, out, env, cmd)`` of one ``plan`` through the CLI under ``tmp`` (emptied first): in
    process (``mode`` ``local``), its driver in process on the standalone cluster ``server``
    (``cluster``), or on the Connect server ``server`` (``connect``)."""
    tmp.mkdir(parents=True, exist_ok=True)
    work, out = tmp / "work", tmp / "plan"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    cmd = [
        sys.executable,
        "-m",
        "segment_balancer",
        "plan",
        "--snapshot",
        str(snapshot),
        "--out",
        str(out),
        "--work",
        str(work),
    ]
    if mode == "connect":
        cmd += ["--remote", server.url]
    elif mode == "cluster":
        env["SPARK_MASTER"] = server.master_url
    return work, out, env, cmd


def start_server(tmp: Path):
    from segment_balancer.spark.connect_server import ConnectServer

    server = ConnectServer(tmp / "connect", port=_free_port(), event_log=True)
    started = time.monotonic()
    server.start()
    return server, time.monotonic() - started


GENERATED_AT_MOST = 1_000_000
"""The largest cluster taken from ``generate`` itself (it holds every segment as a Python dict: 10M
is killed for memory on 24 GiB); a larger multiple of it is the 1M cluster copied
(``replicate_snapshot.py``)."""


def snapshot_for(name: str, cache: Path) -> Path:
    """The snapshot ``name``: a bundled one, or ``generate``'s cluster of ``name`` segments cached
    under ``cache`` (above :data:`GENERATED_AT_MOST`, a multiple of it: that cluster copied)."""
    if not name.isdigit():
        return SNAPSHOTS / name
    if int(name) > GENERATED_AT_MOST:
        times, rest = divmod(int(name), GENERATED_AT_MOST)
        if rest:
            raise SystemExit(f"{name} segments: above {GENERATED_AT_MOST} a size must be a multiple of it")
        out = cache / f"replicated-{name}"
        if not (out / "snapshot.json").exists():
            from replicate_snapshot import replicate

            tmp = sibling_tmp(out)
            replicate(snapshot_for(str(GENERATED_AT_MOST), cache), tmp, times)
            replace_path(tmp, out)
        return out
    out = cache / f"generated-{name}"
    if not (out / "snapshot.json").exists():
        tmp = sibling_tmp(out)
        subprocess.run(
            [sys.executable, "-m", "segment_balancer", "generate", str(tmp), "--segments", name],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        replace_path(tmp, out)
    return out


def run_cli(snapshot: Path, mode: str, tmp: Path, server, timeout: float, watch_class=Watch) -> dict:
    """One CLI plan, watched by a ``watch_class``: its wall, peak memory, JVMs, Spark jobs per
    application, application seconds and operations (and ``work``, ``watch`` for more)."""
    work, out, env, cmd = cli_plan(snapshot, mode, tmp, server)
    events, watch = observe(mode, tmp, env, server, watch_class)
    since = int(time.time() * 1000)
    started = time.monotonic()
    rc = watch.run(cmd, env, tmp / "cli.log", timeout)
    wall = time.monotonic() - started
    if rc != 0:
        raise RuntimeError(f"plan failed ({rc}); see {tmp / 'cli.log'}:\n" + (tmp / "cli.log").read_text()[-3000:])
    timings = json.loads((work / "timings.json").read_text())
    return {
        "wall": wall,
        "peak": watch.peak,
        "pss": watch.peak_pss,
        "jvms": len(watch.jvms),
        "jobs": jobs_per_app(events, since),
        "apps": {k: v["seconds"] for k, v in timings.items()},
        "ops": json.loads((out / "summary.json").read_text())["operations"],
        "work": work,
        "watch": watch,
    }


def run_dag(
    snapshot: Path, mode: str, tmp: Path, server, timeout: float, watch_class=Watch, conf: dict | None = None
) -> dict:
    """One ``airflow dags test segment_balancing`` (params ``conf`` beside ``snapshot``) in a fresh
    Airflow home ``tmp/var``, watched by a ``watch_class`` (called with the extra pids to watch and
    ``var=``): its wall, the DAG run's wall, peak memory, JVMs, Spark jobs and seconds per task,
    operations (and ``watch``)."""
    tmp.mkdir(parents=True, exist_ok=True)
    var = tmp / "var"
    shutil.rmtree(var, ignore_errors=True)
    subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(ROOT), "airflow-home", f"VAR={var}"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = dict(
        os.environ,
        AIRFLOW_HOME=str(var / "airflow_home"),
        SEGMENT_BALANCER_HOME=str(var),
        AIRFLOW__SEGMENT_BALANCER__SPARK_MODE=mode,
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        PYSPARK_PYTHON=sys.executable,
        AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}',
    )
    for key in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS"):
        env.pop(key, None)
    if mode == "connect":
        env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = json.dumps(
            {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": server.port}
        )
    events, watch = observe(mode, tmp, env, server, lambda pids: watch_class(pids, var=var))
    since = int(time.time() * 1000)
    cmd = [
        str(Path(sys.executable).parent / "airflow"),
        "dags",
        "test",
        "segment_balancing",
        "--conf",
        json.dumps({"snapshot": str(snapshot), **(conf or {})}),
    ]
    started = time.monotonic()
    rc = watch.run(cmd, env, tmp / "dag.log", timeout)
    wall = time.monotonic() - started
    if rc != 0:
        raise RuntimeError(f"DAG run failed ({rc}); see {tmp / 'dag.log'}")
    db = sqlite3.connect(var / "airflow_home" / "airflow.db")
    start, end = db.execute("select start_date, end_date from dag_run order by id desc limit 1").fetchone()
    tasks = {
        t: (s, e)
        for t, s, e in db.execute(
            "select task_id, start_date, end_date from task_instance where dag_id = 'segment_balancing'"
        )
    }
    parse = lambda v: datetime.fromisoformat(v).timestamp()  # noqa: E731
    latest = (var / "plans" / "LATEST").read_text().strip()
    return {
        "wall": wall,
        "run": parse(end) - parse(start),
        "peak": watch.peak,
        "pss": watch.peak_pss,
        "jvms": len(watch.jvms),
        "jobs": jobs_per_app(events, since),
        "apps": {t: parse(e) - parse(s) for t, (s, e) in tasks.items()},
        "ops": json.loads((var / "plans" / latest / "summary.json").read_text())["operations"],
        "watch": watch,
    }


def print_tables(kind: str, results: list[tuple[str, dict]]) -> None:
    extra = f" {'DAG run s':>9}" if kind == "dag" else ""
    print(
        f"{'input':<14} {'wall s':>7}{extra} {'JVM starts':>10} {'spark jobs':>10} {'RSS GiB':>8} {'PSS GiB':>8} "
        f"{'operations':>10}"
    )
    for name, r in results:
        run = f" {r['run']:>9.1f}" if kind == "dag" else ""
        print(
            f"{name:<14} {r['wall']:>7.1f}{run} {r['jvms']:>10} {sum(r['jobs'].values()):>10} "
            f"{r['peak'] / 2**30:>8.2f} {r['pss'] / 2**30:>8.2f} {r['ops']:>10}"
        )
    print()
    names = (
        [
            "resolve_snapshot",
            *STAGE0_APPS,
            "choose_coordinators",
            *(f"{ISSUE7458.name}.{app}" for app in (*ISSUE7458.applications, ASSEMBLE_APP)),
            "compare",
            "validate_plan",
            "publish_plan",
            "simulate",
            "release_spark_session",
        ]
        if kind == "dag"
        else APP_NAMES
    )
    print(f"{'task / application':<34}" + "".join(f"{n[:14]:>16}" for n, _ in results))
    print(f"{'':<34}" + "".join(f"{'s':>10}{'jobs':>6}" for _ in results))
    for app in names:
        cells = []
        for _, r in results:
            sec = r["apps"].get(app)
            cells.append(f"{'-' if sec is None else f'{sec:.1f}':>10}{r['jobs'].get(app, 0):>6}")
        print(f"{app:<34}" + "".join(cells))
    untagged = [r["jobs"].get(None, 0) for _, r in results]
    if any(untagged):
        print(f"{'(untagged jobs)':<34}" + "".join(f"{'':>10}{n:>6}" for n in untagged))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["dag", "cli"])
    parser.add_argument("--mode", choices=["connect", "spark-submit", "local"], default="connect")
    parser.add_argument("--snapshots", nargs="+", default=["druid_sample", "generated"], help="dag: bundled snapshots")
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["druid_sample", "20000", "100000"],
        help="cli: druid_sample or a number of generated segments",
    )
    parser.add_argument("--timeout", type=float, default=2400.0)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    args = parser.parse_args()
    if args.kind == "dag" and args.mode == "local":
        parser.error("dag runs in connect or spark-submit mode")
    if args.kind == "cli" and args.mode == "spark-submit":
        parser.error("cli runs in connect or local mode")
    args.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench_overhead-") as tmp:
        tmp = Path(tmp)
        server = None
        try:
            if args.mode == "connect":
                server, seconds = start_server(tmp)
                print(f"Spark Connect server started and answering in {seconds:.1f} s", file=sys.stderr)
                if args.kind == "cli":  # a warm server, as a deployment has
                    run_cli(SNAPSHOTS / "druid_sample", "connect", tmp, server, args.timeout)
            results = []
            inputs = args.snapshots if args.kind == "dag" else args.sizes
            for name in inputs:
                snap = snapshot_for(name, args.cache)
                run = run_dag if args.kind == "dag" else run_cli
                results.append((name, run(snap, args.mode, tmp / name, server, args.timeout)))
                print(f"done: {name}: {results[-1][1]['wall']:.1f} s", file=sys.stderr, flush=True)
        finally:
            if server is not None:
                server.stop()
    print(f"{args.kind}, mode {args.mode}")
    print_tables(args.kind, results)


if __name__ == "__main__":
    main()
