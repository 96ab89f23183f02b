"""Shared fixtures: one lean local SparkSession for the whole test run."""

from __future__ import annotations

import logging

import pytest

# Must run before anything imports airflow: points AIRFLOW_HOME etc. at a temporary directory.
from conftest_airflow import airflow_home  # noqa: E402,F401


@pytest.fixture(scope="session")
def spark():
    from segment_balancer.sparkutil import local_session

    session = local_session("segment_balancer_tests")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at exit, into streams pytest has
    # already closed ("--- Logging error ---"): keep it quiet.
    logging.getLogger("py4j").setLevel(logging.WARNING)
