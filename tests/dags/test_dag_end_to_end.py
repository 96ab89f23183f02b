"""The real DAG, end to end: resolve_snapshot, used_segments, prepare, the thirteen stage
applications, assemble, the Great Expectations gate and publish, on the hand-worked snapshot of
compaction_snapshot.py: overwritten data, two minor-compaction generations, a partially compacted
day that falls back, a tombstone, an unreplicated segment and a decommissioning server.
``used_segments`` must find the overshadowed and standby segments itself, and the plan must be the
one the CLI computes in one Spark session (which test_used_segments.py checks by hand;
test_pipeline.py checks the CLI's plan of the real ``druid_sample`` data, and ``make demo`` runs this
DAG on it).

Here one spark-submit per application (``dag.test()``, on ``local[2]``); the default mode, every
application a client of a Spark Connect server on a standalone cluster, is ``test_dag_on_connect.py``'s."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from compaction_snapshot import OVERSHADOWED, WAITING, line_of
from dag_runs import published_by

from segment_balancer.planner.stages import ALL_APP_NAMES

REPO = Path(__file__).resolve().parents[2]


def run_dag(snapshot: Path, **conf) -> Path:
    """Run the ``segment_balancing`` DAG with ``dag.test()`` on ``snapshot`` (and params ``conf``);
    check every task succeeded and return the published plan directory."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    run = bag.dags["segment_balancing"].test(run_conf={"snapshot": str(snapshot), **conf})

    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert set(states) == {
        "resolve_snapshot",
        *ALL_APP_NAMES,
        "validate_plan",
        "publish_plan",
        "simulate",
        "remove_work",
        "release_spark_session",
    }
    # simulate runs only with simulate_runs; everything else succeeds
    skipped = set() if conf.get("simulate_runs") else {"simulate"}
    assert {t for t, state in states.items() if state != "success"} == skipped, states
    assert {states[t] for t in skipped} <= {"skipped"}, states
    # published: remove_work removed the run's directory and its stage XComs, objects in storage too
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from segment_balancer_airflow.resolve import run_dir_name

    home = Path(os.environ["SEGMENT_BALANCER_HOME"])
    assert not (home / "runs" / run_dir_name(run.run_id)).exists() and (home / "runs").is_dir()
    with create_session() as session:
        left = {x.task_id for x in session.query(XComModel).filter(XComModel.run_id == run.run_id)}
    assert left.isdisjoint(ALL_APP_NAMES) and "resolve_snapshot" in left
    stored = Path(os.environ["AIRFLOW_HOME"]) / "xcom" / "segment_balancing" / run.run_id
    assert not [p for p in stored.rglob("*") if p.is_file()]
    published, extra = published_by(run.run_id)
    assert json.loads((published / "validation.json").read_text())["success"] is True
    assert (published / "report.html").is_file()
    # compare_with_druid (on by default): the other coordinator's validated plan of the same snapshot
    # beside the plan, with its report, and the two compared; off, none
    own = json.loads((published / "summary.json").read_text()).get("coordinator", "issue7458")
    other = "issue7458" if own == "druid" else "druid"
    if conf.get("compare_with_druid", True):
        assert (published / "compared" / other / "report.html").is_file()
        assert json.loads((published / "compared" / other / "validation.json").read_text())["success"] is True
        plans_compared = json.loads((published / "comparison.json").read_text())["plans"]
        assert [p["coordinator"] for p in plans_compared][1] == other
    else:
        assert not (published / "compared").exists() and not (published / "comparison.json").exists()
    summary = json.loads((published / "summary.json").read_text())
    assert extra["cluster"] == summary["cluster"]
    assert (extra["operations"], extra["loads"], extra["unreplicated_after"]) == (
        summary["operations"],
        summary["loads"],
        summary["status_after"]["unreplicated"],
    )
    return published


@pytest.mark.spark_submit
def test_segment_balancing_dag_publishes_the_plan_of_the_cli(airflow_home, compaction_planned, monkeypatch):
    """Overwritten, minor-compacted (two generations) and partially compacted data, planned by the
    DAG with one spark-submit per application: the ``used_segments`` task finds the overshadowed and
    standby segments itself, stage 12 drops exactly the overshadowed replicas whose overshadowing
    segments are served (1-24 wait for 25, which stage 1 only now loads), and the plan is the CLI's.

    With ``simulate_runs`` 2 the ``simulate`` task applies that plan as a cluster would and plans
    once more: 25 is then served, so run 2 drops the 24 replicas that waited for it."""
    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__SPARK_MODE", "spark-submit")
    base, cli_summary, cli_ops = compaction_planned
    # compare_with_druid off: the druid38 test runs both coordinators in this mode
    published = run_dag(base / "snapshot", simulate_runs=2, compare_with_druid=False)
    summary = json.loads((published / "summary.json").read_text())
    # The stages with nothing to schedule are the CLI's, and the DAG did not submit them.
    skipped = {n for n, t in summary["timings_seconds"].items() if t.get("skipped")}
    assert skipped == {n for n, t in cli_summary["timings_seconds"].items() if t.get("skipped")}
    assert {1, 5, 7, 12}.isdisjoint(int(n[5:7]) for n in skipped)
    ops = pd.read_parquet(published / "operations.parquet")
    # Determinism: one spark-submit per application under Airflow gives exactly the plan of the one-session CLI,
    # loads (stage 1), moves off a decommissioning server (stage 5), balancing and drops included.
    pd.testing.assert_frame_equal(ops, cli_ops)
    assert {1, 5, 7, 12} <= set(ops.stage)
    drops = ops[(ops.action == "DROP") & ops.depends_on.isna()]
    assert drops.reason.eq("overshadowed").all()
    assert {line_of(s) for s in drops.segment_id} == OVERSHADOWED - WAITING
    assert summary["overshadowed_waiting"]["per_datasource"] == {"a": {"segments": 24, "served_replicas": 24}}
    per = summary["timeline"]["per_datasource"]
    assert per["h"] == {"overshadowed": 6, "standby": 1, "visible": 3}  # two generations on day 1, a fall-back on day 2
    assert sum(p.get("overshadowed", 0) for p in per.values()) == len(OVERSHADOWED) == 34

    # The what-if simulation, published beside the plan: run 1 is this plan, run 2 plans on the
    # snapshot it left.
    simulation = published / "simulation"
    assert (simulation / "report.html").is_file() and (simulation / "run-002" / "plan" / "report.html").is_file()
    runs = pd.read_csv(simulation / "runs.csv")
    assert list(runs.run) == [1, 2]
    assert (runs.loc[0, "loads"], runs.loc[0, "drops"]) == (summary["loads"], summary["drops"])
    pd.testing.assert_frame_equal(pd.read_parquet(simulation / "run-001" / "plan" / "operations.parquet"), cli_ops)
    run2 = pd.read_parquet(simulation / "run-002" / "plan" / "operations.parquet")
    waited = run2[(run2.action == "DROP") & run2.depends_on.isna() & run2.reason.eq("overshadowed")]
    assert {line_of(s) for s in waited.segment_id} == WAITING


@pytest.mark.spark_submit
def test_segment_balancing_dag_plans_the_druid_38_snapshot(airflow_home, monkeypatch):
    """The bundled ``druid38`` snapshot (a tier alias, partial-load rules, a rule naming a tier
    without historicals) through the DAG, both coordinators (``compare_with_druid`` on; the
    simulation task is the other test's): every task succeeds and both plans pass the gate (``run_dag``); the plan
    loads the ``clicks`` part by_country with Druid's fingerprint on both tiers of the alias ``hot``
    (worked by hand in ``tests/test_druid38_plan.py``), says the tier ``archive`` has no historical,
    and the druid plan is Druid 38.0.0's, from the snapshot's servers."""
    from test_druid38_plan import ID, SNAPSHOT, projection_fingerprint

    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__SPARK_MODE", "spark-submit")
    published = run_dag(SNAPSHOT)
    ops = pd.read_parquet(published / "operations.parquet")
    day0 = ops[ops["segment_id"].isin([ID[("clicks", "2026-09-30", p)] for p in (0, 1)]) & ops["action"].eq("LOAD")]
    assert set(day0["tier"]) == {"hot_blue", "hot_green"}
    assert set(day0["partial_fingerprint"]) == {projection_fingerprint(["by_country"])}
    summary = json.loads((published / "summary.json").read_text())
    assert "archive" in summary["undone"]["tiers"]
    druid = json.loads((published / "compared" / "druid" / "summary.json").read_text())["druid_run"]
    assert (druid["release"], druid["release_from"]) == ("38.0.0", "snapshot")
