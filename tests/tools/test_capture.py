"""``segment_balancer.tools.capture`` against a loopback fake Druid (``fake_druid.py``): the files it writes
(compared with a snapshot written out by hand below), the older nested segment form, every failure
leaving the snapshots root as it was, ``prune``, and the capture loading with the snapshot loaders.
No Spark."""

from __future__ import annotations

import gzip
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fake_druid as fd
import pytest

from segment_balancer.druid.releases import reproduced_release
from segment_balancer.druid.segment_id import parse_segment_id
from segment_balancer.druid.snapshot import loader
from segment_balancer.druid.snapshot.models import QueueEntry, Server
from segment_balancer.planner.config import load_config
from segment_balancer.tools import capture as cap
from segment_balancer.tools.capture import CaptureError, DruidEndpoint, capture, capture_to, prune

NOW = datetime(2026, 11, 23, 10, 15, tzinfo=UTC)
DIR_NAME = "2026-11-23T10-15-00Z"
CLUSTER = "test-cluster"

# ---- the expected snapshot, by hand ----------------------------------------------------------------------

ID_A = "wikipedia_2026-11-20T00:00:00.000Z_2026-11-21T00:00:00.000Z_2026-11-21T01:00:00.000Z"
ID_B = "wikipedia_2026-11-20T00:00:00.000Z_2026-11-21T00:00:00.000Z_2026-11-21T01:00:00.000Z_1"
ID_OLD = "wikipedia_2026-11-20T00:00:00.000Z_2026-11-21T00:00:00.000Z_2026-11-20T01:00:00.000Z"
ID_ALL = "lookups_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z_2026-01-01T00:00:00.000Z"
ID_NEW = "wikipedia_2026-11-22T00:00:00.000Z_2026-11-23T00:00:00.000Z_2026-11-23T01:00:00.000Z"
ID_UNUSED = "wikipedia_2026-11-01T00:00:00.000Z_2026-11-02T00:00:00.000Z_2026-11-02T01:00:00.000Z"
ID_REALTIME = "wikipedia_2026-11-23T00:00:00.000Z_2026-11-24T00:00:00.000Z_2026-11-23T00:00:05.000Z"

# one DataSegment per line + overshadowed; replicationFactor, numRows, realtime gone (the jq of docs/LIVE_CLUSTER.md)
EXPECTED_SEGMENTS = (
    '{"dataSource":"wikipedia","interval":"2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z","version":"2026-11-21T01:00:00.000Z",'
    '"loadSpec":{"type":"s3_zip","bucket":"deep","key":"wikipedia/2026-11-20/v2/0/index.zip"},"dimensions":"channel,pagé,user",'
    '"metrics":"count,added","shardSpec":{"type":"numbered","partitionNum":0,"partitions":2},"lastCompactionState":null,'
    '"binaryVersion":9,"size":1000,"identifier":"' + ID_A + '","overshadowed":false}\n'
    '{"dataSource":"wikipedia","interval":"2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z","version":"2026-11-21T01:00:00.000Z",'
    '"loadSpec":{"type":"s3_zip","bucket":"deep","key":"wikipedia/2026-11-20/v2/1/index.zip"},"dimensions":"channel,pagé,user",'
    '"metrics":"count,added","shardSpec":{"type":"numbered","partitionNum":1,"partitions":2},"lastCompactionState":null,'
    '"binaryVersion":9,"size":900,"identifier":"' + ID_B + '","overshadowed":false}\n'
    '{"dataSource":"wikipedia","interval":"2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z","version":"2026-11-20T01:00:00.000Z",'
    '"loadSpec":{"type":"s3_zip","bucket":"deep","key":"wikipedia/2026-11-20/v1/0/index.zip"},"dimensions":"channel,pagé,user",'
    '"metrics":"count,added","shardSpec":{"type":"numbered","partitionNum":0,"partitions":1},"lastCompactionState":null,'
    '"binaryVersion":9,"size":800,"identifier":"' + ID_OLD + '","overshadowed":true}\n'
    '{"dataSource":"lookups","interval":"-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z","version":"2026-01-01T00:00:00.000Z",'
    '"loadSpec":{"type":"s3_zip","bucket":"deep","key":"lookups/all/0/index.zip"},"dimensions":"k,v",'
    '"metrics":"","shardSpec":{"type":"none"},"lastCompactionState":null,'
    '"binaryVersion":9,"size":500,"identifier":"' + ID_ALL + '","overshadowed":false}\n'
    '{"dataSource":"wikipedia","interval":"2026-11-22T00:00:00.000Z/2026-11-23T00:00:00.000Z","version":"2026-11-23T01:00:00.000Z",'
    '"loadSpec":{"type":"s3_zip","bucket":"deep","key":"wikipedia/2026-11-22/v1/0/index.zip"},"dimensions":"channel,pagé,user",'
    '"metrics":"count,added","shardSpec":{"type":"numbered","partitionNum":0,"partitions":1},"lastCompactionState":null,'
    '"binaryVersion":9,"size":700,"identifier":"' + ID_NEW + '","overshadowed":false}\n'
)

# every row, Druid's trailing blank line not kept
EXPECTED_SERVER_SEGMENTS = (
    '{"server":"hist-1:8083","segment_id":"' + ID_A + '"}\n'
    '{"server":"hist-1:8083","segment_id":"' + ID_B + '"}\n'
    '{"server":"hist-1:8083","segment_id":"' + ID_ALL + '"}\n'
    '{"server":"hist-1:8083","segment_id":"' + ID_UNUSED + '"}\n'
    '{"server":"hist-2:8083","segment_id":"' + ID_A + '"}\n'
    '{"server":"hist-2:8083","segment_id":"' + ID_OLD + '"}\n'
    '{"server":"hist-2:8083","segment_id":"' + ID_ALL + '"}\n'
    '{"server":"peon-1:8100","segment_id":"' + ID_REALTIME + '"}\n'
)

# Druid 38's answer to SELECT * (fake_druid.SERVERS_38, written out by hand from SystemSchema): every
# column is one the capture knows, so it is written as Druid gave it
EXPECTED_SERVERS = fd.SERVERS_38

# the broker's queue (a broadcast load) is left out
EXPECTED_LOAD_QUEUES = {
    "hist-1:8083": {"segmentsToLoad": [], "segmentsToDrop": []},
    "hist-2:8083": {"segmentsToLoad": [ID_NEW], "segmentsToDrop": [ID_OLD]},
}

EXPECTED_RULES = {
    "_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}],
    "wikipedia": [
        {"type": "loadByPeriod", "period": "P90D", "includeFuture": True, "tieredReplicants": {"_default_tier": 2}},
        {"type": "dropForever"},
    ],
    "lookups": [{"type": "broadcastForever"}],
}

EXPECTED_CONFIG = {
    "millisToWaitBeforeDeleting": 900000,
    "mergeBytesLimit": 524288000,
    "mergeSegmentsLimit": 100,
    "maxSegmentsToMove": 100,
    "replicantLifetime": 15,
    "replicationThrottleLimit": 500,
    "balancerComputeThreads": 1,
    "killDataSourceWhitelist": [],
    "killPendingSegmentsSkipList": [],
    "maxSegmentsInNodeLoadingQueue": 500,
    "decommissioningNodes": [],
    "decommissioningMaxPercentOfMaxSegmentsToMove": 70,
    "pauseCoordination": False,
    "replicateAfterLoadTimeout": False,
    "maxNonPrimaryReplicantsToLoad": 2147483647,
    "useRoundRobinSegmentAssignment": True,
    "smartSegmentLoading": True,
    "debugDimensions": None,
}

EXPECTED_META = {"snapshot_time": "2026-11-23T10:15:00.000Z", "cluster": CLUSTER, "druid_version": "38.0.0"}

FILES = [
    "coordinator_config.json",
    "load_queues.json",
    "rules.json",
    "segments.jsonl.gz",
    "server_segments.jsonl.gz",
    "servers.json",
    "snapshot.json",
]


# ---- helpers -------------------------------------------------------------------------------------------------


def endpoints(fake, auth=None):
    return DruidEndpoint(fake.url, auth=auth), DruidEndpoint(fake.url, auth=auth)


def run_capture(fake, root: Path, now=NOW, **kwargs) -> Path:
    coordinator, broker = endpoints(fake, kwargs.pop("auth", None))
    return capture(coordinator, broker, root, CLUSTER, now=now, timeout_s=kwargs.pop("timeout_s", 10.0), **kwargs)


def gunzip_text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode("utf-8")


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` (hidden ones too) with its bytes (None for directories); None if
    ``root`` does not exist."""
    if not root.exists():
        return None
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            path = os.path.join(dirpath, f)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


@pytest.fixture
def roots(tmp_path):
    """Three snapshots roots: missing, empty, and holding an earlier capture of the cluster."""
    missing, empty, earlier = tmp_path / "missing", tmp_path / "empty", tmp_path / "earlier"
    empty.mkdir()
    with fd.fake_druid() as fake:
        run_capture(fake, earlier, now=NOW - timedelta(days=1))
    assert (earlier / CLUSTER / "2026-11-22T10-15-00Z" / "snapshot.json").is_file()
    return [missing, empty, earlier]


def assert_fails_cleanly(roots, knobs: dict, *fragments: str, **capture_kwargs) -> str:
    """Capture against a fake with ``knobs`` into each root: CaptureError whose message holds every
    fragment, and the root exactly as before. Returns the last message."""
    message = ""
    for root in roots:
        before = tree(root)
        with fd.fake_druid(**knobs) as fake:
            with pytest.raises(CaptureError) as info:
                run_capture(fake, root, **capture_kwargs)
        message = str(info.value)
        for fragment in fragments:
            assert fragment in message, (fragment, message)
        assert tree(root) == before, f"{root} changed"
    return message


# ---- the capture -------------------------------------------------------------------------------------------


def test_capture_writes_the_hand_written_snapshot(tmp_path):
    with fd.fake_druid() as fake:
        out = run_capture(fake, tmp_path / "snapshots")
    assert out == tmp_path / "snapshots" / CLUSTER / DIR_NAME
    assert sorted(os.listdir(out)) == FILES
    assert os.listdir(tmp_path / "snapshots" / CLUSTER) == [DIR_NAME]  # no temporary left beside it
    assert gunzip_text(out / "segments.jsonl.gz") == EXPECTED_SEGMENTS
    assert gunzip_text(out / "server_segments.jsonl.gz") == EXPECTED_SERVER_SEGMENTS
    assert read_json(out / "servers.json") == EXPECTED_SERVERS
    assert read_json(out / "load_queues.json") == EXPECTED_LOAD_QUEUES
    assert read_json(out / "rules.json") == EXPECTED_RULES
    assert read_json(out / "coordinator_config.json") == EXPECTED_CONFIG
    assert read_json(out / "snapshot.json") == EXPECTED_META


def test_capture_asks_druid_as_documented(tmp_path):
    with fd.fake_druid() as fake:
        run_capture(fake, tmp_path)
    asked = {(m, p) for m, p, _ in fake.requests}
    assert ("GET", "/druid/coordinator/v1/metadata/segments?includeOvershadowedStatus") in asked
    assert ("GET", "/druid/coordinator/v1/loadqueue") in asked
    assert ("GET", "/druid/coordinator/v1/rules") in asked
    assert ("GET", "/druid/coordinator/v1/config") in asked
    sql = sorted(
        body["query"] + " | " + body["resultFormat"] + " | " + str(body["header"])
        for m, p, body in fake.requests
        if p == "/druid/v2/sql"
    )
    assert sql == [
        "SELECT * FROM sys.servers | object | False",
        "SELECT server, segment_id FROM sys.server_segments | objectLines | False",
    ]


def test_nested_segment_form_gives_the_same_segments(tmp_path):
    with fd.fake_druid(nested_segments=True) as fake:
        out = run_capture(fake, tmp_path)
    assert b'"dataSegment"' in fake.segments_body()
    assert gunzip_text(out / "segments.jsonl.gz") == EXPECTED_SEGMENTS


def test_segments_parse_across_one_byte_chunks(tmp_path):
    """Every chunk boundary, inside strings, numbers and the two bytes of 'é'."""
    with fd.fake_druid(chunk_size=1) as fake:
        out = run_capture(fake, tmp_path)
    assert gunzip_text(out / "segments.jsonl.gz") == EXPECTED_SEGMENTS
    assert gunzip_text(out / "server_segments.jsonl.gz") == EXPECTED_SERVER_SEGMENTS


def test_empty_segment_list_and_no_replicas(tmp_path):
    with fd.fake_druid(segments=[], server_segments=[], load_queues={}) as fake:
        out = run_capture(fake, tmp_path)
    assert gunzip_text(out / "segments.jsonl.gz") == ""
    assert gunzip_text(out / "server_segments.jsonl.gz") == ""
    assert read_json(out / "load_queues.json") == {}


def test_rows_of_servers_missing_from_servers_json_are_left_out(tmp_path):
    rows = fd.SERVER_SEGMENTS + [{"server": "hist-new:8083", "segment_id": ID_A}]
    with fd.fake_druid(server_segments=rows) as fake:
        out = run_capture(fake, tmp_path)
    assert gunzip_text(out / "server_segments.jsonl.gz") == EXPECTED_SERVER_SEGMENTS


def test_full_load_queue_shape_converts_to_ids(tmp_path, monkeypatch):
    """``loadqueue?full`` (CuratorLoadQueuePeon: whole DataSegments) gives the same file; without
    ``identifier`` the id is Druid's SegmentId of the segment's fields."""
    monkeypatch.setattr(cap, "LOAD_QUEUE_PATH", "/druid/coordinator/v1/loadqueue?full")
    with fd.fake_druid() as fake:
        out = run_capture(fake, tmp_path / "with_identifier")
    assert read_json(out / "load_queues.json") == EXPECTED_LOAD_QUEUES

    def bare(segment):
        return {k: v for k, v in segment.items() if k != "identifier"}

    queues = {"hist-1:8083": ([bare(fd.WIKI_B)], []), "hist-2:8083": ([bare(fd.WIKI_NEW)], [bare(fd.WIKI_OLD)])}
    with fd.fake_druid(load_queues=queues) as fake:
        out = run_capture(fake, tmp_path / "computed")
    assert read_json(out / "load_queues.json") == {
        "hist-1:8083": {"segmentsToLoad": [ID_B], "segmentsToDrop": []},
        "hist-2:8083": {"segmentsToLoad": [ID_NEW], "segmentsToDrop": [ID_OLD]},
    }


def test_basic_auth(tmp_path):
    with fd.fake_druid(auth=("admin", "s3cret")) as fake:
        out = run_capture(fake, tmp_path, auth=("admin", "s3cret"))
    assert gunzip_text(out / "segments.jsonl.gz") == EXPECTED_SEGMENTS


def test_capture_to_writes_exactly_there(tmp_path):
    target = tmp_path / "a" / "b" / "snap"
    with fd.fake_druid() as fake:
        coordinator, broker = endpoints(fake)
        assert capture_to(coordinator, broker, target, CLUSTER, now=NOW) == target
        assert sorted(os.listdir(target)) == FILES
        assert read_json(target / "snapshot.json") == EXPECTED_META
        with pytest.raises(CaptureError, match="already exists"):
            capture_to(coordinator, broker, target, CLUSTER, now=NOW)
    assert sorted(os.listdir(tmp_path / "a" / "b")) == ["snap"]


def test_capture_to_failure_removes_the_parents_it_made(tmp_path):
    with fd.fake_druid(fail_status={"rules": 500}) as fake:
        coordinator, broker = endpoints(fake)
        with pytest.raises(CaptureError, match="rules.json"):
            capture_to(coordinator, broker, tmp_path / "a" / "b" / "snap", CLUSTER, now=NOW)
    assert os.listdir(tmp_path) == []


def test_a_second_capture_in_the_same_second_is_refused(tmp_path):
    with fd.fake_druid() as fake:
        first = run_capture(fake, tmp_path)
        before = tree(tmp_path)
        with pytest.raises(CaptureError, match=f"{DIR_NAME} already exists"):
            run_capture(fake, tmp_path, now=NOW + timedelta(milliseconds=400))
    assert tree(tmp_path) == before and first.is_dir()


@pytest.mark.parametrize("cluster", ["", "..", ".hidden", "a/b", "prod:1", "a\\b"])
def test_bad_cluster_names(tmp_path, cluster):
    with pytest.raises(CaptureError, match="cluster"):
        capture(DruidEndpoint("http://127.0.0.1:1"), DruidEndpoint("http://127.0.0.1:1"), tmp_path, cluster, now=NOW)
    assert os.listdir(tmp_path) == []


# ---- failures: CaptureError naming the endpoint, nothing left behind -----------------------------------------

WHERE = {  # endpoint -> what the message names: URL path (and query), file
    "segments": (
        "coordinator GET",
        "/druid/coordinator/v1/metadata/segments?includeOvershadowedStatus",
        "segments.jsonl.gz",
    ),
    "loadqueue": ("coordinator GET", "/druid/coordinator/v1/loadqueue", "load_queues.json"),
    "rules": ("coordinator GET", "/druid/coordinator/v1/rules", "rules.json"),
    "config": ("coordinator GET", "/druid/coordinator/v1/config", "coordinator_config.json"),
    "servers": ("broker POST", "/druid/v2/sql", "FROM sys.servers", "servers.json"),
    "server_segments": ("broker POST", "/druid/v2/sql", "FROM sys.server_segments", "server_segments.jsonl.gz"),
}


@pytest.mark.parametrize("endpoint", fd.ENDPOINTS)
def test_http_500_on_each_endpoint(roots, endpoint):
    message = assert_fails_cleanly(
        roots, {"fail_status": {endpoint: 500}}, *WHERE[endpoint], "HTTP 500", f"injected failure of {endpoint}"
    )
    assert "http://127.0.0.1:" in message


@pytest.mark.parametrize(
    "endpoint, problem",
    [
        ("segments", "malformed or cut-off JSON in element 0"),
        ("loadqueue", "malformed JSON at line 1"),
        ("rules", "malformed JSON at line 1"),
        ("config", "NaN is not valid JSON"),
        ("servers", "malformed JSON at line 1"),
        ("server_segments", "line 1 is not valid JSON"),
    ],
)
def test_malformed_json_on_each_endpoint(roots, endpoint, problem):
    assert_fails_cleanly(roots, {"malformed": {endpoint}}, *WHERE[endpoint], problem)


@pytest.mark.parametrize(
    "style, problem",
    [
        ("close", "ended without Druid's trailing blank line after 3 rows"),
        ("chunked", "broke off"),
    ],
)
def test_cut_object_lines_stream(roots, style, problem):
    assert_fails_cleanly(
        roots, {"cut_server_segments_after": 3, "cut_style": style}, *WHERE["server_segments"], problem
    )


def test_trailer_rule_alone():
    """The rule on its own: rows, then one blank line; zero rows = two blank lines."""
    call = cap._Call("broker", DruidEndpoint("http://druid:8082"), "POST", "/druid/v2/sql", "x.jsonl.gz")
    assert list(cap._object_lines(call, [b'{"a":1}\n{"a":2}\n\n'])) == [(1, b'{"a":1}'), (2, b'{"a":2}')]
    assert list(cap._object_lines(call, [b"\n", b"\n"])) == []
    for body in (b'{"a":1}\n{"a":2}\n', b'{"a":1}\n{"a":2}', b"", b'{"a":1}\n\n{"a":2}\n\n'):
        with pytest.raises(CaptureError):
            list(cap._object_lines(call, [body]))


def test_wrong_credentials_get_401(roots):
    assert_fails_cleanly(
        roots,
        {"auth": ("admin", "s3cret")},
        "broker POST",
        "/druid/v2/sql",
        "servers.json",
        "HTTP 401",
        auth=("admin", "wrong"),
    )


def test_no_credentials_get_401(roots):
    assert_fails_cleanly(roots, {"auth": ("admin", "s3cret")}, "HTTP 401", "Unauthorized")


@pytest.mark.parametrize("closed", ["coordinator", "broker"])
def test_connection_refused(roots, closed):
    port = fd.unused_port()
    for root in roots:
        before = tree(root)
        with fd.fake_druid() as fake:
            coordinator, broker = endpoints(fake)
            dead = DruidEndpoint(f"http://127.0.0.1:{port}")
            if closed == "coordinator":
                coordinator = dead
            else:
                broker = dead
            with pytest.raises(CaptureError) as info:
                capture(coordinator, broker, root, CLUSTER, now=NOW, timeout_s=5)
        assert f"{closed} " in str(info.value) and f"http://127.0.0.1:{port}/druid/" in str(info.value)
        assert "ConnectionError" in str(info.value)
        assert tree(root) == before


def test_timeout(roots):
    assert_fails_cleanly(roots[:1], {"delay_s": {"rules": 2.0}}, *WHERE["rules"], "timed out", timeout_s=0.3)


def test_empty_servers_list(roots):
    assert_fails_cleanly(roots, {"servers": []}, *WHERE["servers"], "no servers")


def test_a_capture_the_loaders_refuse(roots):
    """rules.json without ``_default``: load_rules' SnapshotError, as a CaptureError."""
    assert_fails_cleanly(
        roots,
        {"rules": {"wikipedia": [{"type": "dropForever"}]}},
        "does not load as a snapshot",
        "rules.json",
        "'_default' rule list is missing",
    )


def test_a_segment_element_that_is_not_an_object(roots):
    segments = [(fd.WIKI_A, False, 2, 100), ({"dataSource": "x"}, False, 1, 1)]
    assert_fails_cleanly(
        roots[:1], {"segments": segments}, *WHERE["segments"], "element 1 (0-based) has no string interval"
    )


# ---- prune ---------------------------------------------------------------------------------------------------


def write_meta(directory: Path, when: str, cluster: str = CLUSTER) -> Path:
    directory.mkdir(parents=True)
    (directory / "snapshot.json").write_text(json.dumps({"snapshot_time": when, "cluster": cluster}))
    return directory


def test_prune_keeps_the_newest_by_snapshot_time(tmp_path):
    base = tmp_path / CLUSTER
    oldest = write_meta(base / "zzz-named-last", "2026-11-20T00:00:00.000Z")  # name sorts last, time first
    second = write_meta(base / "2026-11-21T00-00-00Z", "2026-11-21T00:00:00.000Z")
    third = write_meta(base / "2026-11-22T00-00-00Z", "2026-11-22T00:00:00.000Z")
    newest = write_meta(base / "aaa-named-first", "2026-11-23T00:00:00.000Z")
    (base / ".2026-11-24T00-00-00Z.tmp-1234abcd").mkdir()  # a capture in progress
    (base / "notes").mkdir()  # no snapshot.json
    (base / "README").write_text("x")
    other = write_meta(base / "other-cluster", "2020-01-01T00:00:00.000Z", cluster="other")

    assert prune(tmp_path, CLUSTER, keep=2) == [oldest, second]
    assert sorted(p.name for p in base.iterdir()) == sorted(
        [".2026-11-24T00-00-00Z.tmp-1234abcd", "notes", "README", third.name, newest.name, other.name]
    )
    assert prune(tmp_path, CLUSTER, keep=2) == []
    assert prune(tmp_path, CLUSTER, keep=1) == [third]
    assert newest.is_dir()
    assert prune(tmp_path, "no-such-cluster", keep=1) == []


@pytest.mark.parametrize("keep", [0, -1, 1.5, True])
def test_prune_refuses_keep_below_one(tmp_path, keep):
    write_meta(tmp_path / CLUSTER / "s", "2026-11-20T00:00:00.000Z")
    with pytest.raises(ValueError, match="keep"):
        prune(tmp_path, CLUSTER, keep=keep)
    assert (tmp_path / CLUSTER / "s").is_dir()


def test_prune_after_real_captures(tmp_path):
    with fd.fake_druid() as fake:
        made = [run_capture(fake, tmp_path, now=NOW + timedelta(hours=h)) for h in (2, 0, 1)]
    assert prune(tmp_path, CLUSTER, keep=1) == [made[1], made[2]]
    assert os.listdir(tmp_path / CLUSTER) == ["2026-11-23T12-15-00Z"]


# ---- the capture loads ---------------------------------------------------------------------------------------


def test_capture_loads_with_the_snapshot_loaders(tmp_path):
    with fd.fake_druid() as fake:
        out = run_capture(fake, tmp_path)
    historicals, names = loader.load_all_servers(out)
    assert historicals == [
        Server(
            server="hist-1:8083",
            host="hist-1",
            tier="_default_tier",
            current_size=3000,
            max_size=1000000,
            priority=0,
            version="38.0.0",
            storage_size=1000000,
            labels='{"zone":"eu-west-1a"}',
        ),
        Server(
            server="hist-2:8083",
            host="hist-2",
            tier="_default_tier",
            current_size=2300,
            max_size=1000000,
            priority=0,
            version="38.0.0",
            storage_size=4000000,
            labels='{"zone":"eu-west-1b"}',
        ),
    ]
    # the masters are a Coordinator and an Overlord each: one name, two rows
    assert names == {"master-1:8081", "master-2:8081", "hist-1:8083", "hist-2:8083", "broker-1:8082", "peon-1:8100"}
    assert loader.load_load_queues(out, {"hist-1:8083", "hist-2:8083"}) == [
        QueueEntry(server="hist-2:8083", segment_id=ID_NEW, action="LOAD", queue_type="loading"),
        QueueEntry(server="hist-2:8083", segment_id=ID_OLD, action="DROP"),
    ]
    assert sorted(loader.load_rules(out)) == ["_default", "lookups", "wikipedia"]
    assert load_config(out).max_segments_in_node_loading_queue == 500
    meta = loader.load_snapshot_meta(out)
    assert meta.snapshot_id == "test-cluster@2026-11-23T10:15:00.000Z"
    assert meta.snapshot_time_ms == int(NOW.timestamp()) * 1000
    assert meta.druid_version == loader.load_cluster_version(out) == "38.0.0"


# ---- the cluster's Druid release -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "release, version, reproduced",
    [
        ("34.0.0", None, None),  # no version column before 35.0.0
        ("35.0.1", "35.0.1", "35.0.0"),
        ("38.0.0", "38.0.0", "38.0.0"),
    ],
)
def test_a_capture_records_the_release_the_cluster_runs(tmp_path, release, version, reproduced):
    """``SELECT *`` answers each release's columns: servers.json keeps them all (none unknown),
    snapshot.json records the version, ``load_cluster_version`` reads it back, and the druid
    coordinator's release that places segments as that version does follows."""
    with fd.fake_druid(release=release) as fake:
        out = run_capture(fake, tmp_path)
    rows = read_json(out / "servers.json")
    assert [list(row) for row in rows] == [list(fd.RELEASE_COLUMNS[release])] * len(fd.SERVERS_38)
    assert {row.get("version") for row in rows} == {version}
    meta = read_json(out / "snapshot.json")
    assert meta.get("druid_version") == version and ("druid_version" in meta) == (version is not None)
    assert loader.load_cluster_version(out) == version
    assert loader.load_snapshot_meta(out).druid_version == version
    if version is not None:
        assert reproduced_release(version) == reproduced
    historicals, _ = loader.load_all_servers(out)
    assert [(h.server, h.current_size, h.max_size, h.version) for h in historicals] == [
        ("hist-1:8083", 3000, 1000000, version),
        ("hist-2:8083", 2300, 1000000, version),
    ]


def test_the_leading_coordinators_version_is_recorded(tmp_path):
    """Mid-upgrade: historicals on 38, the leading Coordinator still on 35 (it is upgraded last)."""
    rows = [
        {**row, "version": "35.0.1" if row["server"] == "master-1:8081" else "38.0.0"}
        for row in fd.sys_servers("38.0.0")
    ]
    with fd.fake_druid(servers=rows) as fake:
        out = run_capture(fake, tmp_path)
    assert read_json(out / "snapshot.json")["druid_version"] == "35.0.1"


def test_columns_of_a_later_release_are_left_out(tmp_path):
    rows = [{**row, "cpu_model": "x86", "numa_nodes": 2} for row in fd.sys_servers("38.0.0")]
    with fd.fake_druid(servers=rows) as fake:
        out = run_capture(fake, tmp_path)
    assert read_json(out / "servers.json") == EXPECTED_SERVERS


@pytest.mark.parametrize("release", sorted(fd.RELEASE_COLUMNS))
def test_a_query_naming_priority_fails_on_every_release(tmp_path, monkeypatch, release):
    """sys.servers has no priority column in any release: a query naming it is Druid's HTTP 400,
    which is why the capture asks for ``*``."""
    named = "SELECT server, host, server_type, tier, curr_size, max_size, priority FROM sys.servers"
    monkeypatch.setattr(cap, "SERVERS_SQL", named)
    with fd.fake_druid(release=release) as fake:
        with pytest.raises(CaptureError, match="HTTP 400.*Column 'priority' not found in any table"):
            run_capture(fake, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_version_that_is_no_release_is_refused(roots):
    rows = [{**row, "version": "38.0"} for row in fd.sys_servers("38.0.0")]
    assert_fails_cleanly(
        roots, {"servers": rows}, "does not load as a snapshot", "servers.json row 0: version must be a Druid version"
    )


def test_replica_ids_are_listed_or_parse_as_druid_ids(tmp_path):
    """segments.py reads with Spark only; its rule for ids missing from segments.jsonl (unused
    segments: parsed back from the id) is checked here with ``parse_segment_id``."""
    with fd.fake_druid() as fake:
        out = run_capture(fake, tmp_path)
    listed = {json.loads(line)["identifier"] for line in gunzip_text(out / "segments.jsonl.gz").splitlines()}
    replicas = [json.loads(line) for line in gunzip_text(out / "server_segments.jsonl.gz").splitlines()]
    unlisted = sorted({r["segment_id"] for r in replicas} - listed)
    assert unlisted == [ID_UNUSED, ID_REALTIME]
    parsed = parse_segment_id(ID_UNUSED, ["wikipedia", "lookups"])
    assert (parsed.datasource, parsed.version, parsed.partition_num) == ("wikipedia", "2026-11-02T01:00:00.000Z", 0)


def test_druid_segment_id_examples():
    assert (
        cap.druid_segment_id(
            {
                "dataSource": "ds",
                "interval": "2015-01-02/2015-01-03T00:00:00Z",
                "version": "v",
                "shardSpec": {"type": "numbered", "partitionNum": 3},
            }
        )
        == "ds_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_v_3"
    )
    assert (
        cap.druid_segment_id(
            {
                "dataSource": "ds",
                "interval": "2015-01-02T00:00:00.000Z/2015-01-03T00:00:00.000Z",
                "version": "v",
                "shardSpec": {"type": "numbered_overwrite", "partitionId": 32768},
            }
        )
        == "ds_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_v_32768"
    )
    assert (
        cap.druid_segment_id(
            {"dataSource": "ds", "interval": fd.ETERNITY, "version": "v", "shardSpec": {"type": "none"}}
        )
        == "ds_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z_v"
    )


def test_the_cli_captures_and_exits_1_leaving_nothing_when_druid_fails(tmp_path, capsys):
    from segment_balancer.tools.cli import main

    with fd.fake_druid() as fake:
        assert (
            main(
                [
                    "capture",
                    "--coordinator",
                    fake.url,
                    "--broker",
                    fake.url,
                    "--out",
                    str(tmp_path / "snap"),
                    "--cluster",
                    "prod",
                ]
            )
            == 0
        )
    assert sorted(os.listdir(tmp_path / "snap")) == FILES
    assert json.loads((tmp_path / "snap" / "snapshot.json").read_text())["cluster"] == "prod"
    with fd.fake_druid(fail_status={"rules": 503}) as fake:
        assert main(["capture", "--coordinator", fake.url, "--broker", fake.url, "--out", str(tmp_path / "bad")]) == 1
    err = capsys.readouterr().err  # Druid's failure, not the user's input
    assert "error: " in err and "rules" in err and "input refused" not in err and not (tmp_path / "bad").exists()


# ---- a Coordinator that is not the leader --------------------------------------------------------


def test_a_non_leader_coordinator_redirects_and_the_capture_follows_with_the_credentials(tmp_path):
    """Druid's ``RedirectFilter``: a Coordinator that is not the leader answers ``307`` to the leader.
    The capture follows, sending the credentials on to the leader the Coordinator names, and the
    snapshot is the one taken from the leader directly."""
    auth = ("admin", "s3cret")
    with fd.fake_druid(auth=auth) as leader, fd.fake_druid(auth=auth) as follower, fd.fake_druid(auth=auth) as broker:
        follower.redirect_to, follower.leader = leader.url, leader.url
        direct = capture(
            DruidEndpoint(leader.url, auth),
            DruidEndpoint(broker.url, auth),
            tmp_path / "direct",
            CLUSTER,
            now=NOW,
            timeout_s=10.0,
        )
        redirected = capture(
            DruidEndpoint(follower.url, auth),
            DruidEndpoint(broker.url, auth),
            tmp_path / "redirected",
            CLUSTER,
            now=NOW,
            timeout_s=10.0,
        )
        asked_follower = [path for _, path, _ in follower.requests]
        leader_auth = set(leader.authorizations)
    assert tree(direct) == tree(redirected)
    # every Coordinator call went to the follower first, and the leader's name was asked once
    assert sorted(set(asked_follower)) == sorted(
        {cap.SEGMENTS_PATH, cap.LOAD_QUEUE_PATH, cap.RULES_PATH, cap.CONFIG_PATH, cap.LEADER_PATH}
    )
    assert asked_follower.count(cap.LEADER_PATH) == 1
    assert leader_auth == {fd._basic(*auth)}  # the leader got the credentials every time


def test_credentials_are_not_sent_to_a_redirect_outside_the_cluster(tmp_path):
    """A redirect to a host that is neither a configured service nor the leader the Coordinator
    names stops the capture before anything is sent there; nothing is written."""
    auth = ("admin", "s3cret")
    with fd.fake_druid(auth=auth) as leader, fd.fake_druid() as elsewhere, fd.fake_druid(auth=auth) as follower:
        follower.redirect_to, follower.leader = elsewhere.url, leader.url
        with pytest.raises(CaptureError, match="neither a configured service nor the leader") as info:
            capture(
                DruidEndpoint(follower.url, auth),
                DruidEndpoint(leader.url, auth),
                tmp_path,
                CLUSTER,
                now=NOW,
                timeout_s=10.0,
            )
        assert elsewhere.requests == []
    assert "s3cret" not in str(info.value)
    assert os.listdir(tmp_path) == []


def test_without_credentials_any_redirect_is_followed(tmp_path):
    with fd.fake_druid() as leader, fd.fake_druid() as follower:
        follower.redirect_to = leader.url
        out = capture(
            DruidEndpoint(follower.url), DruidEndpoint(leader.url), tmp_path, CLUSTER, now=NOW, timeout_s=10.0
        )
    assert gunzip_text(out / "segments.jsonl.gz") == EXPECTED_SEGMENTS


def test_a_capture_killed_halfway_leaves_no_snapshot_directory(tmp_path):
    """The capture process dies (SIGKILL) while the segment list streams: no snapshot directory
    appears (only the hidden temporary one, which nothing reads), and the planner still picks the
    capture before it."""
    import signal
    import subprocess
    import sys
    import time

    from segment_balancer_airflow.snapshots import pick_snapshot

    root = tmp_path / "snapshots"
    with fd.fake_druid() as fake:
        earlier = capture_to(*endpoints(fake), root / "cluster" / DIR_NAME, "cluster", now=NOW, timeout_s=10.0)
    with fd.fake_druid(delay_s={"segments": 30}) as fake:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "segment_balancer",
                "capture",
                "--coordinator",
                fake.url,
                "--broker",
                fake.url,
                "--out",
                str(root / "cluster" / "2030-01-01T00-00-00Z"),
                "--cluster",
                "cluster",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not any(path.startswith(cap.SEGMENTS_PATH.split("?")[0]) for _, path, _ in fake.requests):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    visible = [p.name for p in (root / "cluster").iterdir() if not p.name.startswith(".")]
    assert visible == [earlier.name]
    assert pick_snapshot(root, datetime(2031, 1, 1, tzinfo=UTC)) == earlier
