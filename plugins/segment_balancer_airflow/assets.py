"""The Airflow Assets of segment_balancer, defined once for every DAG that produces or consumes them."""

from __future__ import annotations

from airflow.sdk import Asset

#: A new snapshot under the snapshots root: ``druid_snapshot_capture`` emits it,
#: ``segment_balancing`` is scheduled on it (besides its daily time schedule).
SNAPSHOTS = Asset(name="segment_balancer_snapshots", uri="segment-balancer://snapshots", group="segment_balancer")

#: A plan published under ``$SEGMENT_BALANCER_HOME/plans/``: ``segment_balancing``'s ``publish_plan``
#: emits it, with the plan's directory and headline numbers as the event's extra
#: (:func:`plan_event_extra`), so a downstream DAG (one that applies plans) can be scheduled on it.
PLANS = Asset(name="segment_balancer_plans", uri="segment-balancer://plans", group="segment_balancer")


def plan_event_extra(plan_dir: str) -> dict:
    """The extra of a :data:`PLANS` event: ``plan_dir`` (str path), ``cluster``, ``snapshot_id``,
    ``snapshot_time``, ``whatif`` (bool) and the headline numbers of
    :func:`segment_balancer.plan.history.headline` (``operations``, ``loads``, ``drops``, ``moves``,
    ``unreplicated_after``, ``underreplicated_after`` …, ints; ``max_minus_min_*`` per tier)."""
    from segment_balancer.plan.history import read_plan

    entry = read_plan(plan_dir)
    return {
        "plan_dir": str(plan_dir),
        "cluster": entry.cluster,
        "snapshot_id": entry.snapshot_id,
        "snapshot_time": entry.snapshot_time,
        "whatif": entry.whatif,
        **entry.numbers,
    }
