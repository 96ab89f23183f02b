"""Command line: the same applications as the DAG, in one Spark session.

``python -m segment_balancer plan --snapshot DIR --out DIR [--coordinator issue7458|druid] [--compare]
[--config FILE.json] [--work DIR] [--balancer-state FILE] [--decommission SERVER] [--remove SERVER]
[--add TIER:COUNT:MAX_SIZE_BYTES]``
``python -m segment_balancer explain --plan PLAN_DIR --segment ID [--json]``
``python -m segment_balancer explain --snapshot DIR --segment ID [--tier T] [--config FILE.json]``
``python -m segment_balancer summary PLAN_DIR``
``python -m segment_balancer report DIR`` (a plan directory, or a simulation directory)
``python -m segment_balancer plans PLANS_ROOT [--cluster NAME] [--json]``
``python -m segment_balancer simulate --snapshot DIR --runs N --out DIR [--config FILE.json] [--loads-per-run N]
[--load-failure-rate P] [--seed N] [--coordinator issue7458|druid] [--compare-margins P,P,… | --compare-coordinators]``
``python -m segment_balancer capture --coordinator URL --broker URL --out DIR [--cluster NAME] [--user USER]``
``python -m segment_balancer generate OUT_DIR [--seed N] [--segments N] [--servers N] [--druid-version [V]]``
``python -m segment_balancer import-sql SQL_FILE OUT_DIR``

Exit codes: 0 success; 2 bad input (``common.errors.InputError``: ``input refused: …``); 1 anything else:
``error: …`` for the machine's or a service's failure or a plan the validation gate refused,
``internal error: …`` (and the traceback) for a bug.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import traceback
from contextlib import ExitStack
from pathlib import Path

from segment_balancer.common.errors import InputError
from segment_balancer.druid.releases import NEWEST_RELEASE
from segment_balancer.planner import config_keys
from segment_balancer.planner.config import check_override_keys
from segment_balancer.planner.coordinators import COORDINATOR_NAMES, DEFAULT_COORDINATOR, coordinator
from segment_balancer.spark.apps import read_overrides
from segment_balancer.tools.pipeline import run_plan
from segment_balancer.tools.simulate import add_simulate_arguments
from segment_balancer.tools.terminal import print_table

EXPLAIN_CACHE_KEPT = 4
"""Snapshots whose prepared tables ``explain --snapshot`` keeps (the newest used), so that asking
about another segment of the same snapshot needs no Spark."""


def explain_cache_root() -> Path:
    """Where ``explain --snapshot`` keeps prepared tables: ``explain/`` of the machine's cache
    (:func:`segment_balancer.common.cache.cache_root`)."""
    from segment_balancer.common.cache import cache_root

    return cache_root() / "explain"


def _explain_key(snapshot: Path, overrides: dict | None) -> str:
    """The cache entry of a snapshot as it is now (its files' names, sizes and times) and overrides."""
    import hashlib

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
    from segment_balancer.common.cache import keep_newest
    from segment_balancer.common.files import replace_dir
    from segment_balancer.plan.explain import explain_segment

    root = explain_cache_root()
    work = root / _explain_key(snapshot, overrides)
    if not (work / "prepared" / "meta.json").is_file():
        from segment_balancer.spark.prepare import prepare
        from segment_balancer.spark.session import local_session, release
        from segment_balancer.spark.used_segments import used_segments

        logging.getLogger(__name__).info(
            "preparing %s once (kept in %s: later questions about it need no Spark)", snapshot, root
        )
        spark = local_session("segment_balancer.explain", remote=remote)
        try:

            def fill(tmp: Path) -> None:
                used_segments(spark, snapshot, tmp)
                prepare(spark, snapshot, tmp, overrides)

            root.mkdir(parents=True, exist_ok=True)
            replace_dir(work, fill, durable=False)
        finally:
            release(spark)
    os.utime(work)
    keep_newest(root, EXPLAIN_CACHE_KEPT)
    try:
        return explain_segment(work, segment_id, tier)
    except KeyError as exc:
        raise InputError(f"--segment {segment_id}: not in the snapshot {snapshot}") from exc


def print_summary(plan: Path) -> None:
    """A short human summary of a published plan (rich table). Raises ``InputError`` when its
    ``summary.json`` is missing or not a plan summary."""
    from rich.console import Console

    from segment_balancer.planner.summary import read_plan_summary

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

    from segment_balancer.plan.compare import COMPARISON_FILE

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
    from rich.console import Console

    from segment_balancer.plan.history import signed_change

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
    from rich.console import Console

    from segment_balancer.plan.report import margin_summary

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
    from rich.console import Console

    from segment_balancer.plan.report import coordinator_summary

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
    from rich.console import Console

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


REMOTE_HELP = (
    "the Spark Connect server to run on (sc://host:port); default $SPARK_REMOTE, else an in-process "
    "Spark on $SPARK_MASTER or local[*]"
)


def _run_spark_command(spark, args, overrides: dict | None, gate) -> None:
    """``plan`` or ``simulate`` on session ``spark`` with the ``--config`` ``overrides`` (checked),
    their plans validated by ``gate`` (a ``ValidationProcess``)."""
    if args.command == "plan":
        from segment_balancer.tools.whatif import WhatIf, parse_add

        edits = WhatIf.parse(args.decommission, args.remove, [parse_add(a) for a in args.add])
        run_plan(
            spark,
            args.snapshot,
            args.out,
            overrides,
            args.work,
            edits,
            args.balancer_state,
            args.coordinator,
            args.compare,
            validator=gate,
        )
        print_summary(args.out)
        print_written("plan", args.out)
    elif args.command == "simulate":
        from segment_balancer.tools.simulate import simulate, simulate_coordinators, simulate_margins

        options = {
            "loads_per_run": args.loads_per_run,
            "load_failure_rate": args.load_failure_rate,
            "seed": args.seed,
            "coordinator": args.coordinator,
            "validator": gate,
        }
        if args.compare_margins and args.coordinator not in (None, DEFAULT_COORDINATOR):
            raise InputError(
                f"--compare-margins compares margins of {DEFAULT_COORDINATOR}'s balancing, not {args.coordinator}'s"
            )
        if args.compare_margins:
            table = simulate_margins(
                spark, args.snapshot, args.out, args.runs, args.compare_margins, overrides, **options
            )
            print_margins(table)
        elif args.compare_coordinators:
            print_coordinators(simulate_coordinators(spark, args.snapshot, args.out, args.runs, overrides, **options))
        else:
            print_runs(simulate(spark, args.snapshot, args.out, args.runs, overrides, **options))
        print_written("simulation", args.out)


EXISTING_DIRECTORIES = {
    "plan": (("snapshot", "the snapshot to plan"),),
    "simulate": (("snapshot", "the snapshot to simulate"),),
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
    from segment_balancer.plan.history import headline
    from segment_balancer.planner.summary import read_plan_summary

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
        import difflib

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


def main(argv=None, gate=None) -> int:
    """Entry point of ``python -m segment_balancer``. ``gate``: the ``ValidationProcess`` a plan or
    simulation validates with, started by the caller (None: one started for the command and ended
    with it)."""
    from segment_balancer.common.errors import INPUT_REFUSED, InputError
    from segment_balancer.common.files import WriteError
    from segment_balancer.plan.validation import PlanValidationError
    from segment_balancer.plan.validation_process import VALIDATING_COMMANDS, ValidationProcessError
    from segment_balancer.spark.session import SparkUnreachable
    from segment_balancer.tools.capture import CaptureError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = _parser()
    parser.given = argv
    args = parser.parse_args(argv)
    stack = ExitStack()  # what a command started (the validation process), ended however it ends
    try:
        _check_directories(args)
        if args.command == "summary" and args.brief:
            for plan in args.plan:
                print_brief(plan)
        elif args.command == "summary":
            if len(args.plan) > 1:
                raise InputError("summary takes one plan directory (several with --brief)")
            print_summary(args.plan[0])
        elif args.command == "report":
            from segment_balancer.plan.report import rebuild

            for path in rebuild(args.dir):
                print(f"report written to {path}")
        elif args.command == "plans":
            from segment_balancer.plan.history import plan_history

            entries = plan_history(args.root, args.cluster)
            if args.json:
                print(json.dumps([e.as_dict() for e in entries], indent=2))
            else:
                print_plans(entries, args.root)
        elif args.command == "generate":
            from segment_balancer.tools.sample import generate_snapshot

            print(
                json.dumps(
                    generate_snapshot(
                        args.out,
                        seed=args.seed,
                        n_segments=args.segments,
                        n_servers=args.servers,
                        druid_version=args.druid_version,
                    ),
                    indent=2,
                )
            )
        elif args.command == "capture":
            import os

            from segment_balancer.tools.capture import DruidEndpoint, capture_to

            auth = (args.user, os.environ.get("DRUID_PASSWORD", "")) if args.user else None
            out = capture_to(
                DruidEndpoint(args.coordinator, auth),
                DruidEndpoint(args.broker, auth),
                args.out,
                args.cluster,
                timeout_s=args.timeout,
            )
            print(f"snapshot captured into {out}")
        elif args.command == "explain" and args.plan is not None:
            from segment_balancer.plan.explain import explain_plan, render_explain

            answer = explain_plan(args.plan, args.segment)
            print(json.dumps(answer, indent=2) if args.json else render_explain(answer))
        elif args.command == "explain":
            from segment_balancer.plan.explain import render_snapshot_explain
            from segment_balancer.spark.prepare import load_small_inputs

            overrides = read_overrides(args.config)
            check_override_keys(overrides, f"--config {args.config}")
            load_small_inputs(args.snapshot, overrides, f"--config {args.config}")
            answer = explain(args.snapshot.absolute(), args.segment, args.tier, overrides, args.remote)
            print(json.dumps(answer, indent=2) if args.json else render_snapshot_explain(answer))
        elif args.command == "import-sql":
            from segment_balancer.druid.importer import import_druid_segments_sql

            print(f"{import_druid_segments_sql(args.sql, args.out)} segments written to {args.out}")
        elif args.command in VALIDATING_COMMANDS:
            from segment_balancer.plan.validation_process import ValidationProcess
            from segment_balancer.spark.session import lazy_local_session, release

            # Great Expectations imported by a process of its own, while the plans are made
            gate = gate or stack.enter_context(ValidationProcess())
            # the user's own overrides: an unknown key is refused here, naming the file, before any JVM
            overrides = read_overrides(args.config)
            check_override_keys(overrides, f"--config {args.config}")
            # the snapshot's small files (servers, queues, rules, config, meta) too: refused before any JVM
            from segment_balancer.spark.prepare import load_small_inputs

            load_small_inputs(args.snapshot, overrides, f"--config {args.config}")
            # Spark (a Connect server above all) resolves paths from its own working directory.
            for key in ("snapshot", "out", "work", "balancer_state"):
                if getattr(args, key, None) is not None:
                    setattr(args, key, getattr(args, key).absolute())
            # started on first use: a run whose applications all run on the driver starts no JVM
            spark = lazy_local_session(f"segment_balancer.{args.command}", remote=args.remote)
            try:
                _run_spark_command(spark, args, overrides, gate)
            finally:
                release(spark)  # a Connect session: released, its Python daemon ended
    except InputError as exc:
        print(f"{INPUT_REFUSED}{exc}", file=sys.stderr)
        return 2
    except (OSError, WriteError, SparkUnreachable, CaptureError, PlanValidationError, ValidationProcessError) as exc:
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
