"""``StageSubmitOperator``: submit one stage application and hand segment groups through XCom;
``SimulateSubmitOperator``: submit the what-if simulation that follows a published plan.

Every stage of a run is a PySpark application ``spark_apps/<stage_app>.py`` (see
docs/ARCHITECTURE.md, "Spark applications"). The operator:

1. pulls the XCom of ``groups_from`` (the previous stage) and writes it as JSON to
   ``WORK/xcom/<task_id>.in.json`` (skipped when ``groups_from`` is None, i.e. for ``prepare``);
   when the stage has nothing to schedule (``segment_balancer.spark.apps.skip_if_idle``: every group
   it reads is empty) it returns the groups the stage would hand on and submits nothing;
2. runs ``spark-submit <apps_dir>/<stage_app>.py --snapshot S --work W [--groups-in IN]
   --groups-out OUT [--config CFG] [--branch COORDINATOR]`` through the Spark provider (connection ``spark_default``),
   configured once when the operator is built (its ``conf`` and ``env_vars``), touching none of
   the provider's private state;
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
from segment_balancer_airflow.refusal import InputRefused
from segment_balancer_airflow.taskargs import AdviseFields, SimulateFields, input_groups, unset

#: ``spark_apps/`` of this checkout; ``SEGMENT_BALANCER_APPS`` or ``apps_dir=`` override it.
DEFAULT_APPS_DIR = Path(__file__).resolve().parents[2] / "spark_apps"


def _submit_environment(python: str) -> dict[str, str]:
    """What spark-submit's process needs beyond this worker's environment (the Spark provider's
    ``env_vars``; this process's own environment is left as it is): ``PYSPARK_PYTHON`` and
    ``SPARK_HOME`` of the pyspark installed for ``python`` unless set, ``PATH`` with ``python``'s
    ``bin`` first when the ``spark-submit`` found on ``PATH`` is another one, and
    ``SPARK_SUBMIT_OPTS`` with the short-run JVM options
    (``segment_balancer.spark.jvm_archive.local_driver_java_options``: C1 JIT, serial GC and the
    class-data-sharing archive when built), which the launcher gives the JVM it starts: the driver
    on a local master or in client deploy mode, only the submitting JVM in cluster mode."""
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
    env["SPARK_SUBMIT_OPTS"] = " ".join(
        filter(None, [local_driver_java_options(), os.environ.get("SPARK_SUBMIT_OPTS")])
    )
    return env


class _SubmitHere(SparkSubmitOperator):
    """``SparkSubmitOperator`` of a ``spark_apps/`` application whose driver and Python workers run
    on this worker's interpreter, with the spark-submit and jars of the pyspark installed for it
    (spark-submit's own lookup would try ``python3`` on PATH) and the short-run JVM options. All of
    it is set once here, as the provider's ``conf`` and ``env_vars`` (the DAG file is parsed again
    on the worker that runs the task, so ``sys.executable`` is that worker's); ``conf`` is merged
    over ``segment_balancer.spark.session.LEAN_CONF`` (every submit starts its own JVM: no UI, few
    shuffle partitions, small driver)."""

    def __init__(
        self,
        *,
        app: str,
        apps_dir: str | os.PathLike | None = None,
        conf: dict[str, Any] | None = None,
        env_vars: dict[str, Any] | None = None,
        conn_id: str = "spark_default",
        **kwargs: Any,
    ) -> None:
        python = sys.executable
        apps = Path(apps_dir or os.environ.get("SEGMENT_BALANCER_APPS") or DEFAULT_APPS_DIR)
        super().__init__(
            application=str(apps / f"{app}.py"),
            conf={**LEAN_CONF, "spark.pyspark.python": python, "spark.pyspark.driver.python": python, **(conf or {})},
            env_vars={**_submit_environment(python), **(env_vars or {})},
            conn_id=conn_id,
            **kwargs,
        )


class StageSubmitOperator(_SubmitHere):
    """Run the Spark application of one stage; input and output groups travel through XCom.

    :param stage_app: application name, e.g. ``stage03_underreplicated`` (file ``<apps_dir>/<name>.py``);
        also the default ``task_id``.
    :param groups_from: task id whose XCom holds the input groups, or None (no ``--groups-in``).
    :param branch: the coordinator whose task group holds the task, or None (stage 0): ``--branch``.
    :param snapshot: snapshot directory (templated).
    :param work: work directory of the run (templated).
    :param config_file: JSON file of coordinator config overrides, or empty (templated).
    :param apps_dir: where the applications live (default: ``$SEGMENT_BALANCER_APPS`` or the
        checkout's ``spark_apps/``).
    :param conf: extra Spark conf, merged over ``LEAN_CONF``.
    Other keyword arguments go to ``SparkSubmitOperator`` (``conn_id`` defaults to ``spark_default``).
    Raises ``refusal.InputRefused`` when the application refused its input (exit code 2).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "snapshot", "work", "config_file")
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
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("task_id", stage_app)
        kwargs.setdefault("name", f"segment_balancer.{stage_app}")
        super().__init__(app=stage_app, **kwargs)
        self.stage_app = stage_app
        self.groups_from = groups_from
        self.branch = branch
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
        if not unset(self.config_file):
            args += ["--config", str(self.config_file)]
        if self.branch:
            args += ["--branch", self.branch]
        self.application_args = args  # the provider's own field, read when it builds its hook
        try:
            super().execute(context)
        except AirflowException:
            if refusal.is_file():  # the application refused its input (exit 2): its one line, no retry
                raise InputRefused(refusal.read_text().strip()) from None
            raise

        if not groups_out.is_file():
            raise FileNotFoundError(f"{self.stage_app} finished without writing {groups_out}")
        return json.loads(groups_out.read_text())


class SimulateSubmitOperator(SimulateFields, _SubmitHere):
    """What-if simulation after a published plan: submit ``spark_apps/simulate.py``
    (``segment_balancer.tools.simulate.main``), ``runs`` Coordinator runs of which the first is the
    published plan; the output goes to ``out`` whole or not at all. Skipped (``AirflowSkipException``)
    when ``runs`` renders to 0 or empty. Fields: :class:`~.taskargs.SimulateFields` (all templated);
    other keyword arguments as for :class:`StageSubmitOperator`. Returns ``out`` (the XCom).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, *SimulateFields.SIMULATE_FIELDS)
    ui_color = "#e4f0d8"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("name", "segment_balancer.tools.simulate")
        super().__init__(app="simulate", **kwargs)

    def execute(self, context: Any) -> str:
        args = self.simulate_args()
        self.application_args = args.argv()
        super().execute(context)
        return str(args.out)


class AdviseSubmitOperator(AdviseFields, _SubmitHere):
    """The advice of a DAG run: submit ``spark_apps/advise.py`` (``segment_balancer.tools.advise.main``),
    Druid's Coordinator simulated for ``runs`` runs under each candidate config of the snapshot,
    ranked, with #7458 beside it; the output goes to ``out`` whole or not at all. Skipped
    (``AirflowSkipException``) when ``runs`` renders to 0 or empty. Fields:
    :class:`~.taskargs.AdviseFields` (all templated); other keyword arguments as for
    :class:`StageSubmitOperator`. Returns ``out`` (the XCom).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, *AdviseFields.ADVISE_FIELDS)
    ui_color = "#e0e8f5"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("name", "segment_balancer.tools.advise")
        super().__init__(app="advise", **kwargs)

    def execute(self, context: Any) -> str:
        args = self.advise_args()
        self.application_args = args.argv()
        super().execute(context)
        return str(args.out)
