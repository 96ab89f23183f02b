"""
# druid_snapshot_capture

Captures a snapshot of a live Druid cluster every hour into `snapshots_root/<cluster>/<UTC time>/`,
whole or not at all, and emits the Asset `segment_balancer_snapshots`, on which `segment_balancing`
is scheduled: each capture is planned on by itself.

```
capture ─▶ prune
```

- **capture** reads the broker's SQL (`sys.servers`, `sys.server_segments` streamed as objectLines)
  through the connection `druid_broker_default` and the Coordinator's HTTP API (used segments with
  their overshadowed status, load queues, rules, the dynamic config) through
  `druid_coordinator_default` (both of the Apache Druid provider; basic auth from login/password).
  `snapshot.json` records the Druid version the cluster runs (Druid 35 and later report it).
  A failed or partial capture leaves nothing and fails the task with the endpoint and the problem.
- **prune** keeps the `keep` newest captures of the cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import Param, chain, dag, task

from segment_balancer_airflow.assets import SNAPSHOTS
from segment_balancer_airflow.druid import BROKER_CONN_ID, COORDINATOR_CONN_ID, broker_endpoint, coordinator_endpoint
from segment_balancer_airflow.params import default_snapshots_root


@dag(
    dag_id="druid_snapshot_capture",
    schedule="@hourly",
    start_date=datetime(2024, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["druid", "segment-balancing", "capture"],
    default_args={"owner": "segment_balancer", "retries": 1, "retry_delay": timedelta(minutes=1)},
    params={
        "cluster": Param(
            "druid",
            type="string",
            minLength=1,
            pattern="^[A-Za-z0-9._-]+$",
            title="Cluster",
            description="Name of the cluster: captures go to snapshots_root/<cluster>/<UTC time>/.",
        ),
        "snapshots_root": Param(
            default_snapshots_root(),
            type="string",
            minLength=1,
            title="Snapshots root",
            description="Where captures go: $SEGMENT_BALANCER_SNAPSHOTS, the root segment_balancing reads.",
        ),
        "keep": Param(
            168,
            type="integer",
            minimum=1,
            title="Captures to keep",
            description="The newest captures of the cluster kept; older ones are deleted (168 = a week "
            "of hourly captures).",
        ),
        "broker_conn_id": Param(BROKER_CONN_ID, type="string", minLength=1, title="Broker connection"),
        "coordinator_conn_id": Param(COORDINATOR_CONN_ID, type="string", minLength=1, title="Coordinator connection"),
    },
)
def druid_snapshot_capture():
    @task(outlets=[SNAPSHOTS])
    def capture(params=None) -> str:
        """Capture the cluster into the snapshots root; returns the new snapshot directory."""
        from segment_balancer.tools.capture import capture as capture_snapshot

        out = capture_snapshot(
            coordinator_endpoint(params["coordinator_conn_id"]),
            broker_endpoint(params["broker_conn_id"]),
            Path(params["snapshots_root"]).expanduser(),
            params["cluster"],
        )
        return str(out)

    @task
    def prune(captured: str, params=None) -> list[str]:
        """Delete all but the ``keep`` newest captures of the cluster; returns what was deleted."""
        from segment_balancer.tools.capture import prune as prune_captures

        removed = prune_captures(Path(params["snapshots_root"]).expanduser(), params["cluster"], params["keep"])
        return [str(p) for p in removed]

    captured = capture()
    chain(captured, prune(captured))


druid_snapshot_capture()
