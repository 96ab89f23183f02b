"""Command line: the same applications as the DAG, in one Spark session.

``python -m segment_balancer plan --snapshot DIR --out DIR [--coordinator issue7458|druid] [--compare]
[--config FILE.json] [--work DIR] [--balancer-state FILE] [--decommission SERVER] [--remove SERVER]
[--add TIER:COUNT:MAX_SIZE_BYTES]``
``python -m segment_balancer explain --plan PLAN_DIR --segment ID [--json]``
``python -m segment_balancer explain --snapshot DIR --segment ID [--tier T] [--config FILE.json]``
``python -m segment_balancer summary PLAN_DIR`` (or an advice directory)
``python -m segment_balancer report DIR`` (a plan directory, a simulation directory or an advice directory)
``python -m segment_balancer plans PLANS_ROOT [--cluster NAME] [--json]``
``python -m segment_balancer simulate --snapshot DIR --runs N --out DIR [--config FILE.json] [--loads-per-run N]
[--load-failure-rate P] [--seed N] [--coordinator issue7458|druid] [--compare-margins P,P,… | --compare-coordinators]``
``python -m segment_balancer advise --snapshot DIR --out DIR [--runs N] [--candidates FILE.json] [--config FILE.json]
[--weights NAME=W,…] [--seed N] [--no-issue7458] [--restart SERVER] [--decommission SERVER] [--remove SERVER]
[--add TIER:COUNT:MAX_SIZE_BYTES]``
``python -m segment_balancer capture --coordinator URL --broker URL --out DIR [--cluster NAME] [--user USER]``
``python -m segment_balancer generate OUT_DIR [--seed N] [--segments N] [--servers N] [--druid-version [V]]``
``python -m segment_balancer import-sql SQL_FILE OUT_DIR``

Exit codes: 0 success; 2 bad input (``common.errors.InputError``: ``input refused: …``); 1 anything else:
``error: …`` for the machine's or a service's failure or a plan the validation gate refused,
``internal error: …`` (and the traceback) for a bug.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import hashlib
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, fields
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from segment_balancer.common.cache import cache_root, keep_newest
from segment_balancer.common.errors import INPUT_REFUSED, InputError
from segment_balancer.common.files import WriteError, replace_dir
from segment_balancer.druid.importer import import_druid_segments_sql
from segment_balancer.druid.releases import NEWEST_RELEASE
from segment_balancer.plan import validation_process
from segment_balancer.plan.advice_report import read_advice, write_advice_report
from segment_balancer.plan.compare import COMPARISON_FILE
from segment_balancer.plan.explain import explain_plan, explain_segment, render_explain, render_snapshot_explain
from segment_balancer.plan.history import headline, plan_history, signed_change
from segment_balancer.plan.layout import ADVICE_FILE
from segment_balancer.plan.report import coordinator_summary, margin_summary, rebuild
from segment_balancer.plan.validation import PlanValidationError
from segment_balancer.planner import advisor, config_keys
from segment_balancer.planner.config import check_override_keys
from segment_balancer.planner.coordinators import COORDINATOR_NAMES, DEFAULT_COORDINATOR, coordinator
from segment_balancer.planner.small_inputs import read_small_inputs
from segment_balancer.planner.summary import read_plan_summary
from segment_balancer.spark import session as spark_session
from segment_balancer.spark.apps import read_overrides
from segment_balancer.tools.advise import DEFAULT_RUNS, advise
from segment_balancer.tools.capture import CaptureError, DruidEndpoint, capture_to
from segment_balancer.tools.pipeline import run_plan
from segment_balancer.tools.sample import generate_snapshot
from segment_balancer.tools.simulate import add_simulate_arguments, simulate, simulate_coordinators, simulate_margins
from segment_balancer.tools.terminal import print_table
from segment_balancer.tools.whatif import WhatIf, parse_add

# The Spark applications' modules (``spark.prepare``, ``spark.used_segments``: pyspark, the snapshot
# readers) are imported in the functions that use them, so that ``--help`` and the commands without a
# snapshot load none of them. ``spark_session`` and ``validation_process`` are used through their
# modules: ``local_session`` and ``ValidationProcess`` are looked up when a command runs, so that a
# caller (a test session sharing one validation process) may replace them after this import.

EXPLAIN_CACHE_KEPT = 4
"""Snapshots whose prepared tables ``explain --snapshot`` keeps (the newest used), so that asking
about another segment of the same snapshot needs no Spark."""


def explain_cache_root() -> Path:
    """Where ``explain --snapshot`` keeps prepared tables: ``explain/`` of the machine's cache
    (:func:`segment_balancer.common.cache.cache_root`)."""
    return cache_root() / "explain"


def _explain_key(snapshot: Path, overrides: dict | None) -> str:
    """The cache entry of a snapshot as it is now (its files' names, sizes and times) and overrides."""
    files = sorted(
        (str(f.relative_to(snapshot)), f.stat().st_size, f.stat().st_mtime_ns)
        for f in snapshot.rglob("*")
        if f.is_file()
    )
    text = json.dumps([str(snapshot.resolve()), files, overrides or {}], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def explain(
    snapshot: Path, segment_id: str, tier: str | None = None, overrides: dict | None = None, remote=None
) -> dict:
    """Every candidate server's start-of-run placement cost, rank, top-``B`` membership and, when
    ineligible, why; per tier where the segment has a target or a replica (or only ``tier``).

    The snapshot's ``used_segments`` and ``prepare`` run in Spark once and their tables are kept
    (:func:`explain_cache_root`, the :data:`EXPLAIN_CACHE_KEPT` newest snapshots); the answer is
    read from them with pyarrow, so a second question about the same snapshot starts no Spark."""
    root = explain_cache_root()
    work = root / _explain_key(snapshot, overrides)
    if not (work / "prepared" / "meta.json").is_file():
        from segment_balancer.spark.prepare import prepare
        from segment_balancer.spark.used_segments import used_segments

        logging.getLogger(__name__).info(
            "preparing %s once (kept in %s: later questions about it need no Spark)", snapshot, root
        )
        spark = spark_session.local_session("segment_balancer.explain", remote=remote)
        try:

            def fill(tmp: Path) -> None:
                used_segments(spark, snapshot, tmp)
                prepare(spark, snapshot, tmp, overrides)

            root.mkdir(parents=True, exist_ok=True)
            replace_dir(work, fill, durable=False)
        finally:
            spark_session.release(spark)
    os.utime(work)
    keep_newest(root, EXPLAIN_CACHE_KEPT)
    try:
        return explain_segment(work, segment_id, tier)
    except KeyError as exc:
        raise InputError(f"--segment {segment_id}: not in the snapshot {snapshot}") from exc


def print_summary(plan: Path) -> None:
    """A short human summary of a published plan (rich table). Raises ``InputError`` when its
    ``summary.json`` is missing or not a plan summary."""
    summary = read_plan_summary(plan)
    console = Console()
    console.print(f"[bold]Plan[/bold] {plan}  snapshot {summary.snapshot_id}")
    edits = summary.whatif
    if edits:
        parts = [
            f"decommission {', '.join(edits.decommission)}" if edits.decommission else "",
            f"remove {', '.join(edits.remove)}" if edits.remove else "",
            f"add {', '.join(edits.added)}" if edits.added else "",
        ]
        console.print(f"[bold]what-if[/bold] {'; '.join(p for p in parts if p)} (on a copy of {edits.snapshot})")
    planner = coordinator(summary.coordinator)
    if planner.headline:
        release = summary.druid_run.release if summary.druid_run else None
        console.print(f"[bold]coordinator[/bold] {planner.name}: {planner.headline.format(release=release)}")
    cancels = summary.operations - summary.loads - summary.drops
    console.print(
        f"{summary.operations} operations: {summary.loads} loads, {summary.drops} drops, "
        f"{summary.moves} of the drops wait for a load (moves and callbacks)"
        + (f", {cancels} queued requests cancelled" if cancels else "")
    )
    rows = [
        [planner.stage_label(row.stage), str(row.tier), row.action, f"{row.count:,}"]
        for row in summary.by_stage_tier_action
    ]
    print_table(console, [planner.step_word, "tier", "action", "count"], rows, numeric_from=3)
    before, after = summary.status_before, summary.status_after
    console.print(f"unreplicated segments: {before.unreplicated} before, {after.unreplicated} once the plan succeeds")
    if summary.undone is not None:
        console.print(f"segments with no replica anywhere once the plan succeeds: {summary.undone.unavailable:,}")
        rows = [
            [
                tier,
                f"{t.underreplicated:,} ({t.missing_replicas:,})",
                f"{t.on_decommissioning:,}",
                f"{t.spread_segments:,}",
                "; ".join(f"{cause}: {n:,}" for cause, n in t.stopped_by.items()) or "-",
                "-" if t.runs_to_finish is None else f"{t.runs_to_finish:,}",
            ]
            for tier, t in sorted(summary.undone.tiers.items())
        ]
        headers = [
            "tier",
            "under-replicated (replicas)",
            "on decommissioning",
            "max − min",
            "stopped by",
            "runs to finish",
        ]
        print_table(console, headers, rows, title="left undone once the plan succeeds", numeric_from=1)
    deferred = summary.availability
    if deferred.deferred_drops:
        console.print(
            f"{deferred.deferred_drops} drops of {deferred.deferred_segments} segments wait for a later run: "
            "dropping now would leave fewer loaded replicas than required"
        )
    waiting = summary.overshadowed_waiting
    if waiting.segments:
        per = ", ".join(f"{ds} {v.segments}" for ds, v in waiting.per_datasource.items())
        console.print(
            f"{waiting.segments} overshadowed segments keep their replicas until what overshadows them is "
            f"served ({per})"
        )
    print_comparison(console, plan)
    unlisted = summary.unlisted
    if unlisted.segments:
        console.print(
            f"{unlisted.segments} segments not in segments.jsonl (unused): "
            f"{unlisted.served_replicas} served replicas dropped"
        )
    for alert in summary.alerts:
        console.print(f"[yellow]alert[/yellow] {alert.kind}: {alert.message}")


def _bytes(n: int) -> str:
    """``n`` bytes in the largest decimal unit that keeps a number of at least 1 (``446 MB``)."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def print_comparison(console, plan: Path) -> None:
    """The plan's ``comparison.json`` (when it has one) as a rich table: per tier, each coordinator's
    loads, moves, bytes moved, under-replicated after, max − min segments and disk %, the fullest
    disk and the total cost."""
    path = Path(plan) / COMPARISON_FILE
    if not path.exists():
        return
    plans = json.loads(path.read_text())["plans"]
    rows = []
    for tier in sorted({t for p in plans for t in p["tiers"]}):
        for p in plans:
            m = p["tiers"].get(tier)
            if m is not None:
                rows.append(
                    [
                        f"{tier} · {p['coordinator']}",
                        f"{m['loads']:,}",
                        f"{m['moves']:,}",
                        _bytes(m["bytes_moved"]),
                        f"{m['underreplicated']:,}",
                        f"{m.get('left_on_decommissioning', 0):,}",
                        f"{m['segments_max_minus_min']:,}",
                        f"{m['disk_pct_max_minus_min']:.2f}",
                        f"{m['fullest_disk_pct']:.2f}",
                        f"{m['total_cost']:.3g}",
                    ]
                )
    headers = [
        "tier · coordinator",
        "loads",
        "moves",
        "bytes moved",
        "under-rep.",
        "on decomm.",
        "Δ segments",
        "Δ disk %",
        "fullest %",
        "cost",
    ]
    title = (
        "the coordinators side by side, once each plan succeeded (on decomm.: segments left on decommissioning "
        "historicals; Δ: max − min over the others)"
    )
    print_table(console, headers, rows, title=title)
    console.print("unavailable after: " + ", ".join(f"{p['coordinator']} {p['unavailable']}" for p in plans))


def print_plans(entries, root: Path) -> None:
    """The plan history (:func:`segment_balancer.plan.history.plan_history`) as a rich table: per plan its
    snapshot time, cluster, name, operations, unreplicated and underreplicated segments once it
    succeeded, max − min segments per tier, each with the change from the previous plan."""
    console = Console()
    if not entries:
        console.print(f"no plans published yet under {root}")
        return
    rows = []
    for e in entries:
        n, d = e.numbers, e.diff

        def cell(key: str, n=n, d=d) -> str:
            return f"{n[key]:,}" + (f" ({signed_change(d[key])})" if d else "")

        spread = ", ".join(
            f"{t} {v}"
            + (f" ({signed_change(d['max_minus_min_after'][t])})" if t in d.get("max_minus_min_after", {}) else "")
            for t, v in sorted(n["max_minus_min_after"].items())
        )
        rows.append(
            [
                e.name + (" (what-if)" if e.whatif else ""),
                e.snapshot_time,
                e.cluster,
                cell("operations"),
                cell("unreplicated_after"),
                cell("underreplicated_after"),
                spread,
                e.previous or "-",
            ]
        )
    headers = [
        "plan",
        "snapshot time",
        "cluster",
        "operations",
        "unreplicated after",
        "underreplicated after",
        "max − min after",
        "compared with",
    ]
    print_table(console, headers, rows, numeric_from=3)


def _margin_list(text: str) -> list[float]:
    """``--compare-margins``: comma-separated percents, e.g. ``0,1,2,5,10``."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated percents such as 0,1,2,5,10, got {text!r}"
        ) from None


def print_margins(table) -> None:
    """Per margin of a ``margins.csv`` frame: its churn and spread (rich table,
    :func:`segment_balancer.plan.report.margin_summary`)."""
    rows = [
        [
            f"{m['margin']:g}",
            f"{m['moves']:,}",
            f"{m['bytes']:,}",
            str(m["quiet_from"] or "-"),
            str(m["segments_spread"]),
            f"{m['total_cost']:.6g}",
        ]
        for m in margin_summary(table)
    ]
    headers = ["margin %", "balancing moves", "bytes moved", "no move from run", "max − min segments", "total cost"]
    print_table(Console(), headers, rows)


def print_coordinators(table) -> None:
    """Per coordinator of a ``coordinators.csv`` frame: when it was fully loaded, what it moved and
    where it left the disks (rich table, :func:`segment_balancer.plan.report.coordinator_summary`)."""
    rows = [
        [
            c["coordinator"],
            str(c["loaded_from"] or "-"),
            f"{c['moves']:,}",
            f"{c['moved_bytes'] / 2**30:,.1f}",
            f"{c['usage_spread']:.1f}",
            f"{c['fullest_usage']:.1f}",
        ]
        for c in coordinator_summary(table)
    ]
    headers = ["coordinator", "loaded from run", "moves", "GiB moved", "usage spread", "fullest %"]
    print_table(Console(), headers, rows)


def print_runs(table) -> None:
    """The ``runs.csv`` table of a simulation (:func:`~segment_balancer.tools.terminal.print_table`;
    ``unrepl.``/``underrepl.``: unreplicated/underreplicated segments at the run's start)."""
    columns = {
        "run": "run",
        "loads": "loads",
        "drops": "drops",
        "moves": "moves",
        "balancing_moves": "balancing moves",
        "unreplicated_before": "unrepl. before",
        "underreplicated_before": "underrepl. before",
        "loads_failed": "loads failed",
        "loads_still_queued": "loads still queued",
        "segments_max_minus_min": "max − min segments",
        "stable": "stable",
    }
    rows = [
        [f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in row]
        for row in table[list(columns)].itertuples(index=False)
    ]
    print_table(Console(), list(columns.values()), rows)


def print_advice(advice: dict) -> None:
    """The candidates of an ``advice.json`` (the recommended one first, ``●`` on the Pareto front,
    #7458 last), then the recommendation and its config to POST."""
    console = Console()
    columns = {
        "runs_to_loaded": "loaded from run",
        "runs_to_quiet": "quiet from run",
        "segments_moved": "moved",
        "bytes_moved": "bytes moved",
        "max_minus_min_disk_pct": "max − min disk %",
        "fullest_disk_pct": "fullest disk %",
        "peak_fullest_disk_pct": "peak disk %",
    }
    recommended = advice["recommended"]["name"]
    rows = sorted(advice["candidates"], key=lambda r: (r["name"] != recommended, not r["pareto"]))
    if advice.get("issue7458"):
        rows = [*rows, {**advice["issue7458"], "name": "#7458", "pareto": False}]

    def cell(v) -> str:
        return "—" if v is None else f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{v:g}"

    table = [
        [
            ("● " if r["pareto"] else "") + r["name"] + (" (now)" if r.get("current") else ""),
            *map(cell, map(r.get, columns)),
        ]
        for r in rows
    ]
    console.print(
        f"[bold]Advice[/bold] {advice['snapshot']}: {len(advice['candidates'])} configs of Druid "
        f"{advice['druid_release']}'s Coordinator, {advice['runs']} runs each (● the Pareto front)"
    )
    print_table(console, ["candidate", *columns.values()], table)
    if advice["recommended"].get("current"):
        console.print(f"[bold]recommended[/bold]: the snapshot's own config ({recommended}); nothing to change")
        return
    console.print(f"[bold]recommended[/bold]: {recommended}")
    if advice["config_diff"]:
        console.print("POST /druid/coordinator/v1/config " + json.dumps(advice["config_diff"]), soft_wrap=True)
    for key, value in advice["restart_keys"].items():
        console.print(f"runtime.properties (restart the Coordinator): {key}={value}", soft_wrap=True)


REMOTE_HELP = (
    "the Spark Connect server to run on (sc://host:port); default $SPARK_REMOTE, else an in-process "
    "Spark on $SPARK_MASTER or local[*]"
)


def _absolute(path: Path | None) -> Path | None:
    """``path`` made absolute (None stays None)."""
    return None if path is None else path.absolute()


def _checked_overrides(config: Path | None, snapshot: Path) -> dict | None:
    """The ``--config`` overrides, read and checked, with the snapshot's small files (servers, queues,
    rules, config, meta) loaded: all refused before any JVM. Raises ``InputError`` naming the file
    (an unknown key, a bad snapshot file)."""
    overrides = read_overrides(config)
    check_override_keys(overrides, f"--config {config}")
    read_small_inputs(snapshot, overrides, f"--config {config}")
    return overrides


def request_from(cls, args: argparse.Namespace, **given):
    """The request dataclass ``cls`` from the parsed ``args``: each field the option of its name,
    unless ``given`` names it (an option stored under another name, or converted)."""
    return cls(**{f.name: given[f.name] if f.name in given else getattr(args, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class PlanRequest:
    """The arguments of ``plan``; the what-if edits as given (``--add``: ``TIER:COUNT:MAX_SIZE_BYTES``)."""

    snapshot: Path
    out: Path
    config: Path | None
    work: Path | None
    remote: str | None
    coordinator: str | None
    compare: bool
    balancer_state: Path | None
    decommission: tuple[str, ...]
    remove: tuple[str, ...]
    add: tuple[str, ...]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PlanRequest:
        return request_from(
            cls, args, decommission=tuple(args.decommission), remove=tuple(args.remove), add=tuple(args.add)
        )


def plan_command(request: PlanRequest, gate) -> None:
    """``plan``: compute, validate (``gate``, a ``ValidationProcess``) and publish a plan, then print
    its summary. Raises ``InputError`` for bad overrides, snapshot files or what-if edits;
    ``SparkUnreachable``, ``PlanValidationError``, ``WriteError`` for what the pipeline refuses."""
    overrides = _checked_overrides(request.config, request.snapshot)
    # Spark (a Connect server above all) resolves paths from its own working directory.
    request = dataclasses.replace(
        request,
        snapshot=request.snapshot.absolute(),
        out=request.out.absolute(),
        work=_absolute(request.work),
        balancer_state=_absolute(request.balancer_state),
    )
    # started on first use: a run whose applications all run on the driver starts no JVM
    spark = spark_session.lazy_local_session("segment_balancer.plan", remote=request.remote)
    try:
        edits = WhatIf.parse(request.decommission, request.remove, [parse_add(a) for a in request.add])
        run_plan(
            spark,
            request.snapshot,
            request.out,
            overrides,
            request.work,
            edits,
            request.balancer_state,
            request.coordinator,
            request.compare,
            validator=gate,
        )
        print_summary(request.out)
        print_written("plan", request.out)
    finally:
        spark_session.release(spark)  # a Connect session: released, its Python daemon ended


@dataclass(frozen=True)
class SimulateRequest:
    """The arguments of ``simulate``."""

    snapshot: Path
    runs: int
    out: Path
    config: Path | None
    loads_per_run: int | None
    load_failure_rate: float
    seed: int
    coordinator: str | None
    compare_coordinators: bool
    compare_margins: tuple[float, ...] | None
    remote: str | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SimulateRequest:
        return request_from(
            cls, args, compare_margins=None if args.compare_margins is None else tuple(args.compare_margins)
        )


def simulate_command(request: SimulateRequest, gate) -> None:
    """``simulate``: plan and apply run after run (each plan validated by ``gate``, a
    ``ValidationProcess``), with the other coordinator or each margin too when asked, then print the
    table of the runs, coordinators or margins. Raises ``InputError`` for bad overrides, snapshot
    files or ``--compare-margins`` with a coordinator other than the default; ``SparkUnreachable``,
    ``PlanValidationError``, ``WriteError`` for what the simulation refuses."""
    overrides = _checked_overrides(request.config, request.snapshot)
    # Spark (a Connect server above all) resolves paths from its own working directory.
    request = dataclasses.replace(request, snapshot=request.snapshot.absolute(), out=request.out.absolute())
    # started on first use: a run whose applications all run on the driver starts no JVM
    spark = spark_session.lazy_local_session("segment_balancer.simulate", remote=request.remote)
    try:
        options = {
            "loads_per_run": request.loads_per_run,
            "load_failure_rate": request.load_failure_rate,
            "seed": request.seed,
            "coordinator": request.coordinator,
            "validator": gate,
        }
        if request.compare_margins and request.coordinator not in (None, DEFAULT_COORDINATOR):
            raise InputError(
                f"--compare-margins compares margins of {DEFAULT_COORDINATOR}'s balancing, not {request.coordinator}'s"
            )
        snapshot, out, runs = request.snapshot, request.out, request.runs
        if request.compare_margins:
            table = simulate_margins(spark, snapshot, out, runs, list(request.compare_margins), overrides, **options)
            print_margins(table)
        elif request.compare_coordinators:
            print_coordinators(simulate_coordinators(spark, snapshot, out, runs, overrides, **options))
        else:
            print_runs(simulate(spark, snapshot, out, runs, overrides, **options))
        print_written("simulation", out)
    finally:
        spark_session.release(spark)  # a Connect session: released, its Python daemon ended


@dataclass(frozen=True)
class AdviseRequest:
    """The arguments of ``advise``; the what-if edits as given, ``weights`` parsed."""

    snapshot: Path
    out: Path
    runs: int
    candidates: Path | None
    config: Path | None
    weights: dict | None
    seed: int
    no_issue7458: bool
    remote: str | None
    restart: tuple[str, ...]
    decommission: tuple[str, ...]
    remove: tuple[str, ...]
    add: tuple[str, ...]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AdviseRequest:
        return request_from(
            cls,
            args,
            restart=tuple(args.restart),
            decommission=tuple(args.decommission),
            remove=tuple(args.remove),
            add=tuple(args.add),
        )


def advise_command(request: AdviseRequest, gate) -> None:
    """``advise``: simulate Druid's Coordinator under candidate configs (a progress bar while the
    candidates and #7458's runs go), write ``advice.json`` and its report, print the candidates and
    the recommendation. Raises ``InputError`` for bad overrides, candidates, weights, snapshot files or
    what-if edits; ``SparkUnreachable``, ``PlanValidationError``, ``WriteError`` as ``simulate``."""
    overrides = _checked_overrides(request.config, request.snapshot)
    request = dataclasses.replace(request, snapshot=request.snapshot.absolute(), out=request.out.absolute())
    spark = spark_session.lazy_local_session("segment_balancer.advise", remote=request.remote)
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    )
    tasks: dict[str, int] = {}

    def progress(what: str, done: int, total: int) -> None:
        if what not in tasks:
            label = "candidate runs (Druid)" if what == "candidates" else "#7458 runs"
            tasks[what] = bar.add_task(label, total=total)
        bar.update(tasks[what], completed=done, total=total)

    try:
        edits = WhatIf.parse(request.decommission, request.remove, [parse_add(a) for a in request.add])
        with bar:
            result = advise(
                spark,
                request.snapshot,
                request.out,
                runs=request.runs,
                overrides=overrides,
                candidates_file=request.candidates,
                edits=edits,
                weights=request.weights,
                seed=request.seed,
                with_issue7458=not request.no_issue7458,
                progress=progress,
                validator=gate,
                restart=request.restart,
            )
        print_advice(result)
        print_written("advice", request.out)
    finally:
        spark_session.release(spark)


def _weights(text: str) -> dict[str, float]:
    """``--weights NAME=W,…`` as a dict (argparse type). Raises ``ArgumentTypeError``."""
    out = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r}: expected NAME=WEIGHT, a number") from None
    return out


@dataclass(frozen=True)
class ExplainRequest:
    """The arguments of ``explain``: ``plan`` or ``snapshot`` (exactly one)."""

    segment: str
    plan: Path | None
    snapshot: Path | None
    tier: str | None
    config: Path | None
    as_json: bool
    remote: str | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExplainRequest:
        return request_from(cls, args, as_json=args.json)


def explain_command(request: ExplainRequest) -> None:
    """``explain``: print what a plan did with the segment (``--plan``) or how every server ranks for
    it at the start of a run (``--snapshot``, :func:`explain`), as text or JSON. Raises
    ``InputError`` for a segment not in the plan or snapshot, bad overrides or snapshot files."""
    if request.plan is not None:
        answer = explain_plan(request.plan, request.segment)
        print(json.dumps(answer, indent=2) if request.as_json else render_explain(answer))
        return
    overrides = _checked_overrides(request.config, request.snapshot)
    answer = explain(request.snapshot.absolute(), request.segment, request.tier, overrides, request.remote)
    print(json.dumps(answer, indent=2) if request.as_json else render_snapshot_explain(answer))


@dataclass(frozen=True)
class CaptureRequest:
    """The arguments of ``capture`` (the password is read from ``$DRUID_PASSWORD`` when it runs)."""

    coordinator: str
    broker: str
    out: Path
    cluster: str
    user: str | None
    timeout: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CaptureRequest:
        return request_from(cls, args)


def capture_command(request: CaptureRequest) -> None:
    """``capture``: write a snapshot of a live Druid cluster into ``out`` (whole or not at all),
    with basic auth when ``user`` is given. Raises ``CaptureError`` for a cluster that does not answer
    or answers nonsense, an ``out`` that exists, a bad cluster name or timeout."""
    auth = (request.user, os.environ.get("DRUID_PASSWORD", "")) if request.user else None
    out = capture_to(
        DruidEndpoint(request.coordinator, auth),
        DruidEndpoint(request.broker, auth),
        request.out,
        request.cluster,
        timeout_s=request.timeout,
    )
    print(f"snapshot captured into {out}")


@dataclass(frozen=True)
class SummaryRequest:
    """The arguments of ``summary``."""

    plans: tuple[Path, ...]
    brief: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SummaryRequest:
        return request_from(cls, args, plans=tuple(args.plan))


def summary_command(request: SummaryRequest) -> None:
    """``summary``: a few lines per plan (``--brief``, :func:`print_brief`) or the full summary of one
    (:func:`print_summary`). Raises ``InputError`` for several plans without ``--brief`` or a
    missing or bad ``summary.json``."""
    if request.brief:
        for plan in request.plans:
            print_brief(plan)
        return
    if len(request.plans) > 1:
        raise InputError("summary takes one plan directory (several with --brief)")
    if (request.plans[0] / ADVICE_FILE).is_file():
        print_advice(read_advice(request.plans[0]))
        return
    print_summary(request.plans[0])


@dataclass(frozen=True)
class ReportRequest:
    """The arguments of ``report``."""

    directory: Path

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportRequest:
        return request_from(cls, args, directory=args.dir)


def report_command(request: ReportRequest) -> None:
    """``report``: rebuild ``report.html`` of a plan or of a simulation and its runs
    (:func:`segment_balancer.plan.report.rebuild`), printing each one written. Raises ``ReportError``
    (an ``InputError``) for a directory that is neither."""
    if (request.directory / ADVICE_FILE).is_file():
        print(f"report written to {write_advice_report(request.directory)}")
        return
    for path in rebuild(request.directory):
        print(f"report written to {path}")


@dataclass(frozen=True)
class PlansRequest:
    """The arguments of ``plans``."""

    root: Path
    cluster: str | None
    as_json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PlansRequest:
        return request_from(cls, args, as_json=args.json)


def plans_command(request: PlansRequest) -> None:
    """``plans``: print the plan history under ``root`` (:func:`segment_balancer.plan.history.plan_history`),
    as a table (:func:`print_plans`) or JSON."""
    entries = plan_history(request.root, request.cluster)
    if request.as_json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))
    else:
        print_plans(entries, request.root)


@dataclass(frozen=True)
class GenerateRequest:
    """The arguments of ``generate``."""

    out: Path
    seed: int
    segments: int
    servers: int | None
    druid_version: str | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> GenerateRequest:
        return request_from(cls, args)


def generate_command(request: GenerateRequest) -> None:
    """``generate``: write the seeded sample snapshot (:func:`segment_balancer.tools.sample.generate_snapshot`)
    and print what it holds as JSON. Raises ``InputError`` for counts or a Druid version it refuses."""
    print(
        json.dumps(
            generate_snapshot(
                request.out,
                seed=request.seed,
                n_segments=request.segments,
                n_servers=request.servers,
                druid_version=request.druid_version,
            ),
            indent=2,
        )
    )


@dataclass(frozen=True)
class ImportSqlRequest:
    """The arguments of ``import-sql``."""

    sql: Path
    out: Path

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ImportSqlRequest:
        return request_from(cls, args)


def import_sql_command(request: ImportSqlRequest) -> None:
    """``import-sql``: ``druid_segments`` SQL rows into ``segments.jsonl.gz`` of ``out``
    (:func:`segment_balancer.druid.importer.import_druid_segments_sql`), printing the count written.
    Raises ``SqlImportError`` (an ``InputError``) naming the file and line of a row it cannot read."""
    print(f"{import_druid_segments_sql(request.sql, request.out)} segments written to {request.out}")


EXISTING_DIRECTORIES = {
    "plan": (("snapshot", "the snapshot to plan"),),
    "simulate": (("snapshot", "the snapshot to simulate"),),
    "advise": (("snapshot", "the snapshot to advise on"),),
    "explain": (("plan", "the plan to explain"), ("snapshot", "the snapshot to explain")),
    "summary": (("plan", "the plan to summarise"),),
    "report": (("dir", "the plan or simulation to report"),),
}
"""Per command, the arguments naming a directory that must exist, and what it is."""


def _check_directories(args: argparse.Namespace) -> None:
    """Raise ``InputError`` (one line, exit 2) for the first directory of :data:`EXISTING_DIRECTORIES`
    that is not there."""
    for attr, what in EXISTING_DIRECTORIES.get(args.command, ()):
        given = getattr(args, attr, None)
        for path in given if isinstance(given, list) else [given]:
            if path is not None and not path.is_dir():
                raise InputError(f"{path}: {'not a directory' if path.exists() else 'no such directory'} ({what})")


def print_brief(plan: Path) -> None:
    """A few lines on a plan: its snapshot, where it and its report are, its headline numbers (the
    segments left unavailable: ``undone.unavailable``, tiers without historicals included, else the
    unreplicated ones) and the runs each tier needs to finish (``make demo``'s recap). Raises
    ``InputError`` when its ``summary.json`` is missing or not a plan summary."""
    summary = read_plan_summary(plan)
    n = headline(summary)
    unavailable = n["unreplicated_after"] if summary.undone is None else summary.undone.unavailable
    print(f"{summary.snapshot_id}")
    print(f"  plan    {plan}")
    if (plan / "report.html").is_file():
        print(f"  report  {plan / 'report.html'}")
    print(
        f"  {n['operations']:,} operations ({n['loads']:,} loads, {n['drops']:,} drops); once they succeed: "
        f"{unavailable:,} unavailable, {n['underreplicated_after']:,} under-replicated"
    )
    if summary.undone is not None:
        runs = ", ".join(
            f"{tier} {'?' if t.runs_to_finish is None else t.runs_to_finish}"
            for tier, t in sorted(summary.undone.tiers.items())
        )
        print(f"  runs to finish per tier: {runs}")


def print_written(what: str, directory: Path) -> None:
    """The last lines of a command that wrote a plan or a simulation: where it is and its report."""
    print(f"{what}: {directory}")
    if (directory / "report.html").is_file():
        print(f"report: {directory / 'report.html'}")


class _Parser(argparse.ArgumentParser):
    """``argparse`` whose refusal of an unknown option names the closest known one of the command
    given, with that command's usage (not the top-level usage)."""

    def error(self, message: str):
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        sub = self._command_parser()
        if unknown and sub is not None:
            flag = unknown.group(1).split("=")[0]
            known = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
            close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            sub.print_usage(sys.stderr)
            sub.exit(2, f"{sub.prog}: error: unknown option {flag}{hint}\n")
        super().error(message)

    def _command_parser(self) -> argparse.ArgumentParser | None:
        choices = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if not choices:
            return None
        args = sys.argv[1:] if self.given is None else self.given
        return next((choices[arg] for arg in args if arg in choices), None)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m segment_balancer", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    plan = sub.add_parser(
        "plan",
        help="compute, validate and publish a plan",
        epilog=config_keys.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plan.add_argument("--snapshot", required=True, type=Path)
    plan.add_argument("--out", required=True, type=Path)
    plan.add_argument("--config", type=Path, help="JSON object of dynamic config overrides (the keys below)")
    plan.add_argument("--work", type=Path, help="keep the work directory here (default: a temporary one)")
    plan.add_argument("--remote", metavar="URL", help=REMOTE_HELP)
    plan.add_argument(
        "--coordinator",
        choices=COORDINATOR_NAMES,
        help="issue7458: the algorithm of Druid issue #7458; druid: what Druid's own Coordinator (the release "
        "of the config key druidVersion, else the snapshot's cluster's, else 38.0.0) queues in one run "
        "(docs/DRUID_COORDINATOR.md); default: the config key coordinator, else issue7458",
    )
    plan.add_argument(
        "--compare",
        action="store_true",
        help="the other coordinator plans the same snapshot too: its plan beside this one (compared/), "
        "the two side by side in comparison.json and the report",
    )
    plan.add_argument(
        "--balancer-state",
        type=Path,
        metavar="FILE",
        help="the balancer_state.json of the previous plan of the cluster (balancerStrategy avgShedder: "
        "its pairs' hit counts); without it every hit count starts at 1",
    )
    what = plan.add_argument_group("what-if edits of the cluster (applied to a copy of the snapshot)")
    what.add_argument(
        "--decommission",
        action="append",
        default=[],
        metavar="SERVER",
        help="decommission this historical too (repeatable)",
    )
    what.add_argument(
        "--remove",
        action="append",
        default=[],
        metavar="SERVER",
        help="remove this historical, as if lost (repeatable)",
    )
    what.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="TIER:COUNT:MAX_SIZE_BYTES",
        help="add COUNT empty historicals of TIER, MAX_SIZE_BYTES each (repeatable)",
    )
    ex = sub.add_parser(
        "explain",
        help="what a plan did with one segment and why (--plan), or how every server "
        "ranks for it at the start of a run (--snapshot)",
    )
    source = ex.add_mutually_exclusive_group(required=True)
    source.add_argument("--plan", type=Path, help="a published plan directory: every stage's operations and decisions")
    source.add_argument("--snapshot", type=Path, help="a snapshot: start-of-run placement costs and ranks")
    ex.add_argument("--segment", required=True)
    ex.add_argument("--tier", help="with --snapshot: only this tier")
    ex.add_argument("--config", type=Path, help="with --snapshot: dynamic config overrides")
    ex.add_argument("--json", action="store_true", help="print the answer as JSON (default: text)")
    ex.add_argument("--remote", metavar="URL", help="with --snapshot: " + REMOTE_HELP)
    sim = sub.add_parser(
        "simulate", help="plan, apply the plan as a cluster would, repeat: where does the cluster end?"
    )
    add_simulate_arguments(sim)
    sim.add_argument(
        "--coordinator",
        choices=COORDINATOR_NAMES,
        help="who plans each run: issue7458 or druid, Druid's own Coordinator (of the release druidVersion "
        "names); default: the config key coordinator, else issue7458",
    )
    compare = sim.add_mutually_exclusive_group()
    compare.add_argument(
        "--compare-coordinators",
        action="store_true",
        help="also simulate the same runs with the other coordinator (out/coordinators/<coordinator>/) and "
        "chart both run by run in out/report.html",
    )
    compare.add_argument(
        "--compare-margins",
        type=_margin_list,
        metavar="P,P,…",
        help="also simulate with each balancingMinCostReductionPercent of the list (out/margins/P/) and "
        "chart the balancing moves per run by margin in out/report.html",
    )
    sim.add_argument("--remote", metavar="URL", help=REMOTE_HELP)
    adv = sub.add_parser(
        "advise",
        help="which Coordinator config to set: Druid's own Coordinator simulated under candidate configs, "
        "ranked, with the config to POST and #7458 beside it (docs/ADVISOR.md)",
    )
    adv.add_argument("--snapshot", required=True, type=Path)
    adv.add_argument("--out", required=True, type=Path, help="advice.json, report.html, work/ and issue7458/ go here")
    adv.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"runs per candidate (default {DEFAULT_RUNS})")
    adv.add_argument(
        "--candidates",
        type=Path,
        metavar="FILE.json",
        help="a JSON list of candidates, each an object of some of " + ", ".join(advisor.TUNED_KEYS) + " (and a "
        "name); default: the grid around the snapshot's own config (docs/ADVISOR.md)",
    )
    adv.add_argument(
        "--config", type=Path, help="JSON object of config overrides of the snapshot's, every candidate's base"
    )
    adv.add_argument(
        "--weights",
        type=_weights,
        metavar="NAME=W,…",
        help="the recommendation's weights of "
        + ", ".join(advisor.OBJECTIVES)
        + " (default "
        + ",".join(f"{k}={v:g}" for k, v in advisor.DEFAULT_WEIGHTS.items())
        + ")",
    )
    adv.add_argument("--seed", type=int, default=0, help="seeds every run's draws, the same for every candidate")
    adv.add_argument("--no-issue7458", action="store_true", help="leave out #7458's runs beside the candidates")
    adv.add_argument("--remote", metavar="URL", help=REMOTE_HELP)
    adv.add_argument(
        "--restart",
        action="append",
        default=[],
        metavar="SERVER",
        help="a rolling restart: this historical is away for run 1 and back after it, with what it served (repeatable)",
    )
    adv_what = adv.add_argument_group("what-if edits of the cluster (applied to a copy of the snapshot)")
    adv_what.add_argument("--decommission", action="append", default=[], metavar="SERVER")
    adv_what.add_argument("--remove", action="append", default=[], metavar="SERVER")
    adv_what.add_argument("--add", action="append", default=[], metavar="TIER:COUNT:MAX_SIZE_BYTES")
    cap = sub.add_parser("capture", help="capture a snapshot from a live Druid cluster (whole or not at all)")
    cap.add_argument("--coordinator", required=True, help="Coordinator URL, e.g. http://coordinator:8081")
    cap.add_argument("--broker", required=True, help="Broker (or Router) URL, e.g. http://broker:8082")
    cap.add_argument("--out", required=True, type=Path, help="the snapshot directory to write (must not exist)")
    cap.add_argument("--cluster", default="druid", help="cluster name written in snapshot.json (default druid)")
    cap.add_argument("--user", help="basic-auth user of both endpoints; the password is read from $DRUID_PASSWORD")
    cap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for a connection or a read")
    sm = sub.add_parser("summary", help="print the summary of a plan directory")
    sm.add_argument("plan", type=Path, nargs="+", help="plan directories (one with the full summary; any with --brief)")
    sm.add_argument(
        "--brief", action="store_true", help="per plan: its snapshot, where it and its report are, its headline numbers"
    )
    rep = sub.add_parser("report", help="(re)build report.html of a plan directory, or of a simulation and its runs")
    rep.add_argument("dir", type=Path, help="a plan directory (summary.json) or a simulation directory (runs.csv)")
    hist = sub.add_parser(
        "plans",
        help="the published plans under a root, newest first, with the change from the "
        "previous plan of the same cluster",
    )
    hist.add_argument("root", type=Path, help="the plans root, e.g. var/plans")
    hist.add_argument("--cluster", help="only this cluster's plans")
    hist.add_argument("--json", action="store_true", help="print the list as JSON")
    gen = sub.add_parser("generate", help="write the seeded realistic sample snapshot")
    gen.add_argument("out", type=Path)
    gen.add_argument(
        "--segments",
        type=int,
        default=20000,
        help="segments to generate (default 20,000; at least 8,200): the count written is within 1 %% of it, "
        "the partitions being drawn at random",
    )
    gen.add_argument("--seed", type=int, default=7458, help="the random generator's seed (default 7458)")
    gen.add_argument("--servers", type=int, help="historicals (default: segments / 5000, at least 30)")
    gen.add_argument(
        "--druid-version",
        nargs="?",
        const=NEWEST_RELEASE,
        metavar="V",
        help=f"give every servers.json row the version column of Druid 35+ (sys.servers.version): V, or "
        f"{NEWEST_RELEASE} without V; without the option the rows have none, as a cluster before 35.0.0",
    )
    imp = sub.add_parser("import-sql", help="druid_segments SQL rows -> segments.jsonl.gz")
    imp.add_argument("sql", type=Path)
    imp.add_argument("out", type=Path)
    return p


COMMANDS: dict[str, tuple[type, Callable[..., None]]] = {
    "plan": (PlanRequest, plan_command),
    "simulate": (SimulateRequest, simulate_command),
    "advise": (AdviseRequest, advise_command),
    "explain": (ExplainRequest, explain_command),
    "capture": (CaptureRequest, capture_command),
    "summary": (SummaryRequest, summary_command),
    "report": (ReportRequest, report_command),
    "plans": (PlansRequest, plans_command),
    "generate": (GenerateRequest, generate_command),
    "import-sql": (ImportSqlRequest, import_sql_command),
}
"""Per subcommand, its request type (``from_args``) and the function that runs it; those of
:data:`~segment_balancer.plan.validation_process.VALIDATING_COMMANDS` take the validation process too."""


def main(argv=None, gate=None) -> int:
    """Entry point of ``python -m segment_balancer``: parse ``argv``, run the subcommand
    (:data:`COMMANDS`), return the exit code (see the module). ``gate``: the ``ValidationProcess`` a
    plan or simulation validates with, started by the caller (None: one started for the command and
    ended with it). Raises ``SystemExit`` for arguments ``argparse`` refuses (and for ``--help``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = _parser()
    parser.given = argv
    args = parser.parse_args(argv)
    request_type, command = COMMANDS[args.command]
    stack = ExitStack()  # what a command started (the validation process), ended however it ends
    try:
        _check_directories(args)
        request = request_type.from_args(args)
        if args.command in validation_process.VALIDATING_COMMANDS:
            # Great Expectations imported by a process of its own, while the plans are made
            command(request, gate or stack.enter_context(validation_process.ValidationProcess()))
        else:
            command(request)
    except InputError as exc:
        print(f"{INPUT_REFUSED}{exc}", file=sys.stderr)
        return 2
    except (
        OSError,
        WriteError,
        spark_session.SparkUnreachable,
        CaptureError,
        PlanValidationError,
        validation_process.ValidationProcessError,
    ) as exc:
        # the machine's or a service's (a full disk, a Spark server or a Druid cluster not answering),
        # or a plan the validation gate kept from publishing: its own message, nothing published
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the tool's own fault, never presented as the user's input
        traceback.print_exception(exc, file=sys.stderr)
        print(
            f"internal error: {type(exc).__name__}: {exc} (a bug in segment_balancer: the traceback is above)",
            file=sys.stderr,
        )
        return 1
    finally:
        stack.close()
    return 0
