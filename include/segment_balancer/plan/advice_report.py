"""``report.html`` beside ``advice.json``: a chart per measure (every candidate's runs, the Pareto
front drawn bold, the others faint, #7458 dashed; a candidate by its number in ``advice.json``'s
``candidates``, from 1), the candidates' table (the front marked, the recommendation first) and the
config to POST (``tools.advise``, ``docs/ADVISOR.md``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import write_text_atomic
from segment_balancer.plan.layout import ADVICE_FILE
from segment_balancer.plan.report import REPORT_FILE, figure_html, plotly_js, template_environment

RUN_CHARTS = (
    ("not_loaded", "not loaded after each run (Druid: unavailable + replicas missing; #7458: segments)", 1),
    ("moves", "segments moved per run", 1),
    ("moved_bytes", "GiB moved per run", 2**30),
    ("max_minus_min_disk_pct", "widest max − min disk % of a tier after each run (points)", 1),
    ("max_minus_min_segments", "widest max − min segments of a tier after each run", 1),
    ("peak_fullest_disk_pct", "fullest disk % while each run's requests complete", 1),
)
"""The charts of the report: a value of every run of every candidate (``runs`` of its row), its
title, the divisor of its values."""
TABLE_COLUMNS = (
    ("runs_to_loaded", "loaded from run"),
    ("runs_to_quiet", "quiet from run"),
    ("segments_moved", "segments moved"),
    ("bytes_moved", "bytes moved"),
    ("max_minus_min_disk_pct", "max − min disk % after"),
    ("max_minus_min_segments", "max − min segments after"),
    ("fullest_disk_pct", "fullest disk % after"),
    ("peak_fullest_disk_pct", "peak fullest disk %"),
)
"""The measures the candidates' table shows, with their headings."""
ISSUE7458_COLOR = "#1f2933"
FRONT_COLORS = ("#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
OTHER_COLOR = "#c3cad3"


def read_advice(directory: Path) -> dict[str, Any]:
    """``advice.json`` of ``directory``. Raises ``InputError`` when it is missing or not JSON."""
    path = Path(directory) / ADVICE_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the advice: {exc}") from None


def _value(run: dict, column: str) -> float | None:
    if column == "not_loaded":
        return run["unavailable"] + run["under_replicated"]
    return run.get(column)


def run_figure(advice: dict, column: str, title: str, divisor: float):
    """One line per candidate of ``column`` over its runs (plotly figure): the front's in colour,
    the recommended one thickest, the others faint grey; #7458's dashed."""
    import plotly.graph_objects as go  # plotly loads in some 0.3 s: only once a report is drawn

    fig = go.Figure()
    recommended = advice["recommended"]["name"]
    colors = iter(FRONT_COLORS * 4)
    numbered = list(enumerate(advice["candidates"], start=1))
    for number, row in sorted(numbered, key=lambda nr: (nr[1]["pareto"], nr[1]["name"] == recommended)):
        runs = [r for r in row["runs"] if _value(r, column) is not None]
        on = row["pareto"]
        fig.add_trace(
            go.Scatter(
                x=[r["run"] for r in runs],
                y=[_value(r, column) / divisor for r in runs],
                name=f"{number}" + (" recommended" if row["name"] == recommended else ""),
                hovertemplate=f"{number}: {row['name']}<br>run %{{x}}: %{{y}}<extra></extra>",
                mode="lines+markers",
                line={
                    "color": next(colors) if on else OTHER_COLOR,
                    "width": 4 if row["name"] == recommended else 2 if on else 1,
                },
                marker={"size": 6 if on else 3},
                opacity=1.0 if on else 0.7,
                legendgroup="front" if on else "others",
            )
        )
    issue7458 = advice.get("issue7458")
    if issue7458:
        runs = [r for r in issue7458["runs"] if _value(r, column) is not None]
        fig.add_trace(
            go.Scatter(
                x=[r["run"] for r in runs],
                y=[_value(r, column) / divisor for r in runs],
                name="#7458",
                mode="lines+markers",
                line={"color": ISSUE7458_COLOR, "dash": "dash", "width": 2},
            )
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "run", "dtick": 1},
        yaxis={"rangemode": "tozero"},
        height=400,
        legend={"title": {"text": "candidate"}, "font": {"size": 10}, "tracegroupgap": 0},
    )
    return fig


def advice_report(directory: str | Path) -> str:
    """The HTML of the report of ``directory``'s advice. Raises ``InputError`` (no advice)."""
    directory = Path(directory)
    advice = read_advice(directory)
    charts = {
        column: figure_html(run_figure(advice, column, title, divisor), f"chart-advice-{column.replace('_', '-')}")
        for column, title, divisor in RUN_CHARTS
    }
    recommended = advice["recommended"]["name"]
    numbered = [{**r, "number": n} for n, r in enumerate(advice["candidates"], start=1)]
    rows = sorted(numbered, key=lambda r: (r["name"] != recommended, not r["pareto"], r["number"]))
    post = json.dumps(advice["config_diff"], indent=2)
    return (
        template_environment()
        .get_template("advice_report.html.j2")
        .render(
            title=f"Advice {directory.name}",
            advice=advice,
            rows=rows,
            columns=TABLE_COLUMNS,
            charts=charts,
            chart_names=[c for c, _, _ in RUN_CHARTS],
            post=post,
            plotlyjs=plotly_js(),
        )
    )


def write_advice_report(directory: str | Path) -> Path:
    """Write ``report.html`` of ``directory``'s advice (atomically) and return its path."""
    path = Path(directory) / REPORT_FILE
    write_text_atomic(advice_report(directory), path)
    return path
