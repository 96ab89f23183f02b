"""``segments.jsonl`` and replica-file lines parsed with pyarrow, vectorised: the readers of the usual,
well-formed files.

A batch of numbered lines becomes the columns :func:`segment_balancer.druid.snapshot.segments.read_segments`
gives (same names, types and meaning), parsed by pyarrow's JSON reader against an explicit schema
and checked with Arrow compute and numpy. Anything it cannot parse or that the reference reader
would refuse (malformed JSON, a field of the wrong type, a missing field, a bad interval, a negative
size or partition number) only marks the batch or the row ``bad``: the caller then runs the
reference reader (Spark's ``from_json``, :func:`~segment_balancer.druid.snapshot.segments.read_segments`),
whose refusal names the file, the line, the value and what was expected. So the two readers agree
by construction on every refusal, and this one costs a few vectorised passes over a good file.

The partial-load fields of Druid 38 (``projections``, ``clusterGroups``) are read only from the
lines whose text names them (:data:`~segment_balancer.druid.partial_load.PAYLOAD_KEYS`), each with
:func:`~segment_balancer.druid.partial_load.line_payload_texts`, the function the reference reader
calls too: a file without them costs one substring test per line.

Source: Druid ``DataSegment`` JSON (``dataSource``, ``interval``, ``version``, ``size``,
``shardSpec``, ``projections``, ``clusterGroups``); ``SegmentId`` for the id.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from segment_balancer.druid.instants import format_instant_ms, parse_instant_ms
from segment_balancer.druid.partial_load import PAYLOAD_KEYS, line_payload_texts, projections_from_text

SHARD_FIELDS = (
    "type",
    "partitionNum",
    "partitionId",
    "partitions",
    "numCorePartitions",
    "startRootPartitionId",
    "endRootPartitionId",
    "minorVersion",
    "atomicUpdateGroupSize",
)

PARSED_FIELDS = [
    ("line", "long"),
    ("segment_id", "string"),
    ("datasource", "string"),
    ("version", "string"),
    ("start_ms", "long"),
    ("end_ms", "long"),
    ("partition_num", "int"),
    ("shard_type", "string"),
    ("num_core_partitions", "int"),
    ("start_root_partition_id", "int"),
    ("end_root_partition_id", "int"),
    ("minor_version", "int"),
    ("atomic_update_group_size", "int"),
    ("size_bytes", "long"),
    ("used", "boolean"),
    ("overshadowed", "boolean"),
    ("overshadowed_given", "boolean"),
    ("projections", "string"),
    ("cluster_groups", "string"),
    ("bad", "boolean"),
]
"""A parsed line: ``read_segments``' columns (``overshadowed`` is the input's flag) and ``bad``
(true when the reference reader is needed: the line, or its batch, did not parse or fails a check)."""
PARSED_SCHEMA = ", ".join(f"{n} {t}" for n, t in PARSED_FIELDS)

PAYLOAD_COLUMNS = ("projections", "cluster_groups")
"""The partial-load columns (null when the payload lacks the field): ``projections`` (the names
joined by commas, as Druid writes them; :func:`projection_lists` makes them lists) and
``cluster_groups`` (the ``clusterGroups`` JSON text, for
:meth:`~segment_balancer.druid.partial_load.ClusterGroups.parse`)."""

_TYPES = {"long": "int64", "int": "int32", "string": "string", "boolean": "bool_"}
CANONICAL = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
"""Druid's print form of an instant of years 1-9999 (``0000`` is no such year)."""


def _arrow_schema():
    return pa.schema([(n, getattr(pa, _TYPES[t])()) for n, t in PARSED_FIELDS])


def _json_schema():
    shard = pa.struct([("type", pa.string())] + [(f, pa.int32()) for f in SHARD_FIELDS[1:]])
    return pa.schema(
        [
            ("dataSource", pa.string()),
            ("interval", pa.string()),
            ("version", pa.string()),
            ("size", pa.int64()),
            ("shardSpec", shard),
            ("used", pa.bool_()),
            ("overshadowed", pa.bool_()),
        ]
    )


def _bad_batch(lines: np.ndarray):
    """One row per line, every one ``bad``: the batch did not parse."""
    n = len(lines)
    columns = {name: pa.nulls(n, getattr(pa, _TYPES[t])()) for name, t in PARSED_FIELDS}
    columns["line"] = pa.array(lines, pa.int64())
    columns["bad"] = pa.array(np.ones(n, bool))
    return pa.table(columns, schema=_arrow_schema())


def _instants(texts) -> tuple[np.ndarray, np.ndarray, list]:
    """epoch ms (int64), valid (bool) and the printed form (Druid's, as a segment id has it) of
    ISO-8601 texts: the canonical ones vectorised, the others (eternity, offsets, short forms)
    one by one by :func:`parse_instant_ms`."""
    n = len(texts)
    ms, valid = np.zeros(n, np.int64), np.zeros(n, bool)
    printed: list = [None] * n
    canonical = pc.and_(pc.match_substring_regex(texts, CANONICAL), pc.invert(pc.starts_with(texts, "0000")))
    canonical = np.asarray(canonical.fill_null(False).to_numpy(zero_copy_only=False), bool)
    rows = np.flatnonzero(canonical)
    if len(rows):
        subset = texts.take(pa.array(rows))
        try:
            ms[rows] = pc.cast(subset, pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_numpy(zero_copy_only=False)
            valid[rows] = True
            values = subset.to_pylist()
            for i, text in zip(rows, values):
                printed[i] = text
        except pa.ArrowInvalid:
            canonical[:] = False  # a date that does not exist: every row the slow way
    values = texts.to_pylist()
    for i in np.flatnonzero(~canonical):
        text = values[i]
        if text is None:
            continue
        try:
            ms[i] = parse_instant_ms(text)
        except ValueError:
            continue
        valid[i] = True
        printed[i] = format_instant_ms(int(ms[i])) if not canonical[i] else text
    return ms, valid, printed


def payload_columns(text: list[str]):
    """The partial-load columns of the lines ``text`` (:data:`PAYLOAD_COLUMNS`: pyarrow string
    arrays) and ``bad`` (bool array: a line whose ``projections`` or ``clusterGroups`` Druid
    refuses). Only the lines naming a field are parsed, in Python."""
    n = len(text)
    bad = np.zeros(n, bool)
    rows = [i for i, t in enumerate(text) if PAYLOAD_KEYS[0] in t or PAYLOAD_KEYS[1] in t]
    if not rows:
        return pa.nulls(n, pa.string()), pa.nulls(n, pa.string()), bad
    projections: list = [None] * n
    groups: list = [None] * n
    for i in rows:
        try:
            projections[i], groups[i] = line_payload_texts(text[i])
        except ValueError:
            bad[i] = True
    return pa.array(projections, pa.string()), pa.array(groups, pa.string()), bad


def projection_lists(projections):
    """The ``projections`` column (comma-joined names, pyarrow) as lists of names (list<string>),
    null where null: the timeline table's form."""
    typ = pa.list_(pa.string())
    if projections.null_count == len(projections):
        return pa.nulls(len(projections), typ)
    return pa.array([projections_from_text(t) for t in projections.to_pylist()], typ)


def parse_lines(line: np.ndarray, text: list[str]):
    """The parsed rows (pyarrow Table of :data:`PARSED_FIELDS`) of the numbered lines ``line``
    (int64) / ``text`` (str, none blank). A batch that pyarrow cannot read against the schema
    comes back as one ``bad`` row per line."""
    n = len(line)
    if n == 0:
        return _arrow_schema().empty_table()
    try:
        table = pj.read_json(
            io.BytesIO("\n".join(text).encode()),
            parse_options=pj.ParseOptions(
                explicit_schema=_json_schema(), unexpected_field_behavior="ignore", newlines_in_values=False
            ),
            read_options=pj.ReadOptions(block_size=max(1 << 20, 2 * sum(len(t) for t in text[:64]))),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return _bad_batch(line)
    if table.num_rows != n:
        return _bad_batch(line)
    shard = table.column("shardSpec").combine_chunks()
    field = {f: (pc.struct_field(shard, f) if len(shard) else pa.nulls(0)) for f in SHARD_FIELDS}
    datasource, version = table.column("dataSource"), table.column("version")
    interval = table.column("interval").combine_chunks()
    halves = pc.extract_regex(interval, r"^(?P<start>[^/]*)/(?P<end>[^/]*)$")  # null unless two parts
    two = np.asarray(halves.is_valid().to_numpy(zero_copy_only=False), bool)
    start_text, end_text = pc.struct_field(halves, "start"), pc.struct_field(halves, "end")
    start_ms, start_ok, start_printed = _instants(start_text)
    end_ms, end_ok, end_printed = _instants(end_text)
    partition = pc.coalesce(field["partitionNum"], field["partitionId"], pa.scalar(0, pa.int32()))
    size = table.column("size")
    part_np = np.asarray(partition.to_numpy(zero_copy_only=False), np.int64)
    size_np = np.asarray(size.fill_null(-1).to_numpy(), np.int64)
    ds_list, ver_list = datasource.to_pylist(), version.to_pylist()
    ids = [
        None
        if (d is None or v is None or s is None or e is None)
        else (f"{d}_{s}_{e}_{v}" if p <= 0 else f"{d}_{s}_{e}_{v}_{p}")
        for d, v, s, e, p in zip(ds_list, ver_list, start_printed, end_printed, part_np)
    ]
    bad = (
        np.asarray(datasource.is_null().to_numpy(), bool)
        | np.asarray(version.is_null().to_numpy(), bool)
        | np.asarray(interval.is_null().to_numpy(zero_copy_only=False), bool)
        | ~two
        | ~start_ok
        | ~end_ok
        | (end_ms < start_ms)
        | np.asarray(size.is_null().to_numpy(), bool)
        | (size_np < 0)
        | (part_np < 0)
    )
    projections, cluster_groups, payload_bad = payload_columns(text)
    bad |= payload_bad
    overshadowed = table.column("overshadowed")
    columns = {
        "line": pa.array(line, pa.int64()),
        "segment_id": pa.array(ids, pa.string()),
        "datasource": datasource,
        "version": version,
        "start_ms": pa.array(start_ms, mask=~start_ok),
        "end_ms": pa.array(end_ms, mask=~end_ok),
        "partition_num": partition,
        "shard_type": pc.coalesce(field["type"], pa.scalar("none")),
        "num_core_partitions": pc.coalesce(field["numCorePartitions"], field["partitions"]),
        "start_root_partition_id": field["startRootPartitionId"],
        "end_root_partition_id": field["endRootPartitionId"],
        "minor_version": field["minorVersion"],
        "atomic_update_group_size": field["atomicUpdateGroupSize"],
        "size_bytes": size,
        "used": pc.coalesce(table.column("used"), pa.scalar(True)),
        "overshadowed": pc.coalesce(overshadowed, pa.scalar(False)),
        "overshadowed_given": pc.is_valid(overshadowed),
        "projections": projections,
        "cluster_groups": cluster_groups,
        "bad": pa.array(bad),
    }
    schema = _arrow_schema()
    return pa.table(
        {
            name: pa.chunked_array([columns[name]]).cast(schema.field(name).type)
            if not isinstance(columns[name], pa.ChunkedArray)
            else columns[name].cast(schema.field(name).type)
            for name in schema.names
        },
        schema=schema,
    )


REPLICA_FIELDS = [
    ("row", "long"),
    ("server", "string"),
    ("segment_id", "string"),
    ("historical", "boolean"),
    ("bad", "boolean"),
]
"""A parsed replica row: ``row`` (its line, or array index), ``server``, ``segment_id``,
``historical`` (a historical of ``servers.json``) and ``bad`` (the reference reader is needed:
the row did not parse, lacks a field, or names a server ``servers.json`` lacks)."""
REPLICA_SCHEMA = ", ".join(f"{n} {t}" for n, t in REPLICA_FIELDS)


def parse_replica_lines(row: np.ndarray, text: list[str], historicals: frozenset, known: frozenset):
    """The parsed rows (pyarrow Table of :data:`REPLICA_FIELDS`) of replica-file lines (``row``
    int64, ``text``: one JSON object each, as ``sys.server_segments`` rows are). A batch pyarrow
    cannot read, or a line that is no object, comes back as one ``bad`` row per line."""
    objects = all(t.lstrip().startswith("{") for t in text)
    return parse_replica_json(row, "\n".join(text).encode() if objects else None, historicals, known)


def parse_replica_json(row: np.ndarray, data: bytes | None, historicals: frozenset, known: frozenset):
    """:func:`parse_replica_lines` of UTF-8 JSON text ``data`` holding one object per row of ``row``
    (int64), each on a line of its own between lines that are blank or only spaces; ``data`` None
    (a row that is no object) or text pyarrow cannot read as ``len(row)`` objects: one ``bad`` row
    per row."""
    schema = pa.schema([(n, getattr(pa, _TYPES[t])()) for n, t in REPLICA_FIELDS])
    n = len(row)
    if n == 0:
        return schema.empty_table()
    every_row_bad = pa.table(
        {
            "row": pa.array(row, pa.int64()),
            "server": pa.nulls(n, pa.string()),
            "segment_id": pa.nulls(n, pa.string()),
            "historical": pa.nulls(n, pa.bool_()),
            "bad": pa.array(np.ones(n, bool)),
        },
        schema=schema,
    )
    if data is None:
        return every_row_bad
    try:
        table = pj.read_json(
            io.BytesIO(data),
            parse_options=pj.ParseOptions(
                explicit_schema=pa.schema([("server", pa.string()), ("segment_id", pa.string())]),
                unexpected_field_behavior="ignore",
                newlines_in_values=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return every_row_bad
    if table.num_rows != n:
        return every_row_bad
    server, segment_id = table.column("server").combine_chunks(), table.column("segment_id").combine_chunks()
    historical = pc.is_in(server, value_set=pa.array(sorted(historicals), pa.string()))
    bad = pc.or_(
        pc.or_(server.is_null(), segment_id.is_null()),
        pc.invert(pc.is_in(server, value_set=pa.array(sorted(known), pa.string())).fill_null(False)),
    )
    return pa.table(
        {
            "row": pa.array(row, pa.int64()),
            "server": server,
            "segment_id": segment_id,
            "historical": historical,
            "bad": bad.fill_null(True),
        },
        schema=schema,
    )
