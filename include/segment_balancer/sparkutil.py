"""One place that builds the Spark session.

The master is never set here when running under ``spark-submit`` (the submitter decides: the
``spark_default`` connection); the CLI and the tests use :func:`local_session`. Whatever the master,
the session gets ``LEAN_CONF``; on a ``local`` master it also gets ``LOCAL_SQL_CONF``: on one
machine the fixed cost of every shuffle stage dominates small runs, so adaptive execution is off. On every master,
shuffles use one partition per core the application has (``defaultParallelism``) unless
``spark.sql.shuffle.partitions`` is set (the connection's or the submit's conf): Spark's 200 cost
seconds of Python-worker tasks per shuffle on the tables of a plan. On a cluster adaptive execution
stays on, so the same applications scale out.
"""

from __future__ import annotations

import os
import sys

from .jvm_archive import local_driver_java_options

# Given to every session and to every spark-submit (see the StageSubmitOperator).
LEAN_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
}

# Set at run time on local masters only (SQL settings can change after the session starts);
# shuffles get one partition per core (``spark.sql.shuffle.partitions`` = the default parallelism).
LOCAL_SQL_CONF = {
    "spark.sql.adaptive.enabled": "false",
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
    sc = session.sparkContext
    sc.setLogLevel("WARN")
    if sc.master.startswith("local"):
        for key, value in LOCAL_SQL_CONF.items():
            session.conf.set(key, value)
    if not sc.getConf().contains("spark.sql.shuffle.partitions"):
        session.conf.set("spark.sql.shuffle.partitions", str(max(2, sc.defaultParallelism)))
    return session


def local_session(app_name: str = "segment_balancer"):
    """A session on ``SPARK_MASTER`` or ``local[*]`` (every core), for the CLI and the tests (the driver JVM
    gets ``jvm_archive.local_driver_java_options()`` unless ``PYSPARK_SUBMIT_ARGS`` is already set)."""
    master = os.environ.get("SPARK_MASTER", "local[*]")
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f'--driver-java-options "{local_driver_java_options()}" pyspark-shell')
    return get_session(app_name, master)
