"""``advise``: Druid's Coordinator under candidate configs, one Spark task each, from the CLI; the
candidates' runs checked against Druid's ``BalancingStrategiesTest`` (35.0.0 and 38.0.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from druid_simulation import T1, historical, wiki_segments, write_cluster

from segment_balancer.common.errors import InputError
from segment_balancer.planner import advisor
from segment_balancer.tools.advise import advise
from segment_balancer.tools.cli import main

SAMPLE = "include/segment_balancer/snapshots/druid_sample"


def _one_more(tmp_path, change: dict):
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps([change]))
    return path


@pytest.mark.simulation
def test_a_new_cluster_is_loaded_in_run_1_and_spread_evenly(spark, tmp_path):
    """``testNewClusterGetsBalanced``: five empty historicals, 1000 segments: the snapshot's own
    config (round robin) assigns all 1000 in run 1, 200 each, and moves nothing."""
    snap = write_cluster(tmp_path / "snap", wiki_segments(), {historical(i): [] for i in range(5)})
    out = advise(
        spark,
        snap,
        tmp_path / "advice",
        runs=2,
        candidates_file=_one_more(tmp_path, {"druid.coordinator.balancer.strategy": "diskNormalized"}),
        with_issue7458=False,
    )
    current = next(r for r in out["candidates"] if r["current"])
    assert current["runs"][0]["unavailable"] == 1000
    assert current["runs_to_loaded"] == 1
    assert current["runs"][1]["max_minus_min_segments"] == 0
    assert current["runs"][1]["moves"] == 0
    assert [r["name"] for r in out["candidates"]] == ["current", "diskNormalized"]
    assert (tmp_path / "advice" / "advice.json").is_file() and (tmp_path / "advice" / "report.html").is_file()


@pytest.mark.simulation
def test_a_cluster_gets_balanced_when_a_historical_is_added(spark, tmp_path):
    """``testClusterGetsBalancedWhenServerIsAdded``: four historicals with 250 each and a fifth,
    empty: after 7 runs of the snapshot's own config each holds 195 to 205 (Druid's range), so
    the widest max − min of segments is at most 10, and the runs moved segments."""
    served = {historical(i): [j for j in range(1000) if j % 4 == i] for i in range(4)}
    snap = write_cluster(tmp_path / "snap", wiki_segments(), {**served, historical(4): []})
    out = advise(
        spark,
        snap,
        tmp_path / "advice",
        runs=7,
        candidates_file=_one_more(tmp_path, {"smartSegmentLoading": False, "maxSegmentsToMove": 0}),
        with_issue7458=False,
    )
    current, frozen = out["candidates"]
    assert current["runs"][0]["max_minus_min_segments"] == 250
    assert current["max_minus_min_segments"] <= 10 and current["segments_moved"] > 0
    # no move allowed: the fifth historical stays empty
    assert frozen["segments_moved"] == 0 and frozen["max_minus_min_segments"] == 250
    assert out["recommended"]["name"] == "current" and out["config_diff"] == {}


@pytest.mark.simulation
def test_the_cli_writes_the_advice_and_prints_the_recommendation(tmp_path, capsys):
    out = tmp_path / "advice"
    assert main(["advise", "--snapshot", SAMPLE, "--out", str(out), "--runs", "2"]) == 0
    printed = capsys.readouterr().out
    advice = json.loads((out / "advice.json").read_text())
    assert f"recommended: {advice['recommended']['name']}" in printed or "nothing to change" in printed
    assert advice["candidates"][0]["current"] and 1 < len(advice["candidates"]) <= 16
    assert all(set(advisor.MEASURES) <= set(r) for r in advice["candidates"])
    assert advice["recommended"]["pareto"]
    current = advice["candidates"][0]["config"]
    assert (advice["config_diff"], advice["restart_keys"]) == advisor.config_diff(
        current, advice["recommended"]["config"]
    )
    assert len(advice["issue7458"]["runs"]) == 3  # the snapshot and two runs
    assert (out / "report.html").read_text().count('data-candidate="') == len(advice["candidates"]) + 1
    assert main(["summary", str(out)]) == 0
    assert "Advice" in capsys.readouterr().out


def test_the_cli_refuses_a_candidate_of_an_unknown_key(tmp_path, capsys):
    path = _one_more(tmp_path, {"maxSegmentToMove": 5})
    assert main(["advise", "--snapshot", SAMPLE, "--out", str(tmp_path / "o"), "--candidates", str(path)]) == 2
    assert "candidate 1: 'maxSegmentToMove' is not a key the advisor changes" in capsys.readouterr().err


@pytest.mark.simulation
def test_a_rolling_restart_leaves_replicas_missing_in_run_1_only(spark, tmp_path):
    """Five historicals holding 1000 segments two replicas each (400 a historical); historical 0
    restarts: away for run 1, its 400 replicas are missing as run 1 begins (nothing unavailable:
    every segment has its other replica); Druid's Coordinator loads some elsewhere in run 1
    (throttled by smart loading), and once the historical is back with its own no replica is
    missing."""
    served = {historical(i): [j for j in range(1000) if i in (j % 5, (j + 1) % 5)] for i in range(5)}
    rules = {"_default": [{"type": "loadForever", "tieredReplicants": {T1: 2}}]}
    snap = write_cluster(tmp_path / "snap", wiki_segments(), served, rules=rules)
    out = advise(
        spark,
        snap,
        tmp_path / "advice",
        runs=2,
        candidates_file=_one_more(tmp_path, {"druid.coordinator.balancer.strategy": "diskNormalized"}),
        restart=[historical(0)],
    )
    current = out["candidates"][0]
    assert (current["runs"][0]["unavailable"], current["runs"][0]["under_replicated"]) == (0, 400)
    assert current["runs"][1]["under_replicated"] == 0 and current["runs_to_loaded"] == 1
    assert out["restarted"] == [historical(0)]
    # #7458's run 1 plans without the historical: its 400 segments under-replicated (segments, one
    # replica each missing); back after it, run 2 starts with nothing missing
    issue7458 = out["issue7458"]
    assert (issue7458["runs"][0]["unavailable"], issue7458["runs"][0]["under_replicated"]) == (0, 400)
    assert issue7458["runs"][1]["under_replicated"] == 0 and issue7458["runs_to_loaded"] == 1


@pytest.mark.simulation
def test_the_dags_entry_point_publishes_whole_or_refuses_leaving_the_earlier_advice(
    spark, tmp_path, capsys, monkeypatch
):
    """``spark_apps/advise.py`` (``tools.advise.main``, what ``AdviseSubmitOperator`` submits): the
    advice into ``--out`` whole, its work directory apart; a snapshot it cannot read exits 2 and
    leaves the advice there as it was. (On the tests' session, which its end must not stop.)"""
    import segment_balancer.tools.advise as advise_module
    from segment_balancer.tools.advise import main as advise_main

    class Kept:
        def __getattr__(self, name):
            return getattr(spark, name)

        def stop(self):
            pass

    monkeypatch.setattr(advise_module, "get_session", lambda *a, **k: Kept())

    out, work = tmp_path / "plan" / "advice", tmp_path / "run" / "advice"
    argv = ["--snapshot", SAMPLE, "--work", str(work), "--runs", "1", "--out", str(out)]
    assert advise_main(argv) == 0
    advice = json.loads((out / "advice.json").read_text())
    assert len(advice["issue7458"]["runs"]) == 2 and not (out / "work").exists() and work.is_dir()
    with pytest.raises(SystemExit) as refused:
        advise_main(["--snapshot", str(tmp_path / "nowhere"), "--work", str(work), "--runs", "1", "--out", str(out)])
    assert refused.value.code == 2 and "advice refused" in capsys.readouterr().err
    assert json.loads((out / "advice.json").read_text()) == advice


def test_a_restart_of_no_historical_is_refused_before_any_work(tmp_path):
    with pytest.raises(InputError, match=r"restart: 'nobody:8083' is no historical of .*servers.json"):
        advise(None, Path(SAMPLE), tmp_path / "o", runs=1, restart=["nobody:8083"])
    assert not (tmp_path / "o" / "work" / "prepared").exists()
