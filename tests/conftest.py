"""Shared fixtures: one lean local SparkSession for the whole test run."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from segment_balancer.sparkutil import local_session

    session = local_session("segment_balancer_tests")
    yield session
    session.stop()
