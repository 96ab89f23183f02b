"""The ``druid`` coordinator on a run's work directory: Druid 35.0.0's Coordinator, one run, on the
tables ``used_segments`` and ``prepare`` wrote (docs/ARCHITECTURE.md "Work directory").

The run is one Spark task: Druid's rules duty visits every used segment in one sequence that
shares the tiers' round-robin cursors, throttles and drop budgets, so it cannot be split; the task,
not the driver, holds the cluster. It writes ``WORK/druid/operations.parquet`` (the plan's operation
schema with Druid's actions), ``assignment.parquet`` (what every historical projects once the run's
requests are done) and ``run.json`` (Druid's metrics of the run, the segments it marks unused).

What a snapshot cannot tell, and what is assumed here (docs/DRUID_COORDINATOR.md):

- a queued load of queue type ``loading`` is a ``REPLICATE`` when another historical of its tier
  serves the segment, else a ``LOAD``; ``balancing`` and ``decommissioning`` loads are ``MOVE_TO``;
  no served segment is marked to drop for a move in progress; no request is already in flight;
- only historicals take part (the snapshot lists no broker's or realtime server's segments);
- a server's host, as ``decommissioningNodes`` and ``cloneServers`` name it, is its ``server`` name
  (``host:port``, Druid's ``getHost()``).
"""

from __future__ import annotations

import json
from pathlib import Path

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import write_json_atomic, write_parquet_atomic
from segment_balancer.druid import metrics as m
from segment_balancer.druid.snapshot.loader import load_rules, read_json
from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
from segment_balancer.planner.druid_coordinator.model import (
    DataSegment,
    DruidServer,
    LoadQueue,
    QueueEvent,
    SegmentAction,
)
from segment_balancer.planner.druid_coordinator.run import DUTY_STAGES, ClusterState, RunResult, run_coordinator

DRUID_DIR = "druid"
"""The druid coordinator's output in the work directory."""
CONFIG_FILE = "coordinator_config.json"


_QUEUE_TYPES = {"LOAD": "loading", "REPLICATE": "loading"}


def _segment(row: dict) -> DataSegment:
    overwrite = None
    if row.get("minor_version") is not None:
        overwrite = (
            row["start_root_partition_id"],
            row["end_root_partition_id"],
            row["minor_version"],
            row["atomic_update_group_size"],
        )
    return DataSegment(
        id=row["segment_id"],
        datasource=row["datasource"],
        start_ms=int(row["start_ms"]),
        end_ms=int(row["end_ms"]),
        version=row["version"],
        partition=int(row["partition_num"] or 0),
        size=int(row["size_bytes"] or 0),
        shard_type=row.get("shard_type") or "numbered",
        num_core_partitions=row.get("num_core_partitions"),
        overwrite=overwrite,
    )


def cluster_state(work: Path, snapshot: Path) -> ClusterState:
    """The cluster as Druid's Coordinator would see it, from ``WORK/timeline`` and ``WORK/prepared``
    and the snapshot's rules. Segments marked used (overshadowed ones and tombstones included) are
    the used set; served segments of no used set keep their prepared row (size 0 when unlisted)."""
    import pyarrow.parquet as pq

    timeline_columns = [
        "segment_id",
        "datasource",
        "version",
        "start_ms",
        "end_ms",
        "partition_num",
        "shard_type",
        "num_core_partitions",
        "start_root_partition_id",
        "end_root_partition_id",
        "minor_version",
        "atomic_update_group_size",
        "size_bytes",
        "used",
        "overshadowed",
    ]
    rows = pq.read_table(work / "timeline" / "segments.parquet", columns=timeline_columns).to_pylist()
    by_id = {r["segment_id"]: _segment(r) for r in rows}
    used = {r["segment_id"]: by_id[r["segment_id"]] for r in rows if r["used"]}
    overshadowed = {r["segment_id"] for r in rows if r["used"] and r["overshadowed"]}
    prepared = pq.read_table(
        work / "prepared" / "segments.parquet",
        columns=["segment_id", "datasource", "start_ms", "end_ms", "version", "partition_num", "size_bytes"],
    ).to_pylist()
    for r in prepared:
        by_id.setdefault(r["segment_id"], _segment(r))
    servers = {
        r["server"]: DruidServer(
            name=r["server"], tier=r["tier"], max_size=int(r["max_size"]), curr_size=int(r["current_size"])
        )
        for r in pq.read_table(work / "prepared" / "servers.parquet").to_pylist()
    }
    replicas = pq.read_table(
        work / "prepared" / "replicas.parquet",
        columns=["segment_id", "server", "tier", "served", "queued_load", "queue_type", "queued_drop"],
    ).to_pylist()
    served_in_tier: dict[tuple[str, str], int] = {}
    for r in replicas:
        if r["served"] and r["server"] in servers:
            servers[r["server"]].segments[r["segment_id"]] = by_id[r["segment_id"]]
            key = (r["segment_id"], r["tier"])
            served_in_tier[key] = served_in_tier.get(key, 0) + 1
    queues = {name: LoadQueue(name) for name in servers}
    for r in replicas:
        if r["server"] not in servers:
            continue
        segment, queue = by_id[r["segment_id"]], queues[r["server"]]
        if r["queued_load"]:
            if r["queue_type"] in ("balancing", "decommissioning"):
                action = SegmentAction.MOVE_TO
            elif served_in_tier.get((r["segment_id"], r["tier"]), 0) > 0:
                action = SegmentAction.REPLICATE
            else:
                action = SegmentAction.LOAD
            queue.load(segment, action)
        if r["queued_drop"]:
            queue.drop(segment)
    for queue in queues.values():
        queue.take_stats()
        queue.journal.clear()
    return ClusterState(
        servers=list(servers.values()),
        used=used,
        rules=load_rules(snapshot),
        overshadowed=overshadowed,
        queues=queues,
    )


def _config(snapshot: Path, overrides: dict | None) -> dict:
    given = read_json(snapshot, CONFIG_FILE, required=False) or {}
    return {**given, **(overrides or {})}


def operation_rows(result: RunResult) -> list[dict]:
    """The run's operations as plan rows (``op_id`` in the order queued): a request is a ``LOAD``
    (queue type ``loading`` for Druid's LOAD and REPLICATE, ``balancing`` or ``decommissioning``
    for a MOVE_TO, by its source) or a ``DROP``; a move's drop at its source follows its load
    (``depends_on``, reason ``MOVE_FROM``); a cancelled request is a ``CANCEL`` of the queue type it
    had. ``reason`` is Druid's action."""
    decommissioning = {h.name for h in result.holders if h.decommissioning}
    rows: list[dict] = []
    for op in result.operations:
        action = op.action.value
        if op.event is QueueEvent.CANCELLED:
            kind = "CANCEL"
        else:
            kind = "DROP" if op.action is SegmentAction.DROP else "LOAD"
        if op.action is SegmentAction.MOVE_TO:
            queue_type = "decommissioning" if op.move_source in decommissioning else "balancing"
        else:
            queue_type = _QUEUE_TYPES.get(action)
        row = {
            "op_id": len(rows),
            "stage": DUTY_STAGES[op.duty],
            "action": kind,
            "queue_type": queue_type,
            "segment_id": op.segment.id,
            "datasource": op.segment.datasource,
            "tier": op.tier,
            "server": op.server,
            "size_bytes": op.segment.size,
            "depends_on": None,
            "reason": action,
        }
        rows.append(row)
        if op.action is SegmentAction.MOVE_TO and kind == "LOAD" and op.move_source:
            source_tier = op.tier
            rows.append(
                {
                    **row,
                    "op_id": len(rows),
                    "action": "DROP",
                    "queue_type": None,
                    "tier": source_tier,
                    "server": op.move_source,
                    "depends_on": row["op_id"],
                    "reason": SegmentAction.MOVE_FROM.value,
                }
            )
    return rows


def druid_task(spec: dict) -> dict:
    """The Spark task: the run on ``spec`` (``work``, ``snapshot`` paths, ``overrides``), its tables
    written to ``WORK/druid/``. Returns counts (operations, by Druid action)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from segment_balancer.spark.workdir import OPS_ARROW_SCHEMA

    work, snapshot = Path(spec["work"]), Path(spec["snapshot"])
    meta = json.loads((work / "prepared" / "meta.json").read_text())
    state = cluster_state(work, snapshot)
    config = druid_config(_config(snapshot, spec.get("overrides")))
    result = run_coordinator(state, config, now_ms=int(meta["now_ms"]))
    out = work / DRUID_DIR
    rows = operation_rows(result)
    codes = pq.read_table(work / "prepared" / "segments.parquet", columns=["segment_id", "idx", "code"]).to_pylist()
    code_of = {r["segment_id"]: (r["idx"], r["code"]) for r in codes}
    for row in rows:
        row["idx"], row["code"] = code_of[row["segment_id"]]
    write_parquet_atomic(pa.Table.from_pylist(rows, schema=OPS_ARROW_SCHEMA), out / "operations.parquet")
    assignment = sorted(
        (s.id, h.name, h.tier) for h in result.holders for s in h.projected_segments() if h.server.type.is_historical
    )
    write_parquet_atomic(
        pa.table(
            {k: [a[i] for a in assignment] for i, k in enumerate(("segment_id", "server", "tier"))},
            schema=pa.schema([("segment_id", pa.string()), ("server", pa.string()), ("tier", pa.string())]),
        ),
        out / "assignment.parquet",
    )
    metrics = [{"metric": r.metric, **r.dims, "value": r.value} for r in result.stats.rows()]
    record = {
        "coordinator": "druid",
        "druid_release": "35.0.0",
        "metrics": metrics,
        "marked_unused": sorted(result.deleted),
        "overshadowed_marked_unused": sorted(result.overshadowed),
        "max_segments_to_move": result.max_segments_to_move,
        "config": {k: v for k, v in config.values.items()},
        "period_ms": config.period_ms,
    }
    write_json_atomic(record, out / "run.json")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["reason"]] = counts.get(r["reason"], 0) + 1
    return {"operations": len(rows), "by_reason": counts}


DECISION_METRICS = (m.ASSIGNED, m.DROPPED, m.MOVED, m.UNNEEDED)
"""The run's metrics that count its decisions, summed per tier into the plan's ``druid_metrics``."""


def druid_record(work: Path) -> dict | None:
    """``WORK/druid/run.json`` when the op log holds the ``druid`` coordinator's step, else None."""
    manifest = Path(work) / "ops" / "manifest.json"
    if not manifest.exists() or not any(s["step"] == "druid" for s in json.loads(manifest.read_text())["steps"]):
        return None
    return json.loads((Path(work) / DRUID_DIR / "run.json").read_text())


def decision_events(record: dict) -> list[dict]:
    """The run's decisions as the plan's ``druid_metrics`` events (``at`` = ``plan``): Druid's
    :data:`DECISION_METRICS` summed over datasources, per tier."""
    sums: dict[tuple[str, str], int] = {}
    for row in record["metrics"]:
        if row["metric"] in DECISION_METRICS:
            key = (row["metric"], row.get("tier"))
            sums[key] = sums.get(key, 0) + int(row["value"])
    return [{"metric": k[0], "tier": k[1], "value": v, "at": "plan"} for k, v in sorted(sums.items())]


def summary_part(record: dict) -> dict:
    """The summary's ``druid_run`` from ``run.json``."""
    return {
        "release": record["druid_release"],
        "metrics": record["metrics"],
        "marked_unused": len(record["marked_unused"]),
        "overshadowed_marked_unused": len(record["overshadowed_marked_unused"]),
        "max_segments_to_move": record["max_segments_to_move"],
        "config": record["config"],
    }


def druid_coordinator(spark, snapshot: Path, work: Path, overrides: dict | None = None) -> dict:
    """Run the ``druid`` coordinator on ``work`` (after ``used_segments`` and ``prepare``) in one
    Spark task and put its operations in the run's op log (stage 1, step ``druid``), where
    ``assemble`` finds them; returns its counts."""
    import pyarrow.parquet as pq

    from segment_balancer.spark.session import run_tasks
    from segment_balancer.spark.workdir import Run

    work = Path(work).absolute()
    for where, values in (("config overrides", overrides or {}), (CONFIG_FILE, _config(snapshot, overrides))):
        try:
            druid_config(values)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
    run = Run(spark, work)
    run.reset_from(1)
    spec = {"work": str(work), "snapshot": str(Path(snapshot).absolute()), "overrides": overrides}
    counts = run_tasks(spark, [spec], druid_task)[0]
    run.append_ops(1, "druid", pq.read_table(work / DRUID_DIR / "operations.parquet"))
    return counts
