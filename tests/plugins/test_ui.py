"""The plans UI (``segment_balancer_airflow.ui``) and the ``segment_balancer`` plugin, on plan
directories written by hand (no Spark).

The history under ``$SEGMENT_BALANCER_HOME/plans`` (newest snapshot first; numbers are
operations, loads, drops, moves, unreplicated after, underreplicated after (summed over tiers),
max − min per tier after, deferred drops):

========  ========  ==================  =====  =====  ====  =====  =====  =========  ===================  ========
plan      cluster   snapshot            ops    loads  drops moves  unrep  underrep   max − min            deferred
========  ========  ==================  =====  =====  ====  =====  =====  =========  ===================  ========
P3        prod      11-22 10:00         1,230  1,000  230   90     1      4 + 0 = 4  hot 3, _default 1    1
WHATIF    prod      11-22 09:00         50     30     20    20     0      0          hot 2                0
S1        staging   11-21 12:00         5      5      0     0      0      0          _default 2           0
P2        prod      11-21 10:00         1,234  1,000  234   100    1      2 + 0 = 2  hot 6, _default 1    3
P1        prod      11-20 10:00         10     6      4     2      3      5 + 2 = 7  hot 4, _default 1    0
========  ========  ==================  =====  =====  ====  =====  =====  =========  ===================  ========

WHATIF decommissions a historical: it is compared with P2 but is nobody's previous plan, so P3 is
compared with P2 too. By hand, P3 − P2: ops −4, loads ±0, drops −4, moves −10, unreplicated ±0,
underreplicated +2, max − min hot −3, _default_tier ±0. WHATIF − P2: −1,184, −970, −214, −80,
−1, −2, hot −4 (it has no _default_tier). P2 − P1: +1,224, +994, +230, +98, −2, −5, hot +2,
_default_tier ±0. P1 and S1 are the first plans of their clusters.

Explain (P3's tables): segment ``S`` (idx 0) has target 2 in ``hot`` and one replica on
``hist-1:8083`` in ``_default_tier`` (no target there). Stage 3 loads it on ``hot-1`` and
``hot-2`` (ops 11, 12). Stage 12 finds 1 excess replica (3 held, Σ target 2), but only queued
loads in ``hot``: loaded = 0 < required = min(2, 2) = 2, and dropping from a tier with target 0
leaves ``loaded`` as it is, so the drop from ``hist-1`` is refused: 1 drop deferred. Segment
``T`` (idx 1) is unreplicated; its one candidate ``hot-1`` has 50 bytes for its 100: not loaded
in stage 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from datetime import datetime
from html import unescape
from html.parser import HTMLParser
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from plan_summaries import summary as plan_summary
from plan_summaries import whatif_record

from segment_balancer.planner.summary import PlanSummary
from segment_balancer_airflow import ui

P1 = "scheduled__2026-11-20T10_00_00_00_00~aaa29d879116"
P2 = "scheduled__2026-11-21T10_00_00_00_00~40109394391a"
WHATIF = "manual__2026-11-22T09_30_00_00_00"
P3_RUN = "scheduled__2026-11-22T10:00:00+00:00"
# run_dir_name: each run of [^A-Za-z0-9._-] becomes "_", then "~" and the first 12 hex digits of
# `printf '%s' scheduled__2026-11-22T10:00:00+00:00 | sha256sum`
P3 = "scheduled__2026-11-22T10_00_00_00_00~3cebb96b6392"
S1 = "staging-2026-11-21"
S = "wiki_2026-01-01T00:00:00.000Z_2026-01-02T00:00:00.000Z_2026-01-03T00:00:00.000Z"
T = "wiki_2026-01-02T00:00:00.000Z_2026-01-03T00:00:00.000Z_2026-01-03T00:00:00.000Z"
PREFIX = "/segment-balancer"


def write_plan(
    root,
    name,
    *,
    cluster,
    snapshot_time,
    published,
    ops,
    loads,
    drops,
    moves,
    unreplicated,
    under,
    spread,
    deferred,
    whatif=None,
    valid=True,
    report=True,
):
    """A published plan as ``history`` reads it: ``summary.json`` (its mtime = ``published``;
    ``plan_summaries.summary`` with the numbers above), ``validation.json`` and a tiny ``report.html``."""
    plan = root / name
    plan.mkdir(parents=True)
    summary = plan_summary(
        cluster, snapshot_time, loads=loads, drops=drops, moves=moves, deferred=deferred, whatif=whatif
    )
    summary.update(
        operations=ops,
        status_before={"unreplicated": 99, "tiers": {t: {"underreplicated": 99} for t in under}},
        status_after={
            "unreplicated": unreplicated,
            "tiers": {t: {"underreplicated": n, "overreplicated": 0} for t, n in under.items()},
        },
        balance_before={t: {"servers": 2, "segments_max_minus_min": 99, "bytes_max_minus_min": 0} for t in spread},
        balance_after={
            t: {"servers": 2, "segments_max_minus_min": n, "bytes_max_minus_min": 0} for t, n in spread.items()
        },
    )
    (plan / "summary.json").write_text(json.dumps(PlanSummary.model_validate(summary).model_dump(mode="json")))
    when = datetime.fromisoformat(published.replace("Z", "+00:00")).timestamp()
    os.utime(plan / "summary.json", (when, when))
    (plan / "validation.json").write_text(json.dumps({"success": valid}))
    if report:
        (plan / "report.html").write_text(
            f"<!doctype html><html><head><title>{name}</title></head>"
            f'<body class="report">\n<h1>Plan {name}</h1>\n</body></html>'
        )
    return plan


def write_explain_tables(plan):
    """The explain tables of segments ``S`` and ``T`` (module docstring), and of an op of ``T``'s
    datasource neighbour that must not show."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyroaring import BitMap

    from segment_balancer.planner.groups import encode

    pq.write_table(
        pa.table(
            {
                "segment_id": [S, T],
                "idx": pa.array([0, 1], pa.int64()),
                "datasource": ["wiki", "wiki"],
                "size_bytes": pa.array([1500, 100], pa.int64()),
                "used": [True, True],
                "overshadowed": [False, False],
                "rule_kind": ["loadForever", "loadForever"],
                "required": pa.array([2, 1], pa.int32()),
                "waiting": [False, False],
                "targets": ['{"hot": 2}', '{"hot": 1}'],
            }
        ),
        plan / "segments.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "op_id": pa.array([5, 11, 12], pa.int64()),
                "stage": pa.array([1, 3, 3], pa.int32()),
                "action": ["LOAD", "LOAD", "LOAD"],
                "queue_type": ["loading", "loading", "loading"],
                "segment_id": ["other", S, S],
                "datasource": ["wiki"] * 3,
                "tier": ["hot"] * 3,
                "server": ["hot-1:8083", "hot-1:8083", "hot-2:8083"],
                "size_bytes": pa.array([10, 1500, 1500], pa.int64()),
                "depends_on": pa.array([None, None, None], pa.int64()),
                "reason": ["unreplicated", "underreplicated", "underreplicated"],
            }
        ),
        plan / "operations.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "segment_id": [S, S, S],
                "server": ["hist-1:8083", "hot-1:8083", "hot-2:8083"],
                "tier": ["_default_tier", "hot", "hot"],
            }
        ),
        plan / "assignment.parquet",
    )
    deferred = {
        "deferred": 1,
        "loaded": 0,
        "required": 2,
        "refused": [["_default_tier", "hist-1:8083"]],
        "targets": {"_default_tier": 0, "hot": 2},
        "counts": {"_default_tier": 1, "hot": 2},
    }
    not_loaded = {
        "tiers": {
            "hot": {
                "target": 1,
                "count": 0,
                "b": 1,
                "tried": [["hot-1:8083", "capacity: 50 bytes available, the segment has 100"]],
            }
        }
    }
    pq.write_table(
        pa.table(
            {
                "stage": pa.array([12, 1], pa.int32()),
                "step": ["unload", "unreplicated"],
                "idx": pa.array([0, 1], pa.int64()),
                "segment_id": [S, T],
                "tier": pa.array([None, None], pa.string()),
                "outcome": ["deferred", "not_loaded"],
                "detail": [json.dumps(deferred), json.dumps(not_loaded)],
            }
        ),
        plan / "decisions.parquet",
    )
    names = ["StillUnderreplicated[hot]", "Unreplicated"]
    (plan / "stage_groups.json").write_text(
        json.dumps(
            {
                "prepare": {
                    "names": names,
                    "changed": {"StillUnderreplicated[hot]": encode(BitMap([0])), "Unreplicated": encode(BitMap([1]))},
                },
                "stage01_unreplicated": {"names": names, "changed": {}},
                "stage03_underreplicated": {"names": names, "changed": {"StillUnderreplicated[hot]": encode(BitMap())}},
                "stage05_decommissioning": {"names": names, "changed": {}},
                "stage12_unload": {"names": names, "changed": {}},
            }
        )
    )


@pytest.fixture
def home(tmp_path, monkeypatch):
    """``$SEGMENT_BALANCER_HOME`` with the five plans of the module docstring."""
    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(tmp_path))
    plans = tmp_path / "plans"
    write_plan(
        plans,
        P1,
        cluster="prod",
        snapshot_time="2026-11-20T10:00:00.000Z",
        published="2026-11-20T10:05:00Z",
        ops=10,
        loads=6,
        drops=4,
        moves=2,
        unreplicated=3,
        under={"hot": 5, "_default_tier": 2},
        spread={"hot": 4, "_default_tier": 1},
        deferred=0,
        valid=False,
    )
    write_plan(
        plans,
        P2,
        cluster="prod",
        snapshot_time="2026-11-21T10:00:00.000Z",
        published="2026-11-21T10:05:00Z",
        ops=1234,
        loads=1000,
        drops=234,
        moves=100,
        unreplicated=1,
        under={"hot": 2, "_default_tier": 0},
        spread={"hot": 6, "_default_tier": 1},
        deferred=3,
    )
    write_plan(
        plans,
        WHATIF,
        cluster="prod",
        snapshot_time="2026-11-22T09:00:00.000Z",
        published="2026-11-22T09:35:00Z",
        ops=50,
        loads=30,
        drops=20,
        moves=20,
        unreplicated=0,
        under={"hot": 0},
        spread={"hot": 2},
        deferred=0,
        whatif=whatif_record(decommission=("hist-1:8083",)),
    )
    p3 = write_plan(
        plans,
        P3,
        cluster="prod",
        snapshot_time="2026-11-22T10:00:00.000Z",
        published="2026-11-22T10:05:00Z",
        ops=1230,
        loads=1000,
        drops=230,
        moves=90,
        unreplicated=1,
        under={"hot": 4, "_default_tier": 0},
        spread={"hot": 3, "_default_tier": 1},
        deferred=1,
    )
    write_plan(
        plans,
        S1,
        cluster="staging",
        snapshot_time="2026-11-21T12:00:00.000Z",
        published="2026-11-21T12:01:00Z",
        ops=5,
        loads=5,
        drops=0,
        moves=0,
        unreplicated=0,
        under={"_default_tier": 0},
        spread={"_default_tier": 2},
        deferred=0,
        whatif=None,
        report=False,
    )
    (p3 / "simulation" / "run-002" / "plan").mkdir(parents=True)
    (p3 / "simulation" / "report.html").write_text("<html><body>simulation of P3</body></html>")
    (p3 / "simulation" / "run-002" / "plan" / "report.html").write_text("<html><body>run 2 of P3</body></html>")
    (p3 / "advice").mkdir()
    (p3 / "advice" / "report.html").write_text("<html><body>advice of P3</body></html>")
    write_explain_tables(p3)
    return tmp_path


@pytest.fixture
def client():
    """A client of the app, the user check replaced by a pass (tested on its own below)."""
    ui.app.dependency_overrides[ui.AUTHORIZED] = lambda: None
    yield TestClient(ui.app)
    ui.app.dependency_overrides.clear()


class Rows(HTMLParser):
    """The ``<tr>`` rows carrying attribute ``attr``: its value -> ``[(data-col, cell text), ...]``,
    the text with runs of white space made one space."""

    def __init__(self, html: str, attr: str):
        super().__init__()
        self.attr, self.rows, self._row, self._cell = attr, {}, None, None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and self.attr in attrs:
            self._row = self.rows.setdefault(attrs[self.attr], [])
        elif tag == "td" and self._row is not None:
            self._cell = [attrs.get("data-col"), ""]

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append((self._cell[0], " ".join(self._cell[1].split())))
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


def text(html: str) -> str:
    """The page's text, tags removed, white space made single spaces."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def links(html: str) -> list[str]:
    return re.findall(r'<a href="([^"]+)"', html)


# ---- the plans page ----------------------------------------------------------------------------
def test_the_plans_page_lists_every_plan_newest_first_with_its_numbers_and_changes(home, client):
    page = client.get("/plans")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    rows = {name: dict(cells) for name, cells in Rows(page.text, "data-plan").rows.items()}
    assert list(rows) == [P3, WHATIF, S1, P2, P1]

    assert rows[P3] == {
        "snapshot_time": "2026-11-22T10:00:00.000Z",
        "cluster": "prod",
        "plan": P3,
        "whatif": "",
        "published_at": "2026-11-22T10:05:00.000Z",
        "operations": "1,230 −4",
        "loads": "1,000 ±0",
        "drops": "230 −4",
        "moves": "90 −10",
        "unreplicated_after": "1 ±0",
        "underreplicated_after": "4 +2",
        "max_minus_min_after": "_default_tier: 1 ±0 hot: 3 −3",
        "deferred_drops": "1",
        "valid": "valid",
        "simulation": "simulation advice",
        "explain": "explain",
        "previous": P2,
    }
    assert rows[WHATIF] == {
        "snapshot_time": "2026-11-22T09:00:00.000Z",
        "cluster": "prod",
        "plan": WHATIF,
        "whatif": "what-if",
        "published_at": "2026-11-22T09:35:00.000Z",
        "operations": "50 −1,184",
        "loads": "30 −970",
        "drops": "20 −214",
        "moves": "20 −80",
        "unreplicated_after": "0 −1",
        "underreplicated_after": "0 −2",
        "max_minus_min_after": "hot: 2 −4",
        "deferred_drops": "0",
        "valid": "valid",
        "simulation": "",
        "explain": "explain",
        "previous": P2,
    }
    assert rows[P2]["operations"] == "1,234 +1,224" and rows[P2]["loads"] == "1,000 +994"
    assert (rows[P2]["drops"], rows[P2]["moves"]) == ("234 +230", "100 +98")
    assert (rows[P2]["unreplicated_after"], rows[P2]["underreplicated_after"]) == ("1 −2", "2 −5")
    assert rows[P2]["max_minus_min_after"] == "_default_tier: 1 ±0 hot: 6 +2"
    assert (rows[P2]["deferred_drops"], rows[P2]["previous"]) == ("3", P1)
    assert rows[P1]["operations"] == "10" and rows[P1]["underreplicated_after"] == "7"
    assert (rows[P1]["valid"], rows[P1]["previous"]) == ("not valid", "— (first of its cluster)")
    assert rows[S1]["plan"] == f"{S1} (no report)" and rows[S1]["previous"] == "— (first of its cluster)"
    assert rows[S1]["max_minus_min_after"] == "_default_tier: 2"

    assert f"{PREFIX}/plans/{P3}/report.html" in links(page.text)
    assert f"{PREFIX}/plans/{P3}/simulation/report.html" in links(page.text)
    assert f"{PREFIX}/plans/{P3}/advice/report.html" in links(page.text)
    assert f"{PREFIX}/plans/{WHATIF}/explain" in links(page.text)
    assert f"{PREFIX}/plans/{S1}/report.html" not in links(page.text)
    assert all(link.startswith(f"{PREFIX}/") for link in links(page.text))
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)  # no external resource


def test_the_plans_page_of_one_cluster(home, client):
    page = client.get("/plans", params={"cluster": "staging"})
    assert list(Rows(page.text, "data-plan").rows) == [S1]
    assert "Published plans of cluster staging" in text(page.text)


def test_no_plans_yet(tmp_path, monkeypatch, client):
    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(tmp_path))
    page = client.get("/plans")
    assert page.status_code == 200
    assert f"No plans published yet under {tmp_path / 'plans'}" in text(page.text)
    assert client.get("/plans.json").json() == []


def test_plans_json(home, client):
    entries = client.get("/plans.json").json()
    assert [e["name"] for e in entries] == [P3, WHATIF, S1, P2, P1]
    p3 = entries[0]
    assert (p3["cluster"], p3["previous"], p3["whatif"], p3["valid"], p3["has_simulation"]) == (
        "prod",
        P2,
        False,
        True,
        True,
    )
    assert p3["diff"] == {
        "operations": -4,
        "loads": 0,
        "drops": -4,
        "moves": -10,
        "unreplicated_after": 0,
        "underreplicated_after": 2,
        "max_minus_min_after": {"_default_tier": 0, "hot": -3},
    }
    assert p3["numbers"]["underreplicated_after"] == 4 and p3["published_at"] == "2026-11-22T10:05:00.000Z"
    assert (entries[1]["whatif"], entries[1]["previous"]) == (True, P2)
    assert (entries[2]["previous"], entries[2]["diff"], entries[2]["has_report"]) == (None, {}, False)
    assert [e["name"] for e in client.get("/plans.json", params={"cluster": "prod"}).json()] == [P3, WHATIF, P2, P1]


# ---- a DAG run's report ------------------------------------------------------------------------
def test_the_run_view_is_the_report_with_the_navigation_bar_after_body(home, client):
    # the UI puts the run id in the href percent-encoded (encodeURIComponent)
    page = client.get(f"/runs/{quote(P3_RUN, safe='')}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    before, nav, script, after = re.fullmatch(
        r"(.*<body class=\"report\">)(<nav id=\"segment-balancer-nav\".*?</nav>)\s*(<script>.*?</script>)(.*)",
        page.text,
        re.S,
    ).groups()
    assert before == f'<!doctype html><html><head><title>{P3}</title></head><body class="report">'
    assert after.strip() == f"<h1>Plan {P3}</h1>\n</body></html>"
    # the report's table of operations: its files and each segment's explanation, inside the plan
    assert script == (
        f'<script>window.SB_PLAN_BASE = "{PREFIX}/plans/{P3}/";'
        f'window.SB_EXPLAIN_URL = "{PREFIX}/plans/{P3}/explain?segment=";</script>'
    )
    assert links(nav) == [
        f"{PREFIX}/plans",
        f"{PREFIX}/plans/{P3}/explain",
        f"{PREFIX}/plans/{P3}/simulation/report.html",
        f"{PREFIX}/plans/{P3}/advice/report.html",
        f"{PREFIX}/plans/{P3}/report.html",
    ]
    assert text(nav) == "All plans Explain a segment Simulation report Advice: which config to set Report alone"
    # the same with the DAG id the UI adds to the tab's URL
    assert client.get(f"/runs/{quote(P3_RUN, safe='')}", params={"dag_id": "segment_balancing"}).text == page.text

    # P2 has no simulation: no link to one
    nav2 = client.get("/runs/scheduled__2026-11-21T10:00:00+00:00").text
    assert "Simulation report" not in nav2 and f"{PREFIX}/plans/{P2}/explain" in links(nav2)


def test_the_run_view_of_a_compared_plan_links_the_other_coordinators_plan(home, client):
    """A plan published with the other coordinator's beside it (``compared/druid/``): the bar links
    that plan's report, and the report's own relative link to it (the side-by-side section's) is
    made an absolute path into the plan, as the page's URL is the run's, not the plan's; fragment
    links, absolute ones and any other ``href="`` (the inline plotly.js has its own) are left alone."""
    p3 = home / "plans" / P3
    (p3 / "compared" / "druid").mkdir(parents=True)
    (p3 / "compared" / "druid" / "report.html").write_text("<html><body>druid's plan of P3</body></html>")
    (p3 / "report.html").write_text(
        '<html><body><a href="#compare">Side by side</a> <a href="compared/druid/report.html">druid</a> '
        '<a href="https://druid.apache.org/">Druid</a> <a href="/elsewhere">x</a> <a href="x.svg">y</a>'
        "<script>var s = '<a href=\"' + u + '\">';</script></body></html>"
    )
    page = client.get(f"/runs/{quote(P3_RUN, safe='')}").text
    nav, body = page.split("</nav>")
    assert f"{PREFIX}/plans/{P3}/compared/druid/report.html" in links(nav) and "Plan of druid" in text(nav)
    assert links(body) == [
        "#compare",
        f"{PREFIX}/plans/{P3}/compared/druid/report.html",
        "https://druid.apache.org/",
        "/elsewhere",
        "x.svg",
        "' + u + '",  # the script's own, untouched
    ]
    assert "var s = '<a href=\"' + u" in body
    served = client.get(f"/plans/{P3}/compared/druid/report.html")
    assert served.status_code == 200 and "druid's plan of P3" in served.text


def test_a_run_without_a_published_plan_says_so(home, client):
    run_id = "manual__2026-11-23T08:00:00+00:00"
    page = client.get(f"/runs/{quote(run_id, safe='')}")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert (
        f"DAG run {run_id} has no published plan: there is nothing at "
        f"{home / 'plans' / 'manual__2026-11-23T08_00_00_00_00~9179d41724e7'}."
    ) in text(page.text)  # sha256sum
    # a plan published without a report; run ids that sanitise to no plan directory at all
    assert "has no report.html" in text(client.get(f"/runs/{S1}").text)
    assert client.get("/runs/..").status_code == 404
    assert client.get("/runs/.").status_code == 404
    # the tab is on every DAG's runs: a run of another DAG with a segment_balancing run's id has no plan
    other = client.get(f"/runs/{quote(P3_RUN, safe='')}", params={"dag_id": "druid_snapshot_capture"})
    assert other.status_code == 404
    assert (
        f"DAG run {P3_RUN} is a run of druid_snapshot_capture: only runs of segment_balancing publish plans."
        in text(other.text)
    )


# ---- the reports of a plan ---------------------------------------------------------------------
def raw_status(path: str) -> int:
    """Status of GET ``path`` handed to the app as it is: HTTP clients remove ``..`` segments, a
    server is sent them by ``curl --path-as-is``."""
    sent, asked = [], []

    async def receive():  # the request, then nothing until the response is sent
        if asked:
            await asyncio.Event().wait()
        asked.append(True)
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("test", 1),
        "server": ("testserver", 80),
    }
    asyncio.run(ui.app(scope, receive, send))
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def test_report_files_are_served(home, client):
    for path, body in (
        (f"{P3}/report.html", f"<h1>Plan {P3}</h1>"),
        (f"{P3}/simulation/report.html", "simulation of P3"),
        (f"{P3}/simulation/run-002/plan/report.html", "run 2 of P3"),
        (f"{P3}/advice/report.html", "advice of P3"),
    ):
        response = client.get(f"/plans/{path}")
        assert response.status_code == 200 and body in response.text, path
        assert response.headers["content-type"].startswith("text/html")


def test_anything_but_a_report_inside_the_plan_is_refused(home, client):
    (home / "report.html").write_text("outside the plans")
    (home / "plans" / ".publishing").mkdir()
    (home / "plans" / ".publishing" / "report.html").write_text("a publish under way")
    (home / "plans" / P3 / ".old").mkdir()
    (home / "plans" / P3 / ".old" / "report.html").write_text("hidden")
    (home / "plans" / P3 / "escape").symlink_to(home)
    refused = [
        f"{P3}/summary.json",
        f"{P3}/validation.json",
        f"{P3}/segments.parquet",
        f"{P3}/stage_groups.json",
        f"{P3}/simulation/run-009/plan/report.html",  # missing
        f"{P3}/%2e%2e/%2e%2e/report.html",
        f"{P3}/..%2F..%2Freport.html",
        f"{P3}/%2E%2E/{P2}/report.html",
        "%2e%2e/report.html",
        ".publishing/report.html",
        f"{P3}/.old/report.html",
        f"{P3}/escape/report.html",  # resolves outside the plan
        "no-such-plan/report.html",
    ]
    for path in refused:
        assert client.get(f"/plans/{path}").status_code == 404, path
    assert raw_status(f"/plans/{P3}/../../report.html") == 404
    assert raw_status("/plans/../report.html") == 404
    assert raw_status(f"/plans/{P3}/../{P2}/report.html") == 404
    assert raw_status(f"/plans/{P2}/report.html") == 200


# ---- explain ------------------------------------------------------------------------------------
def test_the_explain_form(home, client):
    page = client.get(f"/plans/{P3}/explain")
    assert page.status_code == 200
    assert re.search(rf'<form method="get" action="{PREFIX}/plans/{P3}/explain" data-testid="explain-form">', page.text)
    assert '<input type="text" name="segment"' in page.text
    assert '<input type="text" name="find"' in page.text and "Segments found" not in page.text


def test_explain_finds_segments_by_id_prefix_and_datasource(home, client):
    """The plan's segments whose id starts with what was typed, of the datasource chosen, each
    linking to its explanation with its number of operations (S has two, T none)."""
    page = client.get(f"/plans/{P3}/explain", params={"find": "wiki_2026-01-0"})
    assert page.status_code == 200
    assert "2 segments." in text(page.text)
    found = re.findall(
        r'<tr><td><a href="([^"]+)">([^<]+)</a></td><td>wiki</td>'
        r'<td class="num">([\d,]+)</td><td class="num">(\d+)</td>',
        page.text,
    )
    assert found == [
        (f"{PREFIX}/plans/{P3}/explain?segment={quote(S, safe='/')}", S, "1,500", "2"),
        (f"{PREFIX}/plans/{P3}/explain?segment={quote(T, safe='/')}", T, "100", "0"),
    ]
    one = client.get(f"/plans/{P3}/explain", params={"find": "wiki_2026-01-02", "datasource": "wiki"}).text
    assert "1 segment." in text(one) and T in one and f">{S}<" not in one
    assert '<option value="wiki" selected>wiki</option>' in one
    none = client.get(f"/plans/{P3}/explain", params={"datasource": "wiki", "find": "koala"}).text
    assert "0 segments." in text(none) and '<table class="found"' not in none
    assert client.get(f"/plans/{P3}/explain", params={"find": "wiki"}).status_code == 200


def test_the_scripts_of_a_reports_table_of_operations_are_served(home, client):
    ops = home / "plans" / P3 / "operations"
    ops.mkdir()
    (ops / "index.js").write_text("sbOperations.index({});")
    (ops / "rows-00000.js").write_text("sbOperations.rows(0, []);")
    (ops / "notes.js").write_text("not a table's script")
    for path in ("operations/index.js", "operations/rows-00000.js"):
        response = client.get(f"/plans/{P3}/{path}")
        assert response.status_code == 200 and response.text.startswith("sbOperations."), path
        assert response.headers["content-type"].startswith("text/javascript")
    for path in ("operations/notes.js", "operations/rows-0.js", "operations/rows-00001.js", "index.js", "summary.json"):
        assert client.get(f"/plans/{P3}/{path}").status_code == 404, path
    # the plan's own report alone also links its segments to their explanation
    alone = client.get(f"/plans/{P3}/report.html").text
    assert f'window.SB_EXPLAIN_URL = "{PREFIX}/plans/{P3}/explain?segment=";' in alone


def test_explain_a_segment_loaded_in_stage_3_whose_drop_stage_12_deferred(home, client):
    page = client.get(f"/plans/{P3}/explain", params={"segment": S})
    assert page.status_code == 200
    words = text(page.text)
    assert "Datasource wiki Size 1,500 bytes Load rule loadForever Used yes Overshadowed no" in words
    assert "Loaded replicas required (stage 12) 2" in words
    tiers = {t: [c for _, c in cells] for t, cells in Rows(page.text, "data-tier").rows.items()}
    assert tiers == {
        "_default_tier": ["_default_tier", "0", "1 → 1", "hist-1:8083 → hist-1:8083"],
        "hot": ["hot", "2", "0 → 2", "- → hot-1:8083, hot-2:8083"],
    }
    sections = re.findall(r'<section data-app="([^"]+)">', page.text)
    assert sections == ["prepare", "stage03_underreplicated", "stage12_unload"]  # 1 and 5: nothing, groups as before
    ops = {op: [c for _, c in cells] for op, cells in Rows(page.text, "data-op").rows.items()}
    assert ops == {
        "11": ["11", "LOAD", "hot-1:8083", "hot", "loading", "underreplicated", ""],
        "12": ["12", "LOAD", "hot-2:8083", "hot", "loading", "underreplicated", ""],
    }
    prepare, stage3, stage12 = (text(s) for s in re.findall(r"<section.*?</section>", page.text, re.S))
    assert "Groups after: StillUnderreplicated[hot]; counts _default_tier 1, hot 0" in prepare
    assert "Groups after: -; counts _default_tier 1, hot 2" in stage3
    assert "Groups after" not in stage12
    assert (
        "why not: drops refused by the availability rule: fewer loaded replicas than required would remain "
        "(deferred, step unload)"
    ) in stage12
    assert "deferred 1, loaded 0, required 2" in stage12
    assert "dropping from hist-1:8083 [_default_tier] refused: it would leave fewer than 2 loaded replicas" in stage12
    assert f'value="{S}"' in page.text  # the form keeps the segment


def test_explain_shows_the_servers_tried_per_tier(home, client):
    page = client.get(f"/plans/{P3}/explain", params={"segment": T})
    (stage1,) = [
        text(s) for s in re.findall(r'<section data-app="stage01_unreplicated">.*?</section>', page.text, re.S)
    ]
    assert "why not: no server of any tier's top B could take its first replica" in stage1
    assert "tier hot: target 1, count 0, b 1 hot-1:8083: capacity: 50 bytes available, the segment has 100" in stage1
    assert 'data-op="5"' not in page.text  # another segment's op


def test_explain_as_json(home, client):
    answer = client.get(f"/plans/{P3}/explain", params={"segment": S, "format": "json"}).json()
    assert (answer["segment_id"], answer["size_bytes"], answer["required"]) == (S, 1500, 2)
    assert answer["tiers"]["hot"] == {
        "target": 2,
        "count_before": 0,
        "count_after": 2,
        "servers_before": [],
        "servers_after": ["hot-1:8083", "hot-2:8083"],
    }
    (stage12,) = [s for s in answer["stages"] if s["app"] == "stage12_unload"]
    assert [d["outcome"] for d in stage12["decisions"]] == ["deferred"]
    assert stage12["decisions"][0]["detail"]["refused"] == [["_default_tier", "hist-1:8083"]]


def test_explain_refuses_an_unknown_segment_or_a_plan_without_tables(home, client):
    page = client.get(f"/plans/{P3}/explain", params={"segment": "nope"})
    assert page.status_code == 404
    assert f"segment nope is not in the snapshot of the plan {home / 'plans' / P3}" in text(page.text)
    answer = client.get(f"/plans/{P3}/explain", params={"segment": "nope", "format": "json"})
    assert answer.status_code == 404
    assert answer.json() == {"detail": f"segment nope is not in the snapshot of the plan {home / 'plans' / P3}"}
    page = client.get(f"/plans/{P2}/explain", params={"segment": S})
    assert page.status_code == 404 and "plan again to explain it" in text(page.text)
    assert client.get("/plans/no-such-plan/explain", params={"segment": S}).status_code == 404
    assert client.get(f"/plans/{P3}/explain", params={"format": "json"}).status_code == 400


# ---- auth ---------------------------------------------------------------------------------------
ROUTES = ["/plans", "/plans.json", f"/runs/{P3_RUN}", f"/plans/{P3}/explain?segment={S}", f"/plans/{P3}/report.html"]


def test_every_route_needs_an_authenticated_user(home):
    anonymous = TestClient(ui.app)
    for route in ROUTES:
        response = anonymous.get(route)
        assert (response.status_code, response.json()) == (401, {"detail": "Not authenticated"}), route
    assert {route.path for route in ui.app.routes} == {
        "/runs/{run_id:path}",
        "/plans",
        "/plans.json",
        "/plans/{name}/explain",
        "/plans/{name}/{path:path}",
    }
    assert all(any(d.call is ui.AUTHORIZED for d in route.dependant.dependencies) for route in ui.app.routes)


def test_the_ui_session_cookie_of_a_reader_of_the_dag_lets_in(home, airflow_home):
    from airflow.api_fastapi.app import init_auth_manager, purge_cached_app
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    manager = init_auth_manager()
    try:

        def session(role):  # the cookie the UI's login sets
            token = manager.generate_jwt(SimpleAuthManagerUser(username="ann", role=role))
            return TestClient(ui.app, cookies={"_token": token})

        viewer = session("viewer")
        assert viewer.get("/plans").status_code == 200
        assert viewer.get(f"/plans/{P3}/report.html").status_code == 200
        nobody = session(None)  # a user without a role may read nothing
        assert nobody.get("/plans").status_code == 403
        forged = TestClient(ui.app, cookies={"_token": "not-a-jwt"})
        assert forged.get("/plans").status_code == 403
    finally:
        purge_cached_app()


# ---- the plugin ---------------------------------------------------------------------------------
def test_airflow_finds_the_plugin_and_mounts_the_app_at_its_prefix(home, client):
    from airflow import plugins_manager
    from airflow.api_fastapi.app import init_plugins
    from airflow.api_fastapi.core_api.datamodels.plugins import PluginResponse
    from fastapi import FastAPI

    plugins, errors = plugins_manager._get_plugins()
    assert not [e for e in errors if "segment_balancer" in e]
    assert [p.name for p in plugins].count("segment_balancer") == 1
    apps, _ = plugins_manager.get_fastapi_plugins()
    assert {"app": ui.app, "url_prefix": "/segment-balancer", "name": "segment_balancer plans"} in apps
    views, _ = plugins_manager._get_ui_plugins()
    assert {
        "name": "Plan report",
        "href": "/segment-balancer/runs/{RUN_ID}?dag_id={DAG_ID}",
        "destination": "dag_run",
        "url_route": "segment-balancer-plan",
    } in views
    assert {
        "name": "Segment plans",
        "href": "/segment-balancer/plans",
        "destination": "nav",
        "category": "browse",
        "url_route": "segment-balancer-plans",
    } in views
    # what the UI reads (GET /api/v2/plugins leaves out a plugin its model does not validate)
    (info,) = [i for i in plugins_manager.get_plugin_info() if i["name"] == "segment_balancer"]
    response = PluginResponse.model_validate(info)
    assert [(v.name, v.destination) for v in response.external_views] == [
        ("Plan report", "dag_run"),
        ("Segment plans", "nav"),
    ]

    api = FastAPI()
    init_plugins(api)  # the API server's mounting: refuses reserved prefixes
    page = TestClient(api).get(f"/segment-balancer/runs/{quote(P3_RUN, safe='')}")
    assert page.status_code == 200
    explain = links(page.text)[1]
    assert TestClient(api).get(explain, params={"segment": S}).status_code == 200  # the link works as it is
