"""report.html of a plan and of a simulation, from hand-written plan files (the browser test of the
reports of real plans is tests/e2e/test_report.py)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from plan_summaries import summary, whatif_record, write_plan_dir

from segment_balancer.plan.report import ReportError, plan_report, rebuild, simulation_frames, write_report


def headline_values(html: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r'data-testid="headline-([a-z_]+)" data-value="(-?\d+)"', html)}


def test_plan_report_shows_the_summary(tmp_path):
    s = summary(
        "prod",
        loads=1234,
        drops=5,
        moves=3,
        unreplicated=(7, 2),
        underreplicated=(11, 4),
        spread=(9, 2),
        deferred=6,
        waiting=1,
        whatif=whatif_record(decommission=("h1",), snapshot="/snap"),
    )
    s["alerts"] = [{"kind": "unknown_tier", "message": "tier cold is named by a rule but has no historical server"}]
    s["config"].update(decommissioningNodes=["h1"], topBReuse=True)
    s["ignored_config"] = [{"key": "maxSegmentsToMove", "value": 100, "note": "retired by the seed"}]
    plan = write_plan_dir(tmp_path / "plan", s)
    html = write_report(plan).read_text()
    assert headline_values(html) == {
        "operations": 1239,
        "loads": 1234,
        "drops": 5,
        "moves": 3,
        "unreplicated_before": 7,
        "unreplicated_after": 2,
        "underreplicated_before": 11,
        "underreplicated_after": 4,
        "deferred_drops": 6,
        "overshadowed_waiting": 1,
    }
    assert '<div class="value">1,234</div>' in html  # thousands separators
    assert "decommission h1" in html and "tier cold is named by a rule" in html
    assert 'data-testid="validation-status">passed<' in html
    # config values as Druid's JSON has them
    assert "<td>[&#34;h1&#34;]</td>" in html and "<td>true</td>" in html
    assert "<td><code>maxSegmentsToMove</code></td><td>100</td><td>retired by the seed</td>" in html
    # one chart per kind and one holdings chart for the tier
    for div in (
        "chart-status",
        "chart-balance",
        "chart-operations",
        "chart-timings",
        "chart-timeline",
        "chart-holdings-0",
    ):
        assert f'id="{div}"' in html, div
    # self-contained: plotly.js inlined, nothing loaded from elsewhere
    assert "<script src=" not in html and "<link" not in html and "Plotly" in html
    assert plan_report(plan) == html  # the same plan, the same bytes


def test_a_plan_without_validation_says_so_and_bad_summaries_are_refused(tmp_path):
    plan = write_plan_dir(tmp_path / "plan", summary())
    (plan / "validation.json").unlink()
    assert 'data-testid="validation-status">not passed<' in plan_report(plan)
    (plan / "summary.json").write_text(json.dumps({"operations": 1}))
    with pytest.raises(ReportError, match="summary.json: not a plan summary"):
        plan_report(plan)
    with pytest.raises(ReportError, match="no summary.json"):
        plan_report(tmp_path / "empty")


def write_simulation(sim, runs: int):
    """A simulation of one tier: h1, h2, h3 (h3 decommissioning in run 1 only) after each run."""
    rows = []
    held = {1: {"h1": 10, "h2": 4, "h3": 40}, 2: {"h1": 8, "h2": 7, "h3": 0}}
    for run in range(1, runs + 1):
        base = sim / f"run-{run:03d}"
        s = summary(loads=5 - run, unreplicated=(3 - run, 0))
        s["servers"] = [
            {
                "server": h,
                "tier": "hot",
                "max_size": 100,
                "decommissioning": h == "h3" and run == 1,
                "segments_before": 0,
                "bytes_before": 0,
                "segments_after": n,
                "bytes_after": n,
            }
            for h, n in held[run].items()
        ]
        write_plan_dir(base / "plan", s)
        pd.DataFrame(
            {
                "server": list(held[run]),
                "tier": "hot",
                "segments": list(held[run].values()),
                "bytes": list(held[run].values()),
            }
        ).to_csv(base / "historicals.csv", index=False)
        rows.append(
            {
                "run": run,
                "operations": 5 - run,
                "loads": 5 - run,
                "drops": 0,
                "moves": 0,
                "balancing_moves": 0,
                "unreplicated_before": 3 - run,
                "underreplicated_before": 0,
                "segments_max_minus_min": 0,
                "stable": False,
            }
        )
    pd.DataFrame(rows).to_csv(sim / "runs.csv", index=False)


def test_simulation_report_charts_the_runs_and_links_every_run(tmp_path):
    sim = tmp_path / "simulation"
    write_simulation(sim, 2)
    runs, spread = simulation_frames(sim)
    # run 1: h3 decommissioning is left out, 10 - 4; run 2: h3 counts again, 8 - 0
    assert spread.to_dict("records") == [
        {"run": 1, "tier": "hot", "segments_max_minus_min": 6},
        {"run": 2, "tier": "hot", "segments_max_minus_min": 8},
    ]
    written = rebuild(sim)
    assert [p.relative_to(sim).as_posix() for p in written] == [
        "run-001/plan/report.html",
        "run-002/plan/report.html",
        "report.html",
    ]
    html = (sim / "report.html").read_text()
    for div in ("chart-sim-status", "chart-sim-balance", "chart-sim-moves"):
        assert f'id="{div}"' in html
    assert 'href="run-001/plan/report.html"' in html and 'href="run-002/plan/report.html"' in html
    assert headline_values((sim / "run-002" / "plan" / "report.html").read_text())["loads"] == 3


def test_report_command(tmp_path, capsys):
    from segment_balancer.tools.cli import main

    plan = write_plan_dir(tmp_path / "plan", summary())
    write_simulation(plan / "simulation", 1)
    assert main(["report", str(plan)]) == 0
    assert (plan / "report.html").is_file() and (plan / "simulation" / "report.html").is_file()
    assert (plan / "simulation" / "run-001" / "plan" / "report.html").is_file()
    assert main(["report", str(tmp_path)]) == 2
    assert "neither a plan directory" in capsys.readouterr().err
