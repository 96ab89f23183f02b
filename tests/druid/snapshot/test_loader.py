"""Tests of snapshot/loader.py: the bundled small snapshot, and one refusal per kind of bad input."""

from __future__ import annotations

import calendar
import json
from datetime import UTC, datetime
from pathlib import Path

import fake_druid as fd
import pytest

from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.druid.snapshot.loader import (
    load_all_servers,
    load_cluster_version,
    load_load_queues,
    load_rules,
    load_servers,
    load_snapshot_meta,
)
from segment_balancer.druid.snapshot.models import QueueEntry, Server
from segment_balancer.planner.config import load_config

SMALL = Path(__file__).parent / "data" / "small"
W1 = "wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1"
W2 = "wiki_2024-01-02T00:00:00.000Z_2024-01-03T00:00:00.000Z_v1"
W0 = "wiki_2023-01-01T00:00:00.000Z_2023-01-02T00:00:00.000Z_v1"


def utc(*args: int) -> int:
    return calendar.timegm(datetime(*args, tzinfo=UTC).timetuple()) * 1000


def write(tmp_path: Path, name: str, content) -> Path:
    (tmp_path / name).write_text(content if isinstance(content, str) else json.dumps(content))
    return tmp_path


def refused(fn, *args) -> SnapshotError:
    with pytest.raises(SnapshotError) as info:
        fn(*args)
    return info.value


# ------------------------------------------------------------------------------ the small snapshot


def test_small_snapshot_servers():
    servers = load_servers(SMALL)
    assert servers == [
        Server(server="hot1:8083", host="hot1", tier="hot", current_size=1000, max_size=100000, priority=10),
        Server(server="hot2:8083", host="hot2", tier="hot", current_size=0, max_size=100000, priority=10),
        Server(server="cold1:8083", host="cold1", tier="_default_tier", current_size=5, max_size=900000, priority=0),
    ]


def test_small_snapshot_queues():
    entries = load_load_queues(SMALL, {"hot1:8083", "hot2:8083", "cold1:8083"})
    assert entries == [
        QueueEntry(server="hot1:8083", segment_id=W1, action="LOAD", queue_type="loading", requested_at_ms=None),
        QueueEntry(
            server="hot1:8083",
            segment_id=W2,
            action="LOAD",
            queue_type="balancing",
            requested_at_ms=utc(2024, 6, 1, 11, 50),
        ),
        QueueEntry(server="hot1:8083", segment_id=W0, action="DROP", queue_type=None, requested_at_ms=None),
        QueueEntry(server="cold1:8083", segment_id=W1, action="LOAD", queue_type="loading", requested_at_ms=None),
    ]


def test_small_snapshot_rules_config_meta():
    rules = load_rules(SMALL)
    assert list(rules) == ["wiki", "lookup", "_default"]
    assert [r.type for r in rules["wiki"]] == ["loadByPeriod", "dropForever"]
    assert rules["wiki"][0].tiered_replicants == {"hot": 2, "_default_tier": 1}
    assert rules["wiki"][0].period.months == 1 and rules["wiki"][0].include_future
    assert rules["lookup"][0].kind == "broadcast"
    cfg = load_config(SMALL)
    assert cfg.max_segments_in_node_loading_queue == 100 and cfg.decommissioning_nodes == ("hot2:8083",)
    assert cfg.limit(1).cap == 70 and cfg.limit(5).cap == 10 and cfg.limit(7).cap == 20
    assert {e["key"] for e in cfg.ignored} == {"maxSegmentsToMove", "replicantLifetime", "balancerComputeThreads"}
    assert cfg.segment_loading_max_seconds_before_alerting == 900  # 15 x 60 s
    assert load_config(SMALL, {"maxSegmentsInNodeLoadingQueue": 0}).limit(1).cap is None
    meta = load_snapshot_meta(SMALL)
    assert meta.snapshot_time_ms == utc(2024, 6, 1, 12)
    assert meta.cluster == "small" and meta.snapshot_id == "small@2024-06-01T12:00:00.000Z"


def test_optional_files_absent(tmp_path):
    assert load_load_queues(tmp_path, set()) == []
    assert load_config(tmp_path).max_segments_in_node_loading_queue == 500
    err = refused(load_servers, tmp_path)
    assert err.file == "servers.json" and "missing" in err.problem


# ------------------------------------------------------------------------------------- servers

H = {"server": "h1:8083", "host": "h1", "server_type": "historical", "tier": "t", "curr_size": 0, "max_size": 10}


@pytest.mark.parametrize(
    "rows, row, needle",
    [
        ([H, {**H, "server": "h2", "max_size": -5}], 1, "max_size must be >= 0, got -5"),
        ([{**H, "curr_size": -1}], 0, "curr_size must be >= 0, got -1"),
        ([H, H], 1, "server 'h1:8083' repeats row 0"),
        ([{**H, "tier": None}], 0, "tier is required"),
        ([{**H, "tier": None}, {**H, "server": "h2", "max_size": -1}], 0, "tier is required"),  # the first problem
        ([{**H, "tier": ""}], 0, "tier is required"),
        ([{**H, "max_size": "10"}], 0, "max_size must be an integer"),
        ([{**H, "max_size": 10.5}], 0, "max_size must be an integer"),
        ([{**H, "priority": "high"}], 0, "priority must be an integer"),
        ([{k: v for k, v in H.items() if k != "curr_size"}], 0, "current_size (or curr_size) is required"),
        ([{**H, "current_size": 3, "curr_size": 4}], 0, "disagree"),
        ([{k: v for k, v in H.items() if k != "server_type"}], 0, "server_type is required"),
        (["h1"], 0, "must be an object"),
        ([H, {**H, "server": "h2", "version": "38"}], 1, "version must be a Druid version MAJOR.MINOR.PATCH"),
        ([{**H, "version": 38}], 0, "version must be a string, got 38"),
        ([{**H, "storage_size": -1}], 0, "storage_size must be >= 0, got -1"),
        ([{**H, "storage_size": "10"}], 0, "storage_size must be an integer"),
        ([{**H, "is_leader": True}], 0, "is_leader must be an integer"),
        ([{**H, "is_leader": 2}], 0, "is_leader must be <= 1, got 2"),
        ([{**H, "labels": ["a"]}], 0, "labels must be a JSON string or an object (the server's druid.labels)"),
    ],
)
def test_servers_refused(tmp_path, rows, row, needle):
    err = refused(load_servers, write(tmp_path, "servers.json", rows))
    assert err.file == "servers.json" and err.row == row
    assert needle in err.problem
    assert str(err).startswith(f"servers.json row {row}: ")


def test_servers_message_reads_like_the_brief(tmp_path):
    err = refused(
        load_servers,
        write(
            tmp_path, "servers.json", [H, H | {"server": "b"}, H | {"server": "c"}, H | {"server": "d", "max_size": -5}]
        ),
    )
    assert str(err) == "servers.json row 3: max_size must be >= 0, got -5"


def test_malformed_json_reports_line_and_column(tmp_path):
    write(tmp_path, "servers.json", '[\n  {"server": "a",\n   "max_size": 5,,\n  }\n]')
    err = refused(load_servers, tmp_path)
    assert err.row == 3 and err.row_kind == "line" and "column 18" in err.problem
    assert str(err).startswith("servers.json line 3: malformed JSON")
    write(tmp_path, "servers.json", '[{"server": "a", "server": "b"}]')
    assert "duplicate key 'server'" in refused(load_servers, tmp_path).problem
    write(tmp_path, "servers.json", '[{"server": "a", "max_size": NaN}]')
    assert "NaN" in refused(load_servers, tmp_path).problem
    write(tmp_path, "servers.json", '{"server": "a"}')
    assert "JSON array" in refused(load_servers, tmp_path).problem


def test_one_process_in_two_roles_has_a_row_per_role(tmp_path):
    """A Coordinator that is also the Overlord announces both roles (Druid's ``CliCoordinator`` with
    ``druid.coordinator.asOverlord.enabled``, as in every quickstart configuration), and
    ``sys.servers`` lists it once per role under one name. A historical's name stays unique."""
    coordinator = {"server": "master:8081", "server_type": "coordinator", "tier": None, "is_leader": 1}
    overlord = {**coordinator, "server_type": "overlord"}
    rows = [coordinator, overlord, H]
    servers, names = load_all_servers(write(tmp_path, "servers.json", rows))
    assert [s.server for s in servers] == ["h1:8083"] and names == {"master:8081", "h1:8083"}
    for rows, row in (
        ([coordinator, overlord, coordinator], 2),
        ([H, {**H, "server_type": "broker"}], 1),
        ([{**coordinator, "server": H["server"]}, H], 1),
    ):
        err = refused(load_servers, write(tmp_path, "servers.json", rows))
        assert err.row == row and "repeats row" in err.problem


def test_non_historicals_are_dropped_but_still_need_a_unique_name(tmp_path):
    rows = [
        {"server": "b:1", "server_type": "broker", "tier": None, "curr_size": 0, "max_size": 0},
        {"server": "p:1", "server_type": "peon"},
        H,
    ]
    assert [s.server for s in load_servers(write(tmp_path, "servers.json", rows))] == ["h1:8083"]
    assert "repeats" in refused(load_servers, write(tmp_path, "servers.json", rows + [rows[0]])).problem


# Druid 38.0.0's sys.servers rows (every column, in SystemSchema's order): the fake Druid's leading
# Coordinator and a historical
ROWS_38 = [fd.SERVERS_38[0], fd.SERVERS_38[4]]


def test_servers_keep_version_storage_size_and_labels(tmp_path):
    """Druid 38's columns: ``version``, ``storage_size`` and ``labels`` kept on the historical, the
    labels as given (a JSON string from Druid, an object when written by hand); the others ignored."""
    [hist] = load_servers(write(tmp_path, "servers.json", ROWS_38))
    assert hist == Server(
        server="hist-1:8083",
        host="hist-1",
        tier="_default_tier",
        current_size=3000,
        max_size=1000000,
        version="38.0.0",
        storage_size=1000000,
        labels='{"zone":"eu-west-1a"}',
    )
    [hist] = load_servers(write(tmp_path, "servers.json", [{**H, "labels": {"zone": "b"}, "version": "unknown"}]))
    assert hist.labels == {"zone": "b"} and hist.version == "unknown" and hist.storage_size is None
    [hist] = load_servers(write(tmp_path, "servers.json", [H]))
    assert (hist.version, hist.storage_size, hist.labels) == (None, None, None)


def test_load_cluster_version(tmp_path):
    """The leading Coordinator's version; the historicals' without one; None for Druid 34's rows;
    what ``load_all_servers`` refuses is refused here too."""
    assert load_cluster_version(write(tmp_path, "servers.json", ROWS_38)) == "38.0.0"
    rows = [{**ROWS_38[0], "version": "37.0.0"}, ROWS_38[1]]
    assert load_cluster_version(write(tmp_path, "servers.json", rows)) == "37.0.0"
    rows = [{**ROWS_38[0], "version": "unknown"}, {**ROWS_38[1], "version": "36.0.1"}]
    assert load_cluster_version(write(tmp_path, "servers.json", rows)) == "36.0.1"
    druid_34 = [{k: v for k, v in row.items() if k not in ("version", "build_revision", "labels")} for row in ROWS_38]
    assert load_cluster_version(write(tmp_path, "servers.json", druid_34)) is None
    assert load_cluster_version(SMALL) is None
    err = refused(load_cluster_version, write(tmp_path, "servers.json", [ROWS_38[0], {**ROWS_38[1], "version": "x"}]))
    assert str(err).startswith("servers.json row 1: version must be a Druid version")
    err = refused(load_cluster_version, write(tmp_path, "servers.json", [ROWS_38[0], ROWS_38[0]]))
    assert str(err) == "servers.json row 1: server 'master-1:8081' repeats row 0"
    assert load_all_servers(write(tmp_path, "servers.json", ROWS_38))[1] == {"master-1:8081", "hist-1:8083"}


# --------------------------------------------------------------------------------------- queues


@pytest.mark.parametrize(
    "queues, needle",
    [
        ({"ghost:1": {"segmentsToLoad": ["s"]}}, "server 'ghost:1' is not a historical server"),
        ({"h1": {"segmentsToLoad": ["s"], "segmentsToDrop": ["s"]}}, "both in segmentsToLoad and segmentsToDrop"),
        ({"h1": {"segmentsToLoad": ["s", {"segment_id": "s"}]}}, "segmentsToLoad[1]: segment 's' is listed twice"),
        (
            {"h1": {"segmentsToLoad": [{"segment_id": "s", "queue_type": "moving"}]}},
            "segmentsToLoad[0]: queue_type must be one of",
        ),
        ({"h1": {"segmentsToDrop": [{"segment_id": "s", "queue_type": "loading"}]}}, "a drop has no queue_type"),
        ({"h1": {"segmentsToLoad": [{"segment_id": "s", "requested_at": "noon"}]}}, "requested_at"),
        ({"h1": {"segmentsToLoad": [{"segment": "s"}]}}, "segment_id is required"),
        ({"h1": {"segmentsToLoad": [5]}}, "must be a segment id or an object"),
        ({"h1": {"segmentsToLoad": "s"}}, "must be a list"),
        ({"h1": {"toLoad": []}}, "unknown key(s) toLoad"),
        ([], "JSON object"),
    ],
)
def test_queues_refused(tmp_path, queues, needle):
    err = refused(load_load_queues, write(tmp_path, "load_queues.json", queues), {"h1"})
    assert err.file == "load_queues.json" and needle in err.problem


def test_same_segment_on_two_servers_is_fine(tmp_path):
    entries = load_load_queues(
        write(tmp_path, "load_queues.json", {"a": {"segmentsToLoad": ["s"]}, "b": {"segmentsToDrop": ["s"]}}),
        {"a", "b"},
    )
    assert [(e.server, e.action, e.queue_type) for e in entries] == [("a", "LOAD", "loading"), ("b", "DROP", None)]


# ---------------------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    "rules, needle",
    [
        ({"wiki": []}, "'_default' rule list is missing"),
        (
            {"_default": [], "wiki": [{"type": "loadForever"}, {"type": "loadSometimes"}]},
            "datasource 'wiki' rule [1] (0-based): unknown rule type 'loadSometimes'",
        ),
        ({"_default": [{"tieredReplicants": {"t": 1}}]}, "rule [0] (0-based): unknown rule type None"),
        ({"_default": [{"type": "loadByPeriod"}]}, "needs a period"),
        ({"_default": [{"type": "loadByPeriod", "period": "1 month"}]}, "not an ISO-8601 period"),
        ({"_default": [{"type": "loadByInterval", "interval": "2012-02-01/2012-01-01"}]}, "end is before its start"),
        ({"_default": [{"type": "loadForever", "tieredReplicants": {"t": -1}}]}, "replicas for tier [t]: must be >= 0"),
        ({"_default": [{"type": "loadForever", "tieredReplicants": {"t": None}}]}, "must not be null"),
        ({"_default": [{"type": "loadForever", "tieredReplicants": {"t": "2"}}]}, "must be an integer"),
        ({"_default": [{"type": "dropForever", "tieredReplicants": {"t": 1}}]}, "not allowed in a dropForever rule"),
        ({"_default": [{"type": "dropBeforeByPeriod", "period": "P1D", "includeFuture": True}]}, "includeFuture"),
        ({"_default": [{"type": "loadForever", "tier": "t"}]}, "'tier' and 'replicants' must be given together"),
        ({"_default": [{"type": "loadForever", "includeFutur": True}]}, "includeFutur is not a known field"),
        ({"_default": [{"type": "loadByPeriod", "period": "P1D", "includeFuture": "maybe"}]}, "includeFuture"),
        ({"_default": {}}, "rules must be a list"),
        ([], "JSON object"),
    ],
)
def test_rules_refused(tmp_path, rules, needle):
    err = refused(load_rules, write(tmp_path, "rules.json", rules))
    assert err.file == "rules.json" and needle in err.problem, err.problem


def test_rules_accept_druid_variants(tmp_path):
    rules = load_rules(
        write(
            tmp_path,
            "rules.json",
            {
                "_default": [],
                "x": [
                    {"type": "broadcastForever", "colocatedDataSources": ["y"]},
                    {
                        "type": "loadByPeriod",
                        "period": "P1D",
                        "includeFuture": "false",
                        "useDefaultTierForNull": "true",
                    },
                    {"type": "loadByInterval", "interval": "2012-01-01/P1M", "tier": "hot", "replicants": 1},
                ],
            },
        )
    )
    assert rules["_default"] == []
    b, p, i = rules["x"]
    assert b.kind == "broadcast" and p.include_future is False and p.tiered_replicants == {"_default_tier": 2}
    assert i.tiered_replicants == {"hot": 1} and (i.interval_start_ms, i.interval_end_ms) == (
        utc(2012, 1, 1),
        utc(2012, 2, 1),
    )


# ------------------------------------------------------------------------------- config and meta


def test_config_file_errors(tmp_path):
    assert "must be a JSON object" in refused(load_config, write(tmp_path, "coordinator_config.json", [])).problem
    err = refused(load_config, write(tmp_path, "coordinator_config.json", {"maxSegmentsInNodeLoadingQueue": -5}))
    assert str(err) == "coordinator_config.json: maxSegmentsInNodeLoadingQueue must be >= 0, got -5"


@pytest.mark.parametrize(
    "meta, needle",
    [
        ({"cluster": "c"}, "snapshot_time must be an ISO-8601 string"),
        ({"snapshot_time": "2024-02-30T00:00:00Z", "cluster": "c"}, "out of range"),
        ({"snapshot_time": "2024-01-01", "cluster": ""}, "cluster must be a non-empty string"),
        ({"snapshot_time": "2024-01-01", "cluster": "c", "extra": 1}, "unknown key(s) extra"),
        ({"snapshot_time": "2024-01-01", "cluster": "c", "druid_version": "unknown"}, 'got "unknown"'),
        ({"snapshot_time": "2024-01-01", "cluster": "c", "druid_version": 35}, "druid_version must be a Druid version"),
    ],
)
def test_meta_refused(tmp_path, meta, needle):
    err = refused(load_snapshot_meta, write(tmp_path, "snapshot.json", meta))
    assert err.file == "snapshot.json" and needle in err.problem


def test_meta_with_offset(tmp_path):
    meta = load_snapshot_meta(
        write(tmp_path, "snapshot.json", {"snapshot_time": "2024-06-01T14:00:00+02:00", "cluster": "prod"})
    )
    assert meta.snapshot_time_ms == utc(2024, 6, 1, 12) and meta.snapshot_id == "prod@2024-06-01T12:00:00.000Z"


def test_meta_druid_version_is_optional(tmp_path):
    meta = {"snapshot_time": "2024-06-01T12:00:00Z", "cluster": "p", "druid_version": "35.0.1"}
    meta = load_snapshot_meta(write(tmp_path, "snapshot.json", meta))
    assert meta.druid_version == "35.0.1"
    assert load_snapshot_meta(SMALL).druid_version is None
