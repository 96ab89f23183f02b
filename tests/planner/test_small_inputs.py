"""The snapshot's small files as stage 0 reads them: rule targets, queue rows, the servers frame."""

from __future__ import annotations

from segment_balancer.druid.rules import Rule
from segment_balancer.druid.snapshot.models import QueueEntry, Server
from segment_balancer.planner.small_inputs import (
    SERVER_DTYPES,
    mark_broadcast_only,
    queue_rows,
    replicants_total,
    rule_absent_tiers,
    rule_key,
    rule_targets,
    servers_frame,
    tiers_meta,
)

RULES = {
    "wiki": [Rule("loadForever", "load", {"hot": 2, "cold": 0, "gone": 1})],
    "_default": [Rule("dropForever", "drop"), Rule("loadForever", "load", {"cold": 1})],
}


def test_replicants_total_counts_absent_tiers_and_caps_at_a_java_int():
    assert replicants_total(RULES["wiki"][0]) == 3
    assert replicants_total(RULES["_default"][0]) == 0
    assert replicants_total(Rule("loadForever", "load", {"a": 2**31 - 1, "b": 5})) == 2**31 - 1


def test_rule_targets_and_absent_tiers_per_datasource_and_flattened_rule_index():
    tiers = {"hot", "cold"}
    assert rule_targets(RULES, ["wiki", "other"], tiers) == {
        rule_key("wiki", 0): [("hot", 2, 0)],
        rule_key("wiki", 2): [("cold", 1, 0)],
        rule_key("other", 1): [("cold", 1, 0)],
    }
    assert rule_absent_tiers(RULES, ["wiki", "other"], tiers) == {rule_key("wiki", 0): [("gone", 1)]}
    assert rule_key("wiki", 2) == "wiki\x002"


def test_queue_rows_number_each_servers_loads_and_drops_apart():
    queues = [
        QueueEntry(server="h1", segment_id="a", action="LOAD", queue_type="balancing", requested_at_ms=5),
        QueueEntry(server="h1", segment_id="b", action="DROP"),
        QueueEntry(server="h1", segment_id="c", action="LOAD"),
    ]
    assert queue_rows(queues) == [
        ("h1", "a", True, "balancing", 5, False, "server 'h1' segmentsToLoad[0]"),
        ("h1", "b", False, None, None, True, "server 'h1' segmentsToDrop[0]"),
        ("h1", "c", True, None, None, False, "server 'h1' segmentsToLoad[1]"),
    ]


def test_servers_frame_is_typed_without_servers_and_marks_broadcast_only():
    assert dict(servers_frame([], set()).dtypes.astype(str)) == SERVER_DTYPES
    servers = [
        Server(server="h2", host="h2:1", tier="t", current_size=10, max_size=100, priority=1),
        Server(server="h1", host="h1:1", tier="t", current_size=20, max_size=100),
    ]
    frame = servers_frame(servers, {"h2"})
    assert list(frame["server"]) == ["h1", "h2"]
    out = mark_broadcast_only(frame, [{"server": "h1", "queued_bytes": 7, "non_broadcast": 0}])
    assert list(out["projected_size"]) == [27, 10]
    assert list(out["broadcast_only"]) == [False, True]
    assert tiers_meta(out) == {"t": {"priority": 1, "servers": 2, "candidates": 1}}
