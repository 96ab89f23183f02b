"""The schedule of ``segment_balancing``: daily and on each new snapshot; a backfill leaves the daily one.

Airflow (3.3) works out a DAG's next scheduled run from its latest automated run, a backfill run
included (``dag_processing.collection._get_latest_runs_stmt``, the scheduler's reference run).
With ``catchup=False`` the next run is then the later of the latest past tick and the tick after
that run, so a backfill of old days, created at any time of day, starts today's scheduled run at
once beside its own. :class:`SnapshotOrDailySchedule` takes a backfill run at the moment it was
created instead: the next scheduled run is the first tick after the backfill was created.

A custom timetable: the plugin (``plugins/segment_balancer_plugin.py``) registers it, which the
DAG processor and the scheduler need to serialize and read it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pendulum
from airflow.timetables.assets import AssetOrTimeSchedule
from airflow.timetables.base import DagRunInfo
from airflow.utils.types import DagRunType

if TYPE_CHECKING:
    from airflow.models.dagrun import DagRun


class SnapshotOrDailySchedule(AssetOrTimeSchedule):
    """``AssetOrTimeSchedule`` (assets, a time ``timetable``) whose time schedule a backfill does not move.

    The reference run of a backfill (``DagRun.run_type`` ``backfill``) counts as a run at its
    ``created_at`` (UTC): with ``catchup=False`` the next scheduled run is the later of the time
    timetable's latest past tick and its first tick after the backfill was created. Any other run
    is Airflow's own ``Timetable.run_info_from_dag_run``. Meant for ``catchup=False``: with catchup
    the ticks between the last scheduled run and the backfill would not run.
    """

    def run_info_from_dag_run(self, *, dag_run: DagRun) -> DagRunInfo:
        """The run info the next scheduled run is computed from (Airflow 3.3 ``Timetable``)."""
        if dag_run.run_type != DagRunType.BACKFILL_JOB or dag_run.created_at is None:
            return super().run_info_from_dag_run(dag_run=dag_run)
        return DagRunInfo.exact(pendulum.instance(dag_run.created_at))
