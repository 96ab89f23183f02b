"""Druid 38.0.0's ``RunRulesEmptyDeferringHandlerTest`` (server/src/test/java/org/apache/druid/server/
coordinator/duty/, commit aedca20599) and the two end-to-end cases of
``StrategicSegmentAssignerPartialTest`` (``testForeverPartialLoadRuleEndToEnd*``), with Druid's values,
on the ``druid`` coordinator's ``RunRules``: a partial-load rule's matcher choosing what is loaded, and
the empty part of a shard group held back until the group ends.

The deferral's pass-through cases (``fullLoadPassesThroughUnchanged``, ``broadcast…``, ``delete…``)
have nothing to port as such: ``run_rules`` calls the assigner for those itself, never through
``EmptyDeferring``; the end-to-end cases below check that a full load goes to ``replicate``."""

from __future__ import annotations

import pytest

from segment_balancer.druid import metrics as m
from segment_balancer.druid.partial_load import EMPTY_LOAD_FINGERPRINT, PartialLoadProfile
from segment_balancer.druid.snapshot.models import RuleSpec
from segment_balancer.planner.druid_coordinator.assigner import StrategicSegmentAssigner
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidCluster,
    DruidServer,
    LoadQueue,
    ServerHolder,
)
from segment_balancer.planner.druid_coordinator.run import ClusterState, EmptyDeferring, run_rules
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.strategies import CostStrategy

pytestmark = pytest.mark.druid_release("38.0.0")

TIER1 = {"tier1": 1}


class Recording:
    """``RecordingHandler``: the partial loads it was asked for."""

    def __init__(self):
        self.partial_loads: list[tuple[DataSegment, PartialLoadProfile]] = []

    def replicate_partially(self, segment, profile, tiers):
        self.partial_loads.append((segment, profile))


def segment(partition: int) -> DataSegment:
    """``segment(partitionNum)``: ds, 2026-01-01/02, version v, numbered shard of 2 core partitions."""
    return DataSegment(
        f"ds_2026-01-01_2026-01-02_v_{partition}", "ds", 1_767_225_600_000, 1_767_312_000_000, "v", partition, 0
    )


def profile(fingerprint: str) -> PartialLoadProfile:
    return PartialLoadProfile.for_request({"type": "test", "fingerprint": fingerprint}, fingerprint)


POSITIVE, EMPTY = profile("v1:positive"), profile(EMPTY_LOAD_FINGERPRINT)


def test_positive_load_passes_through_immediately():
    """``positiveLoadPassesThroughImmediately``."""
    recording = Recording()
    EmptyDeferring(recording).replicate_partially(segment(0), POSITIVE, TIER1)
    assert recording.partial_loads == [(segment(0), POSITIVE)]


def test_empty_load_is_buffered_until_flush():
    """``emptyLoadIsBufferedUntilFlush``."""
    recording = Recording()
    EmptyDeferring(recording).replicate_partially(segment(0), EMPTY, TIER1)
    assert recording.partial_loads == []


def test_flush_dispatches_buffered_empties_when_positive_seen():
    """``flushDispatchesBufferedEmptiesWhenPositiveSeen``."""
    recording = Recording()
    handler = EmptyDeferring(recording)
    handler.replicate_partially(segment(0), POSITIVE, TIER1)
    handler.replicate_partially(segment(1), EMPTY, TIER1)
    assert len(recording.partial_loads) == 1
    handler.flush()
    assert len(recording.partial_loads) == 2 and recording.partial_loads[1][0] == segment(1)


def test_flush_discards_buffered_empties_when_no_positive():
    """``flushDiscardsBufferedEmptiesWhenNoPositive``."""
    recording = Recording()
    handler = EmptyDeferring(recording)
    handler.replicate_partially(segment(0), EMPTY, TIER1)
    handler.replicate_partially(segment(1), EMPTY, TIER1)
    handler.flush()
    assert recording.partial_loads == []


def test_flush_resets_state_between_groups():
    """``flushResetsStateBetweenGroups``."""
    recording = Recording()
    handler = EmptyDeferring(recording)
    handler.replicate_partially(segment(0), POSITIVE, TIER1)
    handler.replicate_partially(segment(1), EMPTY, TIER1)
    handler.flush()
    assert len(recording.partial_loads) == 2
    handler.replicate_partially(segment(10), EMPTY, TIER1)
    handler.replicate_partially(segment(11), EMPTY, TIER1)
    handler.flush()
    assert len(recording.partial_loads) == 2


def test_flush_on_empty_buffer_is_no_op():
    """``flushOnEmptyBufferIsNoOp``."""
    recording = Recording()
    EmptyDeferring(recording).flush()
    assert recording.partial_loads == []


def test_positive_load_dispatched_after_buffered_empty_still_flushes_empty():
    """``positiveLoadDispatchedAfterBufferedEmptyStillFlushesEmpty``."""
    recording = Recording()
    handler = EmptyDeferring(recording)
    handler.replicate_partially(segment(0), EMPTY, TIER1)
    handler.replicate_partially(segment(1), POSITIVE, TIER1)
    assert len(recording.partial_loads) == 1
    handler.flush()
    assert len(recording.partial_loads) == 2


# ------------------------------------------------ StrategicSegmentAssignerPartialTest, end to end
def run(rule_json: dict, used: list[DataSegment]) -> tuple[RunStats, ServerHolder]:
    """``rule.run(segment, assigner)`` through ``run_rules``: one 10 GiB historical of tier1, smart
    loading and round robin off (``makeRuntimeParams``)."""
    holder = ServerHolder(DruidServer(name="hist_tier1_1", tier="tier1", max_size=10 << 30), LoadQueue("hist_tier1_1"))
    stats = RunStats()
    assigner = StrategicSegmentAssigner(DruidCluster([holder]), CostStrategy(), stats, 500, False, release="38.0.0")
    rules = {"wiki": [RuleSpec.model_validate(rule_json).to_rule()]}
    run_rules(ClusterState(servers=[holder.server], used={s.id: s for s in used}, rules=rules), assigner, now_ms=0)
    return stats, holder


def with_projections(*names: str) -> DataSegment:
    """``segmentWithProjections``: wiki, 2024/2025, numbered shard 0 of 0, size 0."""
    return DataSegment("wiki_2024_2025_v", "wiki", 1_704_067_200_000, 1_735_689_600_000, "v", 0, 0, projections=names)


def test_forever_partial_load_rule_end_to_end_threads_profile():
    """``testForeverPartialLoadRuleEndToEndThreadsProfile``: exactProjection [revenue] on a segment
    with revenue and users: a partial load of revenue, a ``partialProjection`` spec, a ``v1:``
    fingerprint, no bytes loaded on the request."""
    rule = {
        "type": "loadPartialForever",
        "tieredReplicants": TIER1,
        "matcher": {"type": "exactProjection", "names": ["revenue"]},
    }
    stats, holder = run(rule, [with_projections("revenue", "users")])
    assert stats.total(m.PARTIAL_ASSIGNED, tier="tier1", dataSource="wiki") == 1
    queued = holder.queue.to_load["wiki_2024_2025_v"].profile
    assert queued.wrapped_load_spec["type"] == "partialProjection"
    assert list(queued.wrapped_load_spec["projections"]) == ["revenue"]
    assert queued.fingerprint.startswith("v1:") and queued.loaded_bytes is None


def test_forever_partial_load_rule_end_to_end_full_load_fallback():
    """``testForeverPartialLoadRuleEndToEndFullLoadFallback``: the matcher does not apply and
    ``onCannotMatch`` is ``fullLoad``: a full load (``ASSIGNED``), no profile."""
    rule = {
        "type": "loadPartialForever",
        "tieredReplicants": TIER1,
        "matcher": {"type": "exactProjection", "names": ["nonexistent"]},
        "onCannotMatch": "fullLoad",
    }
    stats, holder = run(rule, [with_projections("users")])
    assert stats.total(m.ASSIGNED, tier="tier1", dataSource="wiki") == 1
    assert holder.queue.to_load["wiki_2024_2025_v"].profile is None


def test_a_shard_group_without_a_positive_match_loads_nothing_of_its_empty_parts():
    """Not Druid's test, its ``RunRules`` end to end: a clustered segment's two core partitions, a
    globClusterGroup matcher. When partition 0 matches a group and 1 none, both are loaded (1 the
    empty part, ``v1:partial-empty``); when neither matches, neither is (the group's empties are
    discarded)."""
    groups = '{"clusteringColumns":[{"name":"country","type":"STRING"}],"tuples":[["%s"]]}'

    def clustered(partition: int, country: str) -> DataSegment:
        return DataSegment(
            f"wiki_2024_2025_v_{partition}",
            "wiki",
            1_704_067_200_000,
            1_735_689_600_000,
            "v",
            partition,
            0,
            num_core_partitions=2,
            cluster_groups=groups % country,
        )

    rule = {
        "type": "loadPartialForever",
        "tieredReplicants": TIER1,
        "matcher": {"type": "globClusterGroup", "patterns": [{"country": "US"}]},
    }
    stats, holder = run(rule, [clustered(0, "US"), clustered(1, "FR")])
    fingerprints = {sid: r.profile.fingerprint for sid, r in holder.queue.to_load.items()}
    assert fingerprints["wiki_2024_2025_v_1"] == EMPTY_LOAD_FINGERPRINT
    assert fingerprints["wiki_2024_2025_v_0"] != EMPTY_LOAD_FINGERPRINT and len(fingerprints) == 2
    stats, holder = run(rule, [clustered(0, "DE"), clustered(1, "FR")])
    assert holder.queue.to_load == {} and stats.matching(m.PARTIAL_ASSIGNED) == []
