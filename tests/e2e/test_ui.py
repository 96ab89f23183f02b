"""The UI in a real browser: chromium (Playwright) against the deployment ``make airflow`` starts.

The tests run in this order and share the logged-in page (``conftest.py``):

1. log in as admin through the login page;
2. the DAG page: the trigger form renders the typed fields, its Trigger button is enabled with the
   defaults; a run triggered from it (unpausing the DAG) succeeds and publishes a plan of the newest
   snapshot (``late``);
3. "Run Backfill" over 2024-01-02 .. 2024-01-03 from the same dialog: two runs, which plan on
   ``early`` and ``late`` (each on the newest snapshot at or before its logical date), and no
   scheduled run beside them;
4. the triggered run's "Plan report" tab shows its report, and explains a segment it moved;
5. the capture DAG, unpaused, captures the (fake, loopback) Druid cluster into the snapshots root
   and emits its Asset; ``segment_balancing`` then runs by itself on that capture;
6. Browse -> "Segment plans" lists every published plan with its change from the previous one;
7. a run with a misspelt config key fails its first task at once, its log in the UI saying why in
   one line;
8. no other task instance failed, and the Airflow UI logged no error to the browser console.

Screenshots go to the artifacts directory (``conftest.ARTIFACTS``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest
from deployment import POLL_S

DAG_ID = "segment_balancing"

#: How long the runs may take (each is ~20 tasks, a minute or so on the Connect server; 20 minutes leaves
#: room for spark-submit mode and a slow machine).
RUN_TIMEOUT = 20 * 60
#: how long the UI may take to answer a submitted form (it refetches before it says so)
UI_TIMEOUT = 60_000
BACKFILL_FROM, BACKFILL_TO = datetime(2024, 1, 2, tzinfo=UTC), datetime(2024, 1, 3, tzinfo=UTC)
#: snapshot each backfill date plans on (e2e_snapshots.SNAPSHOTS: early 2024-01-01, late 2024-01-02T12:00)
EXPECTED_BACKFILL = {BACKFILL_FROM: "early", BACKFILL_TO: "late"}

#: the trigger form's sections and some of the labels each must show
SECTIONS = {
    "Snapshot": ("Snapshot", "Cluster", "Snapshots root"),
    "Coordinator dynamic config": (
        "maxSegmentsInNodeLoadingQueue",
        "decommissioningNodes",
        "loadingMinPercent",
        "balancerRandomSeed",
        "balancingMinCostReductionPercent",
        "balancerStrategy",
        "avgShedderLowThresholdPercent",
        "avgShedderHighThresholdPercent",
        "avgShedderHitCountLowThreshold",
        "avgShedderHitCountHighThreshold",
        "Other config keys",
    ),
    "What-if: cluster edits": ("Decommission historicals", "Remove historicals (as if lost)", "Add historicals"),
    "What-if simulation": ("Simulated Coordinator runs", "Loads per historical per run", "Load failure rate"),
}

FORM_SHOTS = {
    "Coordinator dynamic config": "03a-trigger-form-config",
    "What-if: cluster edits": "03b-trigger-form-whatif",
}

#: what the tests hand on to the next ones
STATE: dict = {}


def settle(page, timeout_ms: int = 10_000) -> None:
    """Wait, at most ``timeout_ms``, for the page's network to go quiet before a screenshot. The UI
    keeps polling while any DAG run of the deployment is active, so a quiet network is not promised;
    the test's assertions (``expect``) have already waited for what it checks."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_load_state("networkidle", timeout=timeout_ms)
    except PlaywrightTimeoutError:
        pass


def shot(page, artifacts: Path, name: str, tall: bool = False) -> Path:
    """A screenshot ``<artifacts>/<name>.png``; ``tall`` = with a viewport tall enough for a whole dialog."""
    path = artifacts / f"{name}.png"
    if tall:
        size = page.viewport_size
        height = page.get_by_role("dialog").evaluate("e => e.scrollHeight")
        page.set_viewport_size({"width": size["width"], "height": max(size["height"], height + 200)})
        page.wait_for_timeout(500)
        page.screenshot(path=str(path))
        page.set_viewport_size(size)
    else:
        page.screenshot(path=str(path))
    return path


def summary_of(dep, run_id: str) -> dict:
    """The published ``summary.json`` of a run (``segment_balancer_airflow.resolve.run_paths``)."""
    from segment_balancer_airflow.resolve import run_paths

    path = run_paths(dep.var, run_id)["publish_dir"] / "summary.json"
    assert path.is_file(), f"no plan published for {run_id} at {path}"
    return json.loads(path.read_text())


def planned_on(summary: dict) -> str:
    """The name of the snapshot a summary's plan was made on (``early`` or ``late``)."""
    name = Path(summary["snapshot"]).name
    assert summary["cluster"] == f"e2e-{name}", summary
    return name


def leave_ui(page) -> None:
    """Leave the Airflow UI (a blank page) before a long wait on DAG runs, which the test polls over
    the REST API: while a run is active the UI's pages keep polling the API server, and rendering
    their updates in headless chromium took about half a core with the API server's answers."""
    page.goto("about:blank")


def open_dag_page(page) -> None:
    page.goto(f"/dags/{DAG_ID}")
    page.get_by_test_id("trigger-dag-button").wait_for()


def open_trigger_dialog(page):
    page.get_by_test_id("trigger-dag-button").click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    return dialog


def expand(dialog, section: str) -> None:
    button = dialog.locator(f"button[data-part=item-trigger][id$=':trigger:{section}']")
    if button.get_attribute("aria-expanded") != "true":
        button.click()
    assert button.get_attribute("aria-expanded") == "true", section


def check_choices(page, dialog, artifacts: Path, key: str, labels: list[str], name: str) -> None:
    """The trigger form's choice field ``key`` lists ``labels`` (screenshot ``name``); choosing the
    first, the snapshot's, again closes the list (Escape would close the whole dialog) and leaves the
    param unset."""
    from playwright.sync_api import expect

    dialog.get_by_role("combobox", name=key).click()
    options = page.get_by_role("option")
    expect(options).to_have_text(labels)
    shot(page, artifacts, name)
    options.first.click()
    expect(options).to_have_count(0)
    expect(dialog).to_be_visible()
    expect(dialog.locator(f"input[name=element_{key}]")).to_have_value("__null__")


def test_login(page, deployment, artifacts, console):
    page.goto("/")
    page.wait_for_url(re.compile(r"/auth/login"))
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(deployment.password)
    sign_in = page.get_by_role("button", name="Sign in")
    assert sign_in.is_enabled()
    shot(page, artifacts, "01-login")
    sign_in.click()
    page.wait_for_url(deployment.base + "/")
    console.logged_in = True
    page.get_by_role("link", name="Dags").first.wait_for()
    settle(page)
    shot(page, artifacts, "02-home")
    assert "/auth/login" not in page.url


def test_trigger_form_and_run(page, deployment, artifacts):
    from playwright.sync_api import expect

    open_dag_page(page)
    expect(page.get_by_role("heading", name=DAG_ID).first).to_be_visible()
    assert deployment.get(f"/api/v2/dags/{DAG_ID}")["is_paused"], "the DAG should start paused"
    before = {r["dag_run_id"] for r in deployment.runs()}

    dialog = open_trigger_dialog(page)
    expect(dialog.get_by_text(f"Trigger Dag - {DAG_ID}")).to_be_visible()
    unpause = dialog.get_by_role("checkbox", name=f"Unpause {DAG_ID} on trigger")
    expect(unpause).to_be_checked()  # the UI unpauses the DAG with the run
    submit = dialog.get_by_test_id("trigger-dag-submit")
    # The param sections are an accordion (one open at a time): each in turn, its typed fields.
    for section, labels in SECTIONS.items():
        expand(dialog, section)
        for label in labels:
            expect(dialog.locator("label", has_text=re.compile(rf"^{re.escape(label)}\s*\*?$"))).to_be_visible()
        if section == "Snapshot":
            expect(dialog.locator("input#element_snapshots_root")).to_have_value(str(deployment.var / "snapshots"))
            expect(dialog.locator("input#element_snapshot")).to_have_value("")
        if section == "Coordinator dynamic config":  # numbers are spin buttons, lists one-per-line text areas
            expect(dialog.get_by_role("spinbutton", name="maxSegmentsInNodeLoadingQueue")).to_have_value("")
            expect(dialog.locator("textarea#element_decommissioningNodes")).to_be_visible()
            # the strategy is a choice: its list offers both strategies
            check_choices(
                page,
                dialog,
                artifacts,
                "balancerStrategy",
                [
                    "(the snapshot's; cost unless it says)",
                    "cost (Druid's placement cost)",
                    "avgShedder (usage pairs, shed after repeated gaps)",
                ],
                "03c-trigger-form-strategy",
            )
            # who plans is a choice too, each coordinator by its title, the snapshot's by default
            check_choices(
                page,
                dialog,
                artifacts,
                "coordinator",
                [
                    "(the snapshot's; issue7458 unless it says)",
                    "issue7458 (Druid issue #7458)",
                    "druid (Druid's Coordinator)",
                ],
                "03d-trigger-form-coordinator",
            )
        if section == "What-if: cluster edits":
            expect(dialog.locator("textarea#element_whatif_decommission")).to_have_value("")
        if section == "What-if simulation":
            expect(dialog.get_by_role("spinbutton", name="Simulated Coordinator runs")).to_have_value("0")
        expect(submit).to_be_enabled()  # with the defaults
        if section in FORM_SHOTS:
            shot(page, artifacts, FORM_SHOTS[section], tall=True)

    submit.click()
    # On success the UI refetches, says so and shows the new run (slow on a busy machine).
    page.wait_for_url(re.compile(rf"/dags/{DAG_ID}/runs/manual__"), timeout=UI_TIMEOUT)
    expect(page.get_by_text("Dag Run Triggered").first).to_be_visible(timeout=UI_TIMEOUT)
    run_id = unquote(page.url.split("/runs/", 1)[1].split("?")[0].split("/")[0])
    manual = [r for r in deployment.runs() if r["dag_run_id"] not in before and r["run_type"] == "manual"]
    assert [r["dag_run_id"] for r in manual] == [run_id], manual
    run = manual[0]
    assert run["triggered_by"] == "ui", run
    # the form's defaults: nothing but the snapshots root is set (and the compare_with_druid switch, on)
    conf = {k: v for k, v in (run["conf"] or {}).items() if v not in (None, [], {}, 0)}
    assert conf.pop("compare_with_druid", True) is True, run["conf"]
    assert conf in (
        {},
        {"snapshots_root": str(deployment.var / "snapshots")},
    ), run["conf"]
    assert not deployment.get(f"/api/v2/dags/{DAG_ID}")["is_paused"], "triggering should have unpaused the DAG"
    STATE["manual_run"] = run_id
    settle(page)
    shot(page, artifacts, "04-triggered-run")

    leave_ui(page)
    deployment.wait_for_runs([run["dag_run_id"]], RUN_TIMEOUT)
    # unpausing started no scheduled run of its own (the first is the next midnight)
    assert not [r for r in deployment.runs() if r["run_type"] == "scheduled"], deployment.runs()
    summary = summary_of(deployment, run["dag_run_id"])
    assert planned_on(summary) == "late", summary["snapshot"]  # the newest snapshot
    assert summary["whatif"] in (None, {}, []) or not any(summary["whatif"].values()), summary["whatif"]


def plan_frame(page, view: str):
    """The frame of the plugin's external view ``view`` ("Plan report", "Segment plans")."""
    return page.frame_locator(f"iframe[title='{view}']")


def test_the_runs_plan_in_the_ui(page, deployment, artifacts):
    """The run's "Plan report" tab shows its published report (headline numbers of its
    summary.json, every chart drawn) with the two coordinators side by side (``compare_with_druid``
    is on by default); "Explain a segment" there answers for a segment the plan moved, with the
    move's operations and their reasons; "Plan of druid" opens Druid's own plan of the snapshot."""
    import pandas as pd
    from playwright.sync_api import expect

    from segment_balancer_airflow.resolve import run_paths

    run_id = STATE["manual_run"]
    summary = summary_of(deployment, run_id)
    page.goto(f"/dags/{DAG_ID}/runs/{run_id}")
    page.get_by_text("Plan report", exact=True).click()
    page.wait_for_url(re.compile(r"/plugin/segment-balancer-plan$"))
    report = plan_frame(page, "Plan report")
    # the report loads in its frame (slow beside a DAG run on a busy machine)
    expect(report.get_by_test_id("headline-operations")).to_have_attribute(
        "data-value", str(summary["operations"]), timeout=UI_TIMEOUT
    )
    expect(report.get_by_test_id("headline-unreplicated_after")).to_have_attribute(
        "data-value", str(summary["status_after"]["unreplicated"])
    )
    expect(report.get_by_test_id("validation-status")).to_have_text("passed")
    tiers = {s["tier"] for s in summary["servers"]}
    expect(report.locator(".js-plotly-plot svg.main-svg").first).to_be_visible()
    assert report.locator(".js-plotly-plot").count() == 5 + len(tiers)
    settle(page)
    shot(page, artifacts, "09-plan-report-tab")
    publish_dir = run_paths(deployment.var, run_id)["publish_dir"]
    druid = json.loads((publish_dir / "compared" / "druid" / "summary.json").read_text())
    side = report.locator("#compare")
    expect(side).to_contain_text("druid")
    side.scroll_into_view_if_needed()
    settle(page)
    shot(page, artifacts, "09b-plan-side-by-side")

    ops = pd.read_parquet(run_paths(deployment.var, run_id)["publish_dir"] / "operations.parquet")
    moved = ops[ops.depends_on.notna()].iloc[0]  # a DROP waiting for its LOAD: a move or a callback
    load = ops[ops.op_id == moved.depends_on].iloc[0]
    report.get_by_role("link", name="Explain a segment").click()
    report.locator("input[name=segment]").fill(moved.segment_id)
    report.locator("input[name=segment]").press("Enter")
    for op in (load, moved):
        row = report.locator(f"tr[data-op='{int(op.op_id)}']")
        expect(row).to_contain_text(op.server)
        expect(row).to_contain_text(op.reason)
    settle(page)
    shot(page, artifacts, "10-explain-a-segment")

    page.goto(f"/dags/{DAG_ID}/runs/{run_id}")
    page.get_by_text("Plan report", exact=True).click()
    report = plan_frame(page, "Plan report")
    report.get_by_role("link", name="Plan of druid").click()
    # the other plan's report loads in the frame as the run's did (slow on a busy machine)
    expect(report.get_by_test_id("headline-operations")).to_have_attribute(
        "data-value", str(druid["operations"]), timeout=UI_TIMEOUT
    )
    settle(page)
    shot(page, artifacts, "11-plan-of-druid")


def test_each_coordinator_is_a_branch_of_the_run(page, deployment, artifacts):
    """The run's grid shows each coordinator as a branch of its own: with ``compare_with_druid``
    (the triggered run) both branches ran; a ``druid`` run without it ran the ``druid`` branch and
    skipped every task of the ``issue7458`` one, and published no compared plan."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
    from playwright.sync_api import expect

    both = STATE["manual_run"]
    run = deployment.request(
        "POST",
        f"/api/v2/dags/{DAG_ID}/dagRuns",
        {"logical_date": None, "conf": {"coordinator": "druid", "compare_with_druid": False}},
    )
    druid_only = run["dag_run_id"]
    deployment.wait_for_runs([druid_only], RUN_TIMEOUT)
    for run_id, skipped in ((both, set()), (druid_only, {"issue7458"})):
        states = {ti["task_id"]: ti["state"] for ti in deployment.task_instances(run_id)}
        for group in ("issue7458", "druid"):
            mine = {state for task, state in states.items() if task.startswith(f"{group}.")}
            assert mine == ({"skipped"} if group in skipped else {"success"}), (run_id, states)
        assert states["compare"] == "success", states
    assert summary_of(deployment, druid_only)["coordinator"] == "druid"
    from segment_balancer_airflow.resolve import run_paths

    assert not (run_paths(deployment.var, druid_only)["publish_dir"] / "compared").exists()
    for run_id, name in ((both, "15-grid-both-coordinators"), (druid_only, "16-grid-druid-only")):
        page.goto(f"/dags/{DAG_ID}/runs/{run_id}")
        for group in ("issue7458", "druid"):
            expect(page.get_by_text(group, exact=True).first).to_be_visible(timeout=UI_TIMEOUT)
        # every task group open, so each branch's tasks and their states show
        expand_all = page.get_by_role("button", name="Expand all task groups")
        try:  # the toolbar may render after the groups: wait for it before deciding
            expand_all.first.wait_for(state="attached", timeout=15_000)
        except PlaywrightTimeoutError:
            pass
        if not expand_all.count():  # the grid's own shortcut: toggle every group
            page.keyboard.press("e")
        elif expand_all.first.is_enabled():  # disabled: every group is open already (the UI keeps it)
            expand_all.first.click()
        for task in ("stage01_unreplicated", "druid_rules"):
            expect(page.get_by_text(task, exact=True).first).to_be_visible(timeout=UI_TIMEOUT)
        settle(page)
        shot(page, artifacts, name)


def pick_datetime(page, field_index: int, when: datetime) -> None:
    """Fill one of the dialog's date-time pickers (a popover with a date and a time text field)."""
    page.get_by_test_id("datetime-input").nth(field_index).click()
    popover = page.locator("[data-scope=popover][data-part=content][data-state=open]")
    popover.get_by_placeholder("YYYY/MM/DD").fill(when.strftime("%Y/%m/%d"))
    popover.get_by_placeholder("HH:mm").fill(when.strftime("%H:%M"))
    page.keyboard.press("Escape")
    popover.wait_for(state="hidden")


def test_backfill(page, deployment, artifacts):
    from playwright.sync_api import expect

    assert "manual_run" in STATE, "the triggered run must have succeeded first"
    open_dag_page(page)
    dialog = open_trigger_dialog(page)
    dialog.locator("label[data-part=item]", has_text="Backfill").click()
    expect(dialog.get_by_text(f"Run Backfill - {DAG_ID}")).to_be_visible()
    for i, when in enumerate((BACKFILL_FROM, BACKFILL_TO)):
        pick_datetime(page, i, when)
        expect(dialog.get_by_test_id("datetime-input").nth(i)).to_have_text(when.strftime("%b %d, %Y %H:%M"))
    expect(dialog.get_by_text("2 runs will be triggered.")).to_be_visible()  # the dry run
    expand(dialog, "Coordinator dynamic config")
    run_backfill = dialog.get_by_role("button", name="Run Backfill")
    expect(run_backfill).to_be_enabled()
    shot(page, artifacts, "05-backfill-form", tall=True)

    run_backfill.click()
    expect(page.get_by_text("Backfill generated").first).to_be_visible(timeout=UI_TIMEOUT)
    expect(page.get_by_role("dialog")).to_have_count(0, timeout=UI_TIMEOUT)
    backfills = deployment.get(f"/api/v2/backfills?dag_id={DAG_ID}")["backfills"]
    assert len(backfills) == 1, backfills
    runs = [r for r in deployment.runs() if r["run_type"] == "backfill"]
    dates = {datetime.fromisoformat(r["logical_date"].replace("Z", "+00:00")): r["dag_run_id"] for r in runs}
    assert set(dates) == set(EXPECTED_BACKFILL), sorted(dates)
    page.wait_for_timeout(2000)
    shot(page, artifacts, "06-backfill-created")

    leave_ui(page)
    deployment.wait_for_runs(list(dates.values()), RUN_TIMEOUT)
    planned = {when: planned_on(summary_of(deployment, run_id)) for when, run_id in dates.items()}
    assert planned == EXPECTED_BACKFILL, planned
    assert len(set(planned.values())) == 2
    # the backfill started no scheduled run beside its own (the next daily run is the next midnight)
    assert not [r for r in deployment.runs() if r["run_type"] == "scheduled"], deployment.runs()
    STATE["backfill_runs"] = dates


def test_a_capture_lands_and_is_planned_on_by_itself(page, deployment, artifacts, druid):
    """Unpausing druid_snapshot_capture starts a run (the latest hour) that captures the fake Druid
    into ``<snapshots root>/druid/<UTC time>/``; the Asset it emits makes the scheduler start an
    asset-triggered segment_balancing run, which plans on that capture (the newest snapshot)."""
    capture_dag = "druid_snapshot_capture"
    leave_ui(page)
    deployment.request("PATCH", f"/api/v2/dags/{capture_dag}", {"is_paused": False})
    deadline = datetime.now(UTC).timestamp() + RUN_TIMEOUT
    while not deployment.runs(capture_dag):
        assert datetime.now(UTC).timestamp() < deadline, "no capture run"
        page.wait_for_timeout(POLL_S * 1000)
    [capture_run] = deployment.runs(capture_dag)[:1]
    deployment.wait_for_runs([capture_run["dag_run_id"]], RUN_TIMEOUT, dag_id=capture_dag)
    captures = sorted((deployment.var / "snapshots" / "druid").iterdir())
    assert len(captures) == 1 and (captures[0] / "segments.jsonl.gz").is_file(), captures
    assert any(path == "/druid/v2/sql" for _, path, _ in druid.requests)

    while not [r for r in deployment.runs() if r["run_type"] == "asset_triggered"]:
        assert datetime.now(UTC).timestamp() < deadline, "segment_balancing did not run on the capture"
        page.wait_for_timeout(POLL_S * 1000)
    [asset_run] = [r for r in deployment.runs() if r["run_type"] == "asset_triggered"]
    deployment.wait_for_runs([asset_run["dag_run_id"]], RUN_TIMEOUT)
    summary = summary_of(deployment, asset_run["dag_run_id"])
    assert Path(summary["snapshot"]) == captures[0].resolve() and summary["cluster"] == "druid", summary["snapshot"]
    page.goto(f"/dags/{DAG_ID}/runs")
    settle(page)
    shot(page, artifacts, "08-asset-triggered-run")


def test_plans_page(page, deployment, artifacts):
    """Browse -> "Segment plans" lists every published plan newest snapshot first, each with its
    numbers and the change from the previous plan of its cluster."""
    from playwright.sync_api import expect

    from segment_balancer.plan.history import plan_history, signed_change

    page.goto("/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Segment plans").click()
    page.wait_for_url(re.compile(r"/plugin/segment-balancer-plans$"))
    plans = plan_frame(page, "Segment plans")
    expected = plan_history(deployment.var / "plans")
    assert len(expected) >= 4  # the triggered run, two backfill dates, the asset-triggered run
    rows = plans.locator("tr[data-plan]")
    expect(rows).to_have_count(len(expected))
    assert [rows.nth(i).get_attribute("data-plan") for i in range(len(expected))] == [e.name for e in expected]
    for i, entry in enumerate(expected):
        ops = rows.nth(i).locator("td[data-col=operations]")
        expect(ops).to_contain_text(f"{entry.numbers['operations']:,}")
        if entry.diff:
            expect(ops).to_contain_text(signed_change(entry.diff["operations"]))
    settle(page)
    shot(page, artifacts, "11-plans-page")


def test_every_operation_links_to_its_explanation(page, deployment, artifacts, generated_planned):
    """The plan of the 20k generated cluster (the CLI's, published into the deployment's plans):
    in the UI its report lists every operation; filtered by datasource, it shows as many as
    ``operations.parquet`` has; a segment links to its explanation, which lists that operation;
    "Explain a segment" finds the segment by the start of its id and its datasource."""
    import shutil

    from playwright.sync_api import expect

    base, _, ops = generated_planned
    name = "generated-20k-cli"
    shutil.copytree(base / "plan", deployment.var / "plans" / name)
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(f"/segment-balancer/plans/{name}/report.html")
        expect(page.locator("#operation-list tbody tr[data-op]")).to_have_count(100, timeout=UI_TIMEOUT)
        expect(page.get_by_test_id("ops-range")).to_have_text(f"rows 1–100 of {len(ops):,}")
        datasource = "clickstream"
        chosen = ops[ops["datasource"] == datasource]
        select = page.get_by_test_id("ops-filter-datasource")
        select.select_option(label=f"{datasource} ({len(chosen):,})")
        expect(page.get_by_test_id("ops-range")).to_have_text(
            f"rows 1–100 of {len(chosen):,} (filtered from {len(ops):,})"
        )
        page.locator("#operation-list").scroll_into_view_if_needed()
        settle(page)
        page.locator("#operation-list").screenshot(path=str(artifacts / f"12-operations-in-the-ui-{width}.png"))
    first = page.locator("#operation-list tbody tr[data-op]").first
    op_id = int(first.get_attribute("data-op"))
    segment = ops.loc[ops["op_id"] == op_id, "segment_id"].iloc[0]
    assert segment.startswith(datasource)
    first.get_by_test_id("ops-explain").click()
    page.wait_for_url(re.compile(r"/explain\?segment="))
    expect(page.locator("[data-fact=segment_id]")).to_have_text(segment)
    expect(page.locator(f"tr[data-op='{op_id}']")).to_be_visible()
    settle(page)
    shot(page, artifacts, "13-explain-from-the-operations")
    # find it again by the start of its id and its datasource
    page.locator("input[name=find]").fill(segment[:-6])
    page.locator("[data-testid=find-form] select[name=datasource]").select_option(datasource)
    page.locator("[data-testid=find-form] button").click()
    found = page.get_by_test_id("found")
    expect(found.get_by_role("link", name=segment, exact=True)).to_be_visible()
    settle(page)
    shot(page, artifacts, "14-explain-find")
    page.set_viewport_size({"width": 1400, "height": 1000})  # the session page's size, for the tests after


def test_a_refused_input_fails_the_first_task_in_one_log_line(page, deployment, artifacts):
    """A run whose config override has a misspelt key: ``resolve_snapshot`` fails at once, without a
    retry, and its log in the UI says why in one line (the param, the key, the closest known key),
    with no traceback; no later task runs and no plan is published."""
    import time
    from urllib.parse import quote

    from playwright.sync_api import expect

    run = deployment.request(
        "POST",
        f"/api/v2/dags/{DAG_ID}/dagRuns",
        {"logical_date": None, "conf": {"config_overrides": {"maxSegmentsInNodeLoadQueue": 7}}},
    )
    run_id = STATE["refused_run"] = run["dag_run_id"]
    deadline = time.monotonic() + RUN_TIMEOUT
    while {r["dag_run_id"]: r["state"] for r in deployment.runs()}.get(run_id) != "failed":
        assert time.monotonic() < deadline, f"{run_id} did not fail"
        time.sleep(POLL_S)
    tis = {ti["task_id"]: ti for ti in deployment.task_instances(run_id)}
    assert tis["resolve_snapshot"]["state"] == "failed" and tis["resolve_snapshot"]["try_number"] == 1
    assert {ti["state"] for name, ti in tis.items() if name not in ("resolve_snapshot", "release_spark_session")} == {
        "upstream_failed"
    }
    line = (
        "input refused: param config_overrides: unknown key 'maxSegmentsInNodeLoadQueue' "
        "(did you mean 'maxSegmentsInNodeLoadingQueue'?)"
    )
    log = deployment.get(
        f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/resolve_snapshot/logs/1"
    )
    text = json.dumps(log)
    assert line in text and "Traceback" not in text
    page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/resolve_snapshot")
    expect(page.get_by_text(line).first).to_be_visible(timeout=UI_TIMEOUT)
    settle(page)
    shot(page, artifacts, "12-refused-input-log")
    from segment_balancer_airflow.resolve import run_paths

    assert not run_paths(deployment.var, run_id)["publish_dir"].exists()


def test_no_failures_and_no_console_errors(page, deployment, artifacts, console):
    from playwright.sync_api import expect

    refused = STATE.get("refused_run")  # failed on purpose: test_a_refused_input_fails_the_first_task_in_one_log_line
    runs = [r for r in deployment.runs() if r["dag_run_id"] != refused]
    assert runs, "no runs"
    bad = []
    for run in runs:
        if run["state"] in ("queued", "running"):
            # a run started by another (the capture's Asset) that has not finished yet
            deployment.wait_for_runs([run["dag_run_id"]], RUN_TIMEOUT)
        for ti in deployment.task_instances(run["dag_run_id"]):
            if ti["state"] not in ("success", "skipped") or (ti.get("try_number") or 1) > 1:
                bad.append((run["dag_run_id"], ti["task_id"], ti["state"], ti.get("try_number")))
    assert not bad, f"task instances failed or retried: {bad}"
    assert all(r["state"] == "success" for r in deployment.runs() if r["dag_run_id"] != refused)

    page.goto(f"/dags/{DAG_ID}/runs")
    for run in runs:
        expect(page.get_by_text(run["dag_run_id"], exact=True)).to_be_visible()
    settle(page)
    shot(page, artifacts, "07-runs")
    if console.messages:
        pytest.fail("error-level console messages from the Airflow UI:\n" + "\n".join(console.messages))
