"""The published plans in the Airflow UI: the FastAPI app the ``segment_balancer`` plugin
(``plugins/segment_balancer_plugin.py``) mounts at :data:`URL_PREFIX`.

Routes, under the prefix:

- ``GET /runs/{run_id}``: the ``report.html`` of a DAG run's published plan
  (``run_paths(segment_balancer_home(), run_id)["publish_dir"]``) with a navigation bar after its
  ``<body>`` tag; for a run that published no plan (still running, failed, a run of another DAG), a
  page saying so, naming the run and where its plan would be (404).
- ``GET /plans`` (``?cluster=``): every published plan newest first, with its headline numbers and
  their change since the plan it is compared with (``segment_balancer.plan.history.plan_history``);
  ``GET /plans.json``: the same list as JSON (``PlanEntry.as_dict()`` each).
- ``GET /plans/{name}/explain?segment=ID[&format=json]``: a form, and what the plan did with the
  segment and why (``segment_balancer.plan.explain.explain_plan``), as HTML or JSON; 404 with
  ``PlanExplainError``'s message for an unknown segment or a plan without explain tables. With
  ``find=PREFIX`` and/or ``datasource=DS`` instead: the plan's segments whose id starts so, each
  linking to its explanation (``explain.find_segments``).
- ``GET /plans/{name}/{path}``: the files named ``report.html`` of a plan (``report.html``,
  ``simulation/report.html``, ``simulation/run-NNN/plan/report.html``, ``advice/report.html``,
  ``advice/issue7458/report.html``, the other coordinator's
  ``compared/<coordinator>/report.html``), and the scripts of their tables of operations
  (``operations/index.js``, ``operations/rows-NNNNN.js`` beside each).

A plan ``name`` is a non-hidden directory right under ``<home>/plans``; a file must resolve inside
its plan directory and have no hidden name on its way. Anything else is 404.

Auth: Airflow protects no plugin app by itself, so every route depends on :data:`AUTHORIZED`: the
auth manager's user of the request (the JWT of an ``Authorization: Bearer`` header, else of the
``_token`` cookie the browser holds once logged in to the UI; 401 without one) must be allowed to
read runs of the ``segment_balancing`` DAG (403 otherwise).

Pages are Jinja2 templates (``templates/``, autoescaped) with inline CSS and no external resource;
every link is an absolute path under :data:`URL_PREFIX` (:func:`href`), so it works inside the UI's
iframe. Import-light: ``explain`` (pandas) is imported by its route only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, Query
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import is_plain_child
from segment_balancer.plan.history import plan_history, signed_change
from segment_balancer.plan.layout import ADVICE_DIR
from segment_balancer_airflow.resolve import DAG_ID, plans_root, run_paths, segment_balancer_home

URL_PREFIX = "/segment-balancer"
"""Where the plugin mounts :data:`app`; also the path the browser sees, as ``[api] base_url`` has
no sub-path."""
REPORT = "report.html"

AUTHORIZED = requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN, param_dag_id=DAG_ID)
"""The dependency of every route: the request's user may read runs of ``segment_balancing``
(``HTTPException`` 401 without a valid JWT, 403 when the auth manager refuses)."""

app = FastAPI(
    title="segment_balancer plans", dependencies=[Depends(AUTHORIZED)], docs_url=None, redoc_url=None, openapi_url=None
)

NO_CACHE = {"Cache-Control": "no-cache"}  # a re-run replaces the plan under the same URL
_BODY = re.compile(r"<body\b[^>]*>", re.IGNORECASE)
_RELATIVE_HREF = re.compile(r'href="(?=(?:compared|simulation)/)')
"""An ``href`` of the report to another report of its plan (the other coordinator's plan, the
simulation): relative to the plan's directory. Only these: the report's inline ``plotly.js`` has
``href="`` strings of its own, which must stay as they are."""
_DETAIL_LISTS = ("tried", "tiers", "top_b", "refused")
_OPERATIONS_SCRIPT = re.compile(r"(?:index|rows-\d{5})\.js")
"""A script of a report's table of operations (``plan.operations_table``), in its ``operations/``."""


def href(*parts: str) -> str:
    """The absolute URL path of a page of :data:`app`, the one way pages link: :data:`URL_PREFIX`,
    then ``parts`` joined by ``/`` (each percent-encoded, ``/`` kept): ``href("plans", name,
    "explain")`` is ``/segment-balancer/plans/<name>/explain``."""
    return "/".join([URL_PREFIX, *(quote(p, safe="/") for p in parts)])


def number(n: int) -> str:
    """``n`` with thousands separators: ``1,234``."""
    return f"{n:,}"


def detail_facts(detail: dict) -> list[tuple[str, object]]:
    """The plain facts of a decision's detail, in order: every key but the server lists
    (``tried``, ``tiers``, ``top_b``, ``refused``), as ``explain.render_explain`` shows them."""
    return [(k, v) for k, v in detail.items() if k not in _DETAIL_LISTS]


_templates = Environment(
    loader=FileSystemLoader(Path(__file__).resolve().parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_templates.globals["href"] = href
_templates.filters.update(number=number, change=signed_change, detail_facts=detail_facts)


def _page(template: str, status_code: int = 200, **context) -> HTMLResponse:
    return HTMLResponse(_templates.get_template(template).render(**context), status_code=status_code)


def _not_found(title: str, *message: str) -> HTMLResponse:
    return _page("message.html", 404, title=title, message=message)


def _plans_root() -> Path:
    return plans_root(segment_balancer_home())


def plan_dir(name: str) -> Path | None:
    """The directory of the published plan ``name``: a non-hidden directory right under
    ``<home>/plans`` (also once resolved); None for any other name (``/``, ``..``, leading ``.``)."""
    if not name or "/" in name or ".." in name or name.startswith("."):
        return None
    root = _plans_root()
    path = root / name
    return path if path.is_dir() and is_plain_child(path, root) else None


@app.get("/runs/{run_id:path}", response_class=HTMLResponse)
def run_view(run_id: str, dag_id: str = DAG_ID) -> HTMLResponse:
    """The report of DAG run ``run_id``'s published plan, the navigation bar inserted after its
    ``<body>`` tag (at the start without one; with a link to the other coordinator's plan of a
    compared run) and its relative links made absolute paths into the plan; a 404 page naming the
    run and where its plan would be when the run published none (or a plan without a report), or
    when ``dag_id`` (the UI fills it in: the tab is on the runs of every DAG) is not
    ``segment_balancing``, whose runs alone publish plans (a run of another DAG may have the same run id)."""
    if dag_id != DAG_ID:
        return _not_found(
            "No plan for this run", f"DAG run {run_id} is a run of {dag_id}: only runs of {DAG_ID} publish plans."
        )
    publish_dir = run_paths(segment_balancer_home(), run_id)["publish_dir"]
    plan = plan_dir(publish_dir.name) if publish_dir.parent == _plans_root() else None
    if plan is None:
        return _not_found(
            "No plan for this run",
            f"DAG run {run_id} has no published plan: there is nothing at {publish_dir}.",
            "A run publishes its plan when it succeeds; a run still running, a failed run "
            f"or a run of another DAG than {DAG_ID} has none.",
        )
    if not (plan / REPORT).is_file():
        return _not_found(
            "No report for this run",
            f"The plan of DAG run {run_id} is published at {plan}, but it has no {REPORT} "
            "(it was published before reports were written).",
        )
    from segment_balancer.plan.compare import COMPARED_DIR  # pandas: imported by the route only

    # the report's links to files of its plan (the other coordinator's plan) resolve from the plan
    report = _RELATIVE_HREF.sub(f'href="{href("plans", plan.name)}/', (plan / REPORT).read_text(encoding="utf-8"))
    compared = sorted(p.parent.name for p in (plan / COMPARED_DIR).glob(f"*/{REPORT}"))
    nav = _templates.get_template("nav.html").render(
        name=plan.name,
        simulation=(plan / "simulation" / REPORT).is_file(),
        advice=(plan / ADVICE_DIR / REPORT).is_file(),
        compared=compared,
    ) + _report_links(plan.name)
    head_end = report.lower().find("</head>")
    body = _BODY.search(report, max(head_end, 0))
    at = body.end() if body else 0
    return HTMLResponse(report[:at] + nav + report[at:], headers=NO_CACHE)


def _report_links(name: str) -> str:
    """The script that tells the report of plan ``name`` where the files of its table of
    operations are (``SB_PLAN_BASE``) and where a segment's explanation is (``SB_EXPLAIN_URL``)."""
    links = {"SB_PLAN_BASE": href("plans", name) + "/", "SB_EXPLAIN_URL": href("plans", name, "explain") + "?segment="}
    return _templates.get_template("report_links.html").render(links=links)


@app.get("/plans", response_class=HTMLResponse)
def plans_page(cluster: str | None = None) -> HTMLResponse:
    """Every published plan (of ``cluster`` when given), newest first: headline numbers, their
    change since the plan each is compared with, and links to its report, simulation and explain."""
    root = _plans_root()
    return _page("plans.html", entries=plan_history(root, cluster or None), cluster=cluster or None, root=str(root))


@app.get("/plans.json")
def plans_json(cluster: str | None = None) -> list[dict]:
    """:func:`plans_page`'s list as JSON: ``PlanEntry.as_dict()`` of each plan, newest first."""
    return [entry.as_dict() for entry in plan_history(_plans_root(), cluster or None)]


@app.get("/plans/{name}/explain", response_class=HTMLResponse)
def explain_page(
    name: str,
    segment: str | None = None,
    fmt: Literal["html", "json"] = Query("html", alias="format"),
    find: str | None = None,
    datasource: str | None = None,
) -> Response:
    """The explain form of plan ``name`` and, for ``segment``, ``explain_plan``'s answer as HTML
    (the stages ``render_explain`` shows) or, with ``format=json``, as JSON. 404 (message on the
    page, ``{"detail": message}`` in JSON) for an unknown plan or segment, a plan without explain
    tables or whose summary does not read; JSON without ``segment`` is 400."""
    from segment_balancer.plan.explain import FOUND_LIMIT, NOTHING_UNDONE, explain_plan, find_segments, plan_datasources

    plan = plan_dir(name)
    answer, error, found = None, None, None
    if plan is None:
        error = f"no published plan named {name} under {_plans_root()}"
    elif fmt == "html" and not segment and (find or datasource):
        try:
            found = find_segments(plan, find or "", datasource or None)
        except InputError as exc:
            error = str(exc)
    elif segment:
        try:
            answer = explain_plan(plan, segment)
        except InputError as exc:  # an unknown segment, no explain tables, a summary that does not read
            error = str(exc)
    if fmt == "json":
        if error is None and answer is None:
            return JSONResponse({"detail": "no segment given: add ?segment=<segment id>"}, status_code=400)
        return JSONResponse(answer) if error is None else JSONResponse({"detail": error}, status_code=404)
    if plan is None:
        return _not_found("No such plan", error)
    return _page(
        "explain.html",
        404 if error else 200,
        name=name,
        segment=segment or "",
        error=error,
        answer=answer,
        stages=shown_stages(answer) if answer else [],
        has_report=(plan / REPORT).is_file(),
        nothing_undone=NOTHING_UNDONE,
        find=find or "",
        datasource=datasource or "",
        found=found,
        found_limit=FOUND_LIMIT,
        datasources=plan_datasources(plan),
    )


def shown_stages(answer: dict) -> list[dict]:
    """The stages of an ``explain_plan`` answer that ``render_explain`` shows, in order: those with
    operations or decisions, or whose groups differ from the last shown stage's; each with
    ``groups_changed`` (then its groups and counts are shown)."""
    shown, previous = [], None
    for stage in answer["stages"]:
        changed = stage["groups"] != previous
        if stage["operations"] or stage["decisions"] or changed:
            shown.append({**stage, "groups_changed": changed})
            previous = stage["groups"]
    return shown


@app.get("/plans/{name}/{path:path}")
def plan_file(name: str, path: str) -> Response:
    """A file named ``report.html`` of plan ``name`` at ``path`` (``report.html``,
    ``simulation/report.html``, ``simulation/run-002/plan/report.html``) as ``text/html`` (the plan's
    own with :func:`_report_links`), or a script of a report's table of operations
    (``operations/index.js``, ``operations/rows-NNNNN.js``) as ``text/javascript``; 404 for any
    other name, a hidden part, a path resolving outside the plan, or a missing file."""
    plan = plan_dir(name)
    parts = path.split("/")
    script = len(parts) >= 2 and parts[-2] == "operations" and _OPERATIONS_SCRIPT.fullmatch(parts[-1])
    if plan is not None and (parts[-1] == REPORT or script) and not any(p.startswith(".") for p in parts):
        target = (plan / path).resolve()
        if target.is_relative_to(plan.resolve()) and target.is_file():
            if script:
                return FileResponse(target, media_type="text/javascript", headers=NO_CACHE)
            if path == REPORT:  # the plan's own report: its table of operations links to explain
                report = target.read_text(encoding="utf-8")
                body = _BODY.search(report, max(report.lower().find("</head>"), 0))
                at = body.end() if body else 0
                return HTMLResponse(report[:at] + _report_links(name) + report[at:], headers=NO_CACHE)
            return FileResponse(target, media_type="text/html", headers=NO_CACHE)
    return _not_found("Not found", f"No report {path} in a published plan named {name}.")
