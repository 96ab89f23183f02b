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
``python -m segment_balancer generate OUT_DIR [--seed N] [--segments N] [--servers N]``
``python -m segment_balancer import-sql SQL_FILE OUT_DIR``

Exit codes: 0 success; 2 bad input (``common.errors.InputError``: ``input refused: …``); 1 anything else:
``error: …`` for the machine's or a service's failure or a plan the validation gate refused,
``internal error: …`` (and the traceback) for a bug.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

from segment_balancer.common.errors import InputError
from segment_balancer.planner import config_keys
from segment_balancer.planner.config import check_override_keys
from segment_balancer.planner.stages import COORDINATORS, DEFAULT_COORDINATOR
from segment_balancer.spark.apps import read_overrides
from segment_balancer.tools.pipeline import run_plan
from segment_balancer.tools.simulate import add_simulate_arguments


def explain(spark, snapshot: Path, segment_id: str, tier: str | None = None, overrides: dict | None = None) -> dict:
    """Every candidate server's start-of-run placement cost, rank, top-``B`` membership and, when
    ineligible, why; per tier where the segment has a target or a replica (or only ``tier``)."""
    from segment_balancer.plan.explain import explain_segment

    work = Path(tempfile.mkdtemp(prefix="segment_balancer-explain-"))
    try:
        from segment_balancer.spark.prepare import prepare
        from segment_balancer.spark.used_segments import used_segments

        used_segments(spark, snapshot, work)
        prepare(spark, snapshot, work, overrides)
        return explain_segment(spark, work, segment_id, tier)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def print_summary(plan: Path) -> None:
    """A short human summary of a published plan (rich table). Raises ``InputError`` when its
    ``summary.json`` is missing or not a plan summary."""
    from rich.console import Console
    from rich.table import Table

    from segment_balancer.planner.druid_coordinator.duties import DUTY_NAMES
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
    druid = summary.coordinator == "druid"
    if druid:
        console.print(
            f"[bold]coordinator[/bold] druid: what Druid {summary.druid_run.release}'s Coordinator queues in one run"
        )
    cancels = summary.operations - summary.loads - summary.drops
    console.print(
        f"{summary.operations} operations: {summary.loads} loads, {summary.drops} drops, "
        f"{summary.moves} of the drops wait for a load (moves and callbacks)"
        + (f", {cancels} queued requests cancelled" if cancels else "")
    )
    table = Table("duty" if druid else "stage", "tier", "action", "count")
    for row in summary.by_stage_tier_action:
        stage = f"{row.stage} {DUTY_NAMES.get(row.stage, '')}".strip() if druid else str(row.stage)
        table.add_row(stage, str(row.tier), row.action, str(row.count))
    console.print(table)
    before, after = summary.status_before, summary.status_after
    console.print(f"unreplicated segments: {before.unreplicated} before, {after.unreplicated} once the plan succeeds")
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
    from rich.table import Table

    from segment_balancer.plan.compare import COMPARISON_FILE

    path = Path(plan) / COMPARISON_FILE
    if not path.exists():
        return
    plans = json.loads(path.read_text())["plans"]
    table = Table(
        "tier",
        "coordinator",
        "loads",
        "moves",
        "bytes moved",
        "under-rep.",
        "Δ segments",
        "Δ disk %",
        "fullest %",
        "cost",
        title="the coordinators side by side, once each plan succeeded (Δ: max − min over the historicals)",
    )
    for tier in sorted({t for p in plans for t in p["tiers"]}):
        for p in plans:
            m = p["tiers"].get(tier)
            if m is not None:
                table.add_row(
                    tier,
                    p["coordinator"],
                    f"{m['loads']:,}",
                    f"{m['moves']:,}",
                    _bytes(m["bytes_moved"]),
                    f"{m['underreplicated']:,}",
                    f"{m['segments_max_minus_min']:,}",
                    f"{m['disk_pct_max_minus_min']:.2f}",
                    f"{m['fullest_disk_pct']:.2f}",
                    f"{m['total_cost']:.3g}",
                )
    console.print(table)
    console.print("unavailable after: " + ", ".join(f"{p['coordinator']} {p['unavailable']}" for p in plans))


def print_plans(entries, root: Path) -> None:
    """The plan history (:func:`segment_balancer.plan.history.plan_history`) as a rich table: per plan its
    snapshot time, cluster, name, operations, unreplicated and underreplicated segments once it
    succeeded, max − min segments per tier, each with the change from the previous plan."""
    from rich.console import Console
    from rich.table import Table

    from segment_balancer.plan.history import signed_change

    console = Console()
    if not entries:
        console.print(f"no plans published yet under {root}")
        return
    table = Table(
        "snapshot time",
        "cluster",
        "plan",
        "operations",
        "unreplicated after",
        "underreplicated after",
        "max − min after",
        "compared with",
    )
    for e in entries:
        n, d = e.numbers, e.diff

        def cell(key: str, n=n, d=d) -> str:
            return f"{n[key]:,}" + (f" ({signed_change(d[key])})" if d else "")

        spread = ", ".join(
            f"{t} {v}"
            + (f" ({signed_change(d['max_minus_min_after'][t])})" if t in d.get("max_minus_min_after", {}) else "")
            for t, v in sorted(n["max_minus_min_after"].items())
        )
        table.add_row(
            e.snapshot_time,
            e.cluster,
            e.name + (" (what-if)" if e.whatif else ""),
            cell("operations"),
            cell("unreplicated_after"),
            cell("underreplicated_after"),
            spread,
            e.previous or "-",
        )
    console.print(table)


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
    from rich.table import Table

    from segment_balancer.plan.report import margin_summary

    out = Table("margin %", "balancing moves", "bytes moved", "no move from run", "max − min segments", "total cost")
    for m in margin_summary(table):
        out.add_row(
            f"{m['margin']:g}",
            f"{m['moves']:,}",
            f"{m['bytes']:,}",
            str(m["quiet_from"] or "-"),
            str(m["segments_spread"]),
            f"{m['total_cost']:.6g}",
        )
    Console().print(out)


def print_coordinators(table) -> None:
    """Per coordinator of a ``coordinators.csv`` frame: when it was fully loaded, what it moved and
    where it left the disks (rich table, :func:`segment_balancer.plan.report.coordinator_summary`)."""
    from rich.console import Console
    from rich.table import Table

    from segment_balancer.plan.report import coordinator_summary

    out = Table("coordinator", "loaded from run", "moves", "GiB moved", "usage spread", "fullest %")
    for c in coordinator_summary(table):
        out.add_row(
            c["coordinator"],
            str(c["loaded_from"] or "-"),
            f"{c['moves']:,}",
            f"{c['moved_bytes'] / 2**30:,.1f}",
            f"{c['usage_spread']:.1f}",
            f"{c['fullest_usage']:.1f}",
        )
    Console().print(out)


def print_runs(table) -> None:
    """The ``runs.csv`` table of a simulation (rich table)."""
    from rich.console import Console
    from rich.table import Table

    columns = [
        "run",
        "loads",
        "drops",
        "moves",
        "balancing_moves",
        "unreplicated_before",
        "underreplicated_before",
        "loads_failed",
        "loads_still_queued",
        "segments_max_minus_min",
        "stable",
    ]
    out = Table(*columns)
    for row in table[columns].itertuples(index=False):
        out.add_row(*(str(v) for v in row))
    Console().print(out)


REMOTE_HELP = (
    "the Spark Connect server to run on (sc://host:port); default $SPARK_REMOTE, else an in-process "
    "Spark on $SPARK_MASTER or local[*]"
)


def _run_spark_command(spark, args, overrides: dict | None) -> None:
    """``plan``, ``simulate`` or ``explain --snapshot`` on session ``spark`` with the ``--config``
    ``overrides`` (checked)."""
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
        )
        print_summary(args.out)
    elif args.command == "simulate":
        from segment_balancer.tools.simulate import simulate, simulate_coordinators, simulate_margins

        options = {
            "loads_per_run": args.loads_per_run,
            "load_failure_rate": args.load_failure_rate,
            "seed": args.seed,
            "coordinator": args.coordinator,
        }
        if args.compare_margins and args.coordinator not in (None, DEFAULT_COORDINATOR):
            raise InputError(f"--compare-margins compares margins of {DEFAULT_COORDINATOR}'s balancing, not druid's")
        if args.compare_margins:
            table = simulate_margins(
                spark, args.snapshot, args.out, args.runs, args.compare_margins, overrides, **options
            )
            print_margins(table)
        elif args.compare_coordinators:
            print_coordinators(simulate_coordinators(spark, args.snapshot, args.out, args.runs, overrides, **options))
        else:
            print_runs(simulate(spark, args.snapshot, args.out, args.runs, overrides, **options))
    else:
        print(json.dumps(explain(spark, args.snapshot, args.segment, args.tier, overrides), indent=2))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m segment_balancer", description=__doc__.splitlines()[0])
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
        choices=COORDINATORS,
        help="issue7458: the algorithm of Druid issue #7458; druid: what Druid 35.0.0's own Coordinator "
        "queues in one run (docs/DRUID_COORDINATOR.md); default: the config key coordinator, else issue7458",
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
    source.add_argument("--snapshot", type=Path, help="a snapshot: start-of-run placement costs and ranks (JSON)")
    ex.add_argument("--segment", required=True)
    ex.add_argument("--tier", help="with --snapshot: only this tier")
    ex.add_argument("--config", type=Path, help="with --snapshot: dynamic config overrides")
    ex.add_argument("--json", action="store_true", help="with --plan: print the answer as JSON")
    ex.add_argument("--remote", metavar="URL", help="with --snapshot: " + REMOTE_HELP)
    sim = sub.add_parser(
        "simulate", help="plan, apply the plan as a cluster would, repeat: where does the cluster end?"
    )
    add_simulate_arguments(sim)
    sim.add_argument(
        "--coordinator",
        choices=COORDINATORS,
        help="who plans each run: issue7458 or druid, Druid 35.0.0's own Coordinator; default: the config "
        "key coordinator, else issue7458",
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
    sm.add_argument("plan", type=Path)
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
    gen.add_argument("--seed", type=int, default=7458)
    gen.add_argument("--segments", type=int, default=20000)
    gen.add_argument("--servers", type=int, help="historicals (default: segments / 5000, at least 30)")
    imp = sub.add_parser("import-sql", help="druid_segments SQL rows -> segments.jsonl.gz")
    imp.add_argument("sql", type=Path)
    imp.add_argument("out", type=Path)
    return p


def main(argv=None) -> int:
    """Entry point of ``python -m segment_balancer``."""
    from segment_balancer.common.errors import INPUT_REFUSED, InputError
    from segment_balancer.common.files import WriteError
    from segment_balancer.plan.validation import PlanValidationError
    from segment_balancer.spark.session import SparkUnreachable
    from segment_balancer.tools.capture import CaptureError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    try:
        if args.command == "summary":
            print_summary(args.plan)
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
                    generate_snapshot(args.out, seed=args.seed, n_segments=args.segments, n_servers=args.servers),
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
        elif args.command == "import-sql":
            from segment_balancer.druid.importer import import_druid_segments_sql

            print(f"{import_druid_segments_sql(args.sql, args.out)} segments written to {args.out}")
        else:
            from segment_balancer.spark.session import local_session, release

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
            spark = local_session(f"segment_balancer.{args.command}", remote=args.remote)
            try:
                _run_spark_command(spark, args, overrides)
            finally:
                release(spark)  # a Connect session: released, its Python daemon ended
    except InputError as exc:
        print(f"{INPUT_REFUSED}{exc}", file=sys.stderr)
        return 2
    except (OSError, WriteError, SparkUnreachable, CaptureError, PlanValidationError) as exc:
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
    return 0
