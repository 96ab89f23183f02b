"""A plan's operations as the report's table reads them: ``operations/`` beside ``report.html``.

The report stays one small page whatever the plan's size: its table script loads
``operations/index.js`` (every operation's filterable columns, dictionary-coded into typed arrays,
about 20 bytes an operation in base64) when the table is opened, and ``operations/rows-NNNNN.js`` (the segment
ids of :data:`ROWS_PER_CHUNK` operations, in ``op_id`` order) for the rows of the page it shows.
Both are scripts calling ``sbOperations.index(...)`` / ``sbOperations.rows(...)``, so that they load
from a report opened from disk (``file://``, where a browser refuses ``fetch``) and from the UI
alike.

``index.js``'s payload (JSON): ``count``, ``chunk`` (:data:`ROWS_PER_CHUNK`), ``columns``
(:data:`CODED`: for each, ``values``, its distinct values sorted, and ``codes``, base64 of a
little-endian ``Uint8``/``Uint16``/``Uint32`` array of indexes into ``values``, one per operation),
``op_id`` (base64 of an ``Int32Array``), ``size_mib`` (base64 of a ``Float32Array``:
``size_bytes`` / 2**20) and ``depends_on`` (base64 of an ``Int32Array``, -1 for none).

:func:`server_summary` is the per-historical summary the report shows beside it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pandas as pd

from segment_balancer.common.files import replace_dir
from segment_balancer.planner.coordinators import DEFAULT_COORDINATOR, stage_label
from segment_balancer.planner.operations import Action

OPERATIONS_FILE = "operations.parquet"
OPERATIONS_DIR = "operations"
INDEX_FILE = "index.js"
ROWS_PER_CHUNK = 5000
"""Operations per ``rows-NNNNN.js`` file (about 0.5 MB of segment ids)."""
CODED = ("stage", "action", "tier", "server", "datasource", "reason")
"""The columns the table filters and sorts on, in its order."""


def chunk_name(chunk: int) -> str:
    """The file of the segment ids of operations ``chunk * ROWS_PER_CHUNK`` onwards."""
    return f"rows-{chunk:05d}.js"


def read_operations(plan_dir: Path) -> pd.DataFrame:
    """``operations.parquet`` of a plan (its columns: ``plan.validation``'s) in ``op_id`` order."""
    ops = pd.read_parquet(Path(plan_dir) / OPERATIONS_FILE)
    return ops.sort_values("op_id", kind="stable").reset_index(drop=True)


def _code_type(distinct: int) -> type:
    return np.uint8 if distinct <= 2**8 else np.uint16 if distinct <= 2**16 else np.uint32


def index_payload(ops: pd.DataFrame, coordinator: str = DEFAULT_COORDINATOR) -> dict:
    """The JSON of ``index.js`` (module docstring) for ``ops`` (:func:`read_operations`); stages read
    as :func:`~segment_balancer.planner.coordinators.stage_label` of ``coordinator``."""
    columns = {}
    for name in CODED:
        series = ops[name].map(lambda s: stage_label(s, coordinator)) if name == "stage" else ops[name].fillna("")
        order = sorted(series.unique(), key=(lambda v: int(v.split()[0])) if name == "stage" else str)
        lookup = {v: i for i, v in enumerate(order)}
        codes = series.map(lookup).to_numpy()
        kind = _code_type(len(order))
        columns[name] = {
            "values": [str(v) for v in order],
            "codes": _b64(codes.astype(kind)),
            "type": np.dtype(kind).name,
        }
    depends = ops["depends_on"].fillna(-1).to_numpy().astype(np.int32)
    return {
        "count": len(ops),
        "chunk": ROWS_PER_CHUNK,
        "columns": columns,
        "op_id": _b64(ops["op_id"].to_numpy().astype(np.int32)),
        "size_mib": _b64((ops["size_bytes"].to_numpy() / 2**20).astype(np.float32)),
        "depends_on": _b64(depends),
    }


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()).decode()


def write_operations_table(
    plan_dir: str | Path, coordinator: str = DEFAULT_COORDINATOR, ops: pd.DataFrame | None = None
) -> Path:
    """Write ``plan_dir/operations/`` (module docstring) whole or not at all; returns it.
    Raises ``OSError``/``WriteError`` when it cannot be written, ``FileNotFoundError`` without
    ``operations.parquet``."""
    plan = Path(plan_dir)
    ops = read_operations(plan) if ops is None else ops

    def fill(tmp: Path) -> None:
        (tmp / INDEX_FILE).write_text(f"sbOperations.index({json.dumps(index_payload(ops, coordinator))});\n")
        ids = ops["segment_id"].tolist()
        for chunk, start in enumerate(range(0, max(len(ids), 1), ROWS_PER_CHUNK)):
            part = json.dumps(ids[start : start + ROWS_PER_CHUNK], separators=(",", ":"))
            (tmp / chunk_name(chunk)).write_text(f"sbOperations.rows({chunk},{part});\n")

    return replace_dir(plan / OPERATIONS_DIR, fill, durable=False)


def server_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per historical of ``ops`` (:func:`read_operations`): ``tier``, ``server`` (str), ``loads``,
    ``drops``, ``cancels`` (int: operations of each action), ``moves_in`` (loads a drop waits for: a
    move's destination), ``moves_out`` (drops that wait for a load: a move's source), ``bytes_in``,
    ``bytes_out`` (int64: bytes of its loads and of its drops); sorted by tier, then server."""
    columns = ["tier", "server", "loads", "drops", "cancels", "moves_in", "moves_out", "bytes_in", "bytes_out"]
    if ops.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("tier", "server") else np.int64) for c in columns})
    loads, drops = ops["action"] == Action.LOAD, ops["action"] == Action.DROP
    waiting = drops & ops["depends_on"].notna()
    waited_for = ops["op_id"].isin(ops.loc[waiting, "depends_on"].astype(np.int64))
    frame = pd.DataFrame(
        {
            "tier": ops["tier"],
            "server": ops["server"],
            "loads": loads,
            "drops": drops,
            "cancels": ops["action"] == Action.CANCEL,
            "moves_in": loads & waited_for,
            "moves_out": waiting,
            "bytes_in": ops["size_bytes"].where(loads, 0),
            "bytes_out": ops["size_bytes"].where(drops, 0),
        }
    )
    summed = frame.groupby(["tier", "server"], as_index=False, sort=True).sum()
    return summed[columns].astype({c: np.int64 for c in columns[2:]})
