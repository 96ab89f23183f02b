"""
# segment_balancing

Plans the segment loads, moves and drops of a Druid cluster with the thirteen-stage Coordinator
algorithm of Druid issue #7458, one Spark application per stage, from a snapshot of the cluster.

```
resolve_snapshot ─▶ used_segments ─▶ prepare ─▶ stage01 … stage13 ─▶ assemble ─▶ validate_plan ─▶ publish_plan ─▶ simulate
```

- **resolve_snapshot** picks the snapshot (the `snapshot` param, else the newest under
  `snapshots_root` taken at or before the run's logical date, else its `run_after`), creates a fresh
  work directory `$SEGMENT_BALANCER_HOME/runs/<run id>/work` and writes the config overrides there.
- **prepare**, **stage01…13**, **assemble** are `StageSubmitOperator`s (spark-submit of
  `spark_apps/<name>.py`); each hands its segment groups (roaring bitsets) to the next one through
  XCom (large values go to the object-storage XCom backend).
- **validate_plan** runs the Great Expectations checks; **publish_plan** atomically publishes the
  plan to `$SEGMENT_BALANCER_HOME/plans/<run id>`.
- **simulate** (skipped unless the `simulate_runs` param is above 0) asks "where does the cluster
  end?": it applies the published plan as a cluster would, plans again, and so on, `simulate_runs`
  Coordinator runs in all (the first is this plan), and publishes `plans/<run id>/simulation/`
  (`runs.csv`, one row per run, and every run's plan and snapshot; see docs/SIMULATION.md).

Trigger with `{"snapshot": "<dir or name under snapshots_root>"}` to plan on a given snapshot.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import segment_balancer
from airflow.sdk import Param, chain, dag, task
from segment_balancer.stages import APP_NAMES
from segment_balancer_airflow.operators import SimulateSubmitOperator, StageSubmitOperator

REPO = Path(__file__).resolve().parents[1]
BUNDLED_SNAPSHOTS = Path(segment_balancer.__file__).resolve().parent / "snapshots"
DEFAULT_SNAPSHOTS_ROOT = os.environ.get("SEGMENT_BALANCER_SNAPSHOTS", str(BUNDLED_SNAPSHOTS))

# Stage operators read the run's paths from resolve_snapshot's XCom.
RUN = "{{{{ ti.xcom_pull(task_ids='resolve_snapshot')['{}'] }}}}"


@dag(
    dag_id="segment_balancing",
    schedule="@daily",
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["druid", "segment-balancing", "spark"],
    default_args={"owner": "segment_balancer", "retries": 1, "retry_delay": timedelta(seconds=30)},
    params={
        "snapshot": Param(
            "",
            type="string",
            title="Snapshot",
            description="Snapshot directory (or its name under snapshots_root); empty = the newest "
            "snapshot taken at or before the run's date.",
        ),
        "snapshots_root": Param(
            DEFAULT_SNAPSHOTS_ROOT,
            type="string",
            minLength=1,
            title="Snapshots root",
            description="Directory holding one sub-directory per snapshot.",
        ),
        "config_overrides": Param(
            {},
            type="object",
            title="Coordinator config overrides",
            description="Coordinator dynamic config keys overriding the snapshot's coordinator_config.json.",
        ),
        "simulate_runs": Param(
            0,
            type="integer",
            minimum=0,
            maximum=100,
            title="Simulated Coordinator runs",
            description="0 = plan only. N = after publishing, apply the plan as the cluster would, plan again, "
            "N runs in all (the first is this plan); runs.csv under plans/<run id>/simulation.",
            section="What-if simulation",
        ),
        "simulate_loads_per_run": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Loads per historical per run",
            description="Loads each historical completes per simulated run; empty = all its queue.",
            section="What-if simulation",
        ),
        "simulate_load_failure_rate": Param(
            0.0,
            type="number",
            minimum=0,
            maximum=1,
            title="Load failure rate",
            description="Probability that a simulated load fails (seeded, the same every time).",
            section="What-if simulation",
        ),
    },
)
def segment_balancing():
    @task
    def resolve_snapshot(params=None, run_id=None, logical_date=None, dag_run=None) -> dict:
        """Pick the snapshot, create a fresh work directory, write the config overrides."""
        import json
        import re
        import shutil

        from segment_balancer_airflow.snapshots import pick_snapshot

        root = Path(params["snapshots_root"]).expanduser()
        if params.get("snapshot"):
            snapshot = Path(params["snapshot"]).expanduser()
            if not snapshot.is_absolute() and not snapshot.exists():
                snapshot = root / snapshot
        else:
            snapshot = pick_snapshot(root, logical_date or dag_run.run_after)
        if not (snapshot / "snapshot.json").is_file():
            raise FileNotFoundError(f"{snapshot} is not a snapshot directory (no snapshot.json)")

        home = Path(os.environ.get("SEGMENT_BALANCER_HOME", REPO / "var")).resolve()
        safe_run_id = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)
        work = home / "runs" / safe_run_id / "work"
        shutil.rmtree(work, ignore_errors=True)  # re-running a run starts clean
        work.mkdir(parents=True)
        config_file = work / "config_overrides.json"
        config_file.write_text(json.dumps(params.get("config_overrides") or {}, indent=2))
        return {
            "snapshot": str(snapshot.resolve()),
            "work": str(work),
            "config_file": str(config_file),
            "plan_dir": str(work / "plan"),
            "publish_dir": str(home / "plans" / safe_run_id),
            "simulation_dir": str(home / "plans" / safe_run_id / "simulation"),
        }

    @task
    def validate_plan(run: dict) -> dict:
        """Great Expectations checks of the assembled plan; fails the run when a check fails."""
        from segment_balancer.validation import require_valid

        require_valid(run["plan_dir"], run["work"])
        return {"plan_dir": run["plan_dir"], "valid": True}

    @task
    def publish_plan(run: dict) -> str:
        """Atomically publish the validated plan; returns where it went."""
        from segment_balancer.publish import publish_plan as publish

        publish(run["plan_dir"], run["publish_dir"])
        return run["publish_dir"]

    run = resolve_snapshot()
    stages, previous = [], None
    for app in APP_NAMES:
        stages.append(
            StageSubmitOperator(
                stage_app=app,
                groups_from=previous,
                snapshot=RUN.format("snapshot"),
                work=RUN.format("work"),
                config_file=RUN.format("config_file"),
            )
        )
        previous = app
    validated = validate_plan(run)
    simulate = SimulateSubmitOperator(
        runs="{{ params.simulate_runs }}",
        loads_per_run="{{ params.simulate_loads_per_run }}",
        load_failure_rate="{{ params.simulate_load_failure_rate }}",
        snapshot=RUN.format("snapshot"),
        plan=RUN.format("publish_dir"),
        work=RUN.format("work"),
        out=RUN.format("simulation_dir"),
        config_file=RUN.format("config_file"),
    )
    chain(run, *stages, validated, publish_plan(run), simulate)


segment_balancing()
