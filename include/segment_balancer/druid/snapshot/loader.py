"""Readers of the small snapshot files (docs/ARCHITECTURE.md "Input snapshot directory").

Every function validates fully and raises ``SnapshotError(file, row, problem)`` on the first problem,
so a bad snapshot is refused before any stage runs. JSON must be standard (no NaN/Infinity) and
objects must not repeat a key. ``segments.jsonl`` and ``server_segments.json`` are read with Spark
elsewhere (``snapshot/segments.py``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from segment_balancer.druid.releases import VERSION_FORMAT, cluster_version, parse_version
from segment_balancer.druid.rules import DEFAULT_RULES_KEY, RULE_KINDS, Rule, format_instant_ms, parse_instant_ms
from segment_balancer.druid.snapshot.errors import (
    SnapshotError,
    describe_validation_error,
    json_error,
    json_kind,
    short_value,
)
from segment_balancer.druid.snapshot.models import (
    HISTORICAL,
    QueueEntry,
    QueueItem,
    RuleSpec,
    Server,
    ServerRow,
    SnapshotMeta,
)

__all__ = [
    "load_servers",
    "load_all_servers",
    "load_cluster_version",
    "load_load_queues",
    "load_rules",
    "load_snapshot_meta",
    "read_json",
]

SERVERS_FILE = "servers.json"
QUEUES_FILE = "load_queues.json"
RULES_FILE = "rules.json"
META_FILE = "snapshot.json"
META_KEYS = ("snapshot_time", "cluster", "druid_version")
"""The keys of ``snapshot.json``; ``druid_version`` is optional."""


class _DuplicateKey(ValueError):
    pass


class _NotJson(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(
                f"duplicate key {key!r} in a JSON object (values {short_value(out[key])} and "
                f"{short_value(value)}); expected each key once"
            )
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _NotJson(name)


# A JSON string, or one of the constants Python's parser accepts and JSON does not.
_STRING_OR_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(NaN|-?Infinity)')


def _constant_line(text: str) -> int | None:
    """The 1-based line of the first NaN/Infinity outside a string of ``text``."""
    for match in _STRING_OR_CONSTANT.finditer(text):
        if match.group(1):
            return text.count("\n", 0, match.start()) + 1
    return None


def read_json(directory: str | os.PathLike[str], name: str, required: bool = True) -> Any:
    """Parse ``directory/name`` as strict JSON; ``None`` if absent and not ``required``.

    Raises:
        SnapshotError: missing required file, malformed JSON (``line N``, column in the problem),
            a repeated object key, NaN/Infinity.
    """
    path = Path(directory) / name
    if not path.is_file():
        if required:
            raise SnapshotError(name, None, f"file is missing from the snapshot directory {str(directory)!r}")
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(name, None, f"not UTF-8 text: {exc}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise json_error(name, exc) from None
    except _DuplicateKey as exc:
        raise SnapshotError(name, None, str(exc)) from None
    except _NotJson as exc:
        raise SnapshotError(
            name, _constant_line(text), f"{exc} is not valid JSON; expected a finite number", "line"
        ) from None


def load_servers(directory: str | os.PathLike[str]) -> list[Server]:
    """Historical servers of ``servers.json`` (``sys.servers`` rows), in file order: the first
    item of :func:`load_all_servers`."""
    return load_all_servers(directory)[0]


def load_all_servers(directory: str | os.PathLike[str]) -> tuple[list[Server], set[str]]:
    """Historical servers of ``servers.json`` (``sys.servers`` rows), in file order, and the names
    of every server of the file (peons and brokers too: their replicas are known and ignored).

    Rows whose ``server_type`` is not ``historical`` (any case) are validated and dropped. Sizes are
    bytes; ``current_size`` or Druid's ``curr_size``; ``priority`` defaults to 0.

    Raises:
        SnapshotError: row = 0-based array index; wrong types, negative sizes, a malformed
            ``version``, missing tier or size of a historical, a server name repeated (other than
            one process's rows of different roles, none historical: :func:`_server_rows`).
    """
    out: list[Server] = []
    names: set[str] = set()
    for i, _, row in _server_rows(directory):
        names.add(row.server)
        if row.is_historical:
            try:
                out.append(row.to_server())
            except ValueError as exc:
                raise SnapshotError(SERVERS_FILE, i, f"server {row.server!r}: {exc}") from None
    return out, names


def load_cluster_version(directory: str | os.PathLike[str]) -> str | None:
    """The Druid version the cluster of ``servers.json`` runs, as its rows give it
    (:func:`segment_balancer.druid.releases.cluster_version`: the leading Coordinator's, else the
    historicals' most common); None when no row has one (Druid before 35.0.0, or written by hand).

    Raises:
        SnapshotError: as :func:`load_all_servers` for a row it refuses.
    """
    return cluster_version(raw for _, raw, _ in _server_rows(directory))


def _server_rows(directory: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any], ServerRow]]:
    """``(0-based index, raw row, ServerRow)`` of each row of ``servers.json`` in file order, each
    validated before it is given (SnapshotError naming the row).

    A server name repeats only in rows of different server types, none of them historical: Druid
    lists a process once per role it announces (``SystemSchema`` walks every ``NodeRole``), and a
    Coordinator that is also the Overlord (``druid.coordinator.asOverlord.enabled``, the quickstart
    configurations) announces two. Any other repeat is refused."""
    data = read_json(directory, SERVERS_FILE)
    if not isinstance(data, list):
        raise SnapshotError(SERVERS_FILE, None, f"must be a JSON array of sys.servers rows, got {json_kind(data)}")
    seen: dict[str, list[tuple[int, str]]] = {}
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise SnapshotError(SERVERS_FILE, i, f"must be an object, got {json.dumps(raw)[:60]}")
        try:
            row = ServerRow.model_validate(raw)
        except ValidationError as exc:
            raise SnapshotError(SERVERS_FILE, i, describe_validation_error(exc)) from None
        kind = row.server_type.lower()
        for j, other in seen.get(row.server, []):
            if other == kind or row.is_historical or other == HISTORICAL:
                raise SnapshotError(SERVERS_FILE, i, f"server {row.server!r} repeats row {j}")
        seen.setdefault(row.server, []).append((i, kind))
        yield i, raw, row


def _queue_item(entry: Any, where: str) -> QueueItem:
    if isinstance(entry, str):
        if not entry:
            raise SnapshotError(QUEUES_FILE, None, f"{where}: empty segment id")
        return QueueItem(segment_id=entry)
    if not isinstance(entry, dict):
        raise SnapshotError(
            QUEUES_FILE, None, f"{where}: must be a segment id or an object, got {json.dumps(entry)[:60]}"
        )
    try:
        item = QueueItem.model_validate(entry)
        item.requested_at_ms()
        return item
    except ValidationError as exc:
        raise SnapshotError(QUEUES_FILE, None, describe_validation_error(exc, where)) from None
    except ValueError as exc:
        raise SnapshotError(QUEUES_FILE, None, f"{where} requested_at {exc}") from None


def load_load_queues(directory: str | os.PathLike[str], servers: set[str]) -> list[QueueEntry]:
    """Queued loads and drops of ``load_queues.json`` (optional; absent = empty queues).

    Format: ``{server: {"segmentsToLoad": [...], "segmentsToDrop": [...]}}``; an entry is a segment id or
    ``{"segment_id", "queue_type", "requested_at"}``. Untyped loads are ``loading``; drops have no queue
    type. ``requested_at`` is ISO-8601, returned as epoch ms UTC. Order: servers as in the file, loads
    then drops, each in list order.

    Args:
        servers: names of the historical servers (from ``load_servers``).

    Raises:
        SnapshotError (row None; the problem names server, list and 0-based position): unknown server,
            unknown key, wrong type, a queue type on a drop, a segment listed twice in one server's
            queue, or both loading and dropping on one server.
    """
    data = read_json(directory, QUEUES_FILE, required=False)
    if data is None:
        return []
    if not isinstance(data, dict):
        raise SnapshotError(QUEUES_FILE, None, f"must be a JSON object {{server: queues}}, got {json_kind(data)}")
    out: list[QueueEntry] = []
    for server, queues in data.items():
        if server not in servers:
            raise SnapshotError(QUEUES_FILE, None, f"server {server!r} is not a historical server of servers.json")
        if not isinstance(queues, dict):
            raise SnapshotError(
                QUEUES_FILE, None, f"server {server!r}: must be an object with segmentsToLoad/segmentsToDrop"
            )
        unknown = sorted(set(queues) - {"segmentsToLoad", "segmentsToDrop"})
        if unknown:
            raise SnapshotError(
                QUEUES_FILE,
                None,
                f"server {server!r}: unknown key(s) {', '.join(unknown)}; expected segmentsToLoad and segmentsToDrop",
            )
        actions: dict[str, str] = {}
        for key, action in (("segmentsToLoad", "LOAD"), ("segmentsToDrop", "DROP")):
            entries = queues.get(key) or []
            if not isinstance(entries, list):
                raise SnapshotError(QUEUES_FILE, None, f"server {server!r} {key}: must be a list")
            for j, entry in enumerate(entries):
                where = f"server {server!r} {key}[{j}]"
                item = _queue_item(entry, where)
                if action == "DROP" and item.queue_type is not None:
                    raise SnapshotError(
                        QUEUES_FILE, None, f"{where}: a drop has no queue_type, got {item.queue_type!r}"
                    )
                previous = actions.get(item.segment_id)
                if previous == action:
                    raise SnapshotError(QUEUES_FILE, None, f"{where}: segment {item.segment_id!r} is listed twice")
                if previous is not None:
                    raise SnapshotError(
                        QUEUES_FILE,
                        None,
                        f"{where}: segment {item.segment_id!r} is both in segmentsToLoad and segmentsToDrop",
                    )
                actions[item.segment_id] = action
                out.append(
                    QueueEntry(
                        server=server,
                        segment_id=item.segment_id,
                        action=action,  # type: ignore[arg-type]
                        queue_type=(item.queue_type or "loading") if action == "LOAD" else None,
                        requested_at_ms=item.requested_at_ms(),
                    )
                )
    return out


def load_rules(directory: str | os.PathLike[str]) -> dict[str, list[Rule]]:
    """Retention rules of ``rules.json``: ``{datasource: [rule, ...]}``, which must contain ``_default``.

    Every Druid rule type (``rules.RULE_KINDS``) with Druid's fields and defaults (``models.RuleSpec``).

    Raises:
        SnapshotError (row None; the problem names the datasource and the rule's 0-based position):
            no ``_default``, not a list, unknown rule type, wrong or foreign fields, bad interval/period,
            negative replicants.
    """
    data = read_json(directory, RULES_FILE)
    if not isinstance(data, dict):
        raise SnapshotError(RULES_FILE, None, f"must be a JSON object {{datasource: [rules]}}, got {json_kind(data)}")
    if DEFAULT_RULES_KEY not in data:
        raise SnapshotError(RULES_FILE, None, f"the {DEFAULT_RULES_KEY!r} rule list is missing (it may be empty)")
    out: dict[str, list[Rule]] = {}
    for datasource, rules in data.items():
        if not isinstance(rules, list):
            raise SnapshotError(RULES_FILE, None, f"datasource {datasource!r}: rules must be a list")
        parsed = []
        for j, raw in enumerate(rules):
            where = f"datasource {datasource!r} rule [{j}] (0-based)"
            if not isinstance(raw, dict):
                raise SnapshotError(RULES_FILE, None, f"{where}: must be an object")
            rtype = raw.get("type")
            if rtype not in RULE_KINDS:
                raise SnapshotError(
                    RULES_FILE, None, f"{where}: unknown rule type {rtype!r}; known: {', '.join(RULE_KINDS)}"
                )
            try:
                parsed.append(RuleSpec.model_validate(raw).to_rule())
            except ValidationError as exc:
                raise SnapshotError(RULES_FILE, None, describe_validation_error(exc, f"{where} ({rtype})")) from None
            except ValueError as exc:
                raise SnapshotError(RULES_FILE, None, f"{where} ({rtype}): {exc}") from None
        out[datasource] = parsed
    return out


def load_snapshot_meta(directory: str | os.PathLike[str]) -> SnapshotMeta:
    """``snapshot.json`` ``{"snapshot_time": ISO-8601, "cluster": name, "druid_version": version}``
    (``druid_version`` optional: the cluster's Druid version as captured,
    :func:`load_cluster_version` of the capture's ``servers.json``).

    Returns ``SnapshotMeta`` with ``snapshot_time_ms`` (epoch ms UTC),
    ``snapshot_id = cluster + "@" + yyyy-MM-ddTHH:mm:ss.SSSZ`` and ``druid_version`` (None when absent).

    Raises:
        SnapshotError: missing file or key, unknown key, bad time, empty cluster, a ``druid_version``
            that is no Druid version.
    """
    data = read_json(directory, META_FILE)
    if not isinstance(data, dict):
        raise SnapshotError(META_FILE, None, "must be a JSON object")
    unknown = sorted(set(data) - set(META_KEYS))
    if unknown:
        raise SnapshotError(META_FILE, None, f"unknown key(s) {', '.join(unknown)}; expected {', '.join(META_KEYS)}")
    cluster, when = data.get("cluster"), data.get("snapshot_time")
    if not isinstance(cluster, str) or not cluster:
        raise SnapshotError(META_FILE, None, f"cluster must be a non-empty string, got {cluster!r}")
    if not isinstance(when, str):
        raise SnapshotError(
            META_FILE,
            None,
            "snapshot_time must be an ISO-8601 string, "
            + ("but it is missing" if "snapshot_time" not in data else f"got {short_value(when)}"),
        )
    try:
        ms = parse_instant_ms(when)
    except ValueError as exc:
        raise SnapshotError(META_FILE, None, f"snapshot_time: {exc}") from None
    version = data.get("druid_version")
    if version is not None:
        try:
            parse_version(version)
        except ValueError:
            raise SnapshotError(
                META_FILE, None, f"druid_version must be {VERSION_FORMAT}, got {short_value(version)}"
            ) from None
    return SnapshotMeta(
        snapshot_time_ms=ms,
        cluster=cluster,
        snapshot_id=f"{cluster}@{format_instant_ms(ms)}",
        druid_version=version,
    )
