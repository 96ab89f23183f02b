"""Druid 38.0.0's ``StrategicSegmentAssignerPartialTest`` (server/src/test/java/org/apache/druid/server/
coordinator/loading/, commit aedca20599, #19374 and after), with Druid's values, on
``StrategicSegmentAssigner.replicate_partially``: the requested part (a profile's fingerprint) is
queued with the load; replicas of that part count toward the rule, replicas of another part (or
full ones) are loaded but do not satisfy it and are dropped only once enough of the requested part
are loaded. Smart loading off, round robin off, the ``cost`` strategy, as Druid's test sets them;
historicals of 10 GiB; the segment ``wiki`` 2024/2025 of size 0.

``testForeverPartialLoadRuleEndToEnd*`` (a rule's matcher choosing the profile) are ported with the
rules, in ``test_run_rules_partial.py``."""

from __future__ import annotations

import itertools

import pytest

from segment_balancer.druid import metrics as m
from segment_balancer.planner.druid_coordinator.assigner import StrategicSegmentAssigner
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    DruidServer,
    LoadQueue,
    PartialLoadProfile,
    SegmentAction,
    ServerHolder,
)
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.strategies import CostStrategy

pytestmark = pytest.mark.druid_release("38.0.0")

TIER1, TIER2 = "tier1", "tier2"
FP_REVENUE, FP_USERS = "v1:deadbeefcafebabe", "v1:0123456789abcdef"
LOCAL = {"type": "local", "path": "/var/druid/segments/foo"}
REVENUE = PartialLoadProfile.for_request(
    {"type": "partialProjection", "delegate": LOCAL, "projections": ["revenue"], "fingerprint": FP_REVENUE},
    FP_REVENUE,
)
"""``profileForRevenue``."""
USERS_SPEC = {"type": "partialProjection", "projections": ["users"], "fingerprint": FP_USERS}
YEAR_2024, YEAR_2025 = 1_704_067_200_000, 1_735_689_600_000
SEGMENT = DataSegment("wiki_2024-01-01_2025-01-01_v", "wiki", YEAR_2024, YEAR_2025, "v", 0, 0)


@pytest.fixture
def server():
    ids = itertools.count(1)

    def make(tier: str, loaded: PartialLoadProfile | None | bool = False, *, decommissioning=False, queued=None):
        """``createServer`` / ``createServerWithLoaded``: a 10 GiB historical ``hist_<tier>_<n>``;
        ``loaded``: serving the segment with that profile (None: a full replica; False: not serving);
        ``queued``: a load of the segment already queued with that profile (``addInFlightHolder``)."""
        name = f"hist_{tier}_{next(ids)}"
        druid = DruidServer(name=name, tier=tier, max_size=10 << 30)
        if loaded is not False:
            druid.add(SEGMENT, loaded)
        queue = LoadQueue(name)
        if queued is not None:
            queue.load(SEGMENT, SegmentAction.LOAD, profile=queued)
        return ServerHolder(druid, queue, decommissioning=decommissioning)

    return make


def replicate(holders: list[ServerHolder], tiers: dict[str, int], profile=REVENUE) -> RunStats:
    """``makeRuntimeParams(...).getSegmentAssigner().replicateSegmentPartially(segment, profile, tiers)``."""
    stats = RunStats()
    assigner = StrategicSegmentAssigner(DruidCluster(holders), CostStrategy(), stats, 500, False, release="38.0.0")
    assigner.replicate_partially(SEGMENT, profile, tiers)
    return stats


def stat(stats: RunStats, metric: str, tier: str = TIER1) -> int:
    return stats.total(metric, tier=tier, dataSource="wiki")


def profile_for(holder: ServerHolder):
    """``TestLoadQueuePeon.getProfileFor``: the profile of the segment's queued load, None without one."""
    request = holder.queue.to_load.get(SEGMENT.id)
    return None if request is None else request.profile


def test_replicate_segment_partially_assigns_and_threads_profile_to_peon(server):
    """``testReplicateSegmentPartiallyAssignsAndThreadsProfileToPeon``."""
    s = server(TIER1)
    stats = replicate([s], {TIER1: 1})
    assert stat(stats, m.PARTIAL_ASSIGNED) == 1
    assert SEGMENT in s.loading_segments() and profile_for(s) == REVENUE


def test_replicate_segment_partially_assigns_across_tiers(server):
    """``testReplicateSegmentPartiallyAssignsAcrossTiers``."""
    s1, s2 = server(TIER1), server(TIER2)
    stats = replicate([s1, s2], {TIER1: 1, TIER2: 1})
    assert (stat(stats, m.PARTIAL_ASSIGNED, TIER1), stat(stats, m.PARTIAL_ASSIGNED, TIER2)) == (1, 1)
    assert profile_for(s1) == REVENUE and profile_for(s2) == REVENUE


def test_no_action_when_matching_replica_already_loaded(server):
    """``testNoActionWhenMatchingReplicaAlreadyLoaded``."""
    s1, s2 = server(TIER1, REVENUE), server(TIER1)
    stats = replicate([s1, s2], {TIER1: 1})
    for metric in (m.PARTIAL_ASSIGNED, m.PARTIAL_STALE_DROPPED, m.DROPPED):
        assert stats.matching(metric) == []
    assert s2.loading_segments() == [] and s1.queue.to_drop == {}


def test_full_fallback_loaded_bytes_counts_as_matching(server):
    """``testFullFallbackLoadedBytesCountsAsMatching``: announced with the rule's fingerprint and the
    full size loaded (the historical fell back to a full load): it satisfies the rule."""
    s1 = server(TIER1, PartialLoadProfile.for_loaded(REVENUE.wrapped_load_spec, FP_REVENUE, SEGMENT.size))
    s2 = server(TIER1)
    stats = replicate([s1, s2], {TIER1: 1})
    assert stats.matching(m.PARTIAL_ASSIGNED) == [] and s2.loading_segments() == []


def test_full_load_replica_treated_as_stale_against_partial_rule(server):
    """``testFullLoadReplicaTreatedAsStaleAgainstPartialRule``: a full replica on s1 does not satisfy
    the rule; the empty s2 loads the part (preferred over s1's additive reload) and s1 stays."""
    s1, s2 = server(TIER1, None), server(TIER1)
    stats = replicate([s1, s2], {TIER1: 1})
    assert stat(stats, m.PARTIAL_ASSIGNED) == 1 and stats.matching(m.PARTIAL_STALE_DROPPED) == []
    assert SEGMENT in s2.loading_segments() and profile_for(s2) == REVENUE
    assert s1.queue.to_drop == {}


def test_stale_dropped_after_matching_loaded_satisfies_requirement(server):
    """``testStaleDroppedAfterMatchingLoadedSatisfiesRequirement``."""
    s1, s2 = server(TIER1, REVENUE), server(TIER1, None)
    stats = replicate([s1, s2], {TIER1: 1})
    assert stat(stats, m.PARTIAL_STALE_DROPPED) == 1 and stats.matching(m.PARTIAL_ASSIGNED) == []
    assert SEGMENT.id in s2.queue.to_drop and s1.queue.to_drop == {}


def test_stuck_state_additive_reload_on_stale_servers(server):
    """``testStuckStateAdditiveReloadOnStaleServers``: both hold the users part (512 bytes loaded),
    two are required: both reload in place (additive), neither is dropped."""
    users = PartialLoadProfile.for_loaded(USERS_SPEC, FP_USERS, 512)
    s1, s2 = server(TIER1, users), server(TIER1, users)
    stats = replicate([s1, s2], {TIER1: 2})
    assert stat(stats, m.PARTIAL_ASSIGNED) == 2
    assert profile_for(s1) == REVENUE and profile_for(s2) == REVENUE
    assert stats.matching(m.PARTIAL_STALE_DROPPED) == []


def test_drops_excess_matching_replicas(server):
    """``testDropsExcessMatchingReplicas``: two of the part, one required: one ``DROPPED``."""
    s1, s2 = server(TIER1, REVENUE), server(TIER1, REVENUE)
    stats = replicate([s1, s2], {TIER1: 1})
    assert stat(stats, m.DROPPED) == 1 and len(s1.queue.to_drop) + len(s2.queue.to_drop) == 1


def test_replicate_segment_partially_skips_decommissioning_server(server):
    """``testReplicateSegmentPartiallySkipsDecommissioningServer``."""
    decommissioning, active = server(TIER1, decommissioning=True), server(TIER1)
    stats = replicate([decommissioning, active], {TIER1: 1})
    assert stat(stats, m.PARTIAL_ASSIGNED) == 1
    assert decommissioning.loading_segments() == [] and profile_for(decommissioning) is None
    assert SEGMENT in active.loading_segments() and profile_for(active) == REVENUE


def test_stale_in_flight_cancelled_and_replaced(server):
    """``testStaleInFlightCancelledAndReplaced``: a load of the users part queued by an earlier run is
    cancelled and the revenue part queued on the same server."""
    s1 = server(TIER1, queued=PartialLoadProfile.for_request(USERS_SPEC, FP_USERS))
    stats = replicate([s1], {TIER1: 1})
    assert stat(stats, m.PARTIAL_STALE_CANCELLED) == 1 and stat(stats, m.PARTIAL_ASSIGNED) == 1
    assert profile_for(s1) == REVENUE


def test_a_replica_whose_part_no_snapshot_tells_is_taken_to_match(server):
    """Not Druid's: a served replica of a snapshot whose part is unknown (``ASSUMED_PROFILE``) is taken
    to hold what its rule asks (docs/DRUID_COORDINATOR.md "What a snapshot cannot tell"): nothing to
    do, as for a matching one."""
    from segment_balancer.planner.druid_coordinator.model import ASSUMED_PROFILE

    s1, s2 = server(TIER1, ASSUMED_PROFILE), server(TIER1)
    stats = replicate([s1, s2], {TIER1: 1})
    assert stats.matching(m.PARTIAL_ASSIGNED) == [] and s2.loading_segments() == []
