"""The first task of a ``segment_balancing`` run: which snapshot, with which config and edits, where.

:func:`resolve_run` is what the DAG's ``resolve_snapshot`` task does; it runs no Spark.
:func:`segment_balancer_home` and :func:`run_paths` say where a run works and publishes; the DAG and
the plans UI (``ui``) share them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

from segment_balancer.common.files import write_json_atomic
from segment_balancer.druid.instants import format_instant_ms
from segment_balancer.plan.history import previous_plan
from segment_balancer.plan.layout import ADVICE_DIR
from segment_balancer.planner.balancer_state import STATE_FILE, give_previous
from segment_balancer_airflow.disk import check_room
from segment_balancer_airflow.params import config_overrides, what_if
from segment_balancer_airflow.retention import write_run_marker
from segment_balancer_airflow.snapshots import NoSnapshotError, pick_snapshot

DAG_ID = "segment_balancing"
"""The DAG whose runs work under ``runs/`` and publish under ``plans/``."""


def segment_balancer_home() -> Path:
    """The directory runs work in and plans are published to: ``$SEGMENT_BALANCER_HOME``, else
    ``var/`` of this checkout (what ``make airflow`` exports). :func:`run_paths` lays it out."""
    return Path(os.environ.get("SEGMENT_BALANCER_HOME", Path(__file__).resolve().parents[2] / "var"))


RUN_DIR_PREFIX_CHARS = 80
"""The longest readable prefix of a run directory name whose run id had to change (:func:`run_dir_name`)."""


def run_dir_name(run_id: str) -> str:
    """The one directory name of DAG run ``run_id`` under ``runs/`` and ``plans/``.

    A run id of only ``[A-Za-z0-9._-]``, not starting with ``.``, without ``..`` and at most
    :data:`RUN_DIR_PREFIX_CHARS` characters is its own name. Any other (Airflow's own
    ``manual__2024-07-01T00:00:00+00:00``, ``.``, ``..``, ``a/../b``, a long or non-ASCII id) gets a
    readable prefix (runs of other characters, and of two or more dots, as ``_``; leading dots
    dropped; cut to
    :data:`RUN_DIR_PREFIX_CHARS`; ``run`` when nothing is left) plus ``~`` and the first 12 hex
    digits of the id's SHA-256. No name is ``.``, ``..``, hidden or holds a ``/``; an unchanged
    name never holds ``~``, so two run ids share a name only on a 48-bit hash collision.
    """
    if _PLAIN_NAME.fullmatch(run_id) and ".." not in run_id and len(run_id) <= RUN_DIR_PREFIX_CHARS:
        return run_id
    prefix = re.sub(r"[^A-Za-z0-9._-]+|\.{2,}", "_", run_id).lstrip(".")[:RUN_DIR_PREFIX_CHARS] or "run"
    return f"{prefix}~{hashlib.sha256(run_id.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def plans_root(home: Path) -> Path:
    """Where the DAG publishes plans: ``home/plans``, each plan a direct child (:func:`run_paths`)."""
    return home / "plans"


def runs_root(home: Path) -> Path:
    """Where DAG runs work: ``home/runs``, each run's work directory ``<run dir name>/work``."""
    return home / "runs"


def run_paths(home: Path, run_id: str) -> dict[str, Path]:
    """Where a run keeps its work and publishes, all under directories named :func:`run_dir_name`:
    ``work`` (``home/runs/<name>/work``), ``publish_dir`` (``home/plans/<name>``),
    ``simulation_dir`` (its ``simulation``), ``advice_dir`` (its ``advice``) and ``advice_work``
    (``home/runs/<name>/advice``: the advice's work directory, removed with the run's)."""
    name = run_dir_name(run_id)
    return {
        "work": runs_root(home) / name / "work",
        "publish_dir": plans_root(home) / name,
        "simulation_dir": plans_root(home) / name / "simulation",
        "advice_dir": plans_root(home) / name / ADVICE_DIR,
        "advice_work": runs_root(home) / name / "advice",
    }


def resolve_run(params: dict, run_id: str, when: datetime, home: Path, dag_id: str = DAG_ID) -> dict[str, str]:
    """Pick the snapshot, create a fresh work directory, apply the what-if edits, write the config overrides.

    The snapshot: the ``snapshot`` param (a directory, or a name under ``snapshots_root``), else the
    newest under ``snapshots_root`` (of the ``cluster`` param, when set) taken at or before ``when``.
    The what-if edits (``whatif_*`` params) give an edited copy in the work directory, which the run
    plans on (``segment_balancer.tools.whatif.apply_to_run``); the config overrides are ``config_overrides``
    with the typed config params over it (and the decommissioned historicals added). With the
    ``compare_with_druid`` param the run is planned by both coordinators
    (``segment_balancer.spark.workdir.request_compare``).

    The balancer state of the plan this run follows is handed to it (:func:`previous_balancer_state`).

    The run directory (``work``'s parent) records ``dag_id`` and ``run_id`` (``retention.RUN_MARKER``).

    Returns the XCom the stage operators read: ``snapshot`` (what the run plans on), ``work``,
    ``config_file``, ``plan_dir``, ``publish_dir``, ``simulation_dir``, ``advice_dir``, ``advice_work``,
    ``balancer_state`` (the
    state handed on, "" for none) (str paths).
    Raises ``NoSnapshotError`` (no snapshot there, none old enough), ``SnapshotError`` (a small
    file of the snapshot or an override refused: ``planner.small_inputs.read_small_inputs``), ``WhatIfError``
    (edits naming no historical of the snapshot, malformed), ``ValueError`` (config_overrides no
    object), ``disk.NotEnoughRoom`` (the run's estimated bytes, with its simulated runs, are more than
    ``home``'s file system has free), all before any work directory is made and any stage runs. The
    DAG's task turns them into ``refusal.InputRefused`` (``refusal.NoRoom`` for the last).
    """
    root = Path(params["snapshots_root"]).expanduser()
    if params.get("snapshot"):
        snapshot = Path(params["snapshot"]).expanduser()
        if not snapshot.is_absolute() and not snapshot.exists():
            snapshot = root / snapshot
    else:
        snapshot = pick_snapshot(root, when, params.get("cluster") or None)
    if not (snapshot / "snapshot.json").is_file():
        raise NoSnapshotError(f"{snapshot} is not a snapshot directory (no snapshot.json)")
    overrides, edits = config_overrides(params), what_if(params)
    # A bad snapshot or override is refused here, before any work directory or Spark job: the small
    # files whole; the segment and replica files are found here and checked by used_segments (Spark).
    from segment_balancer.planner.small_inputs import read_small_inputs

    meta = read_small_inputs(snapshot, overrides, "param config_overrides")[-1]

    compare = bool(params.get("compare_with_druid"))
    check_room(home, snapshot, int(params.get("simulate_runs") or 0), compare)
    paths = run_paths(home.resolve(), run_id)
    work = paths["work"]
    shutil.rmtree(work, ignore_errors=True)  # re-running a run starts clean
    work.mkdir(parents=True)
    write_run_marker(work.parent, dag_id, run_id)
    from segment_balancer.tools.whatif import apply_to_run

    planned, overrides = apply_to_run(snapshot.resolve(), work, edits, overrides)
    config_file = work / "config_overrides.json"
    write_json_atomic(overrides, config_file)
    if compare:
        from segment_balancer.spark.workdir import request_compare

        request_compare(work)
    state = previous_balancer_state(paths["publish_dir"].parent, meta.cluster, meta.snapshot_time_ms, work)
    return {
        "snapshot": str(planned),
        "work": str(work),
        "config_file": str(config_file),
        "plan_dir": str(work / "plan"),
        "balancer_state": str(state or ""),
        **{k: str(v) for k, v in paths.items() if k != "work"},
    }


def previous_balancer_state(plans_root: Path, cluster: str, snapshot_time_ms: int, work: Path) -> Path | None:
    """Hand the run working in ``work`` the balancer state of the plan it follows
    (``segment_balancer.plan.history.previous_plan``: the newest plan of ``cluster`` under
    ``plans_root`` of an older snapshot, no what-if), and return that file; None (nothing handed,
    hit counts start at 1) when there is no such plan or it carries no state (a plan of an earlier
    release). A what-if run reads it too; it just does not write its own back (``assemble``)."""
    previous = previous_plan(plans_root, cluster, format_instant_ms(snapshot_time_ms))
    state = Path(previous.path) / STATE_FILE if previous is not None else None
    if state is not None and not state.is_file():
        state = None
    give_previous(state, work)
    return state
