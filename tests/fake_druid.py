"""A loopback fake of a Druid Coordinator and Broker (one HTTP server on 127.0.0.1 answering both),
for the capture tests.

It answers, in Druid's documented shapes:

- ``GET /druid/coordinator/v1/metadata/segments?includeOvershadowedStatus``: a JSON array of
  ``SegmentStatusInCluster`` (the DataSegment fields unwrapped beside ``overshadowed``,
  ``replicationFactor``, ``numRows``, ``realtime``), sent chunked in small pieces; with
  ``nested_segments`` the older ``{"dataSegment": {...}, "overshadowed": b}`` form.
- ``GET /druid/coordinator/v1/loadqueue``: ``{server: {"segmentsToLoad": [id], "segmentsToDrop": [id]}}``;
  ``?full``: the same with whole DataSegment objects (what ``CuratorLoadQueuePeon`` serializes).
- ``GET /druid/coordinator/v1/rules``, ``GET /druid/coordinator/v1/config``.
- ``POST /druid/v2/sql``: ``sys.servers`` as ``resultFormat: object`` (a JSON array: ``SELECT *`` gives
  every column of the release, ``SELECT a, b`` those, and a column the release lacks is Druid's
  HTTP 400 "Column ... not found in any table") and ``sys.server_segments`` as ``objectLines`` (rows,
  then Druid's trailing blank line), chunked.

``release`` (a key of :data:`RELEASE_COLUMNS`, default ``"38.0.0"``) is the Druid release whose
``sys.servers`` columns the fake answers (:func:`sys_servers`); ``servers`` replaces the rows (their
keys are then the columns). Knobs (keyword arguments of :class:`FakeDruid`) inject failures; endpoint
names are ``segments``, ``loadqueue``, ``rules``, ``config``, ``servers``, ``server_segments``:

- ``fail_status={name: status}``: answer that HTTP status with a Druid error body.
- ``malformed={name, ...}``: answer 200 with a malformed JSON body (for ``server_segments``: one bad
  line, then the trailer).
- ``cut_server_segments_after=N``: send N objectLines rows, then close the connection without the
  trailing blank line (``cut_style="close"``: no length, no chunking, so only the missing trailer
  tells; ``"chunked"``: chunked, closed before the last chunk).
- ``delay_s={name: seconds}``: wait before answering.
- ``auth=(login, password)``: require HTTP basic auth; 401 otherwise. Authorization headers seen
  are recorded in ``authorizations``.
- ``redirect_to=URL``: be a Coordinator that is not the leader: answer every request (once
  authenticated, as Druid's filters do) with ``307 Temporary Redirect`` to ``URL`` + the same path.
- ``leader=URL``: what ``GET /druid/coordinator/v1/leader`` answers (default: this fake's own URL).
- ``chunk_size``: bytes per chunk of the streamed responses.

Every request is recorded in ``requests`` as ``(method, path with query, JSON body or None)``.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"

# ---- default data: a small cluster, written out by hand ------------------------------------------------

# sys.servers as Druid answers ``SELECT * FROM sys.servers`` (SystemSchema.SERVERS_SIGNATURE, in its
# column order), by release: 34.0.0 before the version column, 35.0.0 with it (apache/druid#18542),
# 38.0.0 with labels, available_processors, total_memory (36.0.0) and storage_size, build_revision
# (37.0.0). Read from SystemSchema.java at 259e62e3e1 (35.0.0), cc3b20534f^ (34's columns) and
# aedca20599 (38.0.0). No release has a priority column.
COLUMNS_34 = (
    "server",
    "host",
    "plaintext_port",
    "tls_port",
    "server_type",
    "tier",
    "curr_size",
    "max_size",
    "is_leader",
    "start_time",
)
COLUMNS_35 = (*COLUMNS_34, "version")
# 37 put storage_size after max_size and build_revision after version; 36 appended the other three
COLUMNS_38 = (
    *COLUMNS_34[:8],
    "storage_size",
    *COLUMNS_34[8:],
    "version",
    "build_revision",
    "labels",
    "available_processors",
    "total_memory",
)
RELEASE_COLUMNS = {"34.0.0": COLUMNS_34, "35.0.1": COLUMNS_35, "38.0.0": COLUMNS_38}
"""The fake's releases (``FakeDruid(release=...)``) and their sys.servers columns."""
GIB = 1 << 30


def _node(name: str, port: int, role: str, started: str, cpus: int, memory_gib: int, **data) -> dict:
    """One Druid 38 ``sys.servers`` row in :data:`COLUMNS_38` order: a server without data (no tier,
    sizes 0: SystemSchema's UNKNOWN_SIZE; ``is_leader`` null unless given) unless ``data`` gives
    ``tier``, ``curr_size``, ``max_size``, ``storage_size``, ``labels``."""
    return {
        "server": f"{name}:{port}",
        "host": name,
        "plaintext_port": port,
        "tls_port": -1,
        "server_type": role,
        "tier": data.get("tier"),
        "curr_size": data.get("curr_size", 0),
        "max_size": data.get("max_size", 0),
        "storage_size": data.get("storage_size", 0),
        "is_leader": data.get("is_leader"),
        "start_time": started,
        "version": "38.0.0",
        "build_revision": "aedca2059905",
        "labels": data.get("labels"),
        "available_processors": cpus,
        "total_memory": memory_gib * GIB,
    }


# A Druid 38.0.0 cluster: two masters, each a Coordinator that is also the Overlord (one row per
# role under one name; master-1 leads both), a broker, two historicals, a realtime task (a peon
# serving a realtime segment). storage_size is the physical size of a historical's segment
# locations (DruidServerConfig.getStorageSize), max_size what it advertises: the same unless
# druid.server.maxSize is set (hist-2 advertises a quarter of its disks).
SERVERS_38 = [
    _node("master-1", 8081, "coordinator", "2026-11-20T08:00:00.000Z", 8, 16, is_leader=1),
    _node("master-1", 8081, "overlord", "2026-11-20T08:00:00.000Z", 8, 16, is_leader=1),
    _node("master-2", 8081, "coordinator", "2026-11-20T08:05:00.000Z", 8, 16, is_leader=0),
    _node("master-2", 8081, "overlord", "2026-11-20T08:05:00.000Z", 8, 16, is_leader=0),
    _node(
        "hist-1",
        8083,
        "historical",
        "2026-11-20T07:00:00.000Z",
        16,
        64,
        tier="_default_tier",
        curr_size=3000,
        max_size=1000000,
        storage_size=1000000,
        labels='{"zone":"eu-west-1a"}',
    ),
    _node(
        "hist-2",
        8083,
        "historical",
        "2026-11-20T07:10:00.000Z",
        16,
        64,
        tier="_default_tier",
        curr_size=2300,
        max_size=1000000,
        storage_size=4000000,
        labels='{"zone":"eu-west-1b"}',
    ),
    _node("broker-1", 8082, "broker", "2026-11-20T07:30:00.000Z", 8, 32),
    _node("peon-1", 8100, "peon", "2026-11-23T09:00:00.000Z", 2, 4, tier="_default_tier"),
]


def sys_servers(release: str) -> list[dict]:
    """The cluster of :data:`SERVERS_38` as a Druid ``release`` of :data:`RELEASE_COLUMNS` lists it:
    that release's columns, its version in ``version`` where it has the column."""
    columns = RELEASE_COLUMNS[release]
    return [{c: (release if c == "version" else row[c]) for c in columns} for row in SERVERS_38]


WIKI_A = {  # newest version of 2026-11-20, partition 0
    "dataSource": "wikipedia",
    "interval": "2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z",
    "version": "2026-11-21T01:00:00.000Z",
    "loadSpec": {"type": "s3_zip", "bucket": "deep", "key": "wikipedia/2026-11-20/v2/0/index.zip"},
    "dimensions": "channel,pagé,user",
    "metrics": "count,added",
    "shardSpec": {"type": "numbered", "partitionNum": 0, "partitions": 2},
    "lastCompactionState": None,
    "binaryVersion": 9,
    "size": 1000,
    "identifier": "wikipedia_2026-11-20T00:00:00.000Z_2026-11-21T00:00:00.000Z_2026-11-21T01:00:00.000Z",
}
WIKI_B = {  # same version, partition 1
    "dataSource": "wikipedia",
    "interval": "2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z",
    "version": "2026-11-21T01:00:00.000Z",
    "loadSpec": {"type": "s3_zip", "bucket": "deep", "key": "wikipedia/2026-11-20/v2/1/index.zip"},
    "dimensions": "channel,pagé,user",
    "metrics": "count,added",
    "shardSpec": {"type": "numbered", "partitionNum": 1, "partitions": 2},
    "lastCompactionState": None,
    "binaryVersion": 9,
    "size": 900,
    "identifier": "wikipedia_2026-11-20T00:00:00.000Z_2026-11-21T00:00:00.000Z_2026-11-21T01:00:00.000Z_1",
}
WIKI_OLD = {  # the older version of 2026-11-20: overshadowed by A and B, still served by hist-2
    "dataSource": "wikipedia",
    "interval": "2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z",
    "version": "2026-11-20T01:00:00.000Z",
    "loadSpec": {"type": "s3_zip", "bucket": "deep", "key": "wikipedia/2026-11-20/v1/0/index.zip"},
    "dimensions": "channel,pagé,user",
    "metrics": "count,added",
    "shardSpec": {"type": "numbered", "partitionNum": 0, "partitions": 1},
    "lastCompactionState": None,
    "binaryVersion": 9,
    "size": 800,
    "identifier": "wikipedia_2026-11-20T00:00:00.000Z_2026-11-21T00:00:00.000Z_2026-11-20T01:00:00.000Z",
}
LOOKUPS_ALL = {  # ALL granularity: Druid's eternity interval
    "dataSource": "lookups",
    "interval": ETERNITY,
    "version": "2026-01-01T00:00:00.000Z",
    "loadSpec": {"type": "s3_zip", "bucket": "deep", "key": "lookups/all/0/index.zip"},
    "dimensions": "k,v",
    "metrics": "",
    "shardSpec": {"type": "none"},
    "lastCompactionState": None,
    "binaryVersion": 9,
    "size": 500,
    "identifier": "lookups_-146136543-09-08T08:23:32.096Z_146140482-04-24T15:36:27.903Z_2026-01-01T00:00:00.000Z",
}
WIKI_NEW = {  # published, not loaded yet: queued on hist-2
    "dataSource": "wikipedia",
    "interval": "2026-11-22T00:00:00.000Z/2026-11-23T00:00:00.000Z",
    "version": "2026-11-23T01:00:00.000Z",
    "loadSpec": {"type": "s3_zip", "bucket": "deep", "key": "wikipedia/2026-11-22/v1/0/index.zip"},
    "dimensions": "channel,pagé,user",
    "metrics": "count,added",
    "shardSpec": {"type": "numbered", "partitionNum": 0, "partitions": 1},
    "lastCompactionState": None,
    "binaryVersion": 9,
    "size": 700,
    "identifier": "wikipedia_2026-11-22T00:00:00.000Z_2026-11-23T00:00:00.000Z_2026-11-23T01:00:00.000Z",
}
UNUSED_ID = "wikipedia_2026-11-01T00:00:00.000Z_2026-11-02T00:00:00.000Z_2026-11-02T01:00:00.000Z"
REALTIME_ID = "wikipedia_2026-11-23T00:00:00.000Z_2026-11-24T00:00:00.000Z_2026-11-23T00:00:05.000Z"

# (DataSegment, overshadowed, replicationFactor, numRows): the used segments, as the Coordinator lists them
SEGMENTS = [
    (WIKI_A, False, 2, 100),
    (WIKI_B, False, 2, 90),
    (WIKI_OLD, True, 0, 80),
    (LOOKUPS_ALL, False, 4, 10),
    (WIKI_NEW, False, 2, 70),
]

SERVER_SEGMENTS = [
    {"server": "hist-1:8083", "segment_id": WIKI_A["identifier"]},
    {"server": "hist-1:8083", "segment_id": WIKI_B["identifier"]},
    {"server": "hist-1:8083", "segment_id": LOOKUPS_ALL["identifier"]},
    {"server": "hist-1:8083", "segment_id": UNUSED_ID},  # unused: not in the segment list
    {"server": "hist-2:8083", "segment_id": WIKI_A["identifier"]},
    {"server": "hist-2:8083", "segment_id": WIKI_OLD["identifier"]},
    {"server": "hist-2:8083", "segment_id": LOOKUPS_ALL["identifier"]},
    {"server": "peon-1:8100", "segment_id": REALTIME_ID},
]

# server -> (segments to load, segments to drop), as DataSegments
LOAD_QUEUES = {
    "hist-1:8083": ([], []),
    "hist-2:8083": ([WIKI_NEW], [WIKI_OLD]),
    "broker-1:8082": ([LOOKUPS_ALL], []),  # a broker loading a broadcast segment
}

RULES = {
    "_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}],
    "wikipedia": [
        {"type": "loadByPeriod", "period": "P90D", "includeFuture": True, "tieredReplicants": {"_default_tier": 2}},
        {"type": "dropForever"},
    ],
    "lookups": [{"type": "broadcastForever"}],
}

CONFIG = {  # what a Druid 28 Coordinator answers
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

MALFORMED = {
    "segments": b'[{"dataSource": "wikipedia", "interval": "2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z",} ]',
    "loadqueue": b'{"hist-1:8083": {"segmentsToLoad": [}',
    "rules": b'{"_default": [{"type": "loadForever"}]',
    "config": b'{"maxSegmentsInNodeLoadingQueue": NaN}',
    "servers": b'[{"server": "hist-1:8083", "host": "hist-1"',
    "server_segments": b'{"server": "hist-1:8083", "segment_id": \n\n',
}

ENDPOINTS = ("segments", "loadqueue", "rules", "config", "servers", "server_segments")


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeDruid:
    """The fake's data and knobs (module docstring); :meth:`start` serves it on 127.0.0.1."""

    def __init__(
        self,
        *,
        release: str = "38.0.0",
        servers=None,
        segments=None,
        server_segments=None,
        load_queues=None,
        rules=None,
        config=None,
        nested_segments: bool = False,
        fail_status: dict[str, int] | None = None,
        malformed: set[str] | frozenset[str] = frozenset(),
        cut_server_segments_after: int | None = None,
        cut_style: str = "close",
        delay_s: dict[str, float] | None = None,
        auth: tuple[str, str] | None = None,
        chunk_size: int = 97,
        redirect_to: str | None = None,
        leader: str | None = None,
    ):
        self.release = release
        self.servers = copy.deepcopy(sys_servers(release) if servers is None else servers)
        self.segments = copy.deepcopy(SEGMENTS if segments is None else segments)
        self.server_segments = copy.deepcopy(SERVER_SEGMENTS if server_segments is None else server_segments)
        self.load_queues = copy.deepcopy(LOAD_QUEUES if load_queues is None else load_queues)
        self.rules = copy.deepcopy(RULES if rules is None else rules)
        self.config = copy.deepcopy(CONFIG if config is None else config)
        self.nested_segments = nested_segments
        self.fail_status = dict(fail_status or {})
        self.malformed = set(malformed)
        self.cut_server_segments_after = cut_server_segments_after
        self.cut_style = cut_style
        self.delay_s = dict(delay_s or {})
        self.auth = auth
        self.chunk_size = chunk_size
        self.redirect_to = redirect_to
        self.leader = leader
        self.authorizations: list[str | None] = []
        self.requests: list[tuple[str, str, Any]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeDruid:
        fake = self

        class Handler(_Handler):
            druid = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ---- bodies in Druid's shapes ----

    def segments_body(self) -> bytes:
        rows = []
        for segment, overshadowed, replication, num_rows in self.segments:
            if self.nested_segments:  # SegmentWithOvershadowedStatus (older releases)
                rows.append({"dataSegment": segment, "overshadowed": overshadowed})
            else:  # SegmentStatusInCluster: DataSegment unwrapped
                rows.append(
                    {
                        **segment,
                        "overshadowed": overshadowed,
                        "replicationFactor": replication,
                        "numRows": num_rows,
                        "realtime": False,
                    }
                )
        return json.dumps(rows, ensure_ascii=False).encode("utf-8")

    def load_queue_body(self, full: bool) -> bytes:
        def shown(segment):
            return segment if full else segment["identifier"]

        return json.dumps(
            {
                server: {"segmentsToLoad": [shown(s) for s in loads], "segmentsToDrop": [shown(s) for s in drops]}
                for server, (loads, drops) in self.load_queues.items()
            },
            ensure_ascii=False,
        ).encode("utf-8")

    @property
    def server_columns(self) -> list[str]:
        """The columns of sys.servers: the release's, or those of the rows given."""
        if not self.servers or not all(isinstance(row, dict) for row in self.servers):
            return list(RELEASE_COLUMNS[self.release])
        return list(dict.fromkeys(c for row in self.servers for c in row))

    def servers_body(self, query: str) -> tuple[int, Any]:
        """``(HTTP status, body)`` of a ``SELECT <columns|*> FROM sys.servers`` query."""
        match = re.fullmatch(r"\s*SELECT\s+(.+?)\s+FROM\s+sys\.servers\s*", query, re.IGNORECASE | re.DOTALL)
        if match is None:
            return 400, {"error": "druidException", "errorCode": "invalidInput", "errorMessage": "cannot plan"}
        if match.group(1).strip() == "*":
            return 200, self.servers
        asked = [c.strip() for c in match.group(1).split(",")]
        for column in asked:
            if column not in self.server_columns:
                message = f"Column '{column}' not found in any table"
                return 400, {"error": "druidException", "errorCode": "invalidInput", "errorMessage": message}
        return 200, [{c: row.get(c) for c in asked} for row in self.servers]

    def object_lines(self) -> list[bytes]:
        return [json.dumps(row, separators=(",", ":")).encode("utf-8") for row in self.server_segments]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small writes on a kept-alive connection: no 40 ms delayed-ACK waits
    druid: FakeDruid

    def log_message(self, *args) -> None:  # quiet
        pass

    # ---- dispatch ----

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        fake = self.druid
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return self._json(400, {"error": "Malformed JSON request"})
        fake.requests.append((method, self.path, body))
        fake.authorizations.append(self.headers.get("Authorization"))
        if fake.auth is not None and self.headers.get("Authorization") != _basic(*fake.auth):
            return self._json(401, {"error": "Unauthorized"}, {"WWW-Authenticate": 'Basic realm="druid"'})
        parts = urlsplit(self.path)
        if parts.path == "/druid/coordinator/v1/leader":
            return self._bytes(200, (fake.leader or fake.url).encode(), "text/plain")
        if fake.redirect_to is not None:
            return self._bytes(307, b"", "text/plain", {"Location": fake.redirect_to + self.path})
        name = self._endpoint(method, parts.path, parts.query, body)
        if name is None:
            return self._json(404, {"error": f"no such path {parts.path}"})
        if name.startswith("bad:"):
            return self._json(400, {"error": "SQL parse failed", "errorMessage": name[4:]})
        if name in fake.delay_s:
            time.sleep(fake.delay_s[name])
        if name in fake.fail_status:
            return self._json(
                fake.fail_status[name], {"error": "Unknown exception", "errorMessage": f"injected failure of {name}"}
            )
        if name in fake.malformed:
            if name == "server_segments":
                return self._chunked(MALFORMED[name], "text/plain")
            return self._bytes(200, MALFORMED[name], "application/json")
        if name == "segments":
            return self._chunked(fake.segments_body(), "application/json")
        if name == "loadqueue":
            return self._bytes(200, fake.load_queue_body(full="full" in parts.query.split("&")), "application/json")
        if name == "rules":
            return self._json(200, fake.rules)
        if name == "config":
            return self._json(200, fake.config)
        if name == "servers":
            return self._json(*fake.servers_body(body["query"]))
        return self._object_lines()

    def _endpoint(self, method: str, path: str, query: str, body: Any) -> str | None:
        if (
            method == "GET"
            and path == "/druid/coordinator/v1/metadata/segments"
            and "includeOvershadowedStatus" in query
        ):
            return "segments"
        if method == "GET" and path in (
            "/druid/coordinator/v1/loadqueue",
            "/druid/coordinator/v1/rules",
            "/druid/coordinator/v1/config",
        ):
            return path.rsplit("/", 1)[1]
        if method == "POST" and path == "/druid/v2/sql":
            query_text = body.get("query", "") if isinstance(body, dict) else ""
            fmt = body.get("resultFormat", "object") if isinstance(body, dict) else None
            if "sys.server_segments" in query_text:
                return "server_segments" if fmt == "objectLines" else f"bad:expected objectLines, got {fmt}"
            if "sys.servers" in query_text:
                return "servers" if fmt == "object" else f"bad:expected object, got {fmt}"
            return f"bad:unknown query {query_text!r}"
        return None

    # ---- responses ----

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._bytes(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"), "application/json", headers)

    def _bytes(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _chunked(self, data: bytes, content_type: str, finish: bool = True) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        step = self.druid.chunk_size
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        if finish:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _object_lines(self) -> None:
        """Druid's ``ObjectLinesWriter``: rows separated by ``\\n``, then ``\\n\\n``; or a cut stream."""
        fake = self.druid
        lines = fake.object_lines()
        if fake.cut_server_segments_after is None:
            return self._chunked(b"\n".join(lines) + b"\n\n", "text/plain")
        partial = b"\n".join(lines[: fake.cut_server_segments_after]) + b"\n"
        self.close_connection = True
        if fake.cut_style == "chunked":
            self._chunked(partial, "text/plain", finish=False)
        else:  # no length, no chunks: the body ends where the connection does
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(partial)
            self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)


def _basic(login: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode("ascii")


@contextmanager
def fake_druid(**knobs) -> Iterator[FakeDruid]:
    """A started :class:`FakeDruid` with ``knobs``, stopped on exit."""
    fake = FakeDruid(**knobs).start()
    try:
        yield fake
    finally:
        fake.stop()
