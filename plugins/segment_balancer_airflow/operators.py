"""``StageSubmitOperator``: submit one stage application and hand segment groups through XCom;
``SimulateSubmitOperator``: submit the what-if simulation that follows a published plan.

Every stage of a run is a PySpark application ``spark_apps/<stage_app>.py`` (see
docs/ARCHITECTURE.md, "Spark applications"). The operator:

1. pulls the XCom of ``groups_from`` (the previous stage) and writes it as JSON to
   ``WORK/xcom/<task_id>.in.json`` (skipped when ``groups_from`` is None, i.e. for ``prepare``);
   when the stage has nothing to schedule (``segment_balancer.spark.apps.skip_if_idle``: every group
   it reads is empty) it returns the groups the stage would hand on and submits nothing;
2. runs ``spark-submit <apps_dir>/<stage_app>.py --snapshot S --work W [--groups-in IN]
   --groups-out OUT [--config CFG]`` through the Spark provider (connection ``spark_default``);
3. reads ``WORK/xcom/<task_id>.out.json`` and returns it, so it becomes this task's XCom.

The Spark driver and workers run on the worker's own interpreter (``sys.executable``), so they
see the same installed packages as Airflow.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException
from segment_balancer.common.files import write_json_atomic
from segment_balancer.spark.jvm_archive import local_driver_java_options
from segment_balancer.spark.session import LEAN_CONF  # the one place for lean Spark settings
from segment_balancer.spark.apps import skip_if_idle
from segment_balancer_airflow.refusal import InputRefused

#: ``spark_apps/`` of this checkout; ``SEGMENT_BALANCER_APPS`` or ``apps_dir=`` override it.
DEFAULT_APPS_DIR = Path(__file__).resolve().parents[2] / "spark_apps"

def _unset(value: Any) -> bool:
    """True for an absent templated value (None, "" or a Jinja-rendered "None")."""
    return value is None or str(value).strip() in ("", "None")


def _submit_environment(python: str) -> dict[str, str]:
    """What spark-submit's process needs beyond this worker's environment (handed to the Spark
    provider's ``env_vars``; this process's own environment is left as it is): ``PYSPARK_PYTHON``
    and ``SPARK_HOME`` of the pyspark installed for ``python`` unless set, and ``PATH`` with
    ``python``'s ``bin`` first when the ``spark-submit`` found on ``PATH`` is another one."""
    env: dict[str, str] = {}
    if "PYSPARK_PYTHON" not in os.environ:
        env["PYSPARK_PYTHON"] = python
    spec = importlib.util.find_spec("pyspark")
    if "SPARK_HOME" not in os.environ and spec and spec.submodule_search_locations:
        env["SPARK_HOME"] = spec.submodule_search_locations[0]
    bin_dir = str(Path(python).parent)
    ours = shutil.which("spark-submit", path=bin_dir)
    if ours and shutil.which("spark-submit") != ours:
        env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    return env


class _SubmitHere(SparkSubmitOperator):
    """``SparkSubmitOperator`` whose driver and Python workers run on this worker's interpreter,
    with the spark-submit and jars of the pyspark installed for it (spark-submit's own lookup would
    try ``python3`` on PATH), and whose local driver JVM gets the short-run options."""

    def _submit(self, context: Any) -> None:
        """spark-submit ``self.application`` with ``self.application_args`` (set by the caller)."""
        python = sys.executable
        self.conf = {"spark.pyspark.python": python, "spark.pyspark.driver.python": python, **(self.conf or {})}
        self.env_vars = {**_submit_environment(python), **(self.env_vars or {})}

        if _driver_runs_here(self._conn_id) and "spark.driver.extraJavaOptions" not in self.conf:
            self.conf["spark.driver.extraJavaOptions"] = local_driver_java_options()

        self._hook = None  # built by execute() from application_args
        SparkSubmitOperator.execute(self, context)


class StageSubmitOperator(_SubmitHere):
    """Run the Spark application of one stage; input and output groups travel through XCom.

    :param stage_app: application name, e.g. ``stage03_underreplicated`` (file ``<apps_dir>/<name>.py``);
        also the default ``task_id``.
    :param groups_from: task id whose XCom holds the input groups, or None (no ``--groups-in``).
    :param snapshot: snapshot directory (templated).
    :param work: work directory of the run (templated).
    :param config_file: JSON file of coordinator config overrides, or empty (templated).
    :param apps_dir: where the applications live (default: ``$SEGMENT_BALANCER_APPS`` or the
        checkout's ``spark_apps/``).
    :param conf: extra Spark conf, merged over ``segment_balancer.spark.session.LEAN_CONF`` (every submit
        starts its own JVM: no UI, few shuffle partitions, small driver).
    Other keyword arguments go to ``SparkSubmitOperator`` (``conn_id`` defaults to ``spark_default``).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "snapshot", "work", "config_file")
    ui_color = "#fcecd4"

    def __init__(
        self,
        *,
        stage_app: str,
        groups_from: str | None = None,
        snapshot: str,
        work: str,
        config_file: str | None = None,
        apps_dir: str | os.PathLike | None = None,
        conf: dict[str, Any] | None = None,
        conn_id: str = "spark_default",
        **kwargs: Any,
    ) -> None:
        apps = Path(apps_dir or os.environ.get("SEGMENT_BALANCER_APPS") or DEFAULT_APPS_DIR)
        kwargs.setdefault("task_id", stage_app)
        kwargs.setdefault("name", f"segment_balancer.{stage_app}")
        super().__init__(
            application=str(apps / f"{stage_app}.py"),
            conf={**LEAN_CONF, **(conf or {})},
            conn_id=conn_id,
            **kwargs,
        )
        self.stage_app = stage_app
        self.groups_from = groups_from
        self.snapshot = snapshot
        self.work = work
        self.config_file = config_file

    def execute(self, context: Any) -> dict:
        xcom_dir = Path(self.work) / "xcom"
        xcom_dir.mkdir(parents=True, exist_ok=True)
        groups_out = xcom_dir / f"{self.task_id}.out.json"
        groups_out.unlink(missing_ok=True)  # a retry must not return the previous try's output

        args = ["--snapshot", str(self.snapshot), "--work", str(self.work)]
        groups, idle = input_groups(self, context)
        if idle is not None:
            return idle
        if groups is not None:
            groups_in = xcom_dir / f"{self.task_id}.in.json"
            write_json_atomic(groups, groups_in)
            args += ["--groups-in", str(groups_in)]
        refusal = xcom_dir / f"{self.task_id}.refused.txt"
        refusal.unlink(missing_ok=True)
        args += ["--groups-out", str(groups_out), "--refusal-out", str(refusal)]
        if not _unset(self.config_file):
            args += ["--config", str(self.config_file)]
        self.application_args = args
        try:
            self._submit(context)
        except AirflowException:
            if refusal.is_file():  # the application refused the snapshot (exit 2): its one line, no retry
                raise InputRefused(refusal.read_text().strip()) from None
            raise

        if not groups_out.is_file():
            raise FileNotFoundError(f"{self.stage_app} finished without writing {groups_out}")
        return json.loads(groups_out.read_text())


def input_groups(op: Any, context: Any) -> tuple[dict | None, dict | None]:
    """``(groups, idle)`` of stage task ``op`` (``stage_app``, ``groups_from``, ``work``): the XCom of
    ``groups_from`` (None when it is None), and the XCom the stage hands on when it has nothing to
    schedule (``segment_balancer.spark.apps.skip_if_idle``; then it needs no Spark), else None.
    Raises ``ValueError`` when ``groups_from`` left no XCom."""
    if not op.groups_from:
        return None, None
    groups = context["ti"].xcom_pull(task_ids=op.groups_from)
    if groups is None:
        raise ValueError(f"{op.task_id}: task {op.groups_from!r} left no groups in XCom")
    idle = skip_if_idle(op.stage_app, Path(op.work), groups)
    if idle is not None:
        op.log.info("%s: nothing to schedule (every group it reads is empty); no Spark job", op.stage_app)
    return groups, idle


def _driver_runs_here(conn_id: str) -> bool:
    """Whether the Spark driver runs on this machine: a ``local`` master, or client deploy mode
    (the connection's ``deploy-mode`` extra, client by default) on a cluster. Then the driver JVM
    gets the short-run options of ``segment_balancer.spark.jvm_archive.local_driver_java_options()``: C1
    JIT, serial GC and the class-data-sharing archive of this environment when built."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:  # a missing connection: the provider falls back to yarn
        return False
    if (conn.host or "").startswith("local"):
        return True
    return str(conn.extra_dejson.get("deploy-mode") or "client") == "client"


class SimulateSubmitOperator(_SubmitHere):
    """What-if simulation after a published plan: submit ``spark_apps/simulate.py``
    (``segment_balancer.tools.simulate.main``), ``runs`` Coordinator runs of which the first is the
    published plan; the output goes to ``out`` whole or not at all. Skipped (``AirflowSkipException``)
    when ``runs`` renders to 0 or empty.

    :param runs: Coordinator runs to simulate (templated; an int or its string).
    :param snapshot: the run's snapshot; ``plan``: its published plan; ``work``: the work directory
        the plan was made in; ``out``: where the simulation goes; ``config_file``: overrides JSON
        (all templated).
    :param loads_per_run: loads each historical completes per run, empty = all (templated).
    :param load_failure_rate: probability that a load fails (templated); ``seed``: of the failures.
    Other keyword arguments as for :class:`StageSubmitOperator`.
    Returns ``out`` (the XCom).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "runs", "snapshot", "plan", "work",
                                      "out", "config_file", "loads_per_run", "load_failure_rate", "seed")
    ui_color = "#e4f0d8"

    def __init__(self, *, runs: Any, snapshot: str, plan: str, work: str, out: str, config_file: str | None = None,
                 loads_per_run: Any = None, load_failure_rate: Any = 0.0, seed: Any = 0,
                 apps_dir: str | os.PathLike | None = None, conf: dict[str, Any] | None = None,
                 conn_id: str = "spark_default", **kwargs: Any) -> None:
        apps = Path(apps_dir or os.environ.get("SEGMENT_BALANCER_APPS") or DEFAULT_APPS_DIR)
        kwargs.setdefault("task_id", "simulate")
        kwargs.setdefault("name", "segment_balancer.tools.simulate")
        super().__init__(application=str(apps / "simulate.py"), conf={**LEAN_CONF, **(conf or {})},
                         conn_id=conn_id, **kwargs)
        self.runs, self.snapshot, self.plan, self.work, self.out = runs, snapshot, plan, work, out
        self.config_file, self.loads_per_run = config_file, loads_per_run
        self.load_failure_rate, self.seed = load_failure_rate, seed

    def execute(self, context: Any) -> str:
        from airflow.sdk.exceptions import AirflowSkipException

        runs = 0 if _unset(self.runs) else int(self.runs)
        if runs <= 0:
            raise AirflowSkipException("simulate_runs is 0: no simulation asked for")
        args = ["--snapshot", str(self.snapshot), "--plan", str(self.plan), "--work", str(self.work),
                "--runs", str(runs), "--out", str(self.out)]
        if not _unset(self.config_file):
            args += ["--config", str(self.config_file)]
        if not _unset(self.loads_per_run):
            args += ["--loads-per-run", str(int(self.loads_per_run))]
        if not _unset(self.load_failure_rate):
            args += ["--load-failure-rate", str(float(self.load_failure_rate))]
        if not _unset(self.seed):
            args += ["--seed", str(int(self.seed))]
        self.application_args = args
        self._submit(context)
        return str(self.out)
