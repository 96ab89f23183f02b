"""One place that builds the Spark session, and the few Spark idioms every application shares.

Three ways to a session, the same applications on each:

- **a Spark Connect server** (``SPARK_REMOTE`` / ``remote=``, ``sc://host:port/;session_id=…``):
  the server (:mod:`segment_balancer.spark.connect_server`) stays up between applications, so an
  application pays no JVM start and attaches to a warm session. The DAG's stage tasks attach to one
  session per DAG run; the CLI attaches when ``SPARK_REMOTE`` or ``--remote`` is set;
- **under ``spark-submit``** (the DAG's ``spark-submit`` mode, YARN or Kubernetes): the master is
  never set here, the submitter decides (the ``spark_default`` connection);
- **in process** (:func:`local_session`: the CLI and the tests without a server): ``local[*]``.

Whatever the way, the applications use no ``SparkContext`` (Connect has none): per-task work goes
through :func:`run_tasks` (one Spark task per item, ``mapInArrow`` over ``spark.range``), the
number of cores through :func:`parallelism`.

The session gets ``LEAN_CONF`` (set at start where it is a static setting, as SQL settings on a
Connect session); on a ``local`` master also ``LOCAL_SQL_CONF``: on one machine the fixed cost of
every shuffle stage dominates small runs, so adaptive execution is off, and so are automatic
broadcast joins (each broadcast is a Spark job of its own). Shuffles use one partition
per core the application has unless ``spark.sql.shuffle.partitions`` is set (the connection's, the
submit's or the Connect server's conf): Spark's 200 cost seconds of Python-worker tasks per shuffle
on the tables of a plan. On a cluster adaptive execution stays on, so the same applications scale
out.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import reduce
from typing import Any
from urllib.parse import urlparse

import psutil

from segment_balancer.common.files import filesystem
from segment_balancer.spark.jvm_archive import local_driver_java_options

# Given to every session and to every spark-submit (see the StageSubmitOperator).
LEAN_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
}

# The SQL settings of LEAN_CONF: the only ones a Connect client can set on its session.
SESSION_SQL_CONF = {k: v for k, v in LEAN_CONF.items() if k.startswith("spark.sql.")}

# Set at run time on local masters only (SQL settings can change after the session starts);
# shuffles get one partition per core (``spark.sql.shuffle.partitions`` = the default parallelism).
LOCAL_SQL_CONF = {
    "spark.sql.adaptive.enabled": "false",
    # a broadcast join costs a Spark job of its own (the broadcast side is collected first); on
    # one machine a shuffle join of the same tables costs stages inside the query's one job.
    # Explicit ``F.broadcast`` hints still broadcast.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}

#: Seconds to wait for a Spark Connect server's port before failing (not the client's 10-minute retries).
CONNECT_TIMEOUT_S = 10.0

#: How a Connect client retries a call the server did not answer (server gone, restarting): about
#: 10 s in all (0.05, 0.2, 0.8, 3.2, 5 s), where the client's default waits some 10 minutes. A stage
#: then fails soon and its task is retried by Airflow, or cleared once the server is back.
CONNECT_RETRY = {"max_retries": 5, "backoff_multiplier": 4.0, "initial_backoff": 50, "max_backoff": 5000}


class SparkUnreachable(RuntimeError):
    """The Spark Connect server of a ``sc://`` URL does not answer; the message names the URL and
    how to start a server."""


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no ``SparkContext``, no JVM in this process);
    for a :class:`LazySession`, whether the session it started is one (False before it starts)."""
    if isinstance(spark, LazySession):
        return spark.started and is_connect(spark.session)
    return type(spark).__module__.startswith("pyspark.sql.connect")


class LazySession:
    """A Spark session started on first use: ``factory()`` (:func:`local_session`, say) is called
    the first time an attribute other than ``addTag``/``removeTag`` is read, and every attribute
    is then the session's. A run whose applications all run their task functions on the driver
    (:func:`driver_tasks`) never starts one: no JVM (4–7 s), no Connect session.

    Job tags added before the start are kept and given to the session when it starts, so its
    first jobs carry them as they would have. :func:`release` and :func:`detach` leave an
    unstarted one alone."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._session = None
        self._tags: list[str] = []
        self._starting = threading.Lock()  # two threads of one run (``apps.compare_alongside``) start one session

    @property
    def started(self) -> bool:
        """Whether the session has been started."""
        return self._session is not None

    @property
    def if_started(self):
        """The session, or None when it has not been started."""
        return self._session

    @property
    def session(self):
        """The session, started now if it was not."""
        if self._session is None:
            with self._starting:
                if self._session is None:
                    logging.getLogger(__name__).debug("starting the Spark session on first use")
                    session = self._factory()
                    for tag in self._tags:
                        session.addTag(tag)
                    self._session = session
        return self._session

    def addTag(self, tag: str) -> None:  # noqa: N802 - SparkSession's name
        """``SparkSession.addTag``, kept until the start when the session is not started."""
        if self._session is None:
            self._tags.append(tag)
        else:
            self._session.addTag(tag)

    def removeTag(self, tag: str) -> None:  # noqa: N802 - SparkSession's name
        """``SparkSession.removeTag``, or forget a tag kept for the start."""
        if self._session is None:
            self._tags.remove(tag)
        else:
            self._session.removeTag(tag)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.session, name)


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts a TCP connection at ``host:port`` within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def check_reachable(url: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail at once, with :class:`SparkUnreachable`, when nothing listens at the host and port of
    the Spark Connect URL ``url`` (``sc://host[:port]/…``; port 15002 when absent). The client's own
    retries would take about ten minutes to give up."""
    parsed = urlparse(url)
    host, port = parsed.hostname or "localhost", parsed.port or 15002
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        raise SparkUnreachable(
            f"no Spark Connect server answers at {url.split(';')[0]} ({exc.strerror or exc}); start one with "
            f"`python -m segment_balancer.spark.connect_server start --port {port}` "
            "(make airflow and make demo start it), "
            f"or point the connection at a running server"
        ) from exc


def remote_session(url: str):
    """A Spark Connect session at ``url`` (``sc://host:port/[;session_id=<uuid>;…]``): the session
    of that id when the URL names one (attached, or created under that id), else a new one. Gets
    :data:`SESSION_SQL_CONF` and the short retries of :data:`CONNECT_RETRY`. Raises
    :class:`SparkUnreachable` when the server does not answer within :data:`CONNECT_TIMEOUT_S`."""
    check_reachable(url)
    from pyspark.sql import SparkSession

    # Through pyspark.sql's builder, which marks the process as a Connect client (pyspark.sql.functions
    # then build Connect expressions): one process is either a Connect client or a classic driver.
    session = SparkSession.builder.remote(url).getOrCreate()
    from pyspark.sql.connect.client.retries import DefaultPolicy

    session.client.set_retry_policies([DefaultPolicy(**CONNECT_RETRY)])
    for key, value in SESSION_SQL_CONF.items():
        session.conf.set(key, value)
    return session


def detach(spark) -> None:
    """Leave the session without ending it: a Connect session stays on the server for the next
    task of the run (closed here, not released there); a classic session is left as it is."""
    if isinstance(spark, LazySession):
        spark = spark.if_started
    if spark is not None and is_connect(spark):
        spark.release_session_on_close = False
        spark.stop()


#: The environment variable Spark gives the Python workers of one Connect session (its artifact
#: state's id): every session has its own ``pyspark.daemon``, which Spark 4.2 does not end when the
#: session is released (SPARK-54055), so a server that stays up would keep one per session ever run.
SESSION_WORKERS_ENV = "SPARK_JOB_ARTIFACT_UUID"


def python_workers_id(spark) -> str | None:
    """The :data:`SESSION_WORKERS_ENV` value of the Python workers of Connect session ``spark``,
    read by a one-row Python function (one small Spark job); None when Spark sets none."""
    name = SESSION_WORKERS_ENV

    def env(batches):
        import pyarrow as pa

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"id": [os.environ.get(name)]}, schema=pa.schema([("id", pa.string())]))

    rows = spark.range(0, 1, 1, 1).mapInArrow(env, "id string").collect()
    return rows[0]["id"] if rows else None


def session_python_processes(workers_id: str) -> list:
    """The ``pyspark.daemon`` processes on this machine whose environment has
    :data:`SESSION_WORKERS_ENV` = ``workers_id``: one Connect session's daemon and the workers it
    forked (``psutil.Process`` objects). Processes this user may not read are left out."""
    marker = f"{SESSION_WORKERS_ENV}={workers_id}".encode()
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if "pyspark.daemon" not in (proc.info.get("cmdline") or []):
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(proc)
        except OSError:
            continue
    return found


def end_python_daemons(workers_id: str) -> list[int]:
    """End (SIGTERM) the daemon among :func:`session_python_processes` of ``workers_id`` (which ends
    its workers); returns the pids signalled. Only for a session that is released: its daemon gets
    no more tasks (a live session's next Python task would fail). A server on another machine is
    left alone."""
    procs = session_python_processes(workers_id)
    pids = {p.pid for p in procs}
    ended = []
    for proc in procs:
        try:
            if proc.ppid() in pids:
                continue  # a worker: its daemon ends it
            proc.send_signal(signal.SIGTERM)
            ended.append(proc.pid)
        except psutil.Error:
            continue
    return ended


def release(spark) -> None:
    """End a session for good: a Connect session is released on the server (its cached tables,
    views and state) and its Python daemon on this machine ended (:func:`end_python_daemons`; a
    server elsewhere keeps it until it restarts). A classic session is left as it is (it ends
    with its process), and so is a :class:`LazySession` never started. Never raises for a server
    that is gone."""
    if isinstance(spark, LazySession):
        spark = spark.if_started
    if spark is None or not is_connect(spark):
        return
    log = logging.getLogger(__name__)
    try:
        workers = python_workers_id(spark)
    except Exception as exc:  # noqa: BLE001 - a server that is gone has nothing left to end
        log.warning("could not ask the session for its Python workers: %s", exc)
        workers = None
    spark.release_session_on_close = True
    try:
        spark.stop()
    except Exception as exc:  # noqa: BLE001
        log.warning("could not release the Spark Connect session: %s", exc)
    if workers:
        ended = end_python_daemons(workers)
        log.info(
            "released the Spark Connect session; its Python daemon %s",
            f"ended (pid {ended[0]})"
            if ended
            else "is not on this machine (it stays on the server until the server restarts)",
        )


def get_session(app_name: str = "segment_balancer", master: str | None = None, remote: str | None = None):
    """Return a SparkSession: on the Connect server ``remote`` (or ``$SPARK_REMOTE``) when given,
    else the active classic session, creating one if needed.

    ``master``: set only by local callers (CLI, tests); ``None`` leaves it to ``spark-submit``.
    Python workers use this interpreter (``PYSPARK_PYTHON``) so they see the same packages.
    Raises :class:`SparkUnreachable` for a Connect server that does not answer.
    """
    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote:
        return remote_session(remote)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in LEAN_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    sc = session.sparkContext
    sc.setLogLevel("WARN")
    if sc.master.startswith("local"):
        for key, value in LOCAL_SQL_CONF.items():
            session.conf.set(key, value)
    if not sc.getConf().contains("spark.sql.shuffle.partitions"):
        session.conf.set("spark.sql.shuffle.partitions", str(max(2, sc.defaultParallelism)))
    return session


def local_session(app_name: str = "segment_balancer", remote: str | None = None):
    """A session for the CLI and the tests: on the Connect server ``remote`` or ``$SPARK_REMOTE``
    when set, else in process on ``SPARK_MASTER`` or ``local[*]`` (every core; the driver JVM gets
    ``jvm_archive.local_driver_java_options()`` unless ``PYSPARK_SUBMIT_ARGS`` is already set)."""
    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote:
        return remote_session(remote)
    master = os.environ.get("SPARK_MASTER", "local[*]")
    if master.startswith("local"):
        os.environ.setdefault(
            "PYSPARK_SUBMIT_ARGS", f'--driver-java-options "{local_driver_java_options()}" pyspark-shell'
        )
    return get_session(app_name, master)


def lazy_local_session(app_name: str = "segment_balancer", remote: str | None = None) -> LazySession:
    """:func:`local_session` started on first use (:class:`LazySession`; the CLI's). A Connect
    server named by ``remote`` or ``$SPARK_REMOTE`` is checked at once all the same
    (:func:`check_reachable`): a URL that does not answer fails the command before any work, even a
    run that would need no session."""
    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote:
        check_reachable(remote)
    return LazySession(lambda: local_session(app_name, remote=remote))


DRIVER_TASKS_AT_MOST_SEGMENTS = 25_000
"""A run of at most this many segments (the snapshot's ``segments.jsonl`` rows) runs the task
functions of :func:`run_tasks` on the driver, one after another, instead of as a Spark job: there
each Spark job costs more than the work (0.1–1 s against milliseconds), and a run with no Spark job
starts no JVM. ``druid_sample``, the scenarios, the DAG's test snapshots, ``generate``'s default
cluster (20,017 rows) and the 8,200-segment simulation of ``benchmarks/`` are below it. Measured
on this 2-core machine (``benchmarks/README.md``), the CLI in process: 20k segments 8.3 s on the
driver against 19.2 s in Spark (#7458); at 100k the driver still wins here (17.7 s against 25.2 s),
on its one core, where Spark's tasks would scale out over a cluster's executors. The environment
variable :data:`DRIVER_TASKS_ENV` replaces it (``-1``: every run's tasks in Spark)."""

DRIVER_TASKS_ENV = "SEGMENT_BALANCER_DRIVER_TASKS_AT_MOST_SEGMENTS"


def driver_tasks_at_most_segments() -> int:
    """:data:`DRIVER_TASKS_AT_MOST_SEGMENTS`, or the integer in :data:`DRIVER_TASKS_ENV` when set.
    Raises ``ValueError`` naming the variable when that is not an integer."""
    text = os.environ.get(DRIVER_TASKS_ENV, "").strip()
    if not text:
        return DRIVER_TASKS_AT_MOST_SEGMENTS
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{DRIVER_TASKS_ENV}={text!r}: expected an integer number of segments") from None


_DRIVER_TASKS: ContextVar[bool] = ContextVar("driver_tasks", default=False)


@contextmanager
def driver_tasks(on: bool):
    """While the block runs, :func:`run_tasks` calls its functions on the driver (``on``) or in a
    Spark job (not ``on``). Set per application by ``spark.apps.run_app`` from the run's size
    (:data:`DRIVER_TASKS_AT_MOST_SEGMENTS`)."""
    token = _DRIVER_TASKS.set(on)
    try:
        yield
    finally:
        _DRIVER_TASKS.reset(token)


def on_driver() -> bool:
    """True while :func:`run_tasks` calls its functions on the driver (inside :func:`driver_tasks`
    ``(True)``): a task function may then keep what it built for the next application of the same
    process, which a Spark task cannot."""
    return _DRIVER_TASKS.get()


def run_tasks(spark, items: Sequence[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """``[fn(item) for item in items]``, each call a Spark task of its own, in one Spark job; or,
    inside :func:`driver_tasks` ``(True)``, each call on the driver, in order.

    The replacement of ``sparkContext.parallelize(items, n).map(fn).collect()`` that Connect
    lacks: ``spark.range(n)`` in ``n`` partitions, one row each, ``mapInArrow`` calls ``fn`` on its
    row's item (``items`` and ``fn`` travel pickled with the function) and returns the pickled
    result. ``fn`` and its results must be picklable; results come back in the order of ``items``
    and should be small (bitmaps, paths, counts): they are collected to the driver. On the driver
    ``fn``, the items and the results make the same pickle round trip, so a call sees copies, as a
    Spark task does.
    A Spark task gives back what it freed when it ends
    (:func:`~segment_balancer.common.bulk.give_back_memory`): its worker lives on, idle, beside the
    next tasks and the driver.
    """
    items = list(items)
    if not items:
        return []
    if _DRIVER_TASKS.get():
        from pyspark import cloudpickle

        logging.getLogger(__name__).debug("%d task functions on the driver", len(items))
        task, copies = cloudpickle.loads(cloudpickle.dumps((fn, items)))
        return [pickle.loads(pickle.dumps(task(item))) for item in copies]

    def per_partition(batches):
        import pyarrow as pa

        from segment_balancer.common.bulk import give_back_memory

        for batch in batches:
            ids = batch.column(0).to_pylist()
            results = [pickle.dumps(fn(items[i])) for i in ids]
            give_back_memory()  # the worker lives on, idle, beside the next task's
            yield pa.RecordBatch.from_pydict(
                {"i": ids, "result": results}, schema=pa.schema([("i", pa.int64()), ("result", pa.binary())])
            )

    rows = spark.range(0, len(items), 1, len(items)).mapInArrow(per_partition, "i long, result binary").collect()
    return [pickle.loads(r["result"]) for r in sorted(rows, key=lambda r: r["i"])]


def collect_small(frames: dict[str, Any]) -> dict[str, list[dict]]:
    """Several small answers in one Spark job: ``{name: [row as dict, …]}`` for each DataFrame of
    ``frames``, each already cut to a few rows (a ``limit``, an aggregate per datasource or tier).

    The frames are turned into (``query``, ``row`` JSON text) rows and unioned, so that the checks
    and the counts of a stage read their tables in one job instead of one job each. A row's null
    fields are absent from its dict (``.get``); a binary column comes back as base64 text. Rows of
    one frame come back in the frame's order on a local master (an ``orderBy(…).limit(n)`` is one
    sorted partition); callers that need an order sort again, as a cluster's plan may differ.
    """
    from pyspark.sql import functions as F

    parts = [
        df.select(F.lit(name).alias("query"), F.to_json(F.struct(*df.columns)).alias("row"))
        for name, df in frames.items()
    ]
    out: dict[str, list[dict]] = {name: [] for name in frames}
    if not parts:
        return out
    for row in reduce(lambda a, b: a.unionAll(b), parts).collect():
        out[row["query"]].append(json.loads(row["row"]))
    return out


def read_parquet(spark, *paths):
    """``spark.read.parquet(*paths)`` with the schema given, so that opening a table costs no Spark
    job: left to infer it, Spark runs a job that reads a footer. The schema is the one Spark wrote
    into the first file's footer (``org.apache.spark.sql.parquet.row.metadata``), or the Arrow
    schema of a table pyarrow wrote. ``paths``: parquet files or directories (local paths or URIs
    pyarrow's filesystems read), all of one schema. Raises ``FileNotFoundError`` when the first
    path holds no parquet file."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    fs, base = filesystem(str(paths[0]) if "://" in str(paths[0]) else os.path.abspath(paths[0]))
    files = ds.dataset(base, format="parquet", filesystem=fs).files
    if not files:
        raise FileNotFoundError(f"no parquet file under {paths[0]}")
    meta = pq.read_metadata(files[0], filesystem=fs).metadata or {}
    text = meta.get(b"org.apache.spark.sql.parquet.row.metadata")
    schema = (
        StructType.fromJson(json.loads(text)) if text else from_arrow_schema(pq.read_schema(files[0], filesystem=fs))
    )
    return spark.read.schema(schema).parquet(*[str(p) for p in paths])
