"""The balancer state file: a round trip, and every state that cannot be used gives a
warning and no counts, never an error."""

from __future__ import annotations

import json

import pytest

from segment_balancer.druid.instants import parse_instant_ms
from segment_balancer.planner.balancer_state import (
    STATE_FILE,
    BalancerState,
    counts_from_json,
    counts_to_json,
    give_previous,
    read_previous,
    read_state,
)

T0 = parse_instant_ms("2024-06-01T00:00:00.000Z")
T1 = parse_instant_ms("2024-06-01T01:00:00.000Z")


def test_a_state_round_trips(tmp_path):
    state = BalancerState("prod", T0, {"hot": {("a:1", "b:1"): 3}, "cold": {("c:1", "d:1"): 1}})
    path = state.write(tmp_path)
    assert path == tmp_path / STATE_FILE
    data = json.loads(path.read_text())
    assert data == {
        "format": "segment_balancer/balancer_state",
        "version": 1,
        "cluster": "prod",
        "snapshot_time": "2024-06-01T00:00:00.000Z",
        "pairs": [
            {"tier": "cold", "servers": ["c:1", "d:1"], "hit_count": 1, "counted_at": "2024-06-01T00:00:00.000Z"},
            {"tier": "hot", "servers": ["a:1", "b:1"], "hit_count": 3, "counted_at": "2024-06-01T00:00:00.000Z"},
        ],
    }
    assert read_state(path, "prod", T1) == (state.counts, None)
    assert read_state(path, "prod", T0) == (state.counts, None)  # the same snapshot again (a CLI re-run)


def test_no_state_is_the_first_run(tmp_path):
    assert read_state(None, "prod", T0) == ({}, None)
    assert read_state(tmp_path / "absent.json", "prod", T0) == ({}, None)


@pytest.mark.parametrize(
    "edit, warning",
    [
        (
            lambda d: {**d, "cluster": "test"},
            "is the balancer state of cluster 'test', not 'prod'; hit counts start at 1",
        ),
        (
            lambda d: {**d, "snapshot_time": "2024-06-01T02:00:00.000Z"},
            "was counted at 2024-06-01T02:00:00.000Z, after the snapshot planned (2024-06-01T01:00:00.000Z)",
        ),
        (lambda d: {**d, "version": 2}, "is balancer state version 2, this release reads 1"),
        (lambda d: {**d, "format": "other"}, "is not a balancer state"),
        (lambda d: [d], "is not a balancer state"),
        (
            lambda d: {**d, "pairs": [{"tier": "hot", "servers": ["a"], "hit_count": 1}]},
            "is unreadable as a balancer state",
        ),
        (lambda d: {**d, "pairs": [{"tier": "hot", "servers": ["a", "b"], "hit_count": 0}]}, "is unreadable"),
        (lambda d: {**d, "snapshot_time": "yesterday"}, "is unreadable"),
    ],
)
def test_a_state_that_cannot_be_used_warns_and_counts_start_at_1(tmp_path, edit, warning):
    path = BalancerState("prod", T0, {"hot": {("a", "b"): 2}}).write(tmp_path)
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    counts, message = read_state(path, "prod", T1)
    assert counts == {} and warning in message and str(path) in message


def test_an_unreadable_file_warns(tmp_path):
    path = tmp_path / STATE_FILE
    path.write_bytes(b"\xff{not json")
    counts, message = read_state(path, "prod", T1)
    assert counts == {} and "unreadable as a balancer state" in message


def test_a_state_handed_to_a_run_is_read_there_and_named_by_its_source(tmp_path):
    source = BalancerState("prod", T0, {"hot": {("a", "b"): 2}}).write(tmp_path / "plan")
    work = tmp_path / "work"
    give_previous(source, work)
    assert read_previous(work, "prod", T1) == ({"hot": {("a", "b"): 2}}, None)
    counts, message = read_previous(work, "test", T1)
    assert counts == {} and message.startswith(f"{source} is the balancer state of cluster 'prod', not 'test'")
    give_previous(None, work)  # a run without a previous state: nothing left of the earlier one
    assert read_previous(work, "prod", T1) == ({}, None)


def test_a_state_named_that_is_not_there_warns(tmp_path):
    give_previous(tmp_path / "nowhere.json", tmp_path / "work")
    counts, message = read_previous(tmp_path / "work", "prod", T1)
    assert (
        counts == {}
        and message.startswith(f"{tmp_path / 'nowhere.json'} is unreadable as a balancer state (FileNotFoundError")
        and message.endswith("hit counts start at 1")
    )


def test_the_next_state_keeps_the_pairs_that_hit_and_did_not_shed():
    pairs = [
        {"tier": "hot", "high": "b", "low": "a", "hit_count": 3, "sheds": False},
        {"tier": "hot", "high": "d", "low": "c", "hit_count": 2, "sheds": True},
        {"tier": "cold", "high": "f", "low": "e", "hit_count": 0, "sheds": False},
    ]
    assert BalancerState.from_pairs("prod", T0, pairs).counts == {"hot": {("a", "b"): 3}}
    assert counts_from_json(counts_to_json({"hot": {("a", "b"): 3}})) == {"hot": {("a", "b"): 3}}
