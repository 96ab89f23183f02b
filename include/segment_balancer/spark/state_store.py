"""The run state on disk: the segment table and each tier's start state as Arrow IPC files, then
only what the steps changed.

Layout (relative to the work directory):

- ``prepared/segment_table.arrow``: the run's :class:`~segment_balancer.planner.runstate.SegmentTable`,
  one row per code (:data:`SEGMENT_TABLE_SCHEMA`; ``n_used`` and the datasource names in the
  schema's metadata), written by ``prepare``.
- ``state/00_prepare/tier=T/segments.arrow`` and ``replicas.arrow``: tier ``T``'s start
  :class:`~segment_balancer.planner.runstate.TierState` (:data:`TIER_SEGMENTS_SCHEMA`,
  :data:`TIER_REPLICAS_SCHEMA`; server codes are rows of ``prepared/servers.parquet``), written by
  ``prepare``.
- ``state/NN_step/tier=T/topb.arrow``: the top ``B`` a step cached in ``T`` (:data:`TOPB_SCHEMA`).
- the op log (``ops/stage_NN_step.parquet``, :mod:`.workdir`): every operation, with its segment's
  ``code``.

Every file is uncompressed Arrow IPC, written aside and renamed, and read memory-mapped: a task
reads only the pages it touches. The state of a tier after a step (:func:`read_tier`) is its start
state with every operation of the op log so far applied and the top ``B`` cached so far: a step
writes its operations and top ``B``, never the tier again. ``tier=`` + the percent-escaped tier
name, as Spark names a partition directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from segment_balancer.common.files import filesystem, sibling_tmp
from segment_balancer.planner.operations import Action
from segment_balancer.planner.runstate import NO_LOAD, QUEUE_CODES, STATE_FIELDS, SegmentTable, TierState

INITIAL_STATE_DIR = "state/00_prepare"
"""Where ``prepare`` writes the state at the start of the run, relative to the work directory."""
SEGMENT_TABLE_FILE = "prepared/segment_table.arrow"
"""The run's segment table, relative to the work directory."""

_ARROW_TYPES = {
    "string": "string",
    "long": "int64",
    "int": "int32",
    "boolean": "bool_",
    "double": "float64",
    "byte": "int8",
}


def spark_fields(arrow_fields) -> list[tuple[str, str]]:
    """``arrow_fields`` ((name, pyarrow type name) pairs) as (name, Spark type) pairs."""
    spark_type = {arrow: spark for spark, arrow in _ARROW_TYPES.items()}
    return [(n, spark_type[t]) for n, t in arrow_fields]


def arrow_schema(fields):
    """The pyarrow schema of ``fields`` ((name, Spark type) pairs)."""
    return pa.schema([(n, getattr(pa, _ARROW_TYPES[t])()) for n, t in fields])


SEGMENT_TABLE_FIELDS = [
    ("segment_id", "string"),
    ("datasource", "int"),
    ("start_ms", "long"),
    ("end_ms", "long"),
    ("size_bytes", "long"),
    ("rule", "byte"),
    ("required", "int"),
    ("fate", "byte"),
]
"""The segment table's columns, by code (:class:`~segment_balancer.planner.runstate.SegmentTable`)."""
TIER_SEGMENT_FIELDS = [("code", "long"), ("target", "int"), ("tier_pos", "int")]
"""A tier's segments: :attr:`TierState.seg_code`, ``target``, ``tier_pos``."""
TIER_REPLICA_FIELDS = [
    ("code", "long"),
    ("server", "int"),
    ("served", "boolean"),
    ("load", "byte"),
    ("dropping", "boolean"),
    ("dependent", "boolean"),
]
"""A tier's replicas: :attr:`TierState.rep_code`, ``rep_server``, ``served``, ``load``, ``dropping``, ``dependent``."""


def tier_dir_name(tier: str) -> str:
    """``tier=<T>`` with ``T`` percent-escaped, as Spark names a partition directory."""
    return "tier=" + quote(tier, safe="")


def tier_of_dir(name: str) -> str:
    """Inverse of :func:`tier_dir_name` (also reads Spark's escaping)."""
    return unquote(name[len("tier=") :])


def initial_state_dirs(work) -> dict[str, str]:
    """``{tier: directory}`` (relative to the work directory ``work``, a local path) of the state
    ``prepare`` wrote (:data:`INITIAL_STATE_DIR`)."""
    root = Path(work) / INITIAL_STATE_DIR
    if not root.is_dir():
        return {}
    return {
        tier_of_dir(p.name): f"{INITIAL_STATE_DIR}/{p.name}"
        for p in sorted(root.iterdir())
        if p.is_dir() and p.name.startswith("tier=")
    }


# ---- files -------------------------------------------------------------------------------------
def write_ipc(fs, path: str, table) -> None:
    """Write the pyarrow Table ``table`` as an uncompressed Arrow IPC file at ``path`` of
    filesystem ``fs``: written aside (``common.files.sibling_tmp``), then moved into place."""
    parent = path.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    tmp = str(sibling_tmp(PurePosixPath(path)))
    with fs.open_output_stream(tmp) as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    fs.move(tmp, path)


def read_ipc(fs, path: str):
    """The Arrow IPC file at ``path`` as a pyarrow Table: memory-mapped on a local filesystem
    (columns are views of the file's pages), read whole elsewhere."""
    if type(fs).__name__ == "LocalFileSystem":
        return pa.ipc.open_file(pa.memory_map(path)).read_all()
    with fs.open_input_file(path) as source:
        return pa.ipc.open_file(source).read_all()


def _numpy(column, dtype) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=dtype)


# ---- the segment table -------------------------------------------------------------------------
def write_segment_table(fs, path: str, table: SegmentTable) -> None:
    """Write ``table`` as a segment table file (:data:`SEGMENT_TABLE_FIELDS`, ``n_used`` and the
    datasource names in the schema's metadata) at ``path`` of filesystem ``fs``. ``prepare``
    writes the run's from Spark; this is for hand-made work directories and tools."""
    schema = arrow_schema(SEGMENT_TABLE_FIELDS).with_metadata(
        {"n_used": str(table.n_used), "datasources": json.dumps(list(table.datasources))}
    )
    ids = (
        table.segment_id
        if type(table.segment_id).__module__.startswith("pyarrow")
        else pa.array([str(s) for s in table.segment_id], pa.string())
    )
    write_ipc(
        fs,
        path,
        pa.Table.from_arrays(
            [
                ids,
                pa.array(table.datasource, pa.int32()),
                pa.array(table.start_ms),
                pa.array(table.end_ms),
                pa.array(table.size_bytes),
                pa.array(table.rule, pa.int8()),
                pa.array(table.required, pa.int32()),
                pa.array(table.fate, pa.int8()),
            ],
            schema=schema,
        ),
    )


_TABLES: dict = {}


def read_segment_table(work_uri: str) -> SegmentTable:
    """The run's :class:`SegmentTable` (:data:`SEGMENT_TABLE_FILE` of the work directory
    ``work_uri``), memory-mapped; kept per process while the file is unchanged (Python workers
    are reused across tasks)."""
    fs, base = filesystem(work_uri)
    path = f"{base}/{SEGMENT_TABLE_FILE}"
    info = fs.get_file_info(path)
    key = (path, info.mtime_ns, info.size)
    cached = _TABLES.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    table = read_ipc(fs, path)
    meta = table.schema.metadata or {}
    names = tuple(json.loads(meta[b"datasources"]))
    out = SegmentTable(
        table.column("segment_id").combine_chunks(),
        _numpy(table.column("datasource"), np.int32),
        _numpy(table.column("start_ms"), np.int64),
        _numpy(table.column("end_ms"), np.int64),
        _numpy(table.column("size_bytes"), np.int64),
        _numpy(table.column("rule"), np.int8),
        _numpy(table.column("required"), np.int32),
        _numpy(table.column("fate"), np.int8),
        names,
        int(meta[b"n_used"]),
    )
    _TABLES.clear()
    _TABLES[path] = (key, out)
    return out


# ---- tier states -------------------------------------------------------------------------------
def write_tier_start(fs, directory: str, state: TierState) -> None:
    """Write ``state`` as a tier's start state: ``segments.arrow`` and ``replicas.arrow`` in
    ``directory`` (a path of filesystem ``fs``)."""
    segs = pa.table([state.seg_code, state.target, state.tier_pos], schema=arrow_schema(TIER_SEGMENT_FIELDS))
    reps = pa.table(
        [state.rep_code, state.rep_server, state.served, state.load, state.dropping, state.dependent],
        schema=arrow_schema(TIER_REPLICA_FIELDS),
    )
    write_ipc(fs, f"{directory}/segments.arrow", segs)
    write_ipc(fs, f"{directory}/replicas.arrow", reps)


def read_tier_start(fs, directory: str, tier: str, servers: tuple[str, ...]) -> TierState:
    """A tier's start state from ``directory`` (:func:`write_tier_start`); ``servers``: the names
    of the server codes (``prepared/servers.parquet``'s rows)."""
    segs = read_ipc(fs, f"{directory}/segments.arrow")
    reps = read_ipc(fs, f"{directory}/replicas.arrow")
    return TierState(
        tier,
        servers,
        _numpy(segs.column("code"), np.int64),
        _numpy(segs.column("target"), np.int32),
        _numpy(segs.column("tier_pos"), np.int32),
        _numpy(reps.column("code"), np.int64),
        _numpy(reps.column("server"), np.int32),
        _numpy(reps.column("served"), bool),
        _numpy(reps.column("load"), np.int8),
        _numpy(reps.column("dropping"), bool),
        _numpy(reps.column("dependent"), bool),
    )


def write_topb(fs, path: str, topb: dict[int, list[str]]) -> None:
    """Write the top ``B`` a step cached in one tier (``{idx: [server, …]}``) to ``path``."""
    codes = sorted(topb)
    write_ipc(
        fs,
        path,
        pa.table(
            {"code": pa.array(codes, pa.int64()), "topb": pa.array([topb[c] for c in codes], pa.list_(pa.string()))}
        ),
    )


def read_topb(fs, path: str) -> dict[int, list[str]]:
    table = read_ipc(fs, path)
    return dict(zip(table.column("code").to_pylist(), table.column("topb").to_pylist()))


def read_tier(work_uri: str, spec: dict, tier: str, servers: tuple[str, ...]) -> TierState | None:
    """Tier ``tier``'s current state (None when the run's start state has no such tier): its start
    state, every operation of the op log files ``spec["ops"]`` on it applied in order, then the top
    ``B`` files ``spec["topb"][tier]`` in order. ``spec``: :meth:`segment_balancer.spark.workdir.Run.state_spec`
    (paths relative to the work directory ``work_uri``); ``servers``: the server codes' names."""
    fs, base = filesystem(work_uri)
    start = spec["start"].get(tier)
    if start is None:
        return None
    state = read_tier_start(fs, f"{base}/{start}", tier, servers)
    if spec["ops"]:
        ops = ds.dataset([f"{base}/{f}" for f in spec["ops"]], format="parquet", filesystem=fs).to_table(
            filter=ds.field("tier") == tier, columns=["op_id", "code", "server", "action", "queue_type", "depends_on"]
        )
        if ops.num_rows:
            ops = ops.sort_by("op_id")
            code_of = {name: i for i, name in enumerate(servers)}
            server = np.array([code_of[s] for s in ops.column("server").to_pylist()], dtype=np.int64)
            queue = np.array(
                [QUEUE_CODES.get(q, NO_LOAD) if q else NO_LOAD for q in ops.column("queue_type").to_pylist()],
                dtype=np.int8,
            )
            actions = np.asarray(ops.column("action").to_pylist(), dtype=object)
            state = state.apply(
                _numpy(ops.column("code"), np.int64),
                server,
                actions == Action.LOAD,
                queue,
                ops.column("depends_on").is_valid().to_numpy(),
                actions == Action.CANCEL,
            )
    for rel in spec["topb"].get(tier, []):
        state = state.with_topb(read_topb(fs, f"{base}/{rel}"))
    return state


def server_names(servers_pdf) -> tuple[str, ...]:
    """The names of the server codes: ``prepared/servers.parquet``'s ``server`` column (by name)."""
    return tuple(servers_pdf["server"])


def state_exists(work) -> bool:
    return os.path.isdir(os.path.join(str(work), INITIAL_STATE_DIR))


# ---- Spark side -------------------------------------------------------------------------------
def conform_arrow(table, fields):
    """The pyarrow ``table`` with exactly the columns of ``fields`` ((name, Spark type) pairs;
    missing ones null), cast to their types: :func:`conform` without Spark."""
    schema = arrow_schema(fields)
    return pa.table(
        [
            table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
            for f in schema
        ],
        schema=schema,
    )


def conform(df, fields=STATE_FIELDS):
    """``df`` with exactly the columns of ``fields`` ((name, Spark type) pairs, default the state's;
    missing ones null), cast to their types."""
    from pyspark.sql import functions as F

    cols = []
    for name, dtype in fields:
        col = F.col(name) if name in df.columns else F.lit(None)
        cols.append(col.cast(dtype).alias(name))
    return df.select(*cols)
