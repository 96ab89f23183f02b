"""The Airflow Assets of segment_balancer, defined once for every DAG that produces or consumes them."""

from __future__ import annotations

from airflow.sdk import Asset

#: A new snapshot under the snapshots root: ``druid_snapshot_capture`` emits it,
#: ``segment_balancing`` is scheduled on it (besides its daily time schedule).
SNAPSHOTS = Asset(name="segment_balancer_snapshots", uri="segment-balancer://snapshots", group="segment_balancer")
