"""
# segment_balancing

Plans the segment loads, moves and drops of a Druid cluster with the thirteen-stage Coordinator
algorithm of Druid issue #7458, one Spark application per stage, from a snapshot of the cluster.
The stages run on a Spark Connect server (connection `spark_connect_default`), all tasks of a run on
one session, or as one `spark-submit` each (`[segment_balancer] spark_mode = spark-submit`).
Runs daily at midnight UTC, and each time `druid_snapshot_capture` lands a new snapshot (the Asset
`segment_balancer_snapshots`). Unpausing it starts no run of its own: the first daily run is the
next midnight (a plan now is a trigger away, and a triggered run does not wait behind a scheduled one),
and creating a backfill starts only the backfill's runs: the next daily run is the first midnight after it.

```
resolve_snapshot ─▶ used_segments ─▶ prepare ─▶ choose_coordinators
    ├─▶ issue7458: stage01_unreplicated … stage13_broadcast_on_decomm ─▶ assemble ─┐
    └─▶ druid: druid_rules ─▶ druid_unload ─▶ druid_balance ─▶ druid_clone ─▶ assemble ─┤
    ─▶ compare ─▶ validate_plan ─▶ publish_plan ─▶ simulate, advise ─▶ remove_work ─▶ release_spark_session
```

Who plans is the Coordinator config field `coordinator`: `issue7458` (the default; the thirteen
stages) or `druid` (`druid_rules`, `druid_unload`, `druid_balance`, `druid_clone`: what Druid's own
Coordinator queues in one run, of the release the config key `druidVersion` or the snapshot names
(38.0.0 unless they say), a task per duty, docs/DRUID_COORDINATOR.md). Each coordinator is a task
group of its own; `choose_coordinators` follows the branch of the run's coordinator and skips the
other, so the grid shows what ran and what was skipped. With the param `compare_with_druid` (on by
default) it follows both: the other coordinator plans the same snapshot from the same prepared
tables in its own branch (in a fork of the work directory), `compare` joins the two, and its
validated plan is published beside the run's (`compared/<coordinator>/`), the two compared per
tier in the report (`comparison.json`): operations, bytes moved, what stays unavailable or
under-replicated, spread, fullest disk, total cost, Elasticsearch's weighted balance.

A bad snapshot, override or what-if edit fails its task at once, without a retry, with one line
naming the file, the row or key, the offending value and what was expected (`input refused: …`):
`resolve_snapshot` checks the small files and the overrides, `used_segments` and `prepare` the
segment and replica files. Nothing is published.

- **resolve_snapshot** picks the snapshot (the `snapshot` param, else the newest under
  `snapshots_root`, of the `cluster` param when set, taken at or before the run's logical date, else
  its `run_after`), creates a fresh work directory `$SEGMENT_BALANCER_HOME/runs/<run dir>/work`,
  applies the what-if edits (`whatif_*` params) to a copy of the snapshot there, writes the config
  overrides (`config_overrides` with the typed Coordinator config fields over it), and hands the run
  the balancer state (`balancer_state.json`: the `avgShedder` hit counts) of the newest published
  plan of the same cluster of an older snapshot that is no what-if.
- **used_segments**, **prepare**, and each branch's applications and **assemble** run the Spark applications: on the
  run's Spark Connect session (`StageConnectOperator`), or as `spark-submit` of
  `spark_apps/<name>.py` (`StageSubmitOperator`); each hands its segment groups (roaring bitsets)
  to the next one through XCom (large values go to the object-storage XCom backend). A stage with
  nothing to schedule runs no Spark job.
- **choose_coordinators** (a branch task) picks the branches: the run's coordinator's, and the
  other's when `compare_with_druid` is on (forking the work directory for it).
- **compare** joins the branches that ran: the other coordinator's plan set beside the run's,
  the two measured side by side (`comparison.json`).
- **validate_plan** runs the Great Expectations checks (of the other coordinator's plan too,
  which it then sets beside the run's); **publish_plan** atomically publishes the
  plan with its `report.html` to `$SEGMENT_BALANCER_HOME/plans/<run dir>` and emits the Asset
  `segment_balancer_plans` (extra: the plan directory and its headline numbers), on which a DAG that
  applies plans can be scheduled. The run's plan shows in the UI under the run's "Plan report" tab;
  every published plan is listed under Browse → "Segment plans".
- **simulate** (skipped unless the `simulate_runs` param is above 0) asks "where does the cluster
  end?": it applies the published plan as a cluster would, plans again, and so on, `simulate_runs`
  Coordinator runs in all (the first is this plan), and publishes `plans/<run dir>/simulation/`
  (`runs.csv`, one row per run, `report.html` charting the runs, and every run's plan and snapshot;
  see docs/SIMULATION.md).
- **advise** (skipped unless the `advise_runs` param is above 0) asks "which Coordinator config
  should I set?": Druid's own Coordinator simulated for `advise_runs` runs under each candidate
  dynamic config, one Spark task each, ranked, with #7458 on the same runs; publishes
  `plans/<run dir>/advice/` (`advice.json`: the candidates, the Pareto front, the recommendation and
  its config to POST; `report.html`; see docs/ADVISOR.md).
- **remove_work** (once the plan is published and simulated; not after a failure, which keeps them
  for diagnosis) removes the run's directory `runs/<run dir>/` and the XComs of its stage tasks
  (their objects in object storage with them). The `segment_balancer_retention` DAG removes what
  failed runs left, old plans and old task logs (`[segment_balancer] retention_*`).
- **release_spark_session** (a teardown: it runs whatever became of the run and does not decide its
  state) releases the run's Spark Connect session on the server.

Trigger with the defaults to plan on the newest snapshot; fill in `snapshot` to plan on a given
one, the Coordinator config fields or the what-if edits to ask "what if".
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from airflow.sdk import TaskGroup, TriggerRule, chain, dag, task, teardown
from airflow.timetables.trigger import CronTriggerTimetable

from segment_balancer.planner.coordinators import COORDINATORS, STAGE0_APPS
from segment_balancer_airflow.assets import PLANS, SNAPSHOTS, plan_event_extra
from segment_balancer_airflow.branches import STAGE_TASK_IDS, branch_apps, first_task_ids
from segment_balancer_airflow.connect import advise_operator, release_session, simulate_operator, stage_operator
from segment_balancer_airflow.params import dag_params, default_snapshots_root
from segment_balancer_airflow.refusal import RETRY_POLICY, refusing_bad_input
from segment_balancer_airflow.schedule import SnapshotOrDailySchedule


@dag(
    dag_id="segment_balancing",
    # Daily, and whenever druid_snapshot_capture lands a new snapshot.
    # No start_date, and run_immediately zero: unpausing waits for the next midnight instead of
    # running today's at once (CronTriggerTimetable; with a start_date, catchup=False runs it).
    # SnapshotOrDailySchedule: creating a backfill does not start today's run either.
    schedule=SnapshotOrDailySchedule(
        timetable=CronTriggerTimetable("@daily", timezone="UTC", run_immediately=timedelta(0)), assets=[SNAPSHOTS]
    ),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["druid", "segment-balancing", "spark"],
    # A retry for what may pass the next time (a Spark server restarting); none for bad input (refusal.py).
    default_args={
        "owner": "segment_balancer",
        "retries": 1,
        "retry_delay": timedelta(seconds=30),
        "retry_policy": RETRY_POLICY,
    },
    params=dag_params(default_snapshots_root()),
)
def segment_balancing():
    @task(multiple_outputs=True)  # each path its own XCom, which the stage tasks take as XComArgs
    def resolve_snapshot(params=None, run_id=None, logical_date=None, dag_run=None) -> dict:
        """Pick the snapshot, apply the what-if edits, create a fresh work directory, write the config."""
        from segment_balancer_airflow.resolve import resolve_run, segment_balancer_home

        with refusing_bad_input():  # bad input: one line in the log, no retry
            return resolve_run(
                params, run_id, logical_date or dag_run.run_after, segment_balancer_home(), dag_run.dag_id
            )

    @task.branch
    def choose_coordinators(run: dict) -> list[str]:
        """Follow the branch of the run's coordinator, and of the other when the run compares them
        (its work directory forked now); the others are skipped."""
        from segment_balancer.spark.apps import start_branches

        return first_task_ids(start_branches(Path(run["work"])))

    @task(trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    def compare(run: dict) -> dict:
        """Join the branches that ran: the compared coordinator's plan set beside the run's, the
        two measured side by side; returns each planning coordinator and where its plan is."""
        from segment_balancer.plan.compare import place_compared
        from segment_balancer.spark.apps import planned_branches

        plans = planned_branches(Path(run["work"]))
        place_compared(run["plan_dir"], run["work"])
        return plans

    @task
    def validate_plan(run: dict) -> dict:
        """Great Expectations checks of the assembled plan (and of the other coordinator's, set beside
        it by ``compare``); fails the run when a check fails."""
        from segment_balancer.plan.validation import validate_run

        validate_run(run["plan_dir"], run["work"])
        return {"plan_dir": run["plan_dir"], "valid": True}

    @task(outlets=[PLANS])
    def publish_plan(run: dict, outlet_events=None) -> str:
        """Atomically publish the validated plan with its report; emit the plans Asset; returns where it went."""
        from segment_balancer.plan.publish import publish_plan as publish
        from segment_balancer_airflow.resolve import plans_root, segment_balancer_home

        publish(run["plan_dir"], run["publish_dir"], plans_root(segment_balancer_home().resolve()))
        outlet_events[PLANS].extra = plan_event_extra(run["publish_dir"])
        return run["publish_dir"]

    @task(trigger_rule=TriggerRule.NONE_FAILED)  # simulate and advise are skipped unless asked for
    def remove_work(run: dict, dag_run=None) -> dict:
        """Remove the run's work directory and its stage XComs once its plan is published."""
        from segment_balancer_airflow.resolve import runs_root, segment_balancer_home
        from segment_balancer_airflow.retention import remove_run

        removed = remove_run(
            Path(run["work"]).parent,
            runs_root(segment_balancer_home().resolve()),
            dag_run.dag_id,
            dag_run.run_id,
            STAGE_TASK_IDS,
        )
        return {"removed": removed.path, "bytes": removed.bytes}

    @teardown
    def release_spark_session(dag=None, run_id=None) -> str:
        """Release the run's Spark Connect session, whatever became of the run (spark-submit mode: nothing)."""
        return release_session(dag.dag_id, run_id)

    run = resolve_snapshot()
    stage0, previous = [], None
    for app in STAGE0_APPS:
        stage0.append(
            stage_operator(
                stage_app=app,
                groups_from=previous,
                snapshot=run["snapshot"],
                work=run["work"],
                config_file=run["config_file"],
            )
        )
        previous = app
    chosen, joined = choose_coordinators(run), compare(run)
    chain(run, *stage0, chosen)
    for coordinator in COORDINATORS.values():
        with TaskGroup(group_id=coordinator.name, tooltip=coordinator.title):
            tasks, previous = [], STAGE0_APPS[-1]
            for app in branch_apps(coordinator):
                tasks.append(
                    stage_operator(
                        stage_app=app,
                        groups_from=previous,
                        branch=coordinator.name,
                        snapshot=run["snapshot"],
                        work=run["work"],
                        config_file=run["config_file"],
                    )
                )
                previous = tasks[-1].task_id
        chain(chosen, *tasks, joined)
    validated = validate_plan(run)
    simulate = simulate_operator(
        runs="{{ params.simulate_runs }}",
        loads_per_run="{{ params.simulate_loads_per_run }}",
        load_failure_rate="{{ params.simulate_load_failure_rate }}",
        snapshot=run["snapshot"],
        plan=run["publish_dir"],
        work=run["work"],
        out=run["simulation_dir"],
        config_file=run["config_file"],
    )
    advise = advise_operator(
        runs="{{ params.advise_runs }}",
        snapshot=run["snapshot"],
        work=run["advice_work"],
        out=run["advice_dir"],
        config_file=run["config_file"],
    )
    published = publish_plan(run)
    chain(joined, validated, published, [simulate, advise], remove_work(run), release_spark_session())


segment_balancing()
