"""Every port of Druid 35.0.0's Coordinator tests runs for both reproduced releases: Druid 38.0.0
(commit aedca20599) holds each of these tests with the same expected values (only the Java
constructors' arguments changed), so each must pass as 35.0.0 and as 38.0.0. A test of a behaviour
that differs between them marks itself ``pytest.mark.druid_release("35.0.0")`` (or 38.0.0) and runs
for that release only."""

from __future__ import annotations

import coordinator_sim
import pytest

from segment_balancer.druid.releases import REPRODUCED_RELEASES as DRUID_RELEASES


def pytest_configure(config):
    config.addinivalue_line("markers", "druid_release(release): the test holds for that Druid release only")


def pytest_generate_tests(metafunc):
    only = metafunc.definition.get_closest_marker("druid_release")
    releases = [only.args[0]] if only else list(DRUID_RELEASES)
    ids = [f"druid{r.split('.')[0]}" for r in releases]
    metafunc.parametrize("druid_release", releases, ids=ids, indirect=True)


@pytest.fixture(autouse=True)
def druid_release(request, monkeypatch) -> str:
    """The release the test reproduces (``coordinator_sim.RELEASE`` while it runs)."""
    monkeypatch.setattr(coordinator_sim, "RELEASE", request.param)
    return request.param
