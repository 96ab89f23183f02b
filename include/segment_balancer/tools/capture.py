"""Capture a snapshot directory from a live Druid cluster (docs/LIVE_CLUSTER.md, "Exporting a
snapshot by hand", done by Python instead of curl and jq), whole or not at all.

Files written, from a Coordinator and a Broker (or a Router in front of both):

- ``segments.jsonl.gz``: ``GET /druid/coordinator/v1/metadata/segments?includeOvershadowedStatus``,
  streamed through an incremental JSON array parser. Druid answers ``SegmentStatusInCluster``
  (``processing/.../timeline/SegmentStatusInCluster.java``): the ``DataSegment`` fields
  ``@JsonUnwrapped`` beside ``overshadowed``, ``replicationFactor``, ``numRows``, ``realtime``; older
  releases answer ``SegmentWithOvershadowedStatus`` ``{"dataSegment": {...}, "overshadowed": b}``.
  One line per segment, as the jq of docs/LIVE_CLUSTER.md: the nested form becomes ``dataSegment + {overshadowed}``,
  the flat form loses ``replicationFactor``, ``numRows`` and ``realtime``; every other field is kept.
- ``servers.json``: Broker SQL ``SELECT * FROM sys.servers`` (``resultFormat: object``), each row with
  the columns of :data:`~segment_balancer.druid.snapshot.models.SYS_SERVERS_COLUMNS` it has (a
  column a later release adds is left out, with a log line). ``*`` because the columns depend on the
  release: ``version`` from Druid 35.0.0, ``labels``, ``available_processors``, ``total_memory`` from
  36.0.0, ``storage_size`` and ``build_revision`` from 37.0.0; a query naming a column the cluster
  lacks fails. No release has a ``priority`` column (``druid.server.priority`` is not in
  ``sys.servers``): a captured historical has priority 0.
- ``server_segments.jsonl.gz``: Broker SQL ``SELECT server, segment_id FROM sys.server_segments``
  (``resultFormat: objectLines``), streamed line by line. Druid ends the lines formats with one blank
  line "so users can tell the response was not cut off" (``sql/.../http/ObjectLinesWriter.java``
  ``writeResponseEnd``; docs/api-reference/sql-api.md); a response without it is refused. The blank
  line is not written. Rows of servers that ``servers.json`` does not list (a server that joined or
  left between the two queries) are left out with a warning: the snapshot reader refuses them.
- ``load_queues.json``: ``GET /druid/coordinator/v1/loadqueue`` (ids), converted to
  ``{server: {"segmentsToLoad": [id, ...], "segmentsToDrop": [id, ...]}}`` for the historicals of
  ``servers.json``; queues of other servers (brokers and indexers loading broadcast segments) are left
  out with a log line. ``?full`` is not asked: it serializes the ``LoadQueuePeon`` objects themselves,
  which only ``CuratorLoadQueuePeon`` annotates (``@JsonProperty`` segmentsToLoad, segmentsToDrop,
  segmentsMarkedToDrop, as full ``DataSegment`` objects); ``HttpLoadQueuePeon``, the default peon of
  current releases, has no JSON properties (apache/druid#16691: "the full mode is currently broken").
  The conversion accepts both shapes anyway: an entry is an id string or a ``DataSegment`` object (its
  ``identifier``/``id``, else the id computed as Druid's ``SegmentId``).
- ``rules.json`` (``GET /druid/coordinator/v1/rules``) and ``coordinator_config.json``
  (``GET /druid/coordinator/v1/config``): the response bodies as they are.
- ``snapshot.json``: ``{"snapshot_time": now as yyyy-MM-ddTHH:mm:ss.SSSZ, "cluster": name,
  "druid_version": version}``, the version the cluster runs as ``servers.json`` gives it
  (``loader.load_cluster_version``: the leading Coordinator's), left out when no row has one (Druid
  before 35.0.0). The endpoints are logged, not written: ``load_snapshot_meta`` refuses unknown keys.

Everything is written into a hidden sibling ``.<name>.tmp-<hex>`` (files fsynced), checked with the
snapshot's own loaders (servers, load queues, rules, config, meta), then renamed to its name in one
step that refuses a name already taken (``common.files.rename_new``). Any failure removes the
temporary directory (and any parent directory the capture created) and raises :class:`CaptureError`.
No Spark, no Airflow.
"""

from __future__ import annotations

import codecs
import gzip
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import fsync_dir, remove_dir, rename_new, sibling_tmp
from segment_balancer.druid.importer import segment_id
from segment_balancer.druid.instants import format_instant_ms
from segment_balancer.druid.snapshot import loader
from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.druid.snapshot.models import SYS_SERVERS_COLUMNS, is_historical
from segment_balancer.planner.config import load_config

__all__ = [
    "DruidEndpoint",
    "CaptureError",
    "capture",
    "capture_to",
    "prune",
    "snapshot_dir_name",
    "SEGMENTS_PATH",
    "LOAD_QUEUE_PATH",
    "RULES_PATH",
    "CONFIG_PATH",
    "SQL_PATH",
    "SERVERS_SQL",
    "SERVER_SEGMENTS_SQL",
    "druid_segment_id",
]

log = logging.getLogger(__name__)

SEGMENTS_PATH = "/druid/coordinator/v1/metadata/segments?includeOvershadowedStatus"
LOAD_QUEUE_PATH = "/druid/coordinator/v1/loadqueue"
RULES_PATH = "/druid/coordinator/v1/rules"
CONFIG_PATH = "/druid/coordinator/v1/config"
LEADER_PATH = "/druid/coordinator/v1/leader"
MAX_REDIRECTS = 5
SQL_PATH = "/druid/v2/sql"
SERVERS_SQL = "SELECT * FROM sys.servers"
SERVER_SEGMENTS_SQL = "SELECT server, segment_id FROM sys.server_segments"

SEGMENTS_FILE = "segments.jsonl.gz"
SERVER_SEGMENTS_FILE = "server_segments.jsonl.gz"
SERVERS_FILE = loader.SERVERS_FILE
QUEUES_FILE = loader.QUEUES_FILE
RULES_FILE = loader.RULES_FILE
CONFIG_FILE = "coordinator_config.json"
META_FILE = loader.META_FILE

STATUS_FIELDS = ("replicationFactor", "numRows", "realtime")
"""Fields of ``SegmentStatusInCluster`` beside the ``DataSegment`` that are dropped (the jq of docs/LIVE_CLUSTER.md)."""

CHUNK_BYTES = 1 << 20
MAX_ELEMENT_CHARS = 64 << 20
"""A JSON array element still unparsed after this many characters is malformed, not cut by a chunk."""
PROGRESS_EVERY_S = 10.0
ERROR_BODY_CHARS = 300

_WS = re.compile(r"[ \t\n\r]*")
_BAD_NAME = re.compile(r'[\x00-\x1f<>:"/\\|?*]')


@dataclass(frozen=True)
class DruidEndpoint:
    """A Druid service to ask: ``url`` = ``scheme://host:port[/prefix]`` (a trailing ``/`` is ignored),
    ``auth`` = HTTP basic (login, password) or None, ``verify`` = TLS verification as ``requests``
    takes it (True, False, or a CA bundle path)."""

    url: str
    auth: tuple[str, str] | None = None
    verify: bool | str = True


class CaptureError(RuntimeError):
    """A capture failed; nothing was written. The message names the file being captured, the service
    and URL asked (credentials removed), and the HTTP status or the problem."""


# ---- public API -------------------------------------------------------------------------------------


def snapshot_dir_name(now: datetime) -> str:
    """The directory name of a capture taken at ``now`` (naive = UTC): ``yyyy-MM-ddTHH-mm-ssZ`` in UTC
    (no ``:``, so valid on every filesystem; sorts by time)."""
    return _utc(now).strftime("%Y-%m-%dT%H-%M-%SZ")


def capture(
    coordinator: DruidEndpoint,
    broker: DruidEndpoint,
    snapshots_root: Path,
    cluster: str,
    *,
    now: datetime | None = None,
    timeout_s: float = 300.0,
    session: requests.Session | None = None,
) -> Path:
    """Capture a snapshot into ``snapshots_root/<cluster>/<snapshot_dir_name(now)>/``, whole or not at all.

    Args:
        coordinator, broker: the services to ask (a Router URL serves for both).
        snapshots_root: created if missing (and removed again if the capture fails).
        cluster: the cluster's name, written to ``snapshot.json``; a valid directory name.
        now: the snapshot time (default: the current time; naive = UTC), millisecond precision.
        timeout_s: seconds to wait to connect, and between two reads of a response (not the total
            time of a response: the segment list may take minutes to stream).
        session: the ``requests`` session to use (default: a new one, closed at the end).

    Returns:
        The snapshot directory.

    Raises:
        CaptureError: the directory already exists (two captures in one second), an HTTP status >= 400
            (with the first 300 characters of the body), a connection error or timeout, a stream cut
            off, malformed JSON, an empty servers list, a capture the snapshot loaders refuse, or a
            filesystem error. snapshots_root is left as it was.
    """
    when = datetime.now(UTC) if now is None else now
    _check_cluster(cluster)
    return _capture_into(
        coordinator, broker, Path(snapshots_root) / cluster / snapshot_dir_name(when), cluster, when, timeout_s, session
    )


def capture_to(
    coordinator: DruidEndpoint,
    broker: DruidEndpoint,
    out: Path,
    cluster: str,
    *,
    now: datetime | None = None,
    timeout_s: float = 300.0,
    session: requests.Session | None = None,
) -> Path:
    """As :func:`capture`, into exactly ``out``, which must not exist yet (its parents are created,
    and removed again on failure). Returns ``out``. Raises CaptureError as :func:`capture` does."""
    when = datetime.now(UTC) if now is None else now
    _check_cluster(cluster)
    return _capture_into(coordinator, broker, Path(out), cluster, when, timeout_s, session)


def prune(snapshots_root: Path, cluster: str, keep: int) -> list[Path]:
    """Remove all but the ``keep`` newest snapshots of ``snapshots_root/<cluster>/``.

    Newest = latest ``snapshot_time`` of ``snapshot.json`` (ties: the directory name sorting last).
    Hidden entries (a capture in progress), files, and directories without a readable
    ``snapshot.json`` of ``cluster`` are left alone. Each doomed directory is first renamed to a hidden
    name, then deleted, so no half-deleted snapshot is ever visible.

    Returns:
        The removed directories, oldest first ([] when there is no such cluster directory).

    Raises:
        InputError: ``keep`` < 1 (or not an int), or an invalid cluster name.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise InputError(f"keep must be an integer >= 1, got {keep!r}")
    try:
        _check_cluster(cluster)
    except CaptureError as exc:
        raise InputError(str(exc)) from None
    base = Path(snapshots_root) / cluster
    if not base.is_dir():
        return []
    found: list[tuple[int, str, Path]] = []
    for entry in base.iterdir():
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        if not (entry / META_FILE).is_file():
            continue
        try:
            meta = loader.load_snapshot_meta(entry)
        except SnapshotError as exc:
            log.warning("prune: %s left alone: %s", entry, exc)
            continue
        if meta.cluster != cluster:
            log.warning(
                "prune: %s left alone: its snapshot.json names cluster %r, not %r", entry, meta.cluster, cluster
            )
            continue
        found.append((meta.snapshot_time_ms, entry.name, entry))
    found.sort()
    removed = []
    for _, _, path in found[:-keep]:
        remove_dir(path)
        removed.append(path)
        log.info("prune: removed snapshot %s", path)
    return removed


# ---- the capture --------------------------------------------------------------------------------------


def _capture_into(
    coordinator: DruidEndpoint,
    broker: DruidEndpoint,
    final: Path,
    cluster: str,
    now: datetime,
    timeout_s: float,
    session: requests.Session | None,
) -> Path:
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not timeout_s > 0:
        raise CaptureError(f"timeout_s must be a number > 0, got {timeout_s!r}")
    for role, endpoint in (("coordinator", coordinator), ("broker", broker)):
        if (
            not isinstance(endpoint, DruidEndpoint)
            or urlsplit(endpoint.url).scheme not in ("http", "https")
            or not urlsplit(endpoint.url).netloc
        ):
            raise CaptureError(
                f"{role} endpoint must be a DruidEndpoint with an http(s)://host:port url, got {endpoint!r}"
            )
    snapshot_time = format_instant_ms(_epoch_ms(now))
    if final.exists() or final.is_symlink():
        raise CaptureError(f"capture target {final} already exists; nothing was written")
    if not final.name or final.name.startswith("."):
        raise CaptureError(f"capture target {final} must have a name that does not start with '.'")

    created = _make_parents(final.parent)
    tmp = sibling_tmp(final)
    own_session = session is None
    http = _Http(session or requests.Session(), timeout_s, (coordinator, broker))
    started = time.monotonic()
    try:
        tmp.mkdir()
        log.info(
            "capturing cluster %r from coordinator %s and broker %s into %s",
            cluster,
            _redact(coordinator.url),
            _redact(broker.url),
            final,
        )
        servers = _capture_servers(http, broker, tmp)
        historicals = {row["server"] for row in servers if is_historical(row.get("server_type"))}
        if not historicals:
            log.warning("%s lists no historical server", SERVERS_FILE)
        version = _cluster_version(tmp, final)
        _capture_server_segments(http, broker, tmp, {row["server"] for row in servers})
        _capture_segments(http, coordinator, tmp)
        _capture_load_queues(http, coordinator, tmp, historicals)
        _capture_as_is(http, coordinator, RULES_PATH, tmp, RULES_FILE, dict)
        _capture_as_is(http, coordinator, CONFIG_PATH, tmp, CONFIG_FILE, dict)
        meta = {"snapshot_time": snapshot_time, "cluster": cluster}
        _write_file(tmp / META_FILE, _json_bytes(meta if version is None else {**meta, "druid_version": version}))
        _check_loads(tmp, final)
        fsync_dir(tmp)
        rename_new(tmp, final)
        fsync_dir(final.parent)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_created(created)
        if isinstance(exc, OSError):
            raise CaptureError(f"capture into {final} failed: {exc}; nothing was written") from exc
        raise
    finally:
        if own_session:
            http.session.close()
    log.info(
        "captured snapshot %s of cluster %r at %s in %.1f s", final, cluster, snapshot_time, time.monotonic() - started
    )
    return final


def _capture_servers(http: _Http, broker: DruidEndpoint, tmp: Path) -> list[dict[str, Any]]:
    call = _Call("broker", broker, "POST", SQL_PATH, SERVERS_FILE, note=SERVERS_SQL)
    body = http.read_all(call, json={"query": SERVERS_SQL, "resultFormat": "object", "header": False})
    rows = call.parse_json(body)
    if not isinstance(rows, list):
        raise call.error(f"expected a JSON array of sys.servers rows, got {type(rows).__name__}")
    if not rows:
        raise call.error("the broker lists no servers (empty sys.servers)")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("server"), str):
            raise call.error(f"row {i} is not an object with a string server: {_short(row)}")
    unknown = sorted({column for row in rows for column in row} - set(SYS_SERVERS_COLUMNS))
    if unknown:
        log.info("%s: left out the sys.servers column(s) %s, which this capture does not know", SERVERS_FILE, unknown)
    kept = [{k: v for k, v in row.items() if k in SYS_SERVERS_COLUMNS} for row in rows]
    _write_file(tmp / SERVERS_FILE, _json_bytes(kept))
    log.info("%s: %d servers", SERVERS_FILE, len(kept))
    return kept


def _cluster_version(tmp: Path, final: Path) -> str | None:
    """The Druid version of the cluster of the captured ``servers.json`` (``loader.load_cluster_version``)."""
    try:
        version = loader.load_cluster_version(tmp)
    except SnapshotError as exc:
        raise _refused(final, exc) from None
    if version is None:
        log.info("%s: no server reports its Druid version (Druid before 35.0.0)", SERVERS_FILE)
    else:
        log.info("%s: the cluster runs Druid %s", SERVERS_FILE, version)
    return version


def _capture_server_segments(http: _Http, broker: DruidEndpoint, tmp: Path, known: set[str]) -> None:
    call = _Call("broker", broker, "POST", SQL_PATH, SERVER_SEGMENTS_FILE, note=SERVER_SEGMENTS_SQL)
    progress = _Progress(SERVER_SEGMENTS_FILE, "rows")
    unknown: dict[str, int] = {}
    with (
        http.stream(
            call, json={"query": SERVER_SEGMENTS_SQL, "resultFormat": "objectLines", "header": False}
        ) as chunks,
        _GzipLines(tmp / SERVER_SEGMENTS_FILE) as out,
    ):
        counted = _Counted(chunks)
        for line_no, line in _object_lines(call, counted):
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise call.error(f"line {line_no} is not valid JSON ({exc}): {_short(line)}") from None
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("server"), str)
                or not isinstance(row.get("segment_id"), str)
            ):
                raise call.error(f"line {line_no} is not an object with string server and segment_id: {_short(line)}")
            if row["server"] not in known:
                unknown[row["server"]] = unknown.get(row["server"], 0) + 1
                continue
            out.write_line(line)
            progress.tick(counted.bytes)
    for server, n in sorted(unknown.items()):
        log.warning(
            "%s: left out %d rows of server %r, which %s does not list (it joined or left meanwhile)",
            SERVER_SEGMENTS_FILE,
            n,
            server,
            SERVERS_FILE,
        )
    progress.done(counted.bytes)


def _capture_segments(http: _Http, coordinator: DruidEndpoint, tmp: Path) -> None:
    call = _Call("coordinator", coordinator, "GET", SEGMENTS_PATH, SEGMENTS_FILE)
    progress = _Progress(SEGMENTS_FILE, "segments")
    with http.stream(call) as chunks, _GzipLines(tmp / SEGMENTS_FILE) as out:
        counted = _Counted(chunks)
        for index, element in _json_array(call, counted):
            segment = _data_segment(call, index, element)
            out.write_line(json.dumps(segment, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
            progress.tick(counted.bytes)
    progress.done(counted.bytes)


def _data_segment(call: _Call, index: int, element: Any) -> dict[str, Any]:
    """One line of segments.jsonl from one element of the Coordinator's answer (module docstring)."""
    if not isinstance(element, dict):
        raise call.error(f"element {index} (0-based) is not a JSON object: {_short(element)}")
    if "dataSegment" in element:
        inner = element["dataSegment"]
        if not isinstance(inner, dict):
            raise call.error(f"element {index} (0-based): dataSegment is not an object: {_short(inner)}")
        segment = dict(inner)
        segment["overshadowed"] = element.get("overshadowed")
    else:
        segment = {k: v for k, v in element.items() if k not in STATUS_FIELDS}
    for key in ("dataSource", "interval", "version"):
        if not isinstance(segment.get(key), str):
            raise call.error(f"element {index} (0-based) has no string {key}: {_short(element)}")
    if segment.get("overshadowed") not in (True, False, None):
        raise call.error(
            f"element {index} (0-based): overshadowed must be true or false, got {_short(segment['overshadowed'])}"
        )
    return segment


def _capture_load_queues(http: _Http, coordinator: DruidEndpoint, tmp: Path, historicals: set[str]) -> None:
    call = _Call("coordinator", coordinator, "GET", LOAD_QUEUE_PATH, QUEUES_FILE)
    data = call.parse_json(http.read_all(call))
    if not isinstance(data, dict):
        raise call.error(f"expected a JSON object {{server: queues}}, got {type(data).__name__}")
    out: dict[str, dict[str, list[str]]] = {}
    for server, queues in data.items():
        if not isinstance(queues, dict) or not all(
            isinstance(queues.get(k), list) for k in ("segmentsToLoad", "segmentsToDrop")
        ):
            raise call.error(
                f"server {server!r}: expected lists segmentsToLoad and segmentsToDrop, got {_short(queues)}"
            )
        if server not in historicals:
            log.info(
                "%s: left out the queue of %r (%d loads, %d drops): not a historical of %s",
                QUEUES_FILE,
                server,
                len(queues["segmentsToLoad"]),
                len(queues["segmentsToDrop"]),
                SERVERS_FILE,
            )
            continue
        out[server] = {
            key: [_queued_id(call, server, key, j, entry) for j, entry in enumerate(queues[key])]
            for key in ("segmentsToLoad", "segmentsToDrop")
        }
    _write_file(tmp / QUEUES_FILE, _json_bytes(out))
    log.info(
        "%s: %d historical queues, %d loads, %d drops",
        QUEUES_FILE,
        len(out),
        sum(len(q["segmentsToLoad"]) for q in out.values()),
        sum(len(q["segmentsToDrop"]) for q in out.values()),
    )


def _queued_id(call: _Call, server: str, key: str, j: int, entry: Any) -> str:
    """The segment id of one queue entry: an id string (``loadqueue``) or a DataSegment (``?full``)."""
    where = f"server {server!r} {key}[{j}]"
    if isinstance(entry, str) and entry:
        return entry
    if isinstance(entry, dict):
        for name in ("identifier", "id"):
            if isinstance(entry.get(name), str) and entry[name]:
                return entry[name]
        try:
            return druid_segment_id(entry)
        except ValueError as exc:
            raise call.error(f"{where}: {exc}") from None
    raise call.error(f"{where}: expected a segment id or a DataSegment object, got {_short(entry)}")


def druid_segment_id(segment: dict[str, Any]) -> str:
    """Druid's ``SegmentId`` string of a DataSegment JSON object (``importer.segment_id``:
    ``dataSource_start_end_version[_partitionNum]``), after checking the fields it is made of.
    Raises ValueError naming a missing or malformed field."""
    for key in ("dataSource", "interval", "version"):
        if not isinstance(segment.get(key), str) or not segment[key]:
            raise ValueError(f"a DataSegment needs a string {key}, got {_short(segment.get(key))}")
    if len(segment["interval"].split("/")) != 2:
        raise ValueError(f"interval is not start/end: {segment['interval']!r}")
    shard = segment.get("shardSpec") or {}
    partition = shard.get("partitionNum", shard.get("partitionId", 0)) if isinstance(shard, dict) else 0
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ValueError(f"shardSpec partition number must be an integer >= 0, got {_short(partition)}")
    return segment_id(segment if isinstance(shard, dict) else {**segment, "shardSpec": {}})


def _capture_as_is(http: _Http, endpoint: DruidEndpoint, path: str, tmp: Path, file: str, kind: type) -> None:
    call = _Call("coordinator", endpoint, "GET", path, file)
    body = http.read_all(call)
    data = call.parse_json(body)
    if not isinstance(data, kind):
        raise call.error(f"expected a JSON {'object' if kind is dict else 'array'}, got {type(data).__name__}")
    _write_file(tmp / file, body)


def _check_loads(tmp: Path, final: Path) -> None:
    """Refuse a capture the snapshot's own (non-Spark) loaders refuse."""
    try:
        historicals, _ = loader.load_all_servers(tmp)
        loader.load_load_queues(tmp, {s.server for s in historicals})
        loader.load_rules(tmp)
        load_config(tmp)
        loader.load_snapshot_meta(tmp)
    except SnapshotError as exc:
        raise _refused(final, exc) from None


def _refused(final: Path, exc: SnapshotError) -> CaptureError:
    return CaptureError(f"the capture for {final} does not load as a snapshot: {exc}; nothing was written")


# ---- HTTP ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """One request of the capture, and the errors that name it."""

    role: str
    endpoint: DruidEndpoint
    method: str
    path: str
    file: str
    note: str = ""

    @property
    def url(self) -> str:
        return self.endpoint.url.rstrip("/") + self.path

    def error(self, problem: str) -> CaptureError:
        note = f" ({self.note})" if self.note else ""
        return CaptureError(
            f"capture of {self.file} failed: {self.role} {self.method} {_redact(self.url)}{note}: {problem}"
        )

    def parse_json(self, body: bytes) -> Any:
        try:
            return json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
        except UnicodeDecodeError as exc:
            raise self.error(f"the response is not UTF-8 text: {exc}") from None
        except json.JSONDecodeError as exc:
            raise self.error(
                f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; the body begins {_short(body)}"
            ) from None
        except _Malformed as exc:
            raise self.error(str(exc)) from None


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port made explicit: what a redirect is judged by."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


class _Http:
    """The capture's HTTP client. Redirects are followed here, not by ``requests``: a Coordinator
    that is not the leader answers every call with ``307 Temporary Redirect`` to the leader (Druid's
    ``RedirectFilter``), and the leader needs the same credentials, which ``requests`` would drop
    on the change of host. They are sent on only to the configured services' origins
    (:attr:`origins`) and to the leader the configured Coordinator names
    (``GET /druid/coordinator/v1/leader``); a redirect elsewhere stops the capture with the
    credentials unsent."""

    def __init__(self, session: requests.Session, timeout_s: float, endpoints: Iterable[DruidEndpoint] = ()):
        self.session = session
        self.timeout = (timeout_s, timeout_s)
        self.endpoints = list(endpoints)
        self.origins = {_origin(e.url) for e in self.endpoints}
        self._leaders: dict[str, tuple | None] = {}

    def _leader(self, endpoint: DruidEndpoint) -> tuple | None:
        """The origin of the leader Coordinator, as the Coordinator of ``endpoint`` names it (its
        ``/druid/coordinator/v1/leader`` answers on every Coordinator, the leader or not); None
        when it does not say."""
        if endpoint.url not in self._leaders:
            try:
                response = self.session.get(
                    endpoint.url.rstrip("/") + LEADER_PATH,
                    auth=endpoint.auth,
                    verify=endpoint.verify,
                    timeout=self.timeout,
                    allow_redirects=False,
                )
                text = response.text.strip() if response.status_code == 200 else ""
            except requests.RequestException:
                text = ""
            self._leaders[endpoint.url] = _origin(text) if text.startswith(("http://", "https://")) else None
        return self._leaders[endpoint.url]

    def _send(self, call: _Call, stream: bool, json_body: Any) -> requests.Response:
        url, method = call.url, call.method
        for _ in range(MAX_REDIRECTS + 1):
            try:
                response = self.session.request(
                    method,
                    url,
                    json=json_body,
                    auth=call.endpoint.auth,
                    verify=call.endpoint.verify,
                    timeout=self.timeout,
                    stream=stream,
                    headers={"Accept": "application/json, text/plain"},
                    allow_redirects=False,
                )
            except requests.Timeout as exc:
                raise call.error(f"timed out ({exc})") from None
            except requests.RequestException as exc:
                raise call.error(f"{type(exc).__name__}: {exc}") from None
            if response.status_code not in (301, 302, 303, 307, 308) or "Location" not in response.headers:
                break
            target = urljoin(url, response.headers["Location"])
            response.close()
            origin = _origin(target)
            if call.endpoint.auth is not None and origin not in self.origins and origin != self._leader(call.endpoint):
                raise call.error(
                    f"redirected to {_redact(target)}, which is neither a configured service nor the "
                    "leader the Coordinator names; the credentials are not sent there"
                )
            log.info(
                "%s %s: redirected to %s (HTTP %d)", call.role, _redact(url), _redact(target), response.status_code
            )
            url = target
            if response.status_code == 303:
                method, json_body = "GET", None
        else:
            raise call.error(f"more than {MAX_REDIRECTS} redirects")
        if response.status_code >= 400:
            try:
                head = next(response.iter_content(4 * ERROR_BODY_CHARS), b"") if stream else response.content
            except requests.RequestException:
                head = b""
            finally:
                response.close()
            text = head.decode("utf-8", errors="replace")[:ERROR_BODY_CHARS]
            raise call.error(f"HTTP {response.status_code} {response.reason}: {text}")
        return response

    def read_all(self, call: _Call, json: Any = None) -> bytes:
        """The whole body of a small response."""
        return self._send(call, False, json).content

    def stream(self, call: _Call, json: Any = None) -> _Stream:
        """A context manager over the body's byte chunks, for a large response."""
        return _Stream(call, self._send(call, True, json))


class _Stream:
    def __init__(self, call: _Call, response: requests.Response):
        self.call, self.response = call, response

    def __enter__(self) -> Iterator[bytes]:
        return self._chunks()

    def _chunks(self) -> Iterator[bytes]:
        try:
            yield from self.response.iter_content(CHUNK_BYTES)
        except requests.RequestException as exc:
            raise self.call.error(f"the response broke off: {type(exc).__name__}: {exc}") from None

    def __exit__(self, *exc_info) -> None:
        self.response.close()


class _Counted:
    """Byte chunks, counting the bytes read (for progress logs)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks, self.bytes = chunks, 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.bytes += len(chunk)
            yield chunk


class _Progress:
    def __init__(self, file: str, unit: str):
        self.file, self.unit, self.n = file, unit, 0
        self.started = self.last = time.monotonic()

    def tick(self, received: int) -> None:
        self.n += 1
        if self.n % 4096 == 0 and time.monotonic() - self.last >= PROGRESS_EVERY_S:
            self.last = time.monotonic()
            log.info("%s: %d %s so far, %.1f MB received", self.file, self.n, self.unit, received / 1e6)

    def done(self, received: int) -> None:
        log.info(
            "%s: %d %s, %.1f MB received in %.1f s",
            self.file,
            self.n,
            self.unit,
            received / 1e6,
            time.monotonic() - self.started,
        )


# ---- stream parsers ------------------------------------------------------------------------------------------


class _Malformed(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _Malformed(f"{name} is not valid JSON")


def _object_lines(call: _Call, chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(1-based line, line) of each row of a Druid ``objectLines`` body, which must end with Druid's
    trailing blank line: rows ``\\n``-separated, then ``\\n\\n`` (just ``\\n\\n`` with no row)."""
    pending = b""
    line_no = 0
    ended = False
    rows = 0
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            line_no += 1
            if not line.strip():
                ended = True
            elif ended:
                raise call.error(f"line {line_no} follows the trailing blank line: {_short(line)}")
            else:
                rows += 1
                yield line_no, line
    if pending.strip() or not ended:
        raise call.error(
            f"the response ended without Druid's trailing blank line after {rows} rows: "
            "it was cut off (connection closed mid-stream?)"
        )


def _json_array(call: _Call, chunks: Iterable[bytes]) -> Iterator[tuple[int, Any]]:
    """(0-based index, value) of each element of the one JSON array in the byte chunks, parsed
    incrementally (``json.JSONDecoder.raw_decode`` on a rolling buffer; memory: one chunk plus one
    element). Raises CaptureError on malformed JSON, NaN/Infinity, data after the array, a cut body."""
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    utf8 = codecs.getincrementaldecoder("utf-8")()
    source = iter(chunks)
    buf, pos, eof = "", 0, False

    def more() -> bool:
        nonlocal buf, pos, eof
        while not eof:
            chunk = next(source, None)
            try:
                text = utf8.decode(b"", final=True) if chunk is None else utf8.decode(chunk)
            except UnicodeDecodeError as exc:
                raise call.error(f"the response is not UTF-8 text: {exc}") from None
            eof = chunk is None
            if text:
                buf = buf[pos:] + text
                pos = 0
                return True
        return False

    def skip_ws() -> bool:
        nonlocal pos
        while True:
            pos = _WS.match(buf, pos).end()
            if pos < len(buf):
                return True
            if not more():
                return False

    def cut(n: int) -> CaptureError:
        return call.error(f"the response ended inside the JSON array after {n} elements: it was cut off")

    if not skip_ws():
        raise call.error("the response is empty, expected a JSON array")
    if buf[pos] != "[":
        raise call.error(f"expected a JSON array, the body begins {_short(buf[pos : pos + 80])}")
    pos += 1
    if not skip_ws():
        raise cut(0)
    index = 0
    if buf[pos] == "]":
        pos += 1
    else:
        while True:
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    break
                except _Malformed as exc:
                    raise call.error(f"element {index} (0-based): {exc}") from None
                except json.JSONDecodeError as exc:
                    # an element cut by the chunk boundary parses once more text is in; at the end of
                    # the body, or past MAX_ELEMENT_CHARS, it is malformed (or the body was cut off)
                    if len(buf) - pos > MAX_ELEMENT_CHARS or not more():
                        raise call.error(
                            f"malformed or cut-off JSON in element {index} (0-based): {exc.msg} "
                            f"(column {exc.pos - pos + 1} of the element): "
                            f"{_short(buf[pos : pos + 120])}"
                        ) from None
            yield index, value
            index += 1
            pos = end
            if not skip_ws():
                raise cut(index)
            sep = buf[pos]
            pos += 1
            if sep == "]":
                break
            if sep != ",":
                raise call.error(
                    f"malformed JSON after element {index - 1} (0-based): expected ',' or ']', got {sep!r}"
                )
            if not skip_ws():
                raise cut(index)
    if skip_ws():
        raise call.error(f"data after the JSON array: {_short(buf[pos : pos + 80])}")


# ---- files ------------------------------------------------------------------------------------------------


class _GzipLines:
    """A gzip file written line by line, fsynced on a clean close (deterministic: no mtime, no name)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> _GzipLines:
        self.raw = open(self.path, "xb")
        self.gz = gzip.GzipFile(filename="", mode="wb", fileobj=self.raw, compresslevel=6, mtime=0)
        return self

    def write_line(self, line: bytes) -> None:
        self.gz.write(line)
        self.gz.write(b"\n")

    def __exit__(self, exc_type, *_) -> None:
        try:
            self.gz.close()
            if exc_type is None:
                self.raw.flush()
                os.fsync(self.raw.fileno())
        finally:
            self.raw.close()


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; return the ones created, deepest first."""
    missing = []
    probe = directory
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CaptureError(f"cannot create the directory {directory}: {exc}") from None
    return missing


def _remove_created(created: list[Path]) -> None:
    for path in created:
        try:
            path.rmdir()
        except OSError:
            return


# ---- small helpers -----------------------------------------------------------------------------------------


def _check_cluster(cluster: str) -> None:
    if (
        not isinstance(cluster, str)
        or not cluster.strip()
        or cluster in (".", "..")
        or cluster.startswith(".")
        or _BAD_NAME.search(cluster)
    ):
        raise CaptureError(
            f"cluster must be a non-empty directory name without '.' first or any of "
            f'<>:"/\\|?* and control characters, got {cluster!r}'
        )


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _epoch_ms(when: datetime) -> int:
    return (_utc(when) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def _redact(url: str) -> str:
    """``url`` without a ``user:password@`` part."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _short(value: Any, limit: int = 120) -> str:
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
