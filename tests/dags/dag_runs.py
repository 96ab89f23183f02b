"""What the ``segment_balancing`` DAG tests (``test_dag_end_to_end.py``, ``test_dag_on_connect.py``)
read of a finished run: the plan it published and its plans Asset event."""

from __future__ import annotations

import os
from pathlib import Path


def published_by(run_id: str) -> tuple[Path, dict]:
    """The plan directory the DAG run ``run_id`` published and its plans Asset event's extra:
    ``publish_plan`` emitted exactly one event of ``segment_balancer_plans``, its extra naming the
    plan under ``SEGMENT_BALANCER_HOME/plans``; ``LATEST`` names that plan unless an earlier test
    published a plan of a newer snapshot."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    from segment_balancer.plan.publish import plan_order

    with create_session() as session:
        events = (
            session.query(AssetEvent, AssetModel)
            .filter(AssetEvent.asset_id == AssetModel.id)
            .filter(AssetEvent.source_run_id == run_id)
            .all()
        )
        assert [(a.name, e.source_task_id) for e, a in events] == [("segment_balancer_plans", "publish_plan")]
        extra = dict(events[0][0].extra)
    plans = Path(os.environ["SEGMENT_BALANCER_HOME"]) / "plans"
    published = Path(extra["plan_dir"])
    assert published.parent == plans and published.is_dir()
    latest = plans / (plans / "LATEST").read_text().strip()
    assert latest == published or plan_order(latest) > plan_order(published)
    return published, extra
