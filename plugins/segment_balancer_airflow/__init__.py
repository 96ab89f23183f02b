"""Airflow side of segment_balancer: the stage operator and the snapshot picker.

- ``operators.StageSubmitOperator``: a ``SparkSubmitOperator`` that runs one stage application
  (``spark_apps/<name>.py``) and hands the segment groups from stage to stage through XCom.
- ``snapshots.pick_snapshot``: the newest snapshot taken at or before a date (scheduled runs and
  backfills replay history).

Kept import-light: the DAG file imports this package at parse time.
"""
