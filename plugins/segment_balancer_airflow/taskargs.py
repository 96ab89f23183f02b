"""What a stage, simulate or advise task reads from its rendered fields, the same in both Spark modes.

Light at DAG-parse time: no Spark, no provider. The stage tasks (``connect.StageConnectOperator``,
``operators.StageSubmitOperator``) share :func:`input_groups`; the simulate tasks share
:class:`SimulateFields` (their templated fields, and :meth:`SimulateFields.simulate_args`, which
parses them into :class:`SimulateArgs`); the advise tasks :class:`AdviseFields` likewise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException


def unset(value: Any) -> bool:
    """True for an absent rendered value (None, "" or a Jinja-rendered "None")."""
    return value is None or str(value).strip() in ("", "None")


def input_groups(op: Any, context: Any) -> tuple[dict | None, dict | None]:
    """``(groups, idle)`` of stage task ``op`` (``stage_app``, ``groups_from``, ``work``, ``branch``): the XCom of
    ``groups_from`` (None when it is None), and the XCom the stage hands on when it has nothing to
    schedule (``segment_balancer.spark.apps.skip_if_idle``; then it needs no Spark), else None.
    Raises ``RuntimeError`` when ``groups_from`` left no XCom."""
    from segment_balancer.spark.apps import skip_if_idle

    if not op.groups_from:
        return None, None
    groups = context["ti"].xcom_pull(task_ids=op.groups_from)
    if groups is None:
        raise RuntimeError(f"{op.task_id}: task {op.groups_from!r} left no groups in XCom")
    idle = skip_if_idle(op.stage_app, Path(op.work), groups, op.branch)
    if idle is not None:
        op.log.info("%s: nothing to schedule in this run; no Spark job", op.stage_app)
    return groups, idle


@dataclass(frozen=True)
class SimulateArgs:
    """A simulation asked for by a run's params: ``runs`` Coordinator runs (>= 1) from ``snapshot``,
    the first being the published ``plan`` made in ``work``, into ``out``; ``config_file`` (the
    run's overrides, or None), ``loads_per_run`` (None: every queued load completes),
    ``load_failure_rate`` (0–1) and ``seed`` (of the failures)."""

    runs: int
    snapshot: Path
    plan: Path
    work: Path
    out: Path
    config_file: Path | None
    loads_per_run: int | None
    load_failure_rate: float
    seed: int

    def argv(self) -> list[str]:
        """The arguments of ``spark_apps/simulate.py`` (``segment_balancer.tools.simulate.main``)."""
        args = [
            "--snapshot",
            str(self.snapshot),
            "--plan",
            str(self.plan),
            "--work",
            str(self.work),
            "--runs",
            str(self.runs),
            "--out",
            str(self.out),
        ]
        if self.config_file is not None:
            args += ["--config", str(self.config_file)]
        if self.loads_per_run is not None:
            args += ["--loads-per-run", str(self.loads_per_run)]
        return args + ["--load-failure-rate", str(self.load_failure_rate), "--seed", str(self.seed)]


class SimulateFields:
    """The templated fields of a simulate task, mixed in before the operator class of both simulate
    operators (its ``__init__`` takes them and hands the other keyword arguments on; ``task_id``
    defaults to ``simulate``):

    :param runs: Coordinator runs to simulate (an int or its string; 0 or empty: the task is skipped).
    :param snapshot: the run's snapshot; ``plan``: its published plan; ``work``: the work directory
        the plan was made in; ``out``: where the simulation goes; ``config_file``: overrides JSON.
    :param loads_per_run: loads each historical completes per run, empty = all.
    :param load_failure_rate: probability that a load fails; ``seed``: of the failures.
    """

    SIMULATE_FIELDS: Sequence[str] = (
        "runs",
        "snapshot",
        "plan",
        "work",
        "out",
        "config_file",
        "loads_per_run",
        "load_failure_rate",
        "seed",
    )

    def __init__(
        self,
        *,
        runs: Any,
        snapshot: Any,
        plan: Any,
        work: Any,
        out: Any,
        config_file: Any = None,
        loads_per_run: Any = None,
        load_failure_rate: Any = 0.0,
        seed: Any = 0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("task_id", "simulate")
        super().__init__(**kwargs)  # the operator's own class: the rest of the keyword arguments
        self.runs, self.snapshot, self.plan, self.work, self.out = runs, snapshot, plan, work, out
        self.config_file, self.loads_per_run = config_file, loads_per_run
        self.load_failure_rate, self.seed = load_failure_rate, seed

    def simulate_args(self) -> SimulateArgs:
        """The rendered fields, parsed. Raises ``AirflowSkipException`` when no run is asked for."""
        runs = 0 if unset(self.runs) else int(self.runs)
        if runs <= 0:
            raise AirflowSkipException("simulate_runs is 0: no simulation asked for")
        return SimulateArgs(
            runs=runs,
            snapshot=Path(self.snapshot),
            plan=Path(self.plan),
            work=Path(self.work),
            out=Path(self.out),
            config_file=None if unset(self.config_file) else Path(self.config_file),
            loads_per_run=None if unset(self.loads_per_run) else int(self.loads_per_run),
            load_failure_rate=0.0 if unset(self.load_failure_rate) else float(self.load_failure_rate),
            seed=0 if unset(self.seed) else int(self.seed),
        )


@dataclass(frozen=True)
class AdviseArgs:
    """An advice asked for by a run's params: ``runs`` Coordinator runs (>= 1) per candidate config
    from ``snapshot``, stage 0 and the candidates in ``work``, into ``out``; ``config_file`` (the
    run's overrides, or None)."""

    runs: int
    snapshot: Path
    work: Path
    out: Path
    config_file: Path | None

    def argv(self) -> list[str]:
        """The arguments of ``spark_apps/advise.py`` (``segment_balancer.tools.advise.main``)."""
        args = ["--snapshot", str(self.snapshot), "--work", str(self.work), "--runs", str(self.runs)]
        args += ["--out", str(self.out)]
        return args + ([] if self.config_file is None else ["--config", str(self.config_file)])


class AdviseFields:
    """The templated fields of an advise task, mixed in before the operator class of both advise
    operators (``task_id`` defaults to ``advise``):

    :param runs: runs per candidate (an int or its string; 0 or empty: the task is skipped).
    :param snapshot: the run's snapshot; ``work``: the advice's work directory; ``out``: where the
        advice goes; ``config_file``: overrides JSON.
    """

    ADVISE_FIELDS: Sequence[str] = ("runs", "snapshot", "work", "out", "config_file")

    def __init__(self, *, runs: Any, snapshot: Any, work: Any, out: Any, config_file: Any = None, **kwargs: Any):
        kwargs.setdefault("task_id", "advise")
        super().__init__(**kwargs)
        self.runs, self.snapshot, self.work, self.out, self.config_file = runs, snapshot, work, out, config_file

    def advise_args(self) -> AdviseArgs:
        """The rendered fields, parsed. Raises ``AirflowSkipException`` when no run is asked for."""
        runs = 0 if unset(self.runs) else int(self.runs)
        if runs <= 0:
            raise AirflowSkipException("advise_runs is 0: no advice asked for")
        return AdviseArgs(
            runs=runs,
            snapshot=Path(self.snapshot),
            work=Path(self.work),
            out=Path(self.out),
            config_file=None if unset(self.config_file) else Path(self.config_file),
        )
