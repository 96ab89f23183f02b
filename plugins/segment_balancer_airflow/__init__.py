"""Airflow side of segment_balancer: the stage operator, the snapshot picker and the plans UI.

- ``operators.StageSubmitOperator``: a ``SparkSubmitOperator`` that runs one stage application
  (``spark_apps/<name>.py``) and hands the segment groups from stage to stage through XCom.
- ``snapshots.pick_snapshot``: the newest snapshot taken at or before a date (scheduled runs and
  backfills replay history).
- ``ui.app``: the FastAPI app of the published plans (a run's report, the plans page, explain a
  segment), which ``plugins/segment_balancer_plugin.py`` mounts in the Airflow API server at
  ``/segment-balancer``.

Kept import-light: the DAG file imports this package at parse time.
"""
