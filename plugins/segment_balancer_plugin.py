"""The ``segment_balancer`` Airflow plugin: the published plans in the Airflow UI.

- ``fastapi_apps``: ``segment_balancer_airflow.ui.app`` (run reports, the plans page, explain a
  segment), mounted by the API server at ``/segment-balancer``; it checks the user itself
  (``ui.AUTHORIZED``), as Airflow does not protect plugin apps.
- ``external_views``: "Plan report", a tab of every DAG run (the UI puts the run id in
  ``{RUN_ID}`` and the DAG id in ``{DAG_ID}``; runs of other DAGs are told they have no plan), and
  "Segment plans" under Browse; both show the app's pages in the UI's iframe.
- ``timetables``: ``segment_balancer_airflow.schedule.SnapshotOrDailySchedule``, the schedule of
  ``segment_balancing`` (Airflow serializes a custom timetable only when a plugin registers it).

Airflow's plugin manager imports every ``.py`` under ``plugins/`` wherever plugins are loaded:
no Spark or pandas here (``ui`` imports ``explain`` in its route only).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from segment_balancer_airflow.schedule import SnapshotOrDailySchedule
from segment_balancer_airflow.ui import URL_PREFIX, app


class SegmentBalancerPlugin(AirflowPlugin):
    """Mounts the plans app and adds its two views to the Airflow UI; registers the DAG's timetable."""

    name = "segment_balancer"
    timetables = [SnapshotOrDailySchedule]
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "segment_balancer plans"}]
    external_views = [
        {
            "name": "Plan report",
            "href": f"{URL_PREFIX}/runs/{{RUN_ID}}?dag_id={{DAG_ID}}",
            "destination": "dag_run",
            "url_route": "segment-balancer-plan",
        },
        {
            "name": "Segment plans",
            "href": f"{URL_PREFIX}/plans",
            "destination": "nav",
            "category": "browse",
            "url_route": "segment-balancer-plans",
        },
    ]
