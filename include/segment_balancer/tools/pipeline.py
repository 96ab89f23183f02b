"""One plan in one Spark session, as the DAG makes it: every application of
:data:`segment_balancer.planner.stages.APP_NAMES` in order, the Great Expectations gate, publish. The
CLI's ``plan`` and every run of a simulation use it."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path


def run_plan(
    spark,
    snapshot: Path,
    out: Path,
    overrides: dict | None = None,
    work: Path | None = None,
    edits=None,
    balancer_state: Path | None = None,
    coordinator: str | None = None,
    compare: bool = False,
) -> dict:
    """Run every application of the coordinator's run in order (``COORDINATOR_APP_NAMES``: the
    algorithm of #7458, or ``druid``, Druid's own Coordinator), validate, and publish to ``out``.
    ``coordinator``: who plans, over the config key ``coordinator`` of ``overrides`` and the
    snapshot's config (None: theirs, default ``issue7458``). ``compare``: the other coordinator
    plans the same snapshot too, from the same timeline and prepared tables (a fork of the work
    directory, :func:`fork_work`); its plan, validated, goes into the published plan as
    ``compared/<coordinator>/``, with ``comparison.json`` (:mod:`segment_balancer.plan.compare`).

    ``edits``: a ``whatif.WhatIf`` applied to a copy of ``snapshot`` first (recorded in the
    summary's ``whatif``). ``balancer_state``: the previous plan's ``balancer_state.json`` the run
    starts from (:func:`segment_balancer.planner.balancer_state.give_previous`; None: hit counts
    start at 1). Returns the plan's ``summary.json``. Raises ``SnapshotError`` (bad
    input), ``WhatIfError`` (edits that do not fit the snapshot) or ``PlanValidationError``
    (nothing published, an earlier plan at ``out`` untouched).
    """
    from segment_balancer.plan.compare import COMPARED_DIR, write_comparison
    from segment_balancer.plan.publish import publish_plan
    from segment_balancer.plan.report import write_report
    from segment_balancer.plan.validation import import_in_background, require_valid
    from segment_balancer.planner.balancer_state import give_previous
    from segment_balancer.planner.config import load_config
    from segment_balancer.planner.stages import COORDINATOR_APP_NAMES, COORDINATORS
    from segment_balancer.spark.apps import run_app
    from segment_balancer.tools.whatif import apply_to_run

    import_in_background()

    own_work = work is None
    work = Path(work or tempfile.mkdtemp(prefix="segment_balancer-work-")).absolute()
    log = logging.getLogger("segment_balancer.plan")
    try:
        if coordinator is not None:
            overrides = {**(overrides or {}), "coordinator": coordinator}
        if edits is not None:
            snapshot, overrides = apply_to_run(snapshot, work, edits, overrides)
        coordinator = load_config(snapshot, overrides).coordinator
        give_previous(balancer_state, work)
        xcom, prepared = None, None
        for name in COORDINATOR_APP_NAMES[coordinator]:
            log.info("running %s", name)
            xcom = run_app(spark, name, snapshot, work, xcom, overrides)
            if name == "prepare":
                prepared = xcom
        if compare:
            other = next(c for c in COORDINATORS if c != coordinator)
            fork = fork_work(work, work / "compared_work" / other, other)
            xcom = prepared
            for name in COORDINATOR_APP_NAMES[other][2:]:
                log.info("running %s (compared)", name)
                xcom = run_app(spark, name, snapshot, fork, xcom, {**(overrides or {}), "coordinator": other})
            require_valid(fork / "plan", fork)
            shutil.copytree(fork / "plan", work / "plan" / COMPARED_DIR / other)
            write_report(work / "plan" / COMPARED_DIR / other)
            write_comparison(work / "plan", work, fork / "plan", fork)
        require_valid(work / "plan", work)
        publish_plan(work / "plan", out)
        return json.loads((Path(out) / "summary.json").read_text())
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)


FORKED = (
    "timeline",
    "prepared",
    "state/00_prepare",
    "groups/used_segments.json",
    "groups/prepare.json",
    "timings.json",
)
"""What ``used_segments`` and ``prepare`` leave in a work directory that another coordinator's run
starts from."""


def fork_work(work: Path, fork: Path, coordinator: str) -> Path:
    """A work directory at ``fork`` (replaced) that starts where ``work`` stood after ``prepare``:
    its :data:`FORKED` files hard-linked (never written again: every later application writes
    aside and renames), ``prepared/meta.json`` copied with ``coordinator`` as the run's
    coordinator. Returns ``fork``."""
    from segment_balancer.common.files import link_or_copy, write_json_atomic

    shutil.rmtree(fork, ignore_errors=True)
    for rel in FORKED:
        src = work / rel
        if src.is_dir():
            for path in sorted(src.rglob("*")):
                dst = fork / rel / path.relative_to(src)
                if path.is_dir():
                    dst.mkdir(parents=True, exist_ok=True)
                else:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    link_or_copy(path, dst)
        elif src.exists():
            (fork / rel).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(src, fork / rel)
    meta_path = fork / "prepared" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.unlink()
    write_json_atomic({**meta, "config": {**meta["config"], "coordinator": coordinator}}, meta_path)
    return fork
