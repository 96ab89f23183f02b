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
from pathlib import Path

import pandas as pd
import pytest
from compaction_snapshot import OVERSHADOWED, WAITING, line_of
from dag_runs import check_run

REPO = Path(__file__).resolve().parents[2]


def run_dag(snapshot: Path, **conf) -> Path:
    """Run the ``segment_balancing`` DAG with ``dag.test()`` on ``snapshot`` (and params ``conf``);
    check the run (``dag_runs.check_run``) and return the published plan directory."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    run = bag.dags["segment_balancing"].test(run_conf={"snapshot": str(snapshot), **conf})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    return check_run(run.run_id, run.state, states, conf)


@pytest.mark.spark_submit
def test_segment_balancing_dag_publishes_the_plan_of_the_cli(airflow_home, compaction_planned, monkeypatch):
    """Overwritten, minor-compacted (two generations) and partially compacted data, planned by the
    DAG with one spark-submit per application: the ``used_segments`` task finds the overshadowed and
    standby segments itself, stage 12 drops exactly the overshadowed replicas whose overshadowing
    segments are served (1-24 wait for 25, which stage 1 only now loads), and the plan is the CLI's.

    With ``simulate_runs`` 2 the ``simulate`` task applies that plan as a cluster would and plans
    once more: 25 is then served, so run 2 drops the 24 replicas that waited for it. With
    ``compare_with_druid`` (on by default) Druid's Coordinator plans the snapshot beside it. (The
    ``advise`` task runs in the Connect tests, on the bundled druid38 snapshot; its spark-submit
    application's entry point in ``tests/tools/test_advise.py``.)"""
    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__SPARK_MODE", "spark-submit")
    base, cli_summary, cli_ops = compaction_planned
    # compare_with_druid on (the default): compare_coordinators runs the druid coordinator's
    # applications in this mode too (check_run checks its validated plan)
    published = run_dag(base / "snapshot", simulate_runs=2)
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
