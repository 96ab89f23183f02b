"""Great Expectations checks of a plan, on pandas frames.

``validate_plan(plan_dir, work_dir)`` reads the plan (``operations.parquet``, ``assignment.parquet``)
and the prepared start state of the run (``WORK/prepared/``), derives small frames with pandas
(projected size per server, queue counts per stage, dependency targets, ...) and lets GX
expectations decide each check. The report is written atomically to ``PLAN/validation.json``.
Memory follows the plan's operations, not the cluster: of the start state only the rows the
checks need are read, and the assignment (a row per replica) is checked in chunks of
:data:`CHUNK_ROWS`.

Checks, in report order (see ``docs/ARCHITECTURE.md`` and ``ALGORITHM.md``):

1. ``known_servers_and_segments``  every op's server and segment exist in the start state
2. ``assignment_unique``           no duplicate (segment_id, server) in the assignment
3. ``capacity``                    current + queued loads + plan loads <= max_size (drops ignored)
4. ``no_replicated_load_to_decommissioning``  no LOAD of a ``rule_kind == "load"`` segment there
5. ``queue_limits``                per-stage load-queue limits and the total ``M`` after each stage
6. ``dependencies``                depends_on -> earlier LOAD of the same segment; dependents are DROPs
7. ``partial_loads``               a part's fingerprint only on a LOAD, as Druid 38 writes it
8. ``well_formed``                 unique op ids, action/queue type/stage domains, sizes >= 0
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from segment_balancer.common.files import write_json_atomic
from segment_balancer.druid.snapshot.models import QUEUE_TYPES
from segment_balancer.plan.compare import COMPARED_DIR
from segment_balancer.plan.publish import plan_fingerprint
from segment_balancer.planner.coordinators import DEFAULT_COORDINATOR, GateCounting, coordinator
from segment_balancer.planner.operations import GATE_OPS_COLUMNS, Action
from segment_balancer.spark.workdir import compared_work

CLONE_STAGE = 7
"""The duty whose loads (on clone targets) Druid queues past any limit (``GateCounting.SERVER_HOLDER``)."""
STAGES = range(1, 14)
MAX_EXAMPLES = 10
CHUNK_ROWS = 2_000_000
"""Rows of ``assignment.parquet`` checked at once (some 300 MiB of pandas): a plan of millions of
replicas is checked chunk by chunk, each chunk ending where a segment's rows end."""

_REQUIRED = {
    "operations": GATE_OPS_COLUMNS,
    "assignment": ["segment_id", "server", "tier"],
    "servers": ["server", "tier", "max_size", "current_size", "decommissioning"],
    "segments": ["segment_id", "size_bytes", "rule_kind"],
    "replicas": ["segment_id", "server", "queued_load", "queue_type", "queued_drop"],
}


def gx():
    """The ``great_expectations`` module, imported on first use (its import takes some 6 s of
    Python: a caller that plans first, such as the CLI, validates in a
    :class:`~segment_balancer.plan.validation_process.ValidationProcess`, which imports it while the
    plan is made), with GX's usage analytics off and, unless a level was set for it, its logger at
    WARNING: on import GX logs some 200 INFO lines of its own set-up ("Skipping registering
    function …"), in the CLI's log and the validate task's alike."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    gx_log = logging.getLogger("great_expectations")
    if gx_log.level == logging.NOTSET:
        gx_log.setLevel(logging.WARNING)
    import great_expectations

    return great_expectations


class PlanValidationError(RuntimeError):
    """A plan failed validation; ``report`` holds the full report of ``validate_plan``."""

    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report

    def __reduce__(self):
        return (PlanValidationError, (str(self), self.report))


@dataclass
class PlanInputs:
    """What one validation reads: the plan's operations, the path of its assignment (read in chunks,
    :func:`assignment_chunks`), the prepared start state (the columns of :data:`_REQUIRED`;
    ``replicas``: the queued loads and drops only; ``segments``: the segments the operations or the queued
    loads name), stage limits by stage number."""

    operations: pd.DataFrame
    assignment: Path
    servers: pd.DataFrame
    segments: pd.DataFrame
    replicas: pd.DataFrame
    stage_limits: dict[int, dict] = field(default_factory=dict)
    coordinator: str = DEFAULT_COORDINATOR
    druid_queue_limit: int | None = None
    """The load-queue size of a plan its coordinator's gate counts as Druid's ``ServerHolder``
    does (``maxSegmentsInNodeLoadingQueue`` with smart
    loading off; None: unlimited)."""


def load_inputs(plan_dir: str | Path, work_dir: str | Path) -> PlanInputs:
    """Read the plan and the prepared start state in bounded memory: of each table only the
    columns the checks use (:data:`_REQUIRED`); of the replicas only the queued loads, and of the
    segments only those the operations or the queued loads name (every other row answers no
    check); the assignment stays on disk, checked chunk by chunk (:func:`assignment_chunks`).

    ``operations.depends_on`` is returned as nullable ``Int64``. ``stage_limits`` maps the stage
    number (int) to ``{"queue_type": str|None, "limit": int|None, "total": int|None}``.
    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a missing column or a
    ``meta.json`` without ``stage_limits`` for every stage 1–13.
    """
    plan_dir, prepared = Path(plan_dir), Path(work_dir) / "prepared"
    paths = {
        "operations": plan_dir / "operations.parquet",
        "assignment": plan_dir / "assignment.parquet",
        "servers": prepared / "servers.parquet",
        "replicas": prepared / "replicas.parquet",
        "segments": prepared / "segments.parquet",
    }
    datasets = {}
    for name, path in paths.items():
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
        datasets[name] = ds.dataset(path, format="parquet")  # a file or a directory of parts
        missing = [c for c in _REQUIRED[name] if c not in datasets[name].schema.names]
        if missing:
            raise ValueError(f"{name}: missing columns {missing}")
    frames = {
        "operations": datasets["operations"].to_table().to_pandas(),
        "assignment": paths["assignment"],
        "servers": datasets["servers"].to_table(columns=_REQUIRED["servers"]).to_pandas(),
        "replicas": datasets["replicas"]
        .to_table(
            columns=_REQUIRED["replicas"],
            filter=(ds.field("queued_load") == True) | (ds.field("queued_drop") == True),  # noqa: E712 (pyarrow)
        )
        .to_pandas(),
    }  # noqa: E712
    named = pd.concat([frames["operations"]["segment_id"], frames["replicas"]["segment_id"]]).dropna().unique()
    frames["segments"] = (
        datasets["segments"]
        .to_table(columns=_REQUIRED["segments"], filter=ds.field("segment_id").isin(pa.array(named, pa.string())))
        .to_pandas()
    )
    ops = frames["operations"]
    ops["depends_on"] = ops["depends_on"].astype("Int64")
    meta = json.loads((prepared / "meta.json").read_text())
    raw = meta.get("stage_limits")
    if not isinstance(raw, dict) or any(str(k) not in raw for k in STAGES):
        raise ValueError("meta.json: stage_limits must name every stage 1-13")
    limits = {int(k): dict(v) for k, v in raw.items()}
    summary_path = plan_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    planner = coordinator(summary.get("coordinator"))
    druid_limit = None
    if planner.gate is GateCounting.SERVER_HOLDER:
        config = summary["druid_run"]["config"]
        if not config["smartSegmentLoading"] and config["maxSegmentsInNodeLoadingQueue"] > 0:
            druid_limit = int(config["maxSegmentsInNodeLoadingQueue"])
    return PlanInputs(**frames, stage_limits=limits, coordinator=planner.name, druid_queue_limit=druid_limit)


def assignment_chunks(path: Path, rows: int | None = None):
    """Yield ``assignment.parquet`` (``segment_id``, ``server``, ``tier``) as frames of about
    ``rows`` rows with a fresh index, each ending where a segment's rows end, so that a repeated
    (segment, server) of a file sorted by segment, as assemble writes it, lies in one frame. A
    file of at most ``rows`` rows is one frame, whatever its order. Raises ``ValueError`` (the file
    and the row) when a larger file is not sorted by segment id."""
    rows = rows or CHUNK_ROWS
    file = pq.ParquetFile(path)
    if file.metadata.num_rows <= rows:
        yield file.read(columns=_REQUIRED["assignment"]).to_pandas()
        return
    held, seen, last = None, 0, None
    for batch in file.iter_batches(batch_size=rows, columns=_REQUIRED["assignment"]):
        frame = batch.to_pandas()
        ids = frame["segment_id"].to_numpy(object)
        order = (ids[1:] < ids[:-1]).astype(bool)
        if order.any() or (last is not None and len(ids) and ids[0] < last):
            at = seen + (int(order.argmax()) + 1 if order.any() else 0)
            raise ValueError(
                f"{path}: row {at}: segment ids out of order; the plan's assignment is written sorted by segment id"
            )
        seen += len(frame)
        if held is not None:
            frame = pd.concat([held, frame], ignore_index=True)
        if not len(frame):
            continue
        every = frame["segment_id"].to_numpy(object)
        others = np.flatnonzero(every != every[-1])  # the last segment's rows wait for the next batch
        cut = int(others[-1]) + 1 if len(others) else 0
        held = frame.iloc[cut:].reset_index(drop=True)
        if cut:
            yield frame.iloc[:cut].reset_index(drop=True)
        last = ids[-1] if len(ids) else last
    if held is not None and len(held):
        yield held


def capacity_frame(inp: PlanInputs) -> pd.DataFrame:
    """Projected size of every known server that receives at least one LOAD in the plan.

    Columns: ``server``, ``tier`` (str), ``max_size``, ``current_size``, ``queued_bytes`` (sizes of
    queued loads in the start state), ``plan_load_bytes`` (sizes of the plan's LOADs),
    ``projected_size`` (sum of the three), all int64 bytes. Drops are not subtracted.
    """
    sizes = inp.segments.drop_duplicates("segment_id").set_index("segment_id")["size_bytes"]
    queued = inp.replicas[inp.replicas["queued_load"].fillna(False).astype(bool)]
    queued_bytes = queued["segment_id"].map(sizes).fillna(0).groupby(queued["server"]).sum()
    loads = inp.operations[inp.operations["action"] == Action.LOAD]
    load_bytes = loads.groupby("server")["size_bytes"].sum()
    out = inp.servers.loc[
        inp.servers["server"].isin(load_bytes.index), ["server", "tier", "max_size", "current_size"]
    ].reset_index(drop=True)
    out["queued_bytes"] = out["server"].map(queued_bytes).fillna(0).astype("int64")
    out["plan_load_bytes"] = out["server"].map(load_bytes).fillna(0).astype("int64")
    out["projected_size"] = out["current_size"] + out["queued_bytes"] + out["plan_load_bytes"]
    return out


def druid_capacity_frame(inp: PlanInputs) -> pd.DataFrame:
    """A ``druid`` plan's projected sizes as Druid's Coordinator counts them when it decides a load
    (``ServerHolder.getSizeUsed``): current size, plus queued and planned loads, less queued and
    planned drops (not a move's drop at its source, which waits for the load), cancelled requests
    undone; loads of the clone duty, which Druid queues without a check, left out. Columns as
    :func:`capacity_frame`'s, ``queued_bytes`` and ``plan_load_bytes`` net of drops."""
    sizes = inp.segments.drop_duplicates("segment_id").set_index("segment_id")["size_bytes"]
    rep = inp.replicas
    signed = rep["segment_id"].map(sizes).fillna(0) * (
        rep["queued_load"].fillna(False).astype(int) - rep["queued_drop"].fillna(False).astype(int)
    )
    queued_bytes = signed.groupby(rep["server"]).sum()
    ops = inp.operations
    cancelled_load = (ops["action"] == Action.CANCEL) & ops["queue_type"].notna()
    sign = (
        (ops["action"] == Action.LOAD).astype(int)
        - ((ops["action"] == Action.DROP) & (ops["reason"] == "DROP")).astype(int)
        - cancelled_load.astype(int)
        + ((ops["action"] == Action.CANCEL) & ops["queue_type"].isna()).astype(int)
    )
    plan_bytes = (ops["size_bytes"] * sign).groupby(ops["server"]).sum()
    loading = ops.loc[(ops["action"] == Action.LOAD) & (ops["stage"] != CLONE_STAGE), "server"].unique()
    out = inp.servers.loc[inp.servers["server"].isin(loading), ["server", "tier", "max_size", "current_size"]]
    out = out.reset_index(drop=True)
    out["queued_bytes"] = out["server"].map(queued_bytes).fillna(0).astype("int64")
    out["plan_load_bytes"] = out["server"].map(plan_bytes).fillna(0).astype("int64")
    out["projected_size"] = out["current_size"] + out["queued_bytes"] + out["plan_load_bytes"]
    return out


def decommissioning_load_frame(inp: PlanInputs) -> pd.DataFrame:
    """The plan's LOADs of replicated segments (``rule_kind == "load"``).

    Columns: ``op_id`` (int64), ``stage``, ``segment_id``, ``server`` (str), ``decommissioning``
    (bool; null for an unknown server, which check 1 reports).
    """
    loads = inp.operations[inp.operations["action"] == Action.LOAD]
    kinds = inp.segments.drop_duplicates("segment_id").set_index("segment_id")["rule_kind"]
    loads = loads[loads["segment_id"].map(kinds) == "load"]
    decomm = inp.servers.drop_duplicates("server").set_index("server")["decommissioning"]
    out = loads[["op_id", "stage", "segment_id", "server"]].reset_index(drop=True)
    out["decommissioning"] = out["server"].map(decomm).astype("boolean")
    return out


def queue_frame(inp: PlanInputs) -> pd.DataFrame:
    """Queue counts after each stage, for each server that received a LOAD in that stage.

    Stages are replayed in order; queued loads of the start state count with their type (untyped =
    loading), as do the plan's LOADs (a LOAD without a type counts as loading; check 7 reports it).
    Columns: ``stage`` (int64), ``server`` (str), ``counted_type`` (str: the stage's queue type or
    ``"all"``), ``count`` (int64: loads of that type), ``limit`` (Int64, null = none),
    ``total_count`` (int64: all loads), ``total`` (Int64, null = unlimited).
    """
    rep = inp.replicas[inp.replicas["queued_load"].fillna(False).astype(bool)]
    start = pd.DataFrame({"server": rep["server"], "qt": rep["queue_type"].fillna("loading"), "stage": 0})
    ops = inp.operations
    ops = ops[(ops["action"] == Action.LOAD) & ops["stage"].notna() & ops["server"].notna()]
    loads = pd.DataFrame(
        {"server": ops["server"], "qt": ops["queue_type"].fillna("loading"), "stage": ops["stage"].astype("int64")}
    )
    queued = pd.concat([start, loads], ignore_index=True)
    rows = []
    for k in sorted(loads["stage"].unique()):
        counts = queued[queued["stage"] <= k].groupby(["server", "qt"]).size().unstack(fill_value=0)
        lim = inp.stage_limits.get(int(k), {})
        qtype = lim.get("queue_type")
        for server in sorted(loads.loc[loads["stage"] == k, "server"].unique()):
            row = counts.loc[server]
            rows.append(
                {
                    "stage": int(k),
                    "server": server,
                    "counted_type": qtype or "all",
                    "count": int(row.get(qtype, 0) if qtype else row.sum()),
                    "limit": lim.get("limit"),
                    "total_count": int(row.sum()),
                    "total": lim.get("total"),
                }
            )
    cols = ["stage", "server", "counted_type", "count", "limit", "total_count", "total"]
    out = pd.DataFrame(rows, columns=cols)
    for c in ("stage", "count", "total_count"):
        out[c] = out[c].astype("int64")
    for c in ("limit", "total"):
        out[c] = out[c].astype("Int64")
    return out


def druid_queue_frame(inp: PlanInputs) -> pd.DataFrame:
    """A ``druid`` plan's load queues: per server that received a LOAD outside the clone duty, the
    loads queued at the snapshot plus the plan's (a cancellation frees no place in Druid's run),
    against the one limit of every queue (null: none). Columns as :func:`queue_frame`'s, with
    ``stage`` 0 and ``counted_type`` ``all``."""
    rep = inp.replicas[inp.replicas["queued_load"].fillna(False).astype(bool)]
    ops = inp.operations
    ops = ops[(ops["action"] == Action.LOAD) & (ops["stage"] != CLONE_STAGE)]
    new = ops.groupby("server").size()
    start = rep.groupby("server").size()
    rows = [
        {
            "stage": 0,
            "server": server,
            "counted_type": "all",
            "count": int(n + start.get(server, 0)),
            "limit": inp.druid_queue_limit,
            "total_count": int(n + start.get(server, 0)),
            "total": inp.druid_queue_limit,
        }
        for server, n in sorted(new.items())
    ]
    out = pd.DataFrame(rows, columns=["stage", "server", "counted_type", "count", "limit", "total_count", "total"])
    for c in ("stage", "count", "total_count"):
        out[c] = out[c].astype("int64")
    for c in ("limit", "total"):
        out[c] = out[c].astype("Int64")
    return out


PARTIAL_FINGERPRINT = r"^v1:([0-9a-f]{16}|partial-empty)$"
"""A partial load's fingerprint as Druid 38 writes it (``druid.partial_load``): ``v1:`` and 16 hex
digits, or the empty part's."""


def partial_frame(inp: PlanInputs) -> pd.DataFrame:
    """The operations that load a part of a segment (``partial_fingerprint`` not null; ALGORITHM.md
    "Rules of Druid 38"). Columns: ``op_id`` (int64), ``action``, ``segment_id``,
    ``partial_fingerprint`` (str); none for a plan written without the column."""
    ops = inp.operations
    cols = ["op_id", "action", "segment_id", "partial_fingerprint"]
    if "partial_fingerprint" not in ops:
        return pd.DataFrame(columns=cols)
    return ops.loc[ops["partial_fingerprint"].notna(), cols]


def dependency_frame(inp: PlanInputs) -> pd.DataFrame:
    """Every op with a non-null ``depends_on``, joined with the op it points to.

    Columns: ``op_id`` (int64), ``action``, ``segment_id``, ``server`` (str), ``depends_on``
    (Int64), ``target_action``, ``target_segment_id`` (str; ``"<missing>"`` when no op has that id).
    """
    ops = inp.operations
    dep = ops.loc[ops["depends_on"].notna(), ["op_id", "action", "segment_id", "server", "depends_on"]]
    targets = (
        ops[["op_id", "action", "segment_id"]]
        .drop_duplicates("op_id")
        .rename(columns={"op_id": "depends_on", "action": "target_action", "segment_id": "target_segment_id"})
    )
    targets["depends_on"] = targets["depends_on"].astype("Int64")
    out = dep.merge(targets, on="depends_on", how="left").reset_index(drop=True)
    for c in ("target_action", "target_segment_id"):
        out[c] = out[c].astype(object).where(out[c].notna(), "<missing>")
    return out


_COUNTED = {
    GateCounting.PROJECTED: (capacity_frame, queue_frame),
    GateCounting.SERVER_HOLDER: (druid_capacity_frame, druid_queue_frame),
}
"""The capacity and queue frames of each way a coordinator's gate counts (``Coordinator.gate``)."""


def _checks(inp: PlanInputs) -> list[tuple[str, Any, list, list[str]]]:
    """(name, frame or iterator of frames, expectations, example columns) of every check, in
    report order."""
    ops = inp.operations.reset_index(drop=True)
    key = ["op_id", "stage", "action", "segment_id", "server"]
    wf = ops.copy()
    wf["action_queue_type"] = wf["action"].astype(str) + ":" + wf["queue_type"].fillna("null")
    planner = coordinator(inp.coordinator)
    pair_ok = [f"{Action.LOAD.value}:{q}" for q in QUEUE_TYPES] + [f"{Action.DROP.value}:null"]
    if Action.CANCEL in planner.actions:
        pair_ok += [f"{Action.CANCEL.value}:{q}" for q in QUEUE_TYPES] + [f"{Action.CANCEL.value}:null"]
    capacity, queues = _COUNTED[planner.gate]
    # Segment ids are checked through a flag: a value_set of a million ids makes GX take minutes.
    known = ops.assign(
        segment_known=ops["segment_id"]
        .isin(inp.segments["segment_id"])
        .astype("boolean")
        .where(ops["segment_id"].notna())
    )
    not_null = ["op_id", "stage", "action", "segment_id", "server", "size_bytes"]
    E = gx().expectations
    return [
        (
            "known_servers_and_segments",
            known,
            [
                E.ExpectColumnValuesToBeInSet(column="server", value_set=sorted(inp.servers["server"].unique())),
                E.ExpectColumnValuesToBeInSet(column="segment_known", value_set=[True]),
            ],
            key,
        ),
        (
            "assignment_unique",
            assignment_chunks(inp.assignment),
            [
                E.ExpectCompoundColumnsToBeUnique(column_list=["segment_id", "server"]),
            ],
            ["segment_id", "server", "tier"],
        ),
        (
            "capacity",
            capacity(inp),
            [
                E.ExpectColumnPairValuesAToBeGreaterThanB(
                    column_A="max_size", column_B="projected_size", or_equal=True
                ),
            ],
            ["server", "max_size", "current_size", "queued_bytes", "plan_load_bytes", "projected_size"],
        ),
        (
            "no_replicated_load_to_decommissioning",
            decommissioning_load_frame(inp),
            [
                E.ExpectColumnValuesToBeInSet(column="decommissioning", value_set=[False]),
            ],
            ["op_id", "stage", "segment_id", "server"],
        ),
        (
            "queue_limits",
            queues(inp),
            [
                E.ExpectColumnPairValuesAToBeGreaterThanB(
                    column_A="limit", column_B="count", or_equal=True, ignore_row_if="either_value_is_missing"
                ),
                E.ExpectColumnPairValuesAToBeGreaterThanB(
                    column_A="total", column_B="total_count", or_equal=True, ignore_row_if="either_value_is_missing"
                ),
            ],
            ["stage", "server", "counted_type", "count", "limit", "total_count", "total"],
        ),
        (
            "dependencies",
            dependency_frame(inp),
            [
                E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="op_id", column_B="depends_on"),
                E.ExpectColumnValuesToBeInSet(column="target_action", value_set=[Action.LOAD.value]),
                E.ExpectColumnPairValuesToBeEqual(column_A="segment_id", column_B="target_segment_id"),
                E.ExpectColumnValuesToBeInSet(column="action", value_set=[Action.DROP.value]),
            ],
            ["op_id", "action", "segment_id", "depends_on", "target_action", "target_segment_id"],
        ),
        (
            "partial_loads",
            partial_frame(inp),
            [
                E.ExpectColumnValuesToBeInSet(column="action", value_set=[Action.LOAD.value]),
                E.ExpectColumnValuesToMatchRegex(column="partial_fingerprint", regex=PARTIAL_FINGERPRINT),
            ],
            ["op_id", "action", "segment_id", "partial_fingerprint"],
        ),
        (
            "well_formed",
            wf,
            [
                E.ExpectColumnValuesToBeUnique(column="op_id"),
                *[E.ExpectColumnValuesToNotBeNull(column=c) for c in not_null],
                E.ExpectColumnValuesToBeInSet(column="action", value_set=[a.value for a in planner.actions]),
                E.ExpectColumnValuesToBeInSet(column="action_queue_type", value_set=pair_ok),
                E.ExpectColumnValuesToBeBetween(column="stage", min_value=1, max_value=13),
                E.ExpectColumnValuesToBeBetween(column="size_bytes", min_value=0),
            ],
            key + ["queue_type", "size_bytes"],
        ),
    ]


def _exception_message(info: Any) -> str | None:
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for v in info.values():
        msg = _exception_message(v)
        if msg:
            return msg
    return None


def _run_check(source, name: str, frames, exps: list, cols: list[str]) -> dict:
    """One check's report over ``frames`` (a frame, or an iterator of frames checked one by one:
    counts summed, success when every one succeeds, the first :data:`MAX_EXAMPLES` examples)."""
    if isinstance(frames, pd.DataFrame):
        return _run_frame(source, name, name, frames, exps, cols)
    merged = None
    for i, frame in enumerate(frames):
        one = _run_frame(source, name, f"{name}#{i}", frame, exps, cols)
        if merged is None:
            merged = one
            continue
        merged["success"] &= one["success"]
        merged["unexpected_count"] += one["unexpected_count"]
        merged["examples"] = (merged["examples"] + one["examples"])[:MAX_EXAMPLES]
        for mine, theirs in zip(merged["expectations"], one["expectations"]):
            mine["success"] &= theirs["success"]
            mine["unexpected_count"] += theirs["unexpected_count"]
    return merged if merged is not None else _run_frame(source, name, name, pd.DataFrame(columns=cols), exps, cols)


def _run_frame(source, name: str, asset: str, frame: pd.DataFrame, exps: list, cols: list[str]) -> dict:
    batch_def = source.add_dataframe_asset(asset).add_batch_definition_whole_dataframe("all")
    suite = gx().ExpectationSuite(name=name)
    for exp in exps:
        suite.add_expectation(exp)
    result = batch_def.get_batch(batch_parameters={"dataframe": frame}).validate(
        suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": 5}
    )
    examples, unexpected, details = [], 0, []
    for res in result.results:
        etype = res.expectation_config.type
        count = int(res.result.get("unexpected_count") or 0)
        unexpected += count
        details.append(
            {
                "expectation": etype,
                "kwargs": _short_kwargs(res.expectation_config.kwargs),
                "success": bool(res.success),
                "unexpected_count": count,
            }
        )
        if res.success:
            continue
        error = _exception_message(res.exception_info)
        if error:
            examples.append(
                {"expectation": etype, "columns": _columns_of(res.expectation_config.kwargs), "error": error}
            )
            continue
        idx = res.result.get("partial_unexpected_index_list") or []
        rows = json.loads(frame.loc[list(idx), [c for c in cols if c in frame]].to_json(orient="records"))
        on = _columns_of(res.expectation_config.kwargs)
        examples.extend({"expectation": etype, "columns": on, **row} for row in rows)
    return {
        "name": name,
        "success": bool(result.success),
        "unexpected_count": unexpected,
        "examples": examples[:MAX_EXAMPLES],
        "expectations": details,
    }


def _columns_of(kwargs: Any) -> list[str]:
    kw = dict(kwargs)
    if "column_list" in kw:
        return list(kw["column_list"])
    return [kw[k] for k in ("column", "column_A", "column_B") if k in kw]


def _short_kwargs(kwargs: Any) -> dict:
    out = {}
    for k, v in dict(kwargs).items():
        if k in ("batch_id", "result_format"):
            continue
        if isinstance(v, (list, tuple)) and len(v) > 10:
            v = f"<{len(v)} values>"
        out[k] = v
    return out


def validate_plan(plan_dir: str | Path, work_dir: str | Path) -> dict:
    """Validate the plan in ``plan_dir`` against the start state in ``work_dir/prepared``.

    Returns ``{"success": bool, "checks": [{"name", "success", "unexpected_count", "examples",
    "expectations"}], "validated_at": ISO-8601 UTC, "gx_version": str, "plan_files": {file:
    sha256}}`` and writes it atomically to ``plan_dir/validation.json``.
    ``examples`` are up to 10 offending rows of the check's frame (sizes in bytes), each with the
    expectation type that flagged it. Raises what ``load_inputs`` raises; a failed check never
    raises here (see ``require_valid``).
    """
    plan_dir = Path(plan_dir)
    inp = load_inputs(plan_dir, work_dir)
    ctx = gx().get_context(mode="ephemeral")
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = ctx.data_sources.add_pandas("segment_balancer_plan")
    checks = [_run_check(source, *spec) for spec in _checks(inp)]
    report = {
        "success": all(c["success"] for c in checks),
        "checks": checks,
        "validated_at": datetime.now(UTC).isoformat(),
        "gx_version": gx().__version__,
        "plan_files": plan_fingerprint(plan_dir),
    }
    write_json_atomic(report, plan_dir / "validation.json", durable=True)
    return report


def require_valid(plan_dir: str | Path, work_dir: str | Path) -> dict:
    """``validate_plan``, raising ``PlanValidationError`` (failed checks with examples) on failure.

    Returns the report when every check passed; ``validation.json`` is written either way.
    """
    report = validate_plan(plan_dir, work_dir)
    if report["success"]:
        return report
    lines = [f"plan {plan_dir} failed validation:"]
    for check in report["checks"]:
        if not check["success"]:
            lines.append(
                f"- {check['name']}: {check['unexpected_count']} unexpected; "
                f"examples: {json.dumps(check['examples'][:3], default=str)}"
            )
    raise PlanValidationError("\n".join(lines), report)


def validate_run(plan_dir: str | Path, work_dir: str | Path) -> dict:
    """The gate of a run whose plan is ``plan_dir`` (work directory ``work_dir``): each compared
    plan set beside it (``plan_dir/compared/<coordinator>/``, :func:`segment_balancer.plan.compare.place_compared`)
    first, against its own work directory, then the run's own (:func:`require_valid`). Returns the
    run's report; raises ``PlanValidationError`` (nothing is changed but the ``validation.json``
    files)."""
    plan_dir, work_dir = Path(plan_dir), Path(work_dir)
    compared = plan_dir / COMPARED_DIR
    for other in sorted(p.name for p in compared.iterdir() if p.is_dir()) if compared.is_dir() else []:
        require_valid(compared / other, compared_work(work_dir, other))
    return require_valid(plan_dir, work_dir)
