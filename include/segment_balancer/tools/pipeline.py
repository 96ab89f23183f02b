"""One plan in one Spark session, as the DAG makes it: every application of the run's coordinator
in order (``Coordinator.run_apps`` of :mod:`segment_balancer.planner.coordinators`), ``compare_coordinators``,
the Great Expectations gate, publish. The
CLI's ``plan`` and every run of a simulation use it."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path

from segment_balancer.plan import validation_process
from segment_balancer.plan.compare import place_compared
from segment_balancer.plan.publish import publish_plan
from segment_balancer.planner.balancer_state import give_previous
from segment_balancer.planner.config import load_config
from segment_balancer.planner.coordinators import COMPARE_APP, STAGE0_APPS
from segment_balancer.planner.coordinators import coordinator as named
from segment_balancer.spark.apps import abandon_alongside, alongside_fits, compare_alongside, run_app
from segment_balancer.spark.workdir import request_compare
from segment_balancer.tools.whatif import apply_to_run


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
    validator=None,
) -> dict:
    """Run every application of the coordinator's run in order (``Coordinator.run_apps``: the
    algorithm of #7458, or ``druid``, Druid's own Coordinator), validate, and publish to ``out``.
    ``coordinator``: who plans, over the config key ``coordinator`` of ``overrides`` and the
    snapshot's config (None: theirs, default ``issue7458``). ``compare``: the other coordinator
    plans the same snapshot too, from the same timeline and prepared tables (the application
    ``compare_coordinators``, in a fork of the work directory); its plan goes into the plan as
    ``compared/<coordinator>/``, with ``comparison.json``
    (:func:`segment_balancer.plan.compare.place_compared`), validated with it
    (:func:`segment_balancer.plan.validation.validate_run`).

    ``validator``: the :class:`~segment_balancer.plan.validation_process.ValidationProcess` that
    validates the plan (one for many plans, as a simulation's runs); None: one started at once,
    importing Great Expectations while the plan is made, and ended on return.

    ``edits``: a ``whatif.WhatIf`` applied to a copy of ``snapshot`` first (recorded in the
    summary's ``whatif``). ``balancer_state``: the previous plan's ``balancer_state.json`` the run
    starts from (:func:`segment_balancer.planner.balancer_state.give_previous`; None: hit counts
    start at 1). Returns the plan's ``summary.json``. Raises ``SnapshotError`` (bad
    input), ``WhatIfError`` (edits that do not fit the snapshot) or ``PlanValidationError``
    (nothing published, an earlier plan at ``out`` untouched).
    """
    gate = validator or validation_process.ValidationProcess()
    own_work = work is None
    work = Path(work or tempfile.mkdtemp(prefix="segment_balancer-work-")).absolute()
    try:
        make_plan(spark, snapshot, work, overrides, edits, balancer_state, coordinator, compare)
        logging.getLogger("segment_balancer.plan").info("validating the plan (Great Expectations)")
        gate.validate(work / "plan", work)
        publish_plan(work / "plan", out)
        return json.loads((Path(out) / "summary.json").read_text())
    finally:
        if validator is None:
            gate.close()
        if own_work:
            shutil.rmtree(work, ignore_errors=True)


def make_plan(
    spark,
    snapshot: Path,
    work: Path,
    overrides: dict | None = None,
    edits=None,
    balancer_state: Path | None = None,
    coordinator: str | None = None,
    compare: bool = False,
) -> Path:
    """:func:`run_plan` up to the gate: every application of the run in ``work`` (absolute), the
    plan left unvalidated in ``WORK/plan``, which it returns. The arguments and errors are
    :func:`run_plan`'s (``PlanValidationError`` aside). With ``compare``, a run whose task
    functions run in Spark and that is not too large (``alongside_fits``) starts the other
    coordinator's applications right after ``prepare``, beside its own
    (:func:`segment_balancer.spark.apps.compare_alongside`); should the run's own fail, those are
    stopped (their running Spark jobs interrupted, no other started) and waited for (on Ctrl+C,
    not waited for: the session's end ends them)."""
    work = Path(work).absolute()
    log = logging.getLogger("segment_balancer.plan")
    if coordinator is not None:
        overrides = {**(overrides or {}), "coordinator": coordinator}
    if edits is not None:
        snapshot, overrides = apply_to_run(snapshot, work, edits, overrides)
    coordinator = load_config(snapshot, overrides).coordinator
    give_previous(balancer_state, work)
    if compare:
        request_compare(work)
    xcom = None
    try:
        for name in [*named(coordinator).run_apps, COMPARE_APP]:
            log.info("running %s", name)
            xcom = run_app(spark, name, snapshot, work, xcom, overrides)
            if name == STAGE0_APPS[-1] and compare and alongside_fits(snapshot, work):
                log.info("running the other coordinator's applications (compared) beside the run's own")
                compare_alongside(spark, snapshot, work, overrides)
    except Exception:
        abandon_alongside(work)
        raise
    except BaseException:  # Ctrl+C: the session's end (the CLI's) ends the compared plan's jobs
        abandon_alongside(work, wait=False)
        raise
    abandon_alongside(work)  # a compared plan no application waited for
    place_compared(work / "plan", work)
    return work / "plan"
