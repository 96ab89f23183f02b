"""``advise``: which Coordinator config to set (``docs/ADVISOR.md``).

From a snapshot (what-if edits applied to a copy first), stage 0 once (``used_segments``,
``prepare``), then every candidate config's runs of Druid's own Coordinator as one Spark task each
(``spark.advise``), measured and ranked (``planner.advisor``); beside them, the same runs planned
by #7458 (``tools.simulate``, each run a plan of its own). Writes ``OUT/advice.json``
(:data:`ADVICE_FILE`) and ``OUT/report.html``; the work directory and #7458's runs stay in
``OUT/work/`` and ``OUT/issue7458/``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import WriteError, replace_dir, write_json_atomic
from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.plan.advice_report import write_advice_report
from segment_balancer.plan.layout import ADVICE_FILE
from segment_balancer.planner import advisor
from segment_balancer.planner.coordinators import DRUID, ISSUE7458, STAGE0_APPS
from segment_balancer.planner.summary import read_plan_summary
from segment_balancer.spark.advise import simulate_candidates
from segment_balancer.spark.apps import read_overrides, run_app, small_run
from segment_balancer.spark.druid_plan import given_config, run_config
from segment_balancer.spark.session import driver_tasks, get_session
from segment_balancer.tools.simulate import simulate
from segment_balancer.tools.whatif import WhatIf, apply_to_run, apply_what_if, check_historicals

log = logging.getLogger(__name__)

ADVICE_VERSION = 1
DEFAULT_RUNS = 10
"""Runs simulated per candidate unless ``--runs`` says."""


def advise(
    spark,
    snapshot: Path,
    out: Path,
    *,
    runs: int = DEFAULT_RUNS,
    overrides: dict | None = None,
    candidates_file: Path | None = None,
    edits: WhatIf | None = None,
    weights: Mapping[str, float] | None = None,
    seed: int = 0,
    with_issue7458: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    validator=None,
    work: Path | None = None,
    restart: Sequence[str] = (),
) -> dict[str, Any]:
    """Advise on ``snapshot``: returns the ``advice.json`` object written to ``out`` (module
    docstring). ``runs``: runs per candidate (at least 1); ``overrides``: config overrides of the
    snapshot's (Druid's key names), the base every candidate changes; ``candidates_file``: the
    candidates (``planner.advisor.candidates_from_file``; default: the grid of
    ``planner.advisor.default_candidates``); ``weights``: of the recommendation
    (``planner.advisor.DEFAULT_WEIGHTS``); ``with_issue7458``: also the #7458 runs;
    ``progress(what, done, total)``: ``what`` ``candidates`` (runs done of every candidate's) or
    ``issue7458`` (runs planned); ``validator``: the ``ValidationProcess`` #7458's plans are checked
    by; ``work``: the work directory of stage 0 and the candidates (default ``out/work``; replaced);
    ``restart``: historicals restarted in a rolling restart, away for run 1 and back after it (for
    #7458: run 1 plans on a copy of the snapshot without them, applied to the cluster with them).

    Raises:
        InputError: bad candidates, weights, snapshot files or edits.
        ValueError: ``runs`` below 1.
    """
    if runs < 1:
        raise ValueError(f"runs: {runs}: expected at least 1")
    snapshot, out = Path(snapshot).absolute(), Path(out).absolute()
    work = out / "work" if work is None else Path(work).absolute()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if edits is not None:
        snapshot, overrides = apply_to_run(snapshot, work, edits, overrides)
    druid_overrides = {**(overrides or {}), "coordinator": DRUID.name}
    check_historicals(snapshot, {"restart": restart})
    config = run_config(snapshot, druid_overrides)
    current = {k: config[k] for k in advisor.TUNED_KEYS}
    base = {**given_config(snapshot, overrides), "druidVersion": config.release}
    candidates = (
        advisor.default_candidates(current, config.is_38)
        if candidates_file is None
        else advisor.candidates_from_file(candidates_file, current)
    )
    xcom = None
    for name in STAGE0_APPS:
        log.info("running %s", name)
        xcom = run_app(spark, name, snapshot, work, xcom, druid_overrides)
    now_ms = int(json.loads((work / "prepared" / "meta.json").read_text())["now_ms"])
    total = runs * len(candidates)
    log.info("simulating %d candidates x %d runs of Druid %s's Coordinator", len(candidates), runs, config.release)
    with driver_tasks(small_run(snapshot)):
        rows = simulate_candidates(
            spark,
            work,
            snapshot,
            base,
            candidates,
            runs=runs,
            now_ms=now_ms,
            seed=seed,
            restart=restart,
            progress=None if progress is None else (lambda done: progress("candidates", done, total)),
        )
    front = advisor.pareto_front(rows, runs)
    for row, on in zip(rows, front):
        row["pareto"] = on
    chosen = advisor.recommend(rows, front, runs, weights)
    body, restart_keys = advisor.config_diff(current, rows[chosen]["config"])
    advice = {
        "version": ADVICE_VERSION,
        "snapshot": str(snapshot),
        "druid_release": config.release,
        "runs": runs,
        "seed": seed,
        "weights": dict(advisor.DEFAULT_WEIGHTS if weights is None else weights),
        "objectives": list(advisor.OBJECTIVES),
        "candidates": rows,
        "recommended": rows[chosen],
        "config_diff": body,
        "restart_keys": restart_keys,
        "restarted": list(restart),
        "issue7458": None,
    }
    if with_issue7458:
        log.info("planning the same %d runs with #7458", runs)
        advice["issue7458"] = issue7458_measures(
            spark, snapshot, out / "issue7458", runs, overrides, seed, validator, progress, restart
        )
    write_json_atomic(advice, out / ADVICE_FILE)
    write_advice_report(out)
    return advice


def issue7458_measures(
    spark,
    snapshot: Path,
    out: Path,
    runs: int,
    overrides: dict | None,
    seed: int,
    validator,
    progress: Callable[[str, int, int], None] | None = None,
    restart: Sequence[str] = (),
) -> dict[str, Any]:
    """The advisor's measures of ``runs`` runs planned by #7458 on ``snapshot``
    (``tools.simulate.simulate``: every plan applied as a cluster would, every load completed):
    ``runs_to_loaded`` from the status each run left (what the next run started from; the last run's
    once its operations succeeded; run 0: what run 1 started from),
    the spreads and fullest disk from ``runs.csv`` after each run (decommissioning historicals out
    of both); its peaks are after each run, not while its requests complete. Also ``runs``, one
    row per run as the candidates have them. ``restart``: run 1 plans on a copy of the snapshot
    without these historicals (away), applied to the cluster with them (back)."""
    if out.exists():
        shutil.rmtree(out)
    if progress is not None:
        progress("issue7458", 0, runs)

    def plan_on(run: int, current: Path, run_dir: Path) -> Path:
        if run != 1 or not restart:
            return current
        apply_what_if(current, WhatIf.parse((), tuple(restart), []), run_dir / "snapshot-restart")
        return run_dir / "snapshot-restart"

    frame = simulate(
        spark,
        snapshot,
        out,
        runs,
        {**(overrides or {}), "coordinator": ISSUE7458.name},
        seed=seed,
        validator=validator,
        plan_on=plan_on,
    )
    if progress is not None:
        progress("issue7458", runs, runs)
    return measures_of_runs(frame, [read_plan_summary(out / f"run-{r:03d}" / "plan") for r in frame["run"]])


def measures_of_runs(frame: pd.DataFrame, summaries: list) -> dict[str, Any]:
    """The advisor's measures of a simulation's ``runs.csv`` ``frame`` and its runs' plan
    ``summaries`` (``PlanSummary``, in run order)."""

    def not_loaded(status) -> tuple[int, int]:
        return status.unreplicated, sum(t.get("underreplicated", 0) for t in status.tiers.values())

    start = not_loaded(summaries[0].status_before)
    rows = [
        {
            "run": 0,
            "unavailable": start[0],
            "under_replicated": start[1],
            "moves": 0,
            "moved_bytes": 0,
        }
    ]
    # after run r: what run r + 1 started from; after the last, its plan's status once it succeeded
    afters = [s.status_before for s in summaries[1:]] + [summaries[-1].status_after]
    for r, status in zip(frame.to_dict("records"), afters):
        after = not_loaded(status)
        rows.append(
            {
                "run": int(r["run"]),
                "unavailable": after[0],
                "under_replicated": after[1],
                "moves": int(r["moves"]),
                "moved_bytes": int(r["moved_bytes"]),
                "max_minus_min_disk_pct": float(r["usage_max_minus_min"]),
                "max_minus_min_segments": int(r["segments_max_minus_min"]),
                "fullest_disk_pct": float(r["fullest_usage"]),
                "peak_fullest_disk_pct": float(r["fullest_usage"]),
            }
        )
    loaded = [x["run"] for x in rows if x["unavailable"] == 0 and x["under_replicated"] == 0]
    quiet = [x["run"] for x in rows[1:] if x["moves"] == 0]
    last, after = rows[-1], rows[1:]
    return {
        "name": "issue7458",
        "runs_to_loaded": loaded[0] if loaded else None,
        "runs_to_quiet": quiet[0] if quiet else None,
        "segments_moved": sum(x["moves"] for x in after),
        "bytes_moved": sum(x["moved_bytes"] for x in after),
        "max_minus_min_disk_pct": round(last["max_minus_min_disk_pct"], 3),
        "max_minus_min_segments": last["max_minus_min_segments"],
        "fullest_disk_pct": round(last["fullest_disk_pct"], 3),
        "peak_max_minus_min_disk_pct": round(max(x["max_minus_min_disk_pct"] for x in after), 3),
        "peak_max_minus_min_segments": max(x["max_minus_min_segments"] for x in after),
        "peak_fullest_disk_pct": round(max(x["peak_fullest_disk_pct"] for x in after), 3),
        "runs": rows,
    }


class AdviceRefused(InputError):
    """The advice of a DAG run refused its input (a snapshot, config or candidate it cannot take)."""


def advise_published(
    spark, snapshot: Path, work: Path, runs: int, out: Path, overrides: dict | None = None, seed: int = 0
) -> None:
    """The advice of a DAG run (the ``advise_runs`` param) on its ``snapshot`` into ``out`` (beside
    its published plan), written whole or not at all (``common.files.replace_dir``), with its work
    directory ``work`` (the run's, removed with it). Shared by ``spark_apps/advise.py`` and the
    DAG's Spark Connect task. Raises :class:`AdviceRefused` on bad input, leaving an earlier ``out``
    as it was."""
    snapshot, work, out = (Path(p).absolute() for p in (snapshot, work, out))
    try:
        replace_dir(out, lambda tmp: advise(spark, snapshot, tmp, runs=runs, overrides=overrides, seed=seed, work=work))
    except WriteError as exc:
        cause = exc.__cause__
        if isinstance(cause, (SnapshotError, InputError, ValueError)):
            raise AdviceRefused(f"advice refused: {cause}") from exc
        raise


def main(argv=None) -> int:
    """``spark-submit spark_apps/advise.py --snapshot S --work W --runs N --out O [--config C]
    [--seed N]``: :func:`advise_published`. Returns 0; exits with code 2 on bad input, leaving an
    earlier ``O`` as it was."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="advise", description="segment_balancer advice of a DAG run")
    parser.add_argument("--snapshot", required=True, type=Path)
    parser.add_argument("--work", required=True, type=Path, help="the advice's work directory")
    parser.add_argument("--runs", required=True, type=int)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--config", type=Path, help="config overrides JSON")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    spark = get_session("segment_balancer.tools.advise")
    try:
        advise_published(spark, args.snapshot, args.work, args.runs, args.out, read_overrides(args.config), args.seed)
    except AdviceRefused as exc:
        log.error("%s", exc)
        print(str(exc), file=sys.stderr)
        spark.stop()
        raise SystemExit(2) from exc
    log.info("advice of %d runs written to %s", args.runs, args.out)
    spark.stop()
    return 0
