"""Airflow for the tests: a throw-away AIRFLOW_HOME, set before anything imports airflow.

Imported by ``tests/conftest.py`` (so at collection start). Sets, for this pytest process only:

- ``AIRFLOW_HOME`` = a fresh temporary directory (removed at exit), SQLite DB inside it,
  ``dags/`` and ``plugins/`` of this checkout, no example DAGs; DAG bundles ``dags-folder``
  (``dags/``) and ``test-dags`` (``tests/dags/bundle/``);
- the object-storage XCom backend as in ``airflow.cfg.template`` (files under ``$AIRFLOW_HOME/xcom``);
- ``SEGMENT_BALANCER_HOME`` = ``$AIRFLOW_HOME/segment_balancer`` (runs, plans);
- ``SEGMENT_BALANCER_CACHE`` = ``off``: no run takes what another kept, so a test that compares two
  ways of computing a stage computes both (the tests of the cache turn it on in a directory of
  their own);
- ``AIRFLOW_CONN_SPARK_DEFAULT`` = local Spark (kept if already set, e.g. by the Makefile);
- ``PYSPARK_PYTHON`` = this interpreter.

The session fixture ``airflow_home`` creates the metadata DB (once) and returns the home as a
``Path``; use it in any test that needs the DB, e.g. ``dag.test()``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="segment_balancer-airflow-"))
atexit.register(shutil.rmtree, AIRFLOW_HOME, ignore_errors=True)

os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(AIRFLOW_HOME / "logs"),
        "AIRFLOW__CORE__XCOM_BACKEND": "airflow.providers.common.io.xcom.backend.XComObjectStorageBackend",
        "AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_PATH": f"file://{AIRFLOW_HOME}/xcom",
        "AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_THRESHOLD": "16384",
        "AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_COMPRESSION": "gzip",
        # The repo's dags/ plus tests/dags/bundle/ (test-only DAGs: dag.test() needs a bundle).
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(
            [
                {"name": "dags-folder", "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(REPO / "dags")}},
                {
                    "name": "test-dags",
                    "classpath": LOCAL_BUNDLE,
                    "kwargs": {"path": str(REPO / "tests" / "dags" / "bundle")},
                },
            ]
        ),
        "SEGMENT_BALANCER_HOME": str(AIRFLOW_HOME / "segment_balancer"),
        "SEGMENT_BALANCER_CACHE": "off",
        "PYSPARK_PYTHON": sys.executable,
    }
)
os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The test AIRFLOW_HOME with its metadata DB created (once a session)."""
    from airflow.utils.db import initdb

    initdb()
    return AIRFLOW_HOME
