"""The reports as a person sees them: ``report.html`` of the ``druid_sample`` plan, of the compaction
snapshot's plan and of a two-run simulation, opened from disk (``file://``, offline) in chromium.

Each report: its headline numbers are ``summary.json``'s, every chart renders (a Plotly SVG with
its bars or markers drawn), the browser logs no error; a full-page screenshot goes to the
artifacts directory. Collected only by ``make e2e`` (``conftest.py``); the plans come from the
session fixtures of ``tests/conftest.py`` (the CLI path, which publishes with the report).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

#: headline card -> its value in summary.json
FROM_SUMMARY = {
    "operations": lambda s: s["operations"],
    "loads": lambda s: s["loads"],
    "drops": lambda s: s["drops"],
    "moves": lambda s: s["moves"],
    "unreplicated_before": lambda s: s["status_before"]["unreplicated"],
    "unreplicated_after": lambda s: s["status_after"]["unreplicated"],
    "underreplicated_before": lambda s: sum(t.get("underreplicated", 0) for t in s["status_before"]["tiers"].values()),
    "underreplicated_after": lambda s: sum(t.get("underreplicated", 0) for t in s["status_after"]["tiers"].values()),
    "deferred_drops": lambda s: s["availability"]["deferred_drops"],
    "overshadowed_waiting": lambda s: s["overshadowed_waiting"]["segments"],
}


def open_report(browser, path: Path, artifacts: Path, name: str):
    """Open ``path`` in a fresh page; screenshot it whole; return (page, console errors)."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on(
        "request", lambda r: errors.append(f"fetched {r.url}") if not r.url.startswith(("file:", "data:")) else None
    )
    page.goto(path.as_uri())
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
    return page, errors


def charts_render(page, expected: int) -> None:
    """``expected`` Plotly charts, each with its SVG drawn and at least one bar, point or marker."""
    charts = page.locator(".js-plotly-plot")
    assert charts.count() == expected
    for i in range(expected):
        chart = charts.nth(i)
        assert chart.locator("svg.main-svg").count() >= 1, i
        drawn = chart.locator("g.trace path, g.trace .point").count()
        assert drawn > 0, f"chart {chart.get_attribute('id')} drew nothing"


@pytest.mark.parametrize("fixture", ["druid_sample_planned", "compaction_planned"])
def test_plan_report(request, browser, artifacts, fixture):
    base, summary, _ops = request.getfixturevalue(fixture)
    report = base / "plan" / "report.html"
    assert json.loads((base / "plan" / "summary.json").read_text()) == summary
    page, errors = open_report(browser, report, artifacts, f"report-{fixture.removesuffix('_planned')}")
    for key, value in FROM_SUMMARY.items():
        card = page.get_by_test_id(f"headline-{key}")
        assert card.get_attribute("data-value") == str(value(summary)), key
        assert card.locator(".value").inner_text() == f"{value(summary):,}", key
    assert page.get_by_test_id("validation-status").inner_text() == "passed"
    tiers = sorted({s["tier"] for s in summary["servers"]})
    # status, balance, operations, timings, timeline, and one holdings chart per tier
    charts_render(page, 5 + len(tiers))
    for tier in tiers:
        assert page.locator(f".chart[data-tier='{tier}'] .js-plotly-plot").count() == 1
    checks = json.loads((base / "plan" / "validation.json").read_text())["checks"]
    assert page.locator("tr[data-check]").count() == len(checks)
    page.close()
    assert not errors, errors


def test_simulation_report(spark, browser, artifacts, tmp_path):
    """Two runs with the default margin and with 5 (``simulate --compare-margins 0,5``): the run
    charts, the two margin charts (moves and bytes per run, a line per margin) and the margin
    table, whose links open each margin's own simulation report."""
    from druid_sample_plan import SNAPSHOT

    from segment_balancer.plan.report import margin_summary
    from segment_balancer.tools.simulate import simulate_margins

    margins = simulate_margins(spark, SNAPSHOT, tmp_path / "sim", 2, [0, 5])
    table = margins[margins["margin"] == 0].reset_index(drop=True)
    page, errors = open_report(browser, tmp_path / "sim" / "report.html", artifacts, "report-simulation")
    charts_render(page, 5)
    assert page.locator("#chart-sim-margins g.trace.scatter").count() == 2  # one line per margin
    assert page.locator("tr[data-run]").count() == len(table) == 2
    rows = page.locator("tr[data-margin]")
    assert [rows.nth(i).get_attribute("data-margin") for i in range(rows.count())] == ["0", "5"]
    for i, m in enumerate(margin_summary(margins)):
        assert rows.nth(i).locator("td").nth(1).inner_text() == f"{m['moves']:,}"
    page.locator("#sim-margins").screenshot(path=str(artifacts / "report-simulation-margins.png"))
    # every run's own report opens from the simulation's
    page.get_by_role("link", name="run 2").click()
    page.wait_for_load_state("networkidle")
    run2 = json.loads((tmp_path / "sim" / "run-002" / "plan" / "summary.json").read_text())
    assert page.get_by_test_id("headline-operations").get_attribute("data-value") == str(run2["operations"])
    assert int(table.loc[1, "operations"]) == run2["operations"]
    page.go_back()
    page.get_by_role("link", name="margin 5").click()
    page.wait_for_url("**/sim/margins/5/report.html")
    expect(page.locator("tr[data-run]")).to_have_count(2)
    assert page.locator("#sim-margins").count() == 0
    page.close()
    assert not errors, errors


def test_simulation_report_of_both_coordinators(spark, browser, artifacts, tmp_path):
    """Two runs of ``druid_sample`` with each coordinator (``simulate --compare-coordinators``): the
    run charts and the six charts of both coordinators (a line each), the coordinators' table,
    whose link opens druid's own simulation report."""
    from druid_sample_plan import SNAPSHOT

    from segment_balancer.tools.simulate import simulate_coordinators

    table = simulate_coordinators(spark, SNAPSHOT, tmp_path / "sim", 2)
    page, errors = open_report(browser, tmp_path / "sim" / "report.html", artifacts, "report-simulation-coordinators")
    charts_render(page, 3 + 6)
    for chart in page.locator("#sim-coordinators .js-plotly-plot").all():
        assert chart.locator("g.trace.scatter").count() == 2  # one line per coordinator
    rows = page.locator("tr[data-coordinator]")
    assert [rows.nth(i).get_attribute("data-coordinator") for i in range(rows.count())] == ["issue7458", "druid"]
    moves = table.groupby("coordinator", sort=False)["moves"].sum()
    assert [rows.nth(i).locator("td").nth(2).inner_text() for i in range(2)] == [f"{n:,}" for n in moves]
    page.locator("#sim-coordinators").screenshot(path=str(artifacts / "report-simulation-coordinators-section.png"))
    page.get_by_role("link", name="druid", exact=True).click()
    page.wait_for_url("**/sim/coordinators/druid/report.html")
    expect(page.locator("tr[data-run]")).to_have_count(2)
    assert page.locator("#sim-coordinators").count() == 0
    page.close()
    assert not errors, errors


def ops_range(page) -> str:
    return page.get_by_test_id("ops-range").inner_text()


def choose(page, column: str, value: str) -> None:
    """Filter the table of operations on ``column`` = ``value`` (its option reads ``value (count)``)."""
    select = page.get_by_test_id(f"ops-filter-{column}")
    select.select_option(
        label=next(o for o in select.locator("option").all_inner_texts() if o.startswith(value + " ("))
    )


@pytest.mark.parametrize("width", [1280, 1920])
def test_every_operation_of_the_generated_cluster_filtered_sorted_and_paged(
    generated_planned, browser, artifacts, width
):
    """The 20k generated cluster's plan, opened from disk: the table of operations loads from
    ``operations/`` and pages 100 rows at a time; filtering by tier, then by action and server,
    shows as many rows as ``operations.parquet`` has (counted here with pandas); sorting by size
    puts the largest first; the per-historical table has a row per historical with operations,
    each with its loads. Screenshots at ``width`` pixels."""
    base, summary, ops = generated_planned
    page = browser.new_page(viewport={"width": width, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto((base / "plan" / "report.html").as_uri())
    expect(page.locator("#operation-list tbody tr[data-op]")).to_have_count(100, timeout=30_000)
    assert ops_range(page) == f"rows 1–100 of {len(ops):,}"
    first = page.locator("#operation-list tbody tr[data-op]").first
    assert first.get_attribute("data-op") == "0"
    section = page.locator("#operation-list")
    section.scroll_into_view_if_needed()
    section.screenshot(path=str(artifacts / f"report-operations-{width}.png"))

    tier = "cold"
    choose(page, "tier", tier)
    n_tier = int((ops["tier"] == tier).sum())
    assert ops_range(page) == f"rows 1–100 of {n_tier:,} (filtered from {len(ops):,})"
    server = ops.loc[(ops["tier"] == tier) & (ops["action"] == "DROP"), "server"].value_counts().index[0]
    chosen = ops[(ops["tier"] == tier) & (ops["action"] == "DROP") & (ops["server"] == server)]
    choose(page, "action", "DROP")
    choose(page, "server", server)
    shown = min(100, len(chosen))
    assert ops_range(page) == f"rows 1–{shown} of {len(chosen):,} (filtered from {len(ops):,})"
    page.locator("th[data-sort=size]").click()
    page.locator("th[data-sort=size]").click()  # descending
    top = page.locator("#operation-list tbody tr[data-op]").first
    assert int(top.get_attribute("data-op")) in set(
        chosen.loc[chosen["size_bytes"] == chosen["size_bytes"].max(), "op_id"]
    )
    assert top.locator("td").nth(6).inner_text() == server
    section.screenshot(path=str(artifacts / f"report-operations-filtered-{width}.png"))
    # back to every operation, the second page
    for column in ("tier", "action", "server"):
        page.get_by_test_id(f"ops-filter-{column}").select_option(value="")
    page.locator("th[data-sort=op]").click()
    page.locator("button[data-page=next]").click()
    assert ops_range(page) == f"rows 101–200 of {len(ops):,}"
    assert page.locator("#operation-list tbody tr[data-op]").first.get_attribute("data-op") == "100"
    # per historical: a row per historical with operations, its loads as operations.parquet counts them
    per_server = page.get_by_test_id("ops-per-server").locator("tbody tr")
    assert per_server.count() == ops["server"].nunique()
    loads = ops[ops["action"] == "LOAD"].groupby("server").size()
    row = per_server.filter(has=page.locator(f"td:text-is('{loads.index[0]}')"))
    assert row.locator("td").nth(2).inner_text() == f"{int(loads.iloc[0]):,}"
    # nothing wider than the page: the wide table scrolls inside its own box
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.close()
    assert not errors, errors
