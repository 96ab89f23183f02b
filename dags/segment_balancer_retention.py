"""
# segment_balancer_retention

Keeps `$SEGMENT_BALANCER_HOME` and the task logs from growing without end: every hour it applies the
retention settings (`[segment_balancer] retention_*` of the Airflow config; 0 turns a rule off) and
logs every directory it removes, with its reason and size. On from the start (not paused).

```
remove_old_runs    remove_old_plans    remove_old_logs
```

- **remove_old_runs** removes the work directories under `runs/` of runs that did not publish
  (`segment_balancing` removes its own once published), `retention_work_days_after_failure` (7)
  days after they began, with the XComs of their stage tasks; never a run still running.
- **remove_old_plans** removes published plans under `plans/` older than `retention_plan_days` (30)
  or beyond the `retention_plans_per_cluster` (200) newest of their cluster, but never the plan
  `LATEST` names, the newest plan of a cluster, or its newest plan without what-if edits (whose
  balancer state the next run reads).
- **remove_old_logs** removes the task logs of DAG runs older than `retention_log_days` (30).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.configuration import conf
from airflow.sdk import dag, task


@dag(
    dag_id="segment_balancer_retention",
    schedule="@hourly",
    start_date=datetime(2024, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    doc_md=__doc__,
    tags=["druid", "segment-balancing", "maintenance"],
    default_args={"owner": "segment_balancer", "retries": 1, "retry_delay": timedelta(minutes=5)},
)
def segment_balancer_retention():
    @task
    def remove_old_runs(ti=None) -> list[dict]:
        """Remove the work directories (and stage XComs) of runs that did not publish, once old enough."""
        from segment_balancer_airflow.branches import STAGE_TASK_IDS
        from segment_balancer_airflow.resolve import runs_root, segment_balancer_home
        from segment_balancer_airflow.retention import Retention, remove_old_runs, run_state_of

        removed = remove_old_runs(
            runs_root(segment_balancer_home()),
            Retention.from_airflow_config().work_days_after_failure,
            STAGE_TASK_IDS,
            run_state_of(ti),
        )
        return [vars(r) for r in removed]

    @task
    def remove_old_plans() -> list[dict]:
        """Remove published plans by age and count per cluster, keeping the protected ones."""
        from segment_balancer.plan.retention import remove_plans
        from segment_balancer_airflow.resolve import plans_root, segment_balancer_home
        from segment_balancer_airflow.retention import Retention

        settings = Retention.from_airflow_config()
        return [
            vars(r)
            for r in remove_plans(plans_root(segment_balancer_home()), settings.plan_days, settings.plans_per_cluster)
        ]

    @task
    def remove_old_logs() -> list[dict]:
        """Remove the task logs of DAG runs older than the setting."""
        from segment_balancer_airflow.retention import Retention, remove_old_logs

        return [
            vars(r)
            for r in remove_old_logs(
                Path(conf.get("logging", "base_log_folder")), Retention.from_airflow_config().log_days
            )
        ]

    remove_old_runs()
    remove_old_plans()
    remove_old_logs()


segment_balancer_retention()
