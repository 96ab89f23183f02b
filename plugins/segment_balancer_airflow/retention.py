"""What a deployment keeps, and for how long: work directories, their XCom objects, plans, task logs.

The settings are :class:`Retention`'s fields, read from the Airflow config section ``[segment_balancer]``
as ``retention_<field>`` (environment ``AIRFLOW__SEGMENT_BALANCER__RETENTION_<FIELD>``); 0 turns a
rule off. Two places apply them:

- ``segment_balancing``'s ``remove_work`` task, once its plan is published (and simulated): the run's
  directory under ``runs/`` and the run's stage XComs (the segment groups, object storage above
  16 KiB) — :func:`remove_run`. A failed run keeps both, for diagnosis.
- the ``segment_balancer_retention`` DAG (hourly, on from the start): the run directories of runs
  that did not finish well, once ``work_days_after_failure`` old, with their XComs
  (:func:`remove_old_runs`); plans by age and count (``segment_balancer.plan.retention``); the task
  logs of DAG runs older than ``log_days`` (:func:`remove_old_logs`).

Every removal is logged with its reason and bytes. ``resolve_run`` writes :data:`RUN_MARKER` into
each run directory, naming its DAG and run id, so a run directory's XComs can be found again.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from airflow.configuration import conf
from airflow.sdk.execution_time.xcom import XCom

from segment_balancer.common.files import is_leftover, is_plain_child, remove_dir, tree_bytes, write_json_atomic
from segment_balancer.plan.retention import DAY_SECONDS, LEFTOVER_AGE_SECONDS, Removed

log = logging.getLogger(__name__)

SECTION = "segment_balancer"
RUN_MARKER = "run.json"
"""``runs/<run dir>/run.json``: ``{"dag_id": …, "run_id": …}`` of the run working there."""


@dataclass(frozen=True)
class Retention:
    """The retention settings (``[segment_balancer] retention_<field>``; 0: never by that rule).

    ``work_days_after_failure``: days a run directory of a run that did not publish is kept (7);
    ``plan_days``: days a published plan is kept (30); ``plans_per_cluster``: newest plans kept per
    cluster (200); ``log_days``: days the task logs of a DAG run are kept (30). Plans that ``LATEST``
    names, the newest plan of each cluster and the newest without what-if edits are always kept.
    """

    work_days_after_failure: float = 7
    plan_days: float = 30
    plans_per_cluster: int = 200
    log_days: float = 30

    @classmethod
    def from_airflow_config(cls) -> Retention:
        """The settings from Airflow's config, defaults where unset. Raises ``ValueError`` naming
        the key, the value and what was expected."""
        values = {}
        for f in fields(cls):
            key = f"retention_{f.name}"
            raw = conf.get(SECTION, key, fallback=None)
            if raw is None or str(raw).strip() == "":
                continue
            try:  # the field's annotation, a string under postponed evaluation
                value = int(raw) if f.type == "int" else float(raw)
            except ValueError:
                value = -1
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"[{SECTION}] {key} = {raw!r}: expected a number >= 0 "
                    f"({'a whole number' if f.type == 'int' else 'days'}; 0 turns the rule off)"
                )
            values[f.name] = value
        return cls(**values)


def write_run_marker(run_dir: Path, dag_id: str, run_id: str) -> None:
    """Record in ``run_dir`` which DAG run works there (:data:`RUN_MARKER`)."""
    write_json_atomic({"dag_id": dag_id, "run_id": run_id}, run_dir / RUN_MARKER)


def delete_xcoms(dag_id: str, run_id: str, task_ids: Iterable[str]) -> None:
    """Delete the ``return_value`` XCom of each of ``task_ids`` in the DAG run, its object-storage
    file with it (the XCom backend's ``purge``). Only from inside a running task (Task SDK)."""
    for task_id in task_ids:
        XCom.delete(key="return_value", task_id=task_id, dag_id=dag_id, run_id=run_id)


def remove_run(
    run_dir: Path,
    runs_root: Path,
    dag_id: str,
    run_id: str,
    task_ids: Iterable[str],
    xcom_deleter: Callable[[str, str, Iterable[str]], None] = delete_xcoms,
) -> Removed:
    """Remove one run's directory ``run_dir`` (a direct child of ``runs_root``, else ``ValueError``)
    and its XComs of ``task_ids``; log and return what was removed."""
    if not is_plain_child(run_dir, runs_root):
        raise ValueError(f"{run_dir} is not a run directory right under {runs_root}")
    xcom_deleter(dag_id, run_id, task_ids)
    size = remove_dir(run_dir) if run_dir.is_dir() else 0
    log.info("retention: removed %s and the XComs of run %s of %s (%.1f MiB)", run_dir, run_id, dag_id, size / 2**20)
    return Removed(str(run_dir), "published", size)


def remove_old_runs(
    runs_root: Path,
    days: float,
    task_ids: Iterable[str],
    run_state: Callable[[str, str], str | None],
    now: float | None = None,
    xcom_deleter: Callable[[str, str, Iterable[str]], None] = delete_xcoms,
) -> list[Removed]:
    """Remove the run directories under ``runs_root`` older than ``days`` (by :data:`RUN_MARKER`'s
    time, else the directory's) whose run is not ``running`` or ``queued`` (``run_state(dag_id,
    run_id)``; None: the run is gone from Airflow), with their XComs of ``task_ids``; and leftover
    temporaries older than a day. ``days`` 0 removes nothing but leftovers."""
    runs_root = Path(runs_root)
    if not runs_root.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for path in sorted(runs_root.iterdir()):
        if is_leftover(path):
            if now - path.lstat().st_mtime > LEFTOVER_AGE_SECONDS:
                removed.append(Removed(str(path), "leftover", remove_dir(path)))
            continue
        if not days or not path.is_dir() or path.is_symlink() or path.name.startswith("."):
            continue
        marker = path / RUN_MARKER
        born = (marker if marker.is_file() else path).stat().st_mtime
        if now - born <= days * DAY_SECONDS:
            continue
        try:
            run = json.loads(marker.read_text()) if marker.is_file() else None
        except (OSError, ValueError):
            run = None
        if isinstance(run, dict) and run.get("dag_id") and run.get("run_id"):
            if run_state(run["dag_id"], run["run_id"]) in ("running", "queued"):
                continue
            xcom_deleter(run["dag_id"], run["run_id"], task_ids)
        size = remove_dir(path)
        removed.append(Removed(str(path), "age", size))
        log.info(
            "retention: removed %s (a run of %.1f days ago that did not publish, %.1f MiB)",
            path,
            (now - born) / DAY_SECONDS,
            size / 2**20,
        )
    return removed


def remove_old_logs(log_folder: Path, days: float, now: float | None = None) -> list[Removed]:
    """Remove the task logs of DAG runs (``<log_folder>/dag_id=*/run_id=*/``, Airflow's default
    layout) whose newest file was last written more than ``days`` ago; 0 removes nothing."""
    log_folder = Path(log_folder)
    if not days or not log_folder.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for run_logs in sorted(log_folder.glob("dag_id=*/run_id=*")):
        if not run_logs.is_dir() or run_logs.is_symlink():
            continue
        newest = max((p.stat().st_mtime for p in run_logs.rglob("*") if p.is_file()), default=run_logs.stat().st_mtime)
        if now - newest > days * DAY_SECONDS:
            size = tree_bytes(run_logs)
            shutil.rmtree(run_logs, ignore_errors=True)
            removed.append(Removed(str(run_logs), "age", size))
            log.info("retention: removed the logs %s (%.1f MiB)", run_logs, size / 2**20)
    return removed


def run_state_of(ti) -> Callable[[str, str], str | None]:
    """``run_state(dag_id, run_id)`` for :func:`remove_old_runs` through the running task instance
    ``ti`` (Task SDK ``get_dagrun_state``): the run's state, None when Airflow no longer knows it."""

    def run_state(dag_id: str, run_id: str) -> str | None:
        try:
            return str(ti.get_dagrun_state(dag_id, run_id))
        except Exception as exc:  # a run deleted from the metadata DB answers 404
            log.info("retention: the state of run %s of %s is unknown (%s)", run_id, dag_id, exc)
            return None

    return run_state
