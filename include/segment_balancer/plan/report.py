"""``report.html``: a plan, or a simulation, as a self-contained HTML report for a person.

A plan's report (:func:`write_report`) is built from the files of the plan directory only
(``summary.json``, ``validation.json``), so any published plan can be reported again
(``python -m segment_balancer report PLAN_DIR``). It shows the headline numbers
(:func:`segment_balancer.plan.history.headline`), what the plan leaves undone per tier (``undone``),
per tier the segments and bytes of every historical
before and after the plan (with its ``max_size``), the max − min balance before and after, the
replication status before and after, the operations per stage × tier × action, every operation
(a table with filters, sorting and pages, its data in ``operations/`` beside the report:
:mod:`segment_balancer.plan.operations_table`) and per historical its loads and drops, the drops the
availability rule deferred and the overshadowed segments kept waiting, alerts, the timeline counts
per datasource, the per-stage timings, the Great Expectations result, Druid's metric names, the
effective config and the what-if edits.

A simulation's report (:func:`write_simulation_report`) charts its runs (``runs.csv`` and every run's
plan and ``historicals.csv``, :mod:`segment_balancer.tools.simulate`): unreplicated and underreplicated
segments, the max − min of segments per tier and the moves, run by run; it links every run's own
plan report.

Charts are Plotly figures; ``plotly.js`` is inlined once per page, so a report opens offline
(about 5 MB). Element ids are fixed, so the same plan gives the same file.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import pandas as pd

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import write_text_atomic
from segment_balancer.plan.compare import COMPARED_DIR, COMPARISON_FILE
from segment_balancer.plan.history import headline
from segment_balancer.plan.operations_table import (
    CODED,
    OPERATIONS_FILE,
    read_operations,
    server_summary,
    write_operations_table,
)
from segment_balancer.planner.summary import (
    SUMMARY_FILE,
    AppTiming,
    PlanSummary,
    ReplicationStatus,
    ServerHoldings,
    StageTierActionCount,
    TierBalance,
    read_plan_summary,
)

log = logging.getLogger(__name__)

REPORT_FILE = "report.html"
HEADLINES = (
    ("operations", "operations"),
    ("loads", "loads"),
    ("drops", "drops"),
    ("moves", "drops waiting for a load (moves, callbacks)"),
    ("unreplicated_before", "unreplicated at the snapshot"),
    ("unreplicated_after", "unreplicated once the plan succeeded"),
    ("underreplicated_before", "underreplicated at the snapshot"),
    ("underreplicated_after", "underreplicated once the plan succeeded"),
    ("deferred_drops", "drops deferred (availability rule)"),
    ("overshadowed_waiting", "overshadowed segments waiting"),
)
"""The report's headline cards: (key of :func:`~segment_balancer.plan.history.headline`, label). Each card
is an element ``data-testid="headline-<key>"`` with ``data-value`` = the integer."""

BEFORE, AFTER = "#9aa5b1", "#1f77b4"
STATUS_COLORS = {
    "unreplicated": "#d62728",
    "underreplicated": "#ff7f0e",
    "fully_replicated": "#2ca02c",
    "overreplicated": "#9467bd",
}


class ReportError(InputError):
    """The directory is no plan (no ``summary.json``) or no simulation (no ``runs.csv``), or one of
    its files cannot be read."""


def template_environment():
    """The Jinja environment of the reports' templates (``plan/templates/``), with the ``num`` and
    ``value`` filters."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(
        loader=PackageLoader("segment_balancer.plan", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v: f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v
    env.filters["value"] = lambda v: v if isinstance(v, str) else json.dumps(v)  # a config value as Druid's JSON has it
    return env


def plotly_js() -> str:
    """``plotly.js``, to inline once per page (a report opens offline)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@functools.cache
def _template() -> dict:
    """plotly's ``plotly_white`` template as plain data, read once."""
    import plotly.io as pio

    return pio.templates["plotly_white"].to_plotly_json()


def figure_html(fig, div_id: str) -> str:
    """The figure as a ``<div>`` and its script (no ``plotly.js``), with a fixed id, in the
    ``plotly_white`` template with 12-point type. The template goes into the figure's data as it
    is (``validate=False``): set through ``update_layout`` it is validated and copied anew for each
    figure, some 50 ms each."""
    import plotly.io as pio

    figure = fig.to_dict()
    layout = figure.setdefault("layout", {})
    layout["template"] = _template()
    layout["font"] = {**layout.get("font", {}), "size": 12}
    return pio.to_html(
        figure,
        validate=False,
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )


def _read_summary(plan: Path) -> PlanSummary:
    """The plan's summary (:func:`~segment_balancer.planner.summary.read_plan_summary`); a
    :class:`ReportError` when it is missing, unreadable or not a plan summary."""
    try:
        return read_plan_summary(plan)
    except InputError as exc:
        raise ReportError(str(exc)) from exc
    except OSError as exc:
        raise ReportError(f"{plan / SUMMARY_FILE}: unreadable ({exc})") from exc


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path.parent}: no {path.name}; not {what}") from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable ({exc})") from exc


# ---- the charts of one plan ------------------------------------------------------------------------
def holdings_figure(servers: list[ServerHoldings], tier: str):
    """Segments and bytes of each historical of ``tier`` before and after the plan, and its
    ``max_size`` (bytes), from ``summary.json``'s ``servers`` rows. Decommissioning historicals are
    marked ``(decommissioning)``."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = [r for r in servers if r.tier == tier]
    names = [r.server + (" (decommissioning)" if r.decommissioning else "") for r in rows]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.16,
        subplot_titles=("segments per historical", "bytes per historical (GB) and max_size"),
    )
    for when, color in (("before", BEFORE), ("after", AFTER)):
        fig.add_trace(
            go.Bar(
                x=names,
                y=[getattr(r, f"segments_{when}") for r in rows],
                name=f"{when}",
                marker_color=color,
                legendgroup=when,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=names,
                y=[getattr(r, f"bytes_{when}") / 1e9 for r in rows],
                name=f"{when}",
                marker_color=color,
                legendgroup=when,
                showlegend=False,
            ),
            row=2,
            col=1,
        )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=[r.max_size / 1e9 for r in rows],
            name="max_size",
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 28, "color": "#d62728", "line": {"width": 3}},
        ),
        row=2,
        col=1,
    )
    fig.update_layout(title=f"tier {tier}: holdings before and after", barmode="group", height=480)
    fig.update_layout(margin={"t": 90})
    return fig


def balance_figure(before: dict[str, TierBalance], after: dict[str, TierBalance]):
    """max − min of segments and of bytes over each tier's non-decommissioning historicals, before
    and after (``summary.json``'s ``balance_before`` / ``balance_after``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    tiers = sorted(set(before) | set(after))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("max − min segments", "max − min bytes (GB)"))
    for when, data, color in (("before", before, BEFORE), ("after", after, AFTER)):
        fig.add_trace(
            go.Bar(
                x=tiers,
                y=[data[t].segments_max_minus_min if t in data else 0 for t in tiers],
                name=when,
                marker_color=color,
                legendgroup=when,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=tiers,
                y=[(data[t].bytes_max_minus_min if t in data else 0) / 1e9 for t in tiers],
                name=when,
                marker_color=color,
                legendgroup=when,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_layout(title="balance per tier (smaller is more even)", barmode="group", height=340)
    return fig


def status_figure(before: ReplicationStatus, after: ReplicationStatus):
    """Used load-rule segments per tier by replication status, before and after the plan, stacked;
    unreplicated segments (no replica in any tier) in a column of their own (``status_before`` /
    ``status_after`` of ``summary.json``)."""
    import plotly.graph_objects as go

    tiers = sorted(set(before.tiers) | set(after.tiers))
    x = [
        [t for t in tiers for _ in (0, 1)] + ["(any tier)", "(any tier)"],
        ["before", "after"] * len(tiers) + ["before", "after"],
    ]
    fig = go.Figure()
    for status in ("underreplicated", "fully_replicated", "overreplicated"):
        y = [s.tiers.get(t, {}).get(status, 0) for t in tiers for s in (before, after)] + [0, 0]
        fig.add_trace(go.Bar(x=x, y=y, name=status.replace("_", " "), marker_color=STATUS_COLORS[status]))
    fig.add_trace(
        go.Bar(
            x=x,
            y=[0] * (2 * len(tiers)) + [before.unreplicated, after.unreplicated],
            name="unreplicated",
            marker_color=STATUS_COLORS["unreplicated"],
        )
    )
    fig.update_layout(title="replication status per tier, before and after", barmode="stack", height=380)
    return fig


def operations_figure(by_stage: list[StageTierActionCount]):
    """Operations per stage, stacked by tier and action (``summary.json``'s ``by_stage_tier_action``)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    frame = pd.DataFrame([r.model_dump() for r in by_stage], columns=["stage", "tier", "action", "count"])
    stages = [str(s) for s in range(1, 14)]
    for (tier, action), part in frame.groupby(["tier", "action"], sort=True):
        per = dict(zip(part["stage"].astype(str), part["count"].astype(int)))
        fig.add_trace(go.Bar(x=stages, y=[per.get(s, 0) for s in stages], name=f"{tier} {action}"))
    fig.update_layout(
        title="operations per stage × tier × action",
        barmode="stack",
        height=380,
        xaxis={"title": "stage", "type": "category"},
        yaxis={"title": "operations"},
    )
    return fig


def timeline_figure(per_datasource: dict[str, dict[str, int]]):
    """Used segments per datasource by timeline status (visible, standby, overshadowed), side by
    side on a log scale, so that a datasource of a few segments shows beside one of thousands
    (``summary.json``'s ``timeline.per_datasource``)."""
    import plotly.graph_objects as go

    names = sorted(per_datasource)
    fig = go.Figure()
    for status, color in (("visible", "#2ca02c"), ("standby", "#ff7f0e"), ("overshadowed", "#9aa5b1")):
        fig.add_trace(
            go.Bar(x=names, y=[per_datasource[n].get(status, 0) for n in names], name=status, marker_color=color)
        )
    fig.update_layout(
        title="used segments per datasource on the timeline (log scale)",
        barmode="group",
        height=340,
        yaxis={"type": "log", "title": "segments"},
    )
    return fig


def timings_figure(timings: dict[str, AppTiming]):
    """Seconds per application, in run order; skipped stages (nothing to schedule) shown as 0 and
    named so (``summary.json``'s ``timings_seconds``)."""
    import plotly.graph_objects as go

    names = [n + (" (skipped)" if t.skipped else "") for n, t in timings.items()]
    fig = go.Figure(go.Bar(y=names, x=[t.seconds for t in timings.values()], orientation="h", marker_color=AFTER))
    fig.update_layout(
        title="seconds per application",
        height=120 + 24 * len(names),
        yaxis={"autorange": "reversed"},
        xaxis={"title": "seconds"},
    )
    return fig


def plan_report(plan_dir: str | Path, ops: pd.DataFrame | None = None) -> str:
    """The HTML of the report of the plan in ``plan_dir`` (module docstring). Raises
    :class:`ReportError` when ``summary.json`` is missing, unreadable or not a plan summary
    (:class:`~segment_balancer.planner.summary.PlanSummary`); a missing ``validation.json`` is
    reported as not validated. ``ops``: its operations when already read (``read_operations``)."""
    plan = Path(plan_dir)
    summary = _read_summary(plan)
    validation = _read_json(plan / "validation.json", "validated") if (plan / "validation.json").is_file() else None
    return _plan_report(plan, summary, validation, ops)


def _plan_report(plan: Path, summary: PlanSummary, validation: dict | None, ops: pd.DataFrame | None = None) -> str:
    numbers = headline(summary)
    tiers = sorted({r.tier for r in summary.servers})
    charts = {
        "status": figure_html(status_figure(summary.status_before, summary.status_after), "chart-status"),
        "balance": figure_html(balance_figure(summary.balance_before, summary.balance_after), "chart-balance"),
        "operations": figure_html(operations_figure(summary.by_stage_tier_action), "chart-operations"),
        "timings": figure_html(timings_figure(summary.timings_seconds), "chart-timings"),
    }
    per_ds = summary.timeline.per_datasource
    if per_ds:
        charts["timeline"] = figure_html(timeline_figure(per_ds), "chart-timeline")
    holdings = [
        (t, figure_html(holdings_figure(summary.servers, t), f"chart-holdings-{i}")) for i, t in enumerate(tiers)
    ]
    metrics: dict[tuple, dict] = {}
    for e in summary.druid_metrics:
        metrics.setdefault((e.metric, e.tier or ""), {})[e.at] = e.value
    config = {k: v for k, v in summary.config.items() if k not in ("ignored", "derived")}
    comparison_path = plan / COMPARISON_FILE
    comparison = _read_json(comparison_path, "compared") if comparison_path.is_file() else None
    druid_rows = []
    if summary.druid_run is not None:
        druid_rows = [
            r.model_dump(mode="json")
            for r in summary.druid_run.metrics
            if r.value and not r.metric.startswith(("segment/loadQueue", "segment/dropQueue", "tier/"))
        ][:DRUID_ROWS_SHOWN]
    operations = _operations_context(plan, ops)
    # the template reads the summary as its JSON (a key the file leaves out is undefined there)
    return (
        template_environment()
        .get_template("plan_report.html.j2")
        .render(
            title=f"Plan {plan.name}",
            summary=summary.model_dump(mode="json"),
            numbers=numbers,
            headlines=HEADLINES,
            charts=charts,
            holdings=holdings,
            validation=validation,
            metrics=sorted(metrics.items()),
            config=config,
            comparison=comparison,
            compared_dir=COMPARED_DIR,
            druid_rows=druid_rows,
            operations=operations,
            plotlyjs=plotly_js(),
        )
    )


OPERATIONS_PAGE = 100
"""Rows per page of the report's table of operations."""
OPERATIONS_AUTOLOAD = 200_000
"""The table of a plan of at most this many operations loads when the report opens; a larger one
when asked (its index is about 20 bytes an operation)."""


def _operations_context(plan: Path, ops: pd.DataFrame | None = None) -> dict:
    """What the table of operations shows (``_operations.html.j2``): ``count``, ``columns``,
    ``page``, ``autoload`` and the per-historical ``servers`` rows (``server_summary``); none
    without ``operations.parquet``."""
    if ops is None and (plan / OPERATIONS_FILE).is_file():
        ops = read_operations(plan)
    return {
        "count": 0 if ops is None else len(ops),
        "columns": CODED,
        "page": OPERATIONS_PAGE,
        "autoload": OPERATIONS_AUTOLOAD,
        "servers": [] if ops is None else server_summary(ops).to_dict("records"),
    }


DRUID_ROWS_SHOWN = 500
"""The most rows of a ``druid`` run's own metrics the report lists (the summary has them all)."""


def write_report(plan_dir: str | Path) -> Path:
    """Write ``plan_dir/report.html`` atomically (:func:`plan_report`), and the table of operations
    it reads beside it (``operations/``, :func:`~segment_balancer.plan.operations_table.write_operations_table`);
    returns the report's path."""
    plan = Path(plan_dir)
    path = plan / REPORT_FILE
    ops = read_operations(plan) if (plan / OPERATIONS_FILE).is_file() else None  # read once for both
    if ops is not None:
        write_operations_table(plan, _read_summary(plan).coordinator, ops)
    write_text_atomic(plan_report(plan, ops), path)
    log.debug("report written to %s", path)
    return path


# ---- a simulation ----------------------------------------------------------------------------------
MARGINS_FILE = "margins.csv"
"""``margins.csv`` of a simulation made with ``simulate --compare-margins``: ``margin``
(``balancingMinCostReductionPercent``) and the ``runs.csv`` columns of each margin's runs, whose
simulation is ``margins/<margin>/`` (the simulation's own margin: the directory itself)."""


COORDINATORS_FILE = "coordinators.csv"
"""``coordinators.csv`` of a simulation made with ``simulate --compare-coordinators``:
``coordinator`` and the ``runs.csv`` columns of each coordinator's runs, whose simulation is
``coordinators/<coordinator>/`` (the simulation's own coordinator: the directory itself)."""
COORDINATORS_DIR = "coordinators"
COORDINATOR_CHARTS = (
    ("unreplicated_before", "unavailable (no replica loaded) at the start of each run", 1),
    ("underreplicated_before", "under-replicated at the start of each run", 1),
    ("moves", "moves planned per run", 1),
    ("moved_bytes", "GiB moved per run", 2**30),
    ("fullest_usage", "the fullest historical after each run, % of max_size", 1),
    ("usage_max_minus_min", "max − min usage after each run, widest tier (points of %)", 1),
)
"""The charts of a coordinators' comparison, run by run: ``runs.csv`` column, title, divisor."""


def simulation_frames(sim_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(runs, spread)`` of a simulation directory: ``runs.csv`` as a frame, and ``spread`` with one
    row per (``run``, ``tier``): ``segments_max_minus_min`` (int) over the tier's historicals after
    applying the run (``run-NNN/historicals.csv``), the decommissioning ones (``servers`` of the
    run's plan summary) left out. Raises :class:`ReportError` without ``runs.csv``."""
    try:
        runs = pd.read_csv(sim_dir / "runs.csv")
    except FileNotFoundError:
        raise ReportError(f"{sim_dir}: no runs.csv; not a simulation directory") from None
    rows = []
    for run in runs["run"]:
        base = sim_dir / f"run-{int(run):03d}"
        held = pd.read_csv(base / "historicals.csv")
        decommissioning = {s.server for s in _read_summary(base / "plan").servers if s.decommissioning}
        live = held[~held["server"].isin(decommissioning)]
        for tier, part in live.groupby("tier"):
            rows.append(
                {
                    "run": int(run),
                    "tier": tier,
                    "segments_max_minus_min": int(part["segments"].max() - part["segments"].min()),
                }
            )
    return runs, pd.DataFrame(rows, columns=["run", "tier", "segments_max_minus_min"])


def simulation_report(sim_dir: str | Path) -> str:
    """The HTML of a simulation's report (module docstring). Raises :class:`ReportError`."""
    import plotly.graph_objects as go

    sim = Path(sim_dir)
    runs, spread = simulation_frames(sim)
    x = runs["run"].astype(int).tolist()
    status = go.Figure()
    # unreplicated drawn last, dashed, over the under-replicated line it often equals (0 and 0)
    for column, name, color, dash, size in (
        ("underreplicated_before", "underreplicated", STATUS_COLORS["underreplicated"], "solid", 10),
        ("unreplicated_before", "unreplicated", STATUS_COLORS["unreplicated"], "dash", 6),
    ):
        status.add_trace(
            go.Scatter(
                x=x,
                y=runs[column].astype(int).tolist(),
                name=name,
                mode="lines+markers",
                line={"color": color, "dash": dash},
                marker={"size": size},
            )
        )
    status.update_layout(title="segments at the start of each run", xaxis={"title": "run", "dtick": 1}, height=340)
    balance = go.Figure()
    for tier, part in spread.groupby("tier"):
        balance.add_trace(
            go.Scatter(
                x=part["run"].tolist(), y=part["segments_max_minus_min"].tolist(), name=tier, mode="lines+markers"
            )
        )
    balance.update_layout(
        title="max − min segments per tier after each run", xaxis={"title": "run", "dtick": 1}, height=340
    )
    moves = go.Figure()
    for column, name in (
        ("loads", "loads"),
        ("drops", "drops"),
        ("moves", "moves"),
        ("balancing_moves", "balancing moves"),
    ):
        moves.add_trace(go.Bar(x=x, y=runs[column].astype(int).tolist(), name=name))
    moves.update_layout(
        title="operations planned per run", barmode="group", xaxis={"title": "run", "dtick": 1}, height=340
    )
    charts = {
        "status": figure_html(status, "chart-sim-status"),
        "balance": figure_html(balance, "chart-sim-balance"),
        "moves": figure_html(moves, "chart-sim-moves"),
    }
    margins = _per_run_table(sim, MARGINS_FILE)
    if margins is not None:
        charts["margins"] = figure_html(
            _margin_figure(margins, "balancing_moves", "balancing moves per run by margin"), "chart-sim-margins"
        )
        charts["margin_bytes"] = figure_html(
            _margin_figure(
                margins.assign(balancing_bytes=margins["balancing_bytes"] / 2**30),
                "balancing_bytes",
                "GiB moved by balancing per run by margin",
            ),
            "chart-sim-margin-bytes",
        )
    coordinators = _per_run_table(sim, COORDINATORS_FILE)
    if coordinators is not None:
        for column, title, divisor in COORDINATOR_CHARTS:
            charts[f"coordinators_{column}"] = figure_html(
                _runs_by_figure(
                    coordinators.assign(**{column: coordinators[column] / divisor}),
                    "coordinator",
                    column,
                    title,
                    str,
                    "coordinator",
                ),
                f"chart-sim-coordinators-{column.replace('_', '-')}",
            )
    reports = {
        int(r): f"run-{int(r):03d}/plan/{REPORT_FILE}"
        for r in x
        if (sim / f"run-{int(r):03d}" / "plan" / REPORT_FILE).is_file()
    }
    return (
        template_environment()
        .get_template("simulation_report.html.j2")
        .render(
            title=f"Simulation {sim.parent.name}/{sim.name}",
            runs=runs.to_dict("records"),
            columns=list(runs.columns),
            charts=charts,
            reports=reports,
            plotlyjs=plotly_js(),
            margins=None if margins is None else margin_summary(margins, sim),
            coordinators=None if coordinators is None else coordinator_summary(coordinators, sim),
            coordinator_charts=[f"coordinators_{c}" for c, _, _ in COORDINATOR_CHARTS],
        )
    )


def margin_name(margin: float) -> str:
    """A margin's label and directory name under ``margins/``: ``2`` for 2.0, ``2.5`` for 2.5."""
    return f"{float(margin):g}"


def _per_run_table(sim: Path, name: str) -> pd.DataFrame | None:
    """``sim/name`` (:data:`MARGINS_FILE`, :data:`COORDINATORS_FILE`) as a frame, or None without one."""
    path = sim / name
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable ({exc})") from exc


def _margin_figure(margins: pd.DataFrame, column: str, title: str):
    """One line per margin of ``column`` (numbers) over the runs (plotly figure), from 0 up."""
    return _runs_by_figure(
        margins, "margin", column, title, lambda m: f"{margin_name(m)} %", "balancingMinCostReductionPercent"
    )


def _runs_by_figure(table: pd.DataFrame, by: str, column: str, title: str, label, legend: str):
    """One line per value of ``by`` (named ``label(value)``) of ``column`` (numbers) over the runs
    (plotly figure), from 0 up; each line dashed differently, so that equal lines stay visible."""
    import plotly.graph_objects as go

    fig = go.Figure()
    dashes = ("solid", "dash", "dot", "dashdot")
    for i, (value, part) in enumerate(table.groupby(by, sort=False)):
        fig.add_trace(
            go.Scatter(
                x=part["run"].astype(int).tolist(),
                y=part[column].round(2).tolist(),
                name=label(value),
                mode="lines+markers",
                line={"dash": dashes[i % len(dashes)]},
            )
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "run", "dtick": 1},
        yaxis={"rangemode": "tozero"},
        height=340,
        legend={"title": {"text": legend}},
    )
    return fig


def margin_summary(margins: pd.DataFrame, sim: Path | None = None) -> list[dict]:
    """Per margin of a ``margins.csv`` frame, ascending: ``margin`` (float), ``moves`` and
    ``bytes`` (balancing moves and their bytes over all runs), ``quiet_from`` (the first run from
    which no run has a balancing move; None if the last run has one), ``segments_spread`` and
    ``bytes_spread`` (max − min per historical after the last run, the largest over the tiers),
    ``total_cost`` after the last run, and ``report`` (the margin's report, relative to ``sim``,
    when ``sim`` is given and it exists)."""
    out = []
    for margin, part in margins.sort_values(["margin", "run"]).groupby("margin"):
        moved = part["balancing_moves"].to_numpy()
        last_busy = max((int(r) for r, m in zip(part["run"], moved) if m > 0), default=None)
        if last_busy is None:
            quiet = int(part["run"].min())
        else:
            quiet = last_busy + 1 if last_busy < int(part["run"].max()) else None
        last = part.iloc[-1]
        row = {
            "margin": float(margin),
            "moves": int(moved.sum()),
            "bytes": int(part["balancing_bytes"].sum()),
            "quiet_from": quiet,
            "segments_spread": int(last["segments_max_minus_min"]),
            "bytes_spread": int(last["bytes_max_minus_min"]),
            "total_cost": float(last["total_cost"]),
            "report": None,
        }
        if sim is not None:  # the simulation's own margin has no directory under margins/
            own = not (sim / "margins" / margin_name(margin)).is_dir()
            rel = REPORT_FILE if own else f"margins/{margin_name(margin)}/{REPORT_FILE}"
            row["report"] = rel if (sim / rel).is_file() else None
        out.append(row)
    return out


def coordinator_summary(coordinators: pd.DataFrame, sim: Path | None = None) -> list[dict]:
    """Per coordinator of a ``coordinators.csv`` frame, in its order: ``coordinator``,
    ``loaded_from`` (the first run that starts with nothing unavailable or under-replicated; None
    if none does), ``moves`` and ``moved_bytes`` over all runs, ``usage_spread`` (max − min usage
    after the last run, widest tier, points of %), ``fullest_usage`` after the last run (%),
    ``segments_spread`` after the last run, and ``report`` (that coordinator's simulation report,
    relative to ``sim``, when ``sim`` is given and it exists)."""
    out = []
    for coordinator, part in coordinators.sort_values("run", kind="stable").groupby("coordinator", sort=False):
        loaded = part[(part["unreplicated_before"] == 0) & (part["underreplicated_before"] == 0)]
        last = part.iloc[-1]
        row = {
            "coordinator": coordinator,
            "loaded_from": int(loaded["run"].min()) if len(loaded) else None,
            "moves": int(part["moves"].sum()),
            "moved_bytes": int(part["moved_bytes"].sum()),
            "usage_spread": float(last["usage_max_minus_min"]),
            "fullest_usage": float(last["fullest_usage"]),
            "segments_spread": int(last["segments_max_minus_min"]),
            "report": None,
        }
        if sim is not None:  # the simulation's own coordinator has no directory under coordinators/
            own = not (sim / COORDINATORS_DIR / coordinator).is_dir()
            rel = REPORT_FILE if own else f"{COORDINATORS_DIR}/{coordinator}/{REPORT_FILE}"
            row["report"] = rel if (sim / rel).is_file() else None
        out.append(row)
    return out


def write_simulation_report(sim_dir: str | Path) -> Path:
    """Write ``sim_dir/report.html`` atomically (:func:`simulation_report`) and return its path."""
    path = Path(sim_dir) / REPORT_FILE
    write_text_atomic(simulation_report(sim_dir), path)
    log.info("simulation report written to %s", path)
    return path


def rebuild(directory: str | Path) -> list[Path]:
    """``python -m segment_balancer report DIR``: (re)write the report of a plan directory, or of a
    simulation directory and of each of its runs' plans; a plan directory with a ``simulation/``
    gets both. Returns the reports written. Raises :class:`ReportError` when ``DIR`` is neither."""
    d = Path(directory)
    written = []
    if (d / "summary.json").is_file():
        written.append(write_report(d))
        if (d / "simulation" / "runs.csv").is_file():
            written += rebuild(d / "simulation")
    elif (d / "runs.csv").is_file():
        for plan in sorted(d.glob("run-*/plan")):
            if (plan / "summary.json").is_file():
                written.append(write_report(plan))
        written.append(write_simulation_report(d))
    else:
        raise ReportError(f"{d}: neither a plan directory (summary.json) nor a simulation (runs.csv)")
    return written
