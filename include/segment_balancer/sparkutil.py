"""One place that builds the Spark session, lean for local runs.

The master is never set here when running under ``spark-submit`` (the submitter decides); for the CLI
and the tests, ``local_session`` sets ``local[*]`` unless ``SPARK_MASTER`` says otherwise.
"""

from __future__ import annotations

import os
import sys

LEAN_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "true",
}


def get_session(app_name: str = "segment_balancer", master: str | None = None):
    """Return the active SparkSession, creating one if needed.

    ``master``: set only by local callers (CLI, tests); ``None`` leaves it to ``spark-submit``.
    Python workers use this interpreter (``PYSPARK_PYTHON``) so they see the same packages.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in LEAN_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def local_session(app_name: str = "segment_balancer"):
    """A session on ``SPARK_MASTER`` or ``local[2]``, for the CLI and the tests."""
    return get_session(app_name, os.environ.get("SPARK_MASTER", "local[2]"))
