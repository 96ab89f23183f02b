"""The stages on a Spark Connect server: one session per DAG run, kept warm from task to task.

With ``[segment_balancer] spark_mode = connect`` (the default; environment variable
``AIRFLOW__SEGMENT_BALANCER__SPARK_MODE``) every Spark task of a ``segment_balancing`` run is a
:class:`StageConnectOperator` (or :class:`SimulateConnectOperator`): it runs the same
``segment_balancer.spark.apps.run_app(spark, name, …)`` that ``spark_apps/<name>.py`` runs under
``spark-submit``, in the task's own process, against a session of the Spark Connect server that the
Spark provider's connection ``spark_connect_default`` (type ``spark_connect``, ``SparkConnectHook``)
names. Same code, same plan, no JVM start per task.

All tasks of one run attach to **one** session, ``session_id`` = :func:`run_session_id` (a UUID
derived from the DAG id and the run id), so the session's Python workers and state stay warm
between stages, and two runs never share one. A task leaves the session open when it ends
(``segment_balancer.spark.session.detach``; the provider's ``PySparkOperator`` would release it); the DAG's teardown
task ``release_spark_session`` (:func:`release_session`) releases it when the run ends, failed or
not. A session left behind (a worker that died) expires on the server after its idle timeout
(``spark.connect.session.manager.defaultSessionTimeout``, 60 minutes by default).

A server that does not answer fails the task at once with the URL and how to start one
(``segment_balancer.spark.session.SparkUnreachable``), not after the client's ten minutes of retries; bad input fails it
at once, in one log line and without retries (``refusal.InputRefused``), as in ``spark-submit`` mode.

With ``spark_mode = spark-submit`` (clusters that cannot run a Connect server: YARN, Kubernetes)
the tasks are the ``StageSubmitOperator`` / ``SimulateSubmitOperator`` of :mod:`.operators`, as
before; :func:`stage_operator` and :func:`simulate_operator` pick the class.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.configuration import conf
from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.sdk import BaseOperator

from segment_balancer_airflow.taskargs import AdviseFields, SimulateFields, input_groups, unset

from .refusal import refusing_bad_input

#: The Spark provider's Connect connection the tasks use by default.
DEFAULT_CONNECT_CONN_ID = "spark_connect_default"
#: ``[segment_balancer] spark_mode``: how the Spark tasks run.
SPARK_MODES = ("connect", "spark-submit")
_SESSION_NAMESPACE = uuid.UUID("5b0c6f1e-3d3a-4c1e-9a57-0d7a1f6a2b24")


def spark_mode() -> str:
    """``[segment_balancer] spark_mode`` of the Airflow config (``connect`` when unset; env
    ``AIRFLOW__SEGMENT_BALANCER__SPARK_MODE``). Raises ``ValueError`` for another value."""
    mode = (conf.get("segment_balancer", "spark_mode", fallback="connect") or "connect").strip().lower()
    if mode not in SPARK_MODES:
        raise ValueError(f"[segment_balancer] spark_mode = {mode!r}: expected one of {', '.join(SPARK_MODES)}")
    return mode


def run_session_id(dag_id: str, run_id: str) -> str:
    """The Spark Connect session id of one DAG run: a UUID (version 5) of ``dag_id/run_id``, the
    same for every task and every try of the run, different for every run."""
    return str(uuid.uuid5(_SESSION_NAMESPACE, f"{dag_id}/{run_id}"))


def session_url(conn_id: str, dag_id: str, run_id: str) -> str:
    """``sc://host:port/;…;session_id=<run_session_id>``: the connection's URL (``SparkConnectHook``:
    user id, token, SSL from the connection) with the run's session id."""
    url = SparkConnectHook(conn_id).get_connection_url()  # sc://host:port/ or sc://host:port/;k=v;…
    return f"{url};session_id={run_session_id(dag_id, run_id)}"


def _context_session_url(conn_id: str, context: Any) -> str:
    return session_url(conn_id, context["dag"].dag_id, context["run_id"])


class StageConnectOperator(BaseOperator):
    """Run one stage application on the run's Spark Connect session; groups travel through XCom.

    :param stage_app: application name of ``segment_balancer.planner.coordinators.ALL_APP_NAMES``;
        the default ``task_id``.
    :param groups_from: task id whose XCom holds the input groups, or None (``used_segments``).
    :param branch: the coordinator whose task group holds the task (``branches``), or None (stage 0):
        the run's own plans in the run's work directory, the compared one in its fork.
    :param snapshot: snapshot directory; ``work``: the run's work directory; ``config_file``: JSON
        file of coordinator config overrides, or empty (all templated).
    :param conn_id: the ``spark_connect`` connection (default ``spark_connect_default``).
    Returns the application's XCom (``{"stage", "groups"}``). Raises ``refusal.InputRefused`` for a
    refused snapshot (one line, no retry), ``SparkUnreachable`` when the server does not answer.
    """

    template_fields: Sequence[str] = ("snapshot", "work", "config_file")
    ui_color = "#fcecd4"

    def __init__(
        self,
        *,
        stage_app: str,
        groups_from: str | None = None,
        branch: str | None = None,
        snapshot: str,
        work: str,
        config_file: str | None = None,
        conn_id: str = DEFAULT_CONNECT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("task_id", stage_app)
        super().__init__(**kwargs)
        self.stage_app, self.groups_from, self.branch = stage_app, groups_from, branch
        self.snapshot, self.work, self.config_file = snapshot, work, config_file
        self.conn_id = conn_id

    def execute(self, context: Any) -> dict:
        from segment_balancer.spark.apps import read_overrides, run_app
        from segment_balancer.spark.session import detach, remote_session

        groups, idle = input_groups(self, context)
        if idle is not None:
            return idle
        overrides = None if unset(self.config_file) else read_overrides(Path(self.config_file))
        url = _context_session_url(self.conn_id, context)
        self.log.info("%s on Spark Connect %s", self.stage_app, url.split(";")[0])
        spark = remote_session(url)
        try:
            with refusing_bad_input():
                return run_app(spark, self.stage_app, self.snapshot, self.work, groups, overrides, self.branch)
        finally:
            detach(spark)


class SimulateConnectOperator(SimulateFields, BaseOperator):
    """The what-if simulation after a published plan, on the run's Spark Connect session
    (``segment_balancer.tools.simulate.simulate_published``): ``runs`` Coordinator runs of which the first is
    the published plan; the output goes to ``out`` whole or not at all. Skipped when ``runs``
    renders to 0 or empty. Fields: :class:`~.taskargs.SimulateFields` (all templated), and
    ``conn_id`` as :class:`StageConnectOperator`'s. Returns ``out``. Raises ``refusal.InputRefused``
    when the simulation refuses its input."""

    template_fields: Sequence[str] = SimulateFields.SIMULATE_FIELDS
    ui_color = "#e4f0d8"

    def __init__(self, *, conn_id: str = DEFAULT_CONNECT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id

    def execute(self, context: Any) -> str:
        from segment_balancer.spark.apps import read_overrides
        from segment_balancer.spark.session import detach, remote_session
        from segment_balancer.tools.simulate import simulate_published

        args = self.simulate_args()
        spark = remote_session(_context_session_url(self.conn_id, context))
        try:
            with refusing_bad_input():
                simulate_published(
                    spark,
                    args.snapshot,
                    args.plan,
                    args.work,
                    args.runs,
                    args.out,
                    None if args.config_file is None else read_overrides(args.config_file),
                    loads_per_run=args.loads_per_run,
                    load_failure_rate=args.load_failure_rate,
                    seed=args.seed,
                )
        finally:
            detach(spark)
        return str(args.out)


def release_session(dag_id: str, run_id: str, conn_id: str = DEFAULT_CONNECT_CONN_ID) -> str:
    """Release the run's Spark Connect session on the server (its cached tables, views and Python
    workers: ``segment_balancer.spark.session.release``). Nothing to do in ``spark-submit`` mode. A
    server that does not answer is not an error here (the session, if any, expires there). Returns
    what was done, for the task log."""
    log = logging.getLogger(__name__)
    if spark_mode() != "connect":
        return "spark-submit mode: no Spark Connect session to release"
    from segment_balancer.spark.session import SparkUnreachable, release, remote_session

    url = session_url(conn_id, dag_id, run_id)
    try:
        spark = remote_session(url)
    except SparkUnreachable as exc:
        log.warning("%s", exc)
        return f"server unreachable; session {run_session_id(dag_id, run_id)} expires there"
    release(spark)  # released on the server, its Python daemon ended
    return f"released Spark Connect session {run_session_id(dag_id, run_id)}"


class AdviseConnectOperator(AdviseFields, BaseOperator):
    """The advice of a DAG run on its Spark Connect session
    (``segment_balancer.tools.advise.advise_published``): Druid's Coordinator simulated for ``runs``
    runs under each candidate config, ranked, with #7458 beside it; the output goes to ``out`` whole
    or not at all. Skipped when ``runs`` renders to 0 or empty. Fields:
    :class:`~.taskargs.AdviseFields` (all templated), and ``conn_id`` as
    :class:`StageConnectOperator`'s. Returns ``out``. Raises ``refusal.InputRefused`` when the
    advice refuses its input."""

    template_fields: Sequence[str] = AdviseFields.ADVISE_FIELDS
    ui_color = "#e0e8f5"

    def __init__(self, *, conn_id: str = DEFAULT_CONNECT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id

    def execute(self, context: Any) -> str:
        from segment_balancer.spark.apps import read_overrides
        from segment_balancer.spark.session import detach, remote_session
        from segment_balancer.tools.advise import advise_published

        args = self.advise_args()
        spark = remote_session(_context_session_url(self.conn_id, context))
        try:
            with refusing_bad_input():
                advise_published(
                    spark,
                    args.snapshot,
                    args.work,
                    args.runs,
                    args.out,
                    None if args.config_file is None else read_overrides(args.config_file),
                )
        finally:
            detach(spark)
        return str(args.out)


def stage_operator(**kwargs: Any) -> BaseOperator:
    """A stage task of the configured :func:`spark_mode`: :class:`StageConnectOperator` or
    ``StageSubmitOperator`` (keyword arguments as theirs; ``conn_id`` left to each one's default)."""
    if spark_mode() == "connect":
        return StageConnectOperator(**kwargs)
    from .operators import StageSubmitOperator

    return StageSubmitOperator(**kwargs)


def simulate_operator(**kwargs: Any) -> BaseOperator:
    """The simulate task of the configured :func:`spark_mode`: :class:`SimulateConnectOperator`
    or ``SimulateSubmitOperator``."""
    if spark_mode() == "connect":
        return SimulateConnectOperator(**kwargs)
    from .operators import SimulateSubmitOperator

    return SimulateSubmitOperator(**kwargs)


def advise_operator(**kwargs: Any) -> BaseOperator:
    """The advise task of the configured :func:`spark_mode`: :class:`AdviseConnectOperator` or
    ``AdviseSubmitOperator``."""
    if spark_mode() == "connect":
        return AdviseConnectOperator(**kwargs)
    from .operators import AdviseSubmitOperator

    return AdviseSubmitOperator(**kwargs)
