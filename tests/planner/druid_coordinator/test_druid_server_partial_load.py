"""Druid 38.0.0's ``DruidServerPartialLoadTest`` (server/src/test/java/org/apache/druid/client/, commit
aedca20599), with Druid's values, on ``DruidServer``: a partial replica counts the bytes it loaded in
``curr_size``, a full one the segment's size; profiles are kept, swapped and removed with their
replicas."""

from __future__ import annotations

import pytest

from segment_balancer.druid.partial_load import PartialLoadProfile
from segment_balancer.planner.druid_coordinator.model import DataSegment, DruidServer

pytestmark = pytest.mark.druid_release("38.0.0")

FINGERPRINT = "v1:0123456789abcdef"
JAN_2024, FEB_2024 = 1_704_067_200_000, 1_706_745_600_000


def new_server() -> DruidServer:
    """``newServer``: historical ``test`` of 100 MB, tier ``_default_tier``."""
    return DruidServer(name="test", tier="_default_tier", max_size=100_000_000, storage_size=100_000_000)


def segment(version: str, size: int) -> DataSegment:
    """``buildSegment("ds", version, size)``: 2024-01-01/2024-02-01, no shard."""
    return DataSegment(f"ds_2024-01-01_2024-02-01_{version}", "ds", JAN_2024, FEB_2024, version, 0, size)


def loaded(loaded_bytes: int, fingerprint: str = FINGERPRINT) -> PartialLoadProfile:
    return PartialLoadProfile.for_loaded(
        {"type": "partialProjection", "fingerprint": fingerprint}, fingerprint, loaded_bytes
    )


def test_add_segment_without_profile_uses_segment_size_for_curr_size():
    server, s = new_server(), segment("v1", 1000)
    server.add(s)
    assert server.curr_size == 1000 and server.profile_of(s.id) is None


def test_add_segment_with_profile_uses_loaded_bytes_for_curr_size():
    server, s = new_server(), segment("v1", 1000)
    server.add(s, loaded(300))
    assert server.curr_size == 300 and server.profile_of(s.id) == loaded(300)


def test_remove_segment_subtracts_profile_loaded_bytes():
    server, s = new_server(), segment("v1", 1000)
    server.add(s, loaded(300))
    server.remove(s)
    assert server.curr_size == 0 and server.profile_of(s.id) is None


def test_full_fallback_loaded_bytes_uses_full_segment_size():
    server, s = new_server(), segment("v1", 1000)
    server.add(s, loaded(s.size))
    assert server.curr_size == 1000 and server.profile_of(s.id) == loaded(1000)


def test_update_data_segment_profile_swaps_fingerprint_and_adjusts_curr_size():
    server, s = new_server(), segment("v1", 1000)
    server.add(s, loaded(200, "v1:111111aaaa"))
    assert server.curr_size == 200
    assert server.update_profile(s, loaded(700))
    assert server.curr_size == 700 and server.profile_of(s.id) == loaded(700)


def test_update_data_segment_profile_noop_when_segment_absent():
    server, s = new_server(), segment("v1", 1000)
    assert not server.update_profile(s, loaded(500))
    assert server.curr_size == 0 and server.profile_of(s.id) is None


def test_mixed_full_and_partial_replicas_account():
    server, full, partial = new_server(), segment("v1", 1000), segment("v2", 5000)
    server.add(full)
    server.add(partial, loaded(500))
    assert server.curr_size == 1500
    assert server.profile_of(full.id) is None and server.profile_of(partial.id) == loaded(500)
