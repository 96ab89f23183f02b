"""What a plan leaves undone (``planner.undone``), worked by hand on a two-tier cluster."""

from __future__ import annotations

import json

from segment_balancer.planner.summary import ReplicationStatus, ServerHoldings, TierBalance
from segment_balancer.planner.undone import (
    CAUSES,
    NO_ROOM_HOW,
    decision_causes,
    left_undone,
    refusal_cause,
    runs_to_finish,
    stopped_by,
)

QUEUE = CAUSES["queue"].format(limit="maxSegmentsInNodeLoadingQueue")


def test_refusals_read_as_their_causes():
    assert refusal_cause("load queue full: 100 loads queued, maxSegmentsInNodeLoadingQueue 100") == QUEUE
    assert refusal_cause("load queue full for stage 5: 25 decommissioning loads queued, its limit 25") == (
        "stage 5's share of the load queues full"
    )
    assert refusal_cause("capacity: 50 bytes available, the segment has 100") == "no room (capacity)"
    assert refusal_cause("serves it") == CAUSES["other"]


def test_a_decision_is_stopped_by_capacity_when_any_server_had_no_room():
    tried = {
        "tried": [
            ["h1", "load queue full: 3 loads queued, maxSegmentsInNodeLoadingQueue 3"],
            ["h2", "capacity: 0 bytes available, the segment has 9"],
        ]
    }
    assert decision_causes("not_loaded", {"tiers": {"hot": tried}}, None) == {"hot": CAUSES["capacity"]}
    queue_only = {"tried": [["h1", "load queue full: 3 loads queued, maxSegmentsInNodeLoadingQueue 3"]]}
    assert decision_causes("short", queue_only, "cold") == {"cold": QUEUE}
    assert decision_causes("deferred", {"deferred": 1}, None) == {"": CAUSES["availability"]}
    assert decision_causes("no_destination", {"tried": []}, "hot") == {"hot": CAUSES["no_destination"]}
    # every historical of the tier decommissioning: an empty top B, nothing tried
    no_candidate = {"b": 0, "count": 2, "left": 2, "target": 2, "tried": []}
    assert decision_causes("left_on_decomm", no_candidate, "hot") == {"hot": CAUSES["no_candidate"]}


def test_each_segment_counts_once_per_tier_under_its_last_cause():
    queue = {"tried": [["h1", "load queue full: 3 loads queued, maxSegmentsInNodeLoadingQueue 3"]]}
    room = {"tried": [["h1", "capacity: 0 bytes available, the segment has 9"]]}
    rows = [
        {"idx": 1, "tier": "hot", "outcome": "short", "detail": json.dumps(queue)},
        {"idx": 1, "tier": "hot", "outcome": "short", "detail": json.dumps(room)},  # later: capacity
        {"idx": 2, "tier": "hot", "outcome": "short", "detail": json.dumps(queue)},
        {"idx": 3, "tier": "hot", "outcome": "balanced", "detail": "{}"},  # nothing undone
        {"idx": 4, "tier": "cold", "outcome": "left_on_decomm", "detail": json.dumps(queue)},
    ]
    assert stopped_by(rows) == {"cold": {QUEUE: 1}, "hot": {QUEUE: 1, CAUSES["capacity"]: 1}}


def test_runs_to_finish_from_the_load_queue_limit():
    # 250 loads, 10 per historical per run on 4 live historicals: 40 a run, 7 runs (6 give 240)
    runs, how = runs_to_finish(250, 4, 10, {})
    assert runs == 7 and "250 loads at most 10 per historical per run on 4 historicals (40 a run)" in how
    assert runs_to_finish(0, 4, 10, {})[0] == 0
    assert runs_to_finish(250, 4, 0, {})[0] is None  # no queue limit
    assert runs_to_finish(250, 4, 10, {CAUSES["capacity"]: 3}) == (
        None,
        "capacity stopped loads: more runs do not help until the tier has room",
    )
    # no decision says so (the druid coordinator records none), but no live historical has a free byte
    assert runs_to_finish(250, 4, 10, {}, room=False) == (None, NO_ROOM_HOW)
    assert runs_to_finish(250, 0, 10, {}, room=False) == (None, "no live historical in the tier")


def test_left_undone_of_a_two_tier_cluster():
    def server(name, tier, after, decommissioning=False):
        return ServerHoldings(
            server=name,
            tier=tier,
            max_size=100,
            decommissioning=decommissioning,
            segments_before=after,
            bytes_before=0,
            segments_after=after,
            bytes_after=0,
        )

    servers = [
        server("h1", "hot", 30),
        server("h2", "hot", 20),
        server("d1", "hot", 12, decommissioning=True),
        server("c1", "cold", 50),
    ]
    status = ReplicationStatus(unreplicated=2, tiers={"hot": {"underreplicated": 5, "fully_replicated": 40}})
    balance = {"hot": TierBalance(servers=2, segments_max_minus_min=10, bytes_max_minus_min=0)}
    queue = {"tried": [["h1", "load queue full: 4 loads queued, maxSegmentsInNodeLoadingQueue 4"]]}
    decisions = [{"idx": 7, "tier": "hot", "outcome": "left_on_decomm", "detail": json.dumps(queue)}]
    absent = {"ghost": {"segments": 3, "replicas": 5}}
    config = {"maxSegmentsInNodeLoadingQueue": 4}
    undone = left_undone(status, balance, servers, decisions, config, {"hot": 6}, 5, absent)
    assert undone.unavailable == 5  # as given: the 2 unreplicated and 3 whose rule names only ghost
    hot = undone.tiers["hot"]
    assert (hot.underreplicated, hot.missing_replicas, hot.on_decommissioning, hot.spread_segments) == (5, 6, 12, 10)
    assert hot.stopped_by == {QUEUE: 1}
    # 6 missing + 12 to move off d1 = 18 loads, 4 a run on each of h1 and h2: 3 runs
    assert hot.runs_to_finish == 3
    cold = undone.tiers["cold"]
    assert (cold.underreplicated, cold.on_decommissioning, cold.runs_to_finish) == (0, 0, 0)
    # ghost, named by a rule, has no historical: its 3 segments miss all 5 replicas, for good
    ghost = undone.tiers["ghost"]
    assert (ghost.underreplicated, ghost.missing_replicas, ghost.runs_to_finish) == (3, 5, None)
    assert ghost.stopped_by == {"the tier has no historical server": 3}
    assert list(undone.tiers) == ["cold", "ghost", "hot"]


def test_a_refusal_a_later_stage_made_up_for_is_not_undone():
    """Stage 5 could not move segment s1 off a decommissioning historical (queue full); stage 9
    moved it: nothing is left undone for s1. s2, refused in stage 5 and never moved, is."""
    queue = {"tried": [["h1", "load queue full for stage 5: 25 decommissioning loads queued, its limit 25"]]}
    rows = [
        {"idx": 1, "segment_id": "s1", "stage": 5, "tier": "hot", "outcome": "left_on_decomm", "detail": queue},
        {"idx": 2, "segment_id": "s2", "stage": 5, "tier": "hot", "outcome": "left_on_decomm", "detail": queue},
    ]
    later = {("s1", "hot"): 9, ("s2", "cold"): 9}
    assert stopped_by(rows, later) == {"hot": {"stage 5's share of the load queues full": 1}}
    assert stopped_by(rows) == {"hot": {"stage 5's share of the load queues full": 2}}
