"""The ``druid`` coordinator on a run's work directory: Druid's Coordinator (of the release the run's
config names, ``DruidConfig.release``), one run, on the
tables ``used_segments`` and ``prepare`` wrote (docs/ARCHITECTURE.md "Work directory"), duty by duty:
one Spark application each (``planner.coordinators.DUTY_APPS``, one Airflow task each).

``druid_rules`` is one Spark task: Druid's rules duty visits every used segment in one sequence that
shares the tiers' round-robin cursors, throttles and drop budgets, so it cannot be split; the task,
not the driver, holds the cluster. ``druid_unload`` and ``druid_clone`` are one Spark task each (the
whole cluster), ``druid_balance`` one per tier (each holds its tier only; in one job, or above
:data:`BALANCE_TIERS_AT_ONCE_AT_MOST_SEGMENTS` one job per tier). Each application's task builds
the run from the prepared tables, replays what the earlier duties queued (the op log's
``druid_*`` steps and each one's ``WORK/druid/<application>.json``) and appends its own operations
to the op log (the plan's operation schema with Druid's actions); when the tasks run on the driver
(``spark.session.on_driver``), the run ``druid_rules`` built is held between the applications
instead (:class:`_Held`) and built once; ``druid_clone`` also writes
``WORK/druid/assignment.parquet`` (what every historical projects once the run's requests are done)
and ``run.json`` (Druid's metrics of the run, the segments it marks unused).

What a snapshot cannot tell, and what is assumed here (docs/DRUID_COORDINATOR.md):

- a queued load of queue type ``loading`` is a ``REPLICATE`` when another historical of its tier
  serves the segment, else a ``LOAD``; ``balancing`` and ``decommissioning`` loads are ``MOVE_TO``;
  no served segment is marked to drop for a move in progress; no request is already in flight;
- only historicals take part (the snapshot lists no broker's or realtime server's segments);
- a server's host, as ``decommissioningNodes`` and ``cloneServers`` name it, is its ``server`` name
  (``host:port``, Druid's ``getHost()``);
- which part of a segment a served or queued replica holds (Druid 38's partial loads) is in no export
  Druid offers: it is taken to be what the segment's rule asks (``ASSUMED_PROFILE``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from segment_balancer.common.bulk import cycle_collection_paused
from segment_balancer.common.errors import InputError
from segment_balancer.common.files import write_json_atomic, write_parquet_atomic
from segment_balancer.druid import metrics as m
from segment_balancer.druid.rules import PARTIAL_RULE_TYPES
from segment_balancer.druid.snapshot.loader import load_cluster_version, load_rules, read_json
from segment_balancer.planner.coordinators import DRUID, DUTY_APPS, DUTY_STAGES
from segment_balancer.planner.druid_coordinator.balancer import served_and_queued
from segment_balancer.planner.druid_coordinator.dynamic_config import druid_config
from segment_balancer.planner.druid_coordinator.model import (
    ASSUMED_PROFILE,
    DataSegment,
    DruidServer,
    LoadQueue,
    QueueEvent,
    SegmentAction,
    java_concurrent_map_capacity,
    java_hash_order,
    java_map_capacity,
)
from segment_balancer.planner.druid_coordinator.run import ClusterState, CoordinatorRun, Operation, QueuedOperation
from segment_balancer.planner.druid_coordinator.run_stats import RunStats
from segment_balancer.planner.druid_coordinator.settled import SettledApart, settled_rows
from segment_balancer.planner.druid_coordinator.unheld import UnheldServed, UnheldShare
from segment_balancer.planner.operations import PARTIAL_OP_COLUMNS, Action
from segment_balancer.spark.session import on_driver, run_tasks
from segment_balancer.spark.workdir import OPS_ARROW_SCHEMA, Run

DRUID_DIR = "druid"
"""The druid coordinator's output in the work directory."""
CONFIG_FILE = "coordinator_config.json"
BALANCE_TIERS_AT_ONCE_AT_MOST_SEGMENTS = 2_000_000
"""The most used segments of a run whose ``druid_balance`` tier tasks run in one Spark job, side by
side; a larger run's run one job after another, so that one tier's task at a time holds its tier
(a task of the largest tier peaks at about 1.5 GiB at 1M segments and 10 GiB at 10M)."""
RUN_FILE = "run.json"
"""The run's record (``WORK/druid/run.json``, :func:`druid_record`), written by the last application."""
LAST_APP = list(DUTY_APPS)[-1]


_QUEUE_TYPES = {"LOAD": "loading", "REPLICATE": "loading"}


def _segments(table) -> list[DataSegment]:
    """A ``DataSegment`` per row of ``table`` (``timeline/segments.parquet``'s or
    ``prepared/segments.parquet``'s columns; those it lacks taken as unknown), read column by
    column."""
    n = table.num_rows

    def column(name: str) -> list:
        return table[name].to_pylist() if name in table.column_names else [None] * n

    roots = zip(
        column("start_root_partition_id"),
        column("end_root_partition_id"),
        column("minor_version"),
        column("atomic_update_group_size"),
    )
    overwrites = [None if minor is None else (start, end, minor, group) for start, end, minor, group in roots]
    projections = [None if p is None else tuple(p) for p in column("projections")]
    # positional, in DataSegment's field order: a million segments are made here
    return [
        DataSegment(sid, ds, start, end, version, part or 0, size or 0, shard or "numbered", cores, over, proj, groups)
        for sid, ds, start, end, version, part, size, shard, cores, over, proj, groups in zip(
            column("segment_id"),
            column("datasource"),
            column("start_ms"),
            column("end_ms"),
            column("version"),
            column("partition_num"),
            column("size_bytes"),
            column("shard_type"),
            column("num_core_partitions"),
            overwrites,
            projections,
            column("cluster_groups"),
        )
    ]


REPLICA_COLUMNS = ["segment_id", "server", "tier", "served", "queued_load", "queue_type", "queued_drop"]
"""The columns of ``prepared/replicas.parquet`` a run reads."""


def read_replicas(work: Path):
    """``prepared/replicas.parquet``'s :data:`REPLICA_COLUMNS` (pyarrow Table): read once by a duty's
    task and handed to what needs it (:func:`cluster_state`, :func:`_acting_ids`,
    :func:`_served_beyond`)."""
    return pq.read_table(Path(work) / "prepared" / "replicas.parquet", columns=REPLICA_COLUMNS)


def cluster_state(
    work: Path,
    snapshot: Path,
    tiers: set[str] | None = None,
    also: set[str] | None = None,
    only: set[str] | None = None,
    replicas=None,
) -> ClusterState:
    """The cluster as Druid's Coordinator would see it, from ``WORK/timeline`` and ``WORK/prepared``
    and the snapshot's rules. Segments marked used (overshadowed ones and tombstones included) are
    the used set; served segments of no used set keep their prepared row (size 0 when unlisted).
    ``tiers``: only the servers of these tiers, and only the segments they serve or queue, and those
    of ``also`` (the segments the run's earlier duties queued). ``only``: every server, but only
    these segments (the state's ``only``): what a duty that decides nothing of the others needs.
    ``replicas``: :func:`read_replicas` of ``work``, when the caller has read it already."""
    server_table = pq.read_table(work / "prepared" / "servers.parquet")
    replica_table = read_replicas(work) if replicas is None else replicas
    wanted_ids = None
    if tiers is not None:
        server_table = server_table.filter(pc.is_in(server_table["tier"], pa_array(sorted(tiers))))
        # the names as strings: an empty servers table's column is typed null
        names = pa_array(server_table["server"].to_pylist())
        replica_table = replica_table.filter(pc.is_in(replica_table["server"].cast(pa.string()), names))
    if only is not None:
        only_ids = pa_array(sorted(only))
        replica_table = replica_table.filter(pc.is_in(replica_table["segment_id"], only_ids))
    if tiers is not None:
        also_ids = pa_array(sorted(also or ()))
        if only is not None:
            also_ids = also_ids.filter(pc.is_in(also_ids, only_ids))
        wanted_ids = pc.unique(pa.concat_arrays([replica_table["segment_id"].combine_chunks(), also_ids]))
    elif only is not None:
        wanted_ids = only_ids

    timeline = read_where(
        work / "timeline" / "segments.parquet", [*TIMELINE_SEGMENT_COLUMNS, "used", "overshadowed"], wanted_ids
    )
    segments = _segments(timeline)
    by_id = {segment.id: segment for segment in segments}
    used_flags, overshadowed_flags = timeline["used"].to_pylist(), timeline["overshadowed"].to_pylist()
    used = {segment.id: segment for segment, flag in zip(segments, used_flags) if flag}
    overshadowed = {segment.id for segment, u, o in zip(segments, used_flags, overshadowed_flags) if u and o}
    prepared_table = read_where(work / "prepared" / "segments.parquet", PREPARED_SEGMENT_COLUMNS, wanted_ids)
    prepared_table = prepared_table.filter(pc.invert(pc.is_in(prepared_table["segment_id"], timeline["segment_id"])))
    for segment in _segments(prepared_table):
        by_id.setdefault(segment.id, segment)
    servers = _servers(server_table)
    names_served = pa_array(list(servers))
    served = replica_table.filter(
        pc.and_(
            pc.fill_null(replica_table["served"], False),
            pc.is_in(replica_table["server"].cast(pa.string()), names_served),
        )
    )
    # each server's served segments in the replicas' order: grouped by a stable sort on the server
    codes = pc.dictionary_encode(served["server"].combine_chunks())
    server_codes = codes.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(server_codes, kind="stable")
    grouped_codes = server_codes[order]
    grouped_ids = served["segment_id"].combine_chunks().take(pa.array(order)).to_pylist()
    starts = np.flatnonzero(np.diff(grouped_codes, prepend=-1)).tolist()
    names = codes.dictionary.to_pylist()
    for start, end in zip(starts, [*starts[1:], len(grouped_ids)]):
        ids = grouped_ids[start:end]
        servers[names[grouped_codes[start]]].segments.update(zip(ids, map(by_id.__getitem__, ids)))
    loading = replica_table.filter(pc.fill_null(replica_table["queued_load"], False))["segment_id"]
    served_loading = served.filter(pc.is_in(served["segment_id"], loading.combine_chunks()))
    # of the segments with a load queued: how many replicas each tier serves
    served_in_tier = Counter(zip(served_loading["segment_id"].to_pylist(), served_loading["tier"].to_pylist()))
    queues = {name: LoadQueue(name) for name in servers}
    queued = pc.or_(
        pc.fill_null(replica_table["queued_load"], False), pc.fill_null(replica_table["queued_drop"], False)
    )
    for r in replica_table.filter(queued).to_pylist():
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
            queue.load(segment, action, profile=ASSUMED_PROFILE)
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
        only=None if only is None else frozenset(only),
    )


def _servers(server_table) -> dict[str, DruidServer]:
    """A ``DruidServer`` per row of ``prepared/servers.parquet`` (``server_table``), serving nothing
    yet, by name."""
    return {
        r["server"]: DruidServer(
            name=r["server"],
            tier=r["tier"],
            max_size=int(r["max_size"]),
            curr_size=int(r["current_size"]),
            storage_size=int(r.get("storage_size") or 0),
            profiles_unknown=True,
        )
        for r in server_table.to_pylist()
    }


TIMELINE_SEGMENT_COLUMNS = [
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
    "projections",
    "cluster_groups",
]
"""The columns of ``timeline/segments.parquet`` a run makes a ``DataSegment`` from (:func:`_segments`)."""
PREPARED_SEGMENT_COLUMNS = ["segment_id", "datasource", "start_ms", "end_ms", "version", "partition_num", "size_bytes"]
"""The columns of ``prepared/segments.parquet`` a run makes a segment of no used set from."""


def read_where(path: Path, columns: list[str], ids=None):
    """``columns`` of the Parquet table at ``path`` (pyarrow Table, in the file's order): the rows
    whose ``segment_id`` is one of ``ids`` (a string array; None: every row), filtered batch by
    batch as it is read, so that a large table is never held whole for a few of its rows."""
    return pq.read_table(path, columns=columns, filters=None if ids is None else pc.field("segment_id").isin(ids))


def pa_array(values: list[str]):
    return pa.array(values, pa.string())


def given_config(snapshot: Path, overrides: dict | None) -> dict:
    """The snapshot's ``coordinator_config.json`` object with ``overrides`` over it (Druid's key names)."""
    given = read_json(snapshot, CONFIG_FILE, required=False) or {}
    return {**given, **(overrides or {})}


def _refuse_rules_of_a_later_release(snapshot: Path, config) -> None:
    """Druid 35.0.0 cannot read Druid 38's partial-load rules (its ``Rule`` has no such type):
    ``InputError`` naming the first one, when ``config`` reproduces 35.0.0."""
    if config.is_38:
        return
    for datasource, rules in load_rules(snapshot).items():
        for rule in rules:
            if rule.type in PARTIAL_RULE_TYPES:
                raise InputError(
                    f"rules.json: {datasource}'s rule {rule.type} is a rule of Druid 38.0.0, which the "
                    f"Coordinator of Druid {config.release} cannot read (druidVersion {config.release}, "
                    f"from the {config.release_from}); plan with druidVersion 38.0.0"
                )


def run_config(snapshot: Path, overrides: dict | None = None):
    """The ``DruidConfig`` of a run of ``snapshot``: its ``coordinator_config.json`` with
    ``overrides``, and the release of its cluster (``servers.json``'s version) unless they name one.

    Raises:
        ValueError: as ``druid_config``.
    """
    return druid_config(given_config(snapshot, overrides), load_cluster_version(snapshot))


def operation_rows(operations: list[Operation], decommissioning: set[str]) -> list[dict]:
    """The run's operations as plan rows (``op_id`` in the order queued): a request is a ``LOAD``
    (queue type ``loading`` for Druid's LOAD and REPLICATE, ``balancing`` or ``decommissioning``
    for a MOVE_TO, by its source) or a ``DROP``; a move's drop at its source follows its load
    (``depends_on``, reason ``MOVE_FROM``); a cancelled request is a ``CANCEL`` of the queue type it
    had. ``reason`` is Druid's action. ``decommissioning``: the servers that are."""
    rows: list[dict] = []
    for op in operations:
        action = op.action.value
        if op.event is QueueEvent.CANCELLED:
            kind = Action.CANCEL
        else:
            kind = Action.DROP if op.action is SegmentAction.DROP else Action.LOAD
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
            **_partial_columns(op.profile if kind == Action.LOAD else None),
        }
        rows.append(row)
        if op.action is SegmentAction.MOVE_TO and kind == Action.LOAD and op.move_source:
            source_tier = op.tier
            rows.append(
                {
                    **row,
                    "op_id": len(rows),
                    "action": Action.DROP,
                    "queue_type": None,
                    "tier": source_tier,
                    "server": op.move_source,
                    "depends_on": row["op_id"],
                    "reason": SegmentAction.MOVE_FROM.value,
                    **_partial_columns(None),
                }
            )
    return rows


def _partial_columns(profile) -> dict:
    """The op log's ``partial_*`` columns of a load of ``profile``'s part (all None without one)."""
    if profile is None:
        return dict.fromkeys(PARTIAL_OP_COLUMNS)
    return {
        "partial_matcher": profile.matcher,
        "partial_type": profile.load_spec_type,
        "partial_parts": json.dumps(list(profile.parts)),
        "partial_fingerprint": profile.fingerprint,
    }


def queued_operations(work: Path) -> tuple[list[QueuedOperation], list[tuple[int, str, str]]]:
    """What the earlier duties of the run in ``work`` queued and cancelled, for
    :meth:`CoordinatorRun.replay`: the op log's rows after stage 1 (``PrepareBalancerAndLoadQueues``
    runs again instead) in order, a move's drop at its source folded into its load, and the moves
    called off on their source that each application's record keeps (positions counted over the
    whole list)."""
    manifest = json.loads((work / "ops" / "manifest.json").read_text())
    operations: list[QueuedOperation] = []
    unmarked: list[tuple[int, str, str]] = []
    for step, name in zip(manifest["steps"], manifest["files"]):
        if step["stage"] <= DUTY_STAGES["prepare"]:
            continue
        rows = pq.read_table(work / "ops" / name).to_pylist()
        sources = {r["depends_on"]: r["server"] for r in rows if r["reason"] == SegmentAction.MOVE_FROM.value}
        first = len(operations)
        for r in rows:
            if r["reason"] == SegmentAction.MOVE_FROM.value:
                continue
            event = QueueEvent.CANCELLED if r["action"] == Action.CANCEL else QueueEvent.ASSIGNED
            action = SegmentAction(r["reason"])
            source = sources.get(r["op_id"]) if action is SegmentAction.MOVE_TO else None
            operations.append(QueuedOperation(event, action, r["server"], r["segment_id"], source))
        app = _app_of_step(step["step"])
        if app is not None and (work / DRUID_DIR / f"{app}.json").exists():
            part = json.loads((work / DRUID_DIR / f"{app}.json").read_text())
            unmarked += [(first + i, server, sid) for i, server, sid in part.get("unmarked", {}).get(step["step"], [])]
    return operations, unmarked


def _step(duty: str) -> str:
    """The op log step of a duty's operations."""
    return f"druid_{duty}"


def _app_of_step(step: str) -> str | None:
    return next((app for app, duties in DUTY_APPS.items() if step in {_step(d) for d in duties}), None)


def _read_part(work: Path, app: str) -> dict:
    return json.loads((work / DRUID_DIR / f"{app}.json").read_text())


def build_run(spec: dict, tiers: set[str] | None = None, replicas=None, whole: bool = True) -> CoordinatorRun:
    """The run of ``spec`` (``work``, ``snapshot`` paths, ``overrides``) as a duty's application
    starts it: built from the prepared tables (``replicas``: :func:`read_replicas`; of ``tiers``
    only, when given),
    ``PrepareBalancerAndLoadQueues`` run again, then, after the first application, the replicas the
    rules started counted against the replication throttle and what the earlier duties queued
    replayed. ``whole``: False when the run need not be held for later applications, so that
    ``druid_rules`` may hold only the segments that act (:func:`_rules_apart`) and a tier's
    ``druid_balance`` only those queued or acted on, the rest as rows (:func:`_balance_state`)."""
    work, snapshot = Path(spec["work"]), Path(spec["snapshot"])
    meta = json.loads((work / "prepared" / "meta.json").read_text())
    config = run_config(snapshot, spec.get("overrides"))
    now_ms = int(meta["now_ms"])
    first = spec["app"] == list(DUTY_APPS)[0]
    operations, unmarked = ([], []) if first else queued_operations(work)
    only = apart = None
    if tiers is None and spec["app"] in ("druid_unload", LAST_APP):
        only = _acting_ids(work, spec["app"], config, operations, unmarked, replicas)
    elif tiers is None and first and not whole:
        found = _rules_apart(work, snapshot, config, replicas, now_ms)
        if found is not None:
            only, apart = found
    also = {op.segment_id for op in operations}
    if tiers is not None and not whole and spec["app"] == "druid_balance":
        state = _balance_state(work, snapshot, tiers, also, replicas)
    else:
        state = cluster_state(work, snapshot, tiers, also, only, replicas)
    used_count = apart.used_count if apart is not None else None
    if not first:
        used_count = _read_part(work, list(DUTY_APPS)[0])["used_count"]
    run = CoordinatorRun(state, config, now_ms=now_ms, used_count=used_count)
    run.apart = apart
    run.prepare(emit=first and tiers is None)
    if not first:
        # the replicas the rules started count against the tiers' replication throttle (a move of
        # a loading replica is a new replica: BalanceSegments is throttled by what RunRules spent)
        run.assigner.throttler.assigned = dict(_read_part(work, list(DUTY_APPS)[0])["replicas_started"])
        run.replay(operations, unmarked)
    return run


def _acting_ids(
    work: Path, app: str, config, operations: list[QueuedOperation], unmarked: list, replicas
) -> set[str] | None:
    """The segments ``app``'s duties can act on or read, when they are few enough to hold only them
    (a run's ``only``: :func:`cluster_state`), else None. In every case the segments queued before
    the run (``prepared/replicas.parquet``) or by it (``operations``, ``unmarked``): replaying them
    decides nothing, and they are all the load queues hold. ``druid_clone`` with no clone target
    (``CloneHistoricals`` queues nothing then) needs no more: it counts the load queues and writes
    the projection. ``druid_unload`` also reads the served segments that are not used (it drops
    them), the overshadowed used ones and those no rule wants replicas of, and every segment of the
    same datasource overlapping one of these (the timeline ``MarkOvershadowedSegmentsAsUnused``
    checks them against). ``replicas``: :func:`read_replicas`."""
    if app == LAST_APP and config["cloneServers"]:
        return None
    queued = pc.or_(pc.fill_null(replicas["queued_load"], False), pc.fill_null(replicas["queued_drop"], False))
    ids = set(pc.unique(replicas["segment_id"].filter(queued)).to_pylist())
    ids |= {op.segment_id for op in operations} | {sid for _, _, sid in unmarked}
    if app == LAST_APP:
        return ids
    columns = ["segment_id", "datasource", "start_ms", "end_ms"]
    timeline = pq.read_table(work / "timeline" / "segments.parquet", columns=[*columns, "used", "overshadowed"])
    used = timeline.filter(timeline["used"])
    served = replicas.filter(pc.fill_null(replicas["served"], False))["segment_id"]
    ids |= set(pc.unique(served.filter(pc.invert(pc.is_in(served, used["segment_id"])))).to_pylist())
    zero_replica = _read_part(work, list(DUTY_APPS)[0])["zero_replica"]
    flagged = pc.or_(pc.fill_null(used["overshadowed"], False), pc.is_in(used["segment_id"], pa_array(zero_replica)))
    ids |= set(used["segment_id"].filter(flagged).to_pylist())
    # every segment overlapping a flagged one of its datasource (the union of the flagged intervals
    # of each datasource, merged, then each segment looked up in it)
    prepared = pq.read_table(work / "prepared" / "segments.parquet", columns=columns)
    rows = pa.concat_tables([timeline.select(columns), prepared.cast(timeline.select(columns).schema)])
    flagged_rows = used.filter(flagged)
    for datasource in pc.unique(flagged_rows["datasource"]).to_pylist():
        mine = flagged_rows.filter(pc.equal(flagged_rows["datasource"], datasource))
        order = np.lexsort((mine["end_ms"].to_numpy(), mine["start_ms"].to_numpy()))
        starts, ends = mine["start_ms"].to_numpy()[order], mine["end_ms"].to_numpy()[order]
        merged_starts, merged_ends = [], []
        for start, end in zip(starts.tolist(), ends.tolist()):
            if merged_ends and start < merged_ends[-1]:
                merged_ends[-1] = max(merged_ends[-1], end)
            else:
                merged_starts.append(start)
                merged_ends.append(end)
        of_datasource = rows.filter(pc.equal(rows["datasource"], datasource))
        s, e = of_datasource["start_ms"].to_numpy(), of_datasource["end_ms"].to_numpy()
        at = np.searchsorted(np.array(merged_starts), e, side="left") - 1
        overlaps = (at >= 0) & (np.array(merged_ends)[np.maximum(at, 0)] > s)
        ids |= set(of_datasource["segment_id"].filter(pa.array(overlaps)).to_pylist())
    return ids


def _rules_apart(work: Path, snapshot: Path, config, replicas, now_ms: int) -> tuple[set[str], SettledApart] | None:
    """For ``druid_rules``: the segments a run must hold (every used segment that is not settled,
    every segment queued anywhere) and what it needs of the settled ones
    (:mod:`~segment_balancer.planner.druid_coordinator.settled`), from ``WORK/timeline`` and
    ``replicas`` (:func:`read_replicas`); None when the whole run is needed: a partial-load rule
    (its match asks for each segment's shape) or round-robin assignment off (the cost strategy
    reads every projected segment of a server)."""
    rules = load_rules(snapshot)
    if any(not rule.is_interval_based for rule_list in rules.values() for rule in rule_list):
        return None
    columns = ["segment_id", "datasource", "version", "start_ms", "end_ms", "partition_num", "size_bytes"]
    timeline = pq.read_table(work / "timeline" / "segments.parquet", columns=[*columns, "used", "overshadowed"])
    used = timeline.filter(timeline["used"])
    if not config.loading(used.num_rows).use_round_robin_assignment:
        return None
    # the cluster's tiers and managed historicals as the run orders them (its servers, no segment)
    servers = list(_servers(pq.read_table(work / "prepared" / "servers.parquet")).values())
    skeleton = CoordinatorRun(
        ClusterState(servers=servers, used={}, rules=rules), config, now_ms=now_ms, used_count=used.num_rows
    )
    skeleton.prepare(emit=False)
    managed = skeleton.cluster.managed
    tiers = list(managed)
    names = [h.name for hs in managed.values() for h in hs]
    tier_of = np.array([j for j, hs in enumerate(managed.values()) for _ in hs], dtype=np.int64)

    ids = used["segment_id"].combine_chunks().cast(pa.string())
    queued = pc.or_(pc.fill_null(replicas["queued_load"], False), pc.fill_null(replicas["queued_drop"], False))
    queued_ids = pc.unique(replicas["segment_id"].filter(queued).combine_chunks().cast(pa.string()))
    served = replicas.filter(pc.fill_null(replicas["served"], False))
    row = pc.fill_null(pc.index_in(served["segment_id"].cast(pa.string()), ids), -1).to_numpy().astype(np.int64)
    server = pc.fill_null(pc.index_in(served["server"].cast(pa.string()), pa_array(names)), -1).to_numpy()
    keep = (row >= 0) & (server >= 0)
    # a replica once per (segment, historical), as a server's served segments are a map
    pairs = np.unique(row[keep] * max(1, len(names)) + server[keep].astype(np.int64))
    row, server = pairs // max(1, len(names)), pairs % max(1, len(names))
    loaded = np.bincount(row * len(tiers) + tier_of[server], minlength=used.num_rows * len(tiers))
    loaded = loaded.reshape(used.num_rows, len(tiers)).astype(np.int32)

    datasource_codes, ranks, datasources = _codes_and_ranks(used["datasource"].combine_chunks())
    datasource_rank = ranks[datasource_codes]
    version_codes, ranks, _ = _codes_and_ranks(used["version"].combine_chunks())
    version_rank = ranks[version_codes]
    rows = settled_rows(
        datasource_codes=datasource_codes,
        datasources=datasources,
        start_ms=used["start_ms"].to_numpy().astype(np.int64),
        end_ms=used["end_ms"].to_numpy().astype(np.int64),
        datasource_rank=datasource_rank,
        version_rank=version_rank,
        partition=pc.fill_null(used["partition_num"], 0).to_numpy().astype(np.int64),
        size_bytes=pc.fill_null(used["size_bytes"], 0).to_numpy().astype(np.int64),
        overshadowed=pc.fill_null(used["overshadowed"], False).to_numpy(zero_copy_only=False),
        queued=pc.is_in(ids, queued_ids).to_numpy(zero_copy_only=False),
        loaded=loaded,
        managed_tiers=tiers,
        rules=rules,
        now_ms=now_ms,
        plan_of=skeleton.assigner.settled_plan,
    )
    held = np.flatnonzero(~rows.settled)
    held_ids = ids.take(pa.array(held)).to_pylist()
    visit = rows.visit_position[held].tolist()
    apart = SettledApart(
        used_count=used.num_rows,
        visit_positions={sid: p for sid, p in zip(held_ids, visit) if p >= 0},
        used_positions=dict(zip(held_ids, held.tolist())),
        touches=rows.touches,
        datasources=rows.datasources,
        under_first=rows.under_first,
    )
    return set(held_ids) | set(queued_ids.to_pylist()), apart


def _codes_and_ranks(values) -> tuple:
    """A string array's dictionary codes (int64, one per value), each distinct value's rank in code
    point order (int64, by code: what ``DataSegment.newest_first`` compares) and the values by code."""
    encoded = pc.dictionary_encode(values)
    rank = np.empty(len(encoded.dictionary), dtype=np.int64)
    rank[pc.array_sort_indices(encoded.dictionary).to_numpy()] = np.arange(len(encoded.dictionary))
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), rank, encoded.dictionary.to_pylist()


def _balance_state(work: Path, snapshot: Path, tiers: set[str], also: set[str], replicas) -> ClusterState:
    """:func:`cluster_state` of ``tiers`` for ``BalanceSegments``: the segments queued on their
    historicals and ``also`` (what the earlier duties acted on) as objects, every other served
    segment a row of the state's ``unheld`` (:mod:`~segment_balancer.planner.druid_coordinator.
    unheld`), counted into each historical's share, in the order the balancer walks it."""
    servers_table = pq.read_table(work / "prepared" / "servers.parquet")
    names = servers_table.filter(pc.is_in(servers_table["tier"], pa_array(sorted(tiers))))["server"].to_pylist()
    mine = replicas.filter(pc.is_in(replicas["server"].cast(pa.string()), pa_array(names)))
    queued = pc.or_(pc.fill_null(mine["queued_load"], False), pc.fill_null(mine["queued_drop"], False))
    held_ids = set(pc.unique(mine["segment_id"].filter(queued)).to_pylist()) | set(also)
    state = cluster_state(work, snapshot, tiers, also, held_ids, replicas)

    served = mine.filter(pc.fill_null(mine["served"], False))
    served_ids = served["segment_id"].cast(pa.string()).combine_chunks()
    ids = pc.unique(served_ids)  # the rows: each served segment once, in first-seen order
    row_of_replica = pc.index_in(served_ids, ids).to_numpy().astype(np.int64)
    server_names = pc.unique(served["server"].cast(pa.string()).combine_chunks())
    server_of_replica = pc.index_in(served["server"].cast(pa.string()), server_names).to_numpy().astype(np.int64)

    timeline = read_where(work / "timeline" / "segments.parquet", [*TIMELINE_SEGMENT_COLUMNS, "used"], ids)
    # each row's place in the two tables: timeline rows first, then the prepared rows of no used set
    in_timeline = pc.fill_null(pc.index_in(ids, timeline["segment_id"]), -1).to_numpy().astype(np.int64)
    prepared = read_where(
        work / "prepared" / "segments.parquet", PREPARED_SEGMENT_COLUMNS, ids.filter(pa.array(in_timeline < 0))
    )
    in_prepared = pc.fill_null(pc.index_in(ids, prepared["segment_id"]), -1).to_numpy().astype(np.int64)

    where = np.where(in_timeline >= 0, in_timeline, len(timeline) + in_prepared)  # each row in the two, stacked

    def column(name: str) -> np.ndarray:
        """int64 per row (nulls 0), from the row's table."""
        both = pa.concat_arrays([t[name].cast(pa.int64()).combine_chunks() for t in (timeline, prepared)])
        return pc.fill_null(both, 0).to_numpy()[where]

    def ranked(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
        both = pa.concat_arrays([t[name].cast(pa.string()).combine_chunks() for t in (timeline, prepared)])
        codes, rank, names = _codes_and_ranks(both)
        return codes[where], rank, names

    datasource_codes, datasource_rank, datasource_names = ranked("datasource")
    version_codes, version_rank, _ = ranked("version")
    start, end, partition, size = (column(name) for name in ("start_ms", "end_ms", "partition_num", "size_bytes"))
    used = np.zeros(len(ids), dtype=bool)
    used[in_timeline >= 0] = pc.fill_null(timeline["used"], False).to_numpy(zero_copy_only=False)[
        in_timeline[in_timeline >= 0]
    ]

    held_mask = pc.is_in(ids, pa_array(sorted(held_ids))).to_numpy(zero_copy_only=False)
    objects = {sid: segment for server in state.servers for sid, segment in server.segments.items()}
    held_rows = np.flatnonzero(held_mask)
    held = dict(zip(held_rows.tolist(), map(objects.__getitem__, ids.take(pa.array(held_rows)).to_pylist())))

    by_server = {server.name: server for server in state.servers}
    order: dict[str, np.ndarray] = {}
    servers_of: dict[int, list[str]] = {}
    position = np.arange(len(row_of_replica), dtype=np.int64)
    grouping = np.argsort(server_of_replica, kind="stable")
    bounds = np.flatnonzero(np.diff(server_of_replica[grouping], prepend=-1, append=len(server_names) + 1))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        replicas_here = grouping[a:b]
        name = server_names[int(server_of_replica[replicas_here[0]])].as_py()
        rows = row_of_replica[replicas_here]
        # the server's datasources in the order first served, then Java's hash order of them
        codes = datasource_codes[rows]
        _, first = np.unique(codes, return_index=True)
        seen = codes[np.sort(first)]
        java = java_hash_order([datasource_names[c] for c in seen.tolist()], java_concurrent_map_capacity(len(seen)))
        place = np.zeros(len(datasource_names), dtype=np.int64)
        place[[datasource_names.index(n) for n in java]] = np.arange(len(java))
        walk = np.lexsort(
            (
                position[replicas_here],
                -partition[rows],
                -version_rank[version_codes[rows]],
                -start[rows],
                -end[rows],
                place[codes],
            )
        )
        order[name] = rows[walk]
        server = by_server[name]
        loose = rows[~held_mask[rows]]
        share = UnheldShare(count=len(loose), bytes=int(size[loose].sum()))
        share.intervals.update(Counter(zip(start[loose].tolist(), end[loose].tolist())))
        share.datasource_intervals.update(
            Counter(
                zip(
                    [datasource_names[c] for c in datasource_codes[loose].tolist()],
                    start[loose].tolist(),
                    end[loose].tolist(),
                )
            )
        )
        server.unheld = share
        for row in loose.tolist():
            servers_of.setdefault(row, []).append(name)
    for server in state.servers:
        if server.unheld is None:
            server.unheld = UnheldShare()

    def make(rows: np.ndarray) -> list[DataSegment]:
        parts = []
        for row in rows.tolist():
            if in_timeline[row] >= 0:
                parts.append(_segments(timeline.slice(int(in_timeline[row]), 1))[0])
            else:
                parts.append(_segments(prepared.slice(int(in_prepared[row]), 1))[0])
        return parts

    state.unheld = UnheldServed(make, held, datasource_codes, datasource_names, used, order, servers_of)
    return state


@dataclass
class _Held:
    """The whole run as a duty application's task left it on the driver, for the next application
    of the same run in the same process to go on with (:meth:`CoordinatorRun.resume`) instead of
    building it again and replaying what came before (:func:`build_run`): the same run, as Druid
    runs its duties one after the other on one. ``key``: the run's work directory, snapshot and
    overrides; ``done``: the application it ran last (``tiers``: the tiers ``druid_balance`` has
    balanced so far); ``started``: the op log's manifest as that application's task began;
    ``committed``: the manifest once its operations were appended (None until then). A run whose
    work directory changed otherwise (another manifest) is never taken."""

    run: CoordinatorRun
    key: tuple
    done: str
    tiers: frozenset = frozenset()
    started: tuple | None = None
    committed: tuple | None = None


_HELD: _Held | None = None
"""At most one run held, on the driver only (``spark.session.on_driver``)."""


def _run_key(spec: dict) -> tuple:
    overrides = json.dumps(spec.get("overrides"), sort_keys=True)
    return (str(Path(spec["work"]).absolute()), str(spec["snapshot"]), overrides)


def _manifest_mark(work: Path) -> tuple | None:
    """The op log manifest's identity: its inode, modification time (ns) and size (each commit is
    an atomic replace: a new inode), and its bytes; None when there is none."""
    path = Path(work) / "ops" / "manifest.json"
    try:
        st = path.stat()
        return (st.st_ino, st.st_mtime_ns, st.st_size, path.read_bytes())
    except FileNotFoundError:
        return None


def _take_held(spec: dict) -> _Held | None:
    """The held run when it is the one ``spec``'s task goes on from, else None; either way no run
    is held afterwards (the task holds its own when it ends)."""
    global _HELD
    held, _HELD = _HELD, None
    if held is None or held.key != _run_key(spec):
        return None
    app, mark = spec["app"], _manifest_mark(Path(spec["work"]))
    apps = list(DUTY_APPS)
    if app == held.done == "druid_balance":
        ok = held.committed is None and spec.get("tier") not in held.tiers and held.started == mark
    else:
        ok = held.committed is not None and held.committed == mark and apps.index(app) == apps.index(held.done) + 1
    return held if ok else None


def _commit_held(spec: dict, tiers: list[str] | None = None) -> None:
    """After ``spec``'s application appended its operations: the held run (if it is the one that
    application's tasks left, every tier of ``tiers`` balanced for ``druid_balance``) may be taken
    by the next application; the last application's run is let go."""
    global _HELD
    held = _HELD
    goes_on = (
        held is not None
        and held.key == _run_key(spec)
        and held.done == spec["app"] != LAST_APP
        and held.committed is None
        and (tiers is None or held.tiers == frozenset(tiers))
    )
    if goes_on:
        held.committed = _manifest_mark(Path(spec["work"]))
    else:
        _HELD = None


def _duty_task(spec: dict) -> dict:
    """One Spark task of a duty's application: build the run (:func:`build_run`; on the driver, go
    on with the run the application before left, :class:`_Held`), run the application's duties
    (``druid_balance``: of ``spec["tier"]`` only), write its operations to
    ``WORK/druid/<application>[/<tier>].parquet`` and return its record (stats rows, the moves
    called off on their source per op log step, what later duties need). The cyclic garbage
    collector is paused meanwhile (:func:`segment_balancer.common.bulk.cycle_collection_paused`: the
    run is millions of objects at 1M segments, and a paused collector builds it twice as fast)."""
    with cycle_collection_paused():
        return _duty(spec)


def _duty(spec: dict) -> dict:
    """:func:`_duty_task`'s work."""
    global _HELD
    app, work = spec["app"], Path(spec["work"])
    tier = spec.get("tier")
    driver = on_driver()
    started = _manifest_mark(work) if driver else None
    held = _take_held(spec) if driver else None
    whole = held is not None or tier is None
    replicas = None
    if held is not None:
        run = held.run
        run.resume()
    else:
        replicas = read_replicas(work)
        run = build_run(spec, None if tier is None else {tier}, replicas, whole=driver)
    record: dict = {}
    if app == "druid_rules":
        run.rules()
        record = {
            "used_count": run.used_count,
            "deleted": sorted(run.result.deleted),
            "zero_replica": sorted(run.zero_replica_ids()),
            "replicas_started": run.assigner.throttler.assigned,
        }
    elif app == "druid_unload":
        run.unload(_read_part(work, "druid_rules")["zero_replica"])
        record = {
            "overshadowed": sorted(run.result.overshadowed),
            "served_and_queued": _served_and_queued(run, replicas),
        }
    elif app == "druid_balance":
        most = run.balance([tier], _read_part(work, "druid_unload")["served_and_queued"])
        record = {"max_segments_to_move": most}
    else:
        run.clone()
    result = run.finish(collect=app == LAST_APP)
    decommissioning = {h.name for h in run.holders if h.decommissioning}
    by_step: dict[str, list[Operation]] = {}
    for op in result.operations:
        by_step.setdefault(_step(op.duty), []).append(op)
    unmarked: dict[str, list] = {}
    offsets, seen = {}, 0
    for duty in DUTY_APPS[app]:
        offsets[_step(duty)] = seen
        seen += len(by_step.get(_step(duty), []))
    for position, server, segment_id in result.unmarked:
        step = max((s for s, o in offsets.items() if o <= position), key=lambda s: offsets[s])
        unmarked.setdefault(step, []).append([position - offsets[step], server, segment_id])
    out = work / DRUID_DIR / (app if tier is None else f"{app}.tiers")
    files = {}
    for duty in DUTY_APPS[app]:
        rows = operation_rows(by_step.get(_step(duty), []), decommissioning)
        codes = _codes(work, {r["segment_id"] for r in rows})
        for row in rows:
            row["idx"], row["code"] = codes[row["segment_id"]]
        name = f"{_step(duty)}.parquet" if tier is None else f"{_step(duty)}.{_safe(tier)}.parquet"
        write_parquet_atomic(pa.Table.from_pylist(rows, schema=OPS_ARROW_SCHEMA), out / name)
        files[_step(duty)] = str(out / name)
    if app == LAST_APP:
        _write_assignment(run, work, replicas)
    stats = [{"metric": r.metric, "dims": r.dims, "value": r.value} for r in run.stats.rows()]
    if driver and whole and run.state.only is None and app != LAST_APP:
        tiers = frozenset() if tier is None else frozenset({tier})
        if held is not None and held.done == app:
            tiers |= held.tiers
        _HELD = _Held(run, _run_key(spec), app, tiers, started)
    return {**record, "stats": stats, "unmarked": unmarked, "files": files}


def _served_and_queued(run: CoordinatorRun, replicas) -> int:
    """:func:`served_and_queued` of the whole cluster, for a run of some segments only
    (``state.only``) the other segments' served replicas on managed historicals counted from
    ``replicas`` (:func:`read_replicas`; nothing is queued of them)."""

    held = served_and_queued(run.cluster)
    if run.state.only is None:
        return held
    return held + _served_beyond(run, replicas, [h.name for hs in run.cluster.managed.values() for h in hs]).num_rows


def _served_beyond(run: CoordinatorRun, replicas, servers: list[str]):
    """The replicas ``replicas`` (:func:`read_replicas`) serves on ``servers`` of the segments a run
    of some segments only (``state.only``) does not hold: a table (``segment_id``, ``server``)."""
    keep = pc.and_(
        pc.and_(
            pc.fill_null(replicas["served"], False), pc.is_in(replicas["server"].cast(pa.string()), pa_array(servers))
        ),
        pc.invert(pc.is_in(replicas["segment_id"], pa_array(sorted(run.state.only)))),
    )
    return replicas.filter(keep).select(["segment_id", "server"])


def _safe(tier: str) -> str:
    """A tier's name as part of a file name."""
    return hashlib.sha256(tier.encode()).hexdigest()[:16]


def _codes(work: Path, ids: set[str]) -> dict[str, tuple[int, int]]:
    """``segment_id`` -> (``idx``, ``code``) of the prepared segments among ``ids``."""

    if not ids:
        return {}
    table = read_where(work / "prepared" / "segments.parquet", ["segment_id", "idx", "code"], pa_array(sorted(ids)))
    return {r["segment_id"]: (r["idx"], r["code"]) for r in table.to_pylist()}


def _write_assignment(run: CoordinatorRun, work: Path, replicas) -> None:
    """``WORK/druid/assignment.parquet``: every (segment, historical, tier) the run projects, sorted
    (by Arrow: UTF-8 bytes order as Python's code point order). A run of some segments only
    (``state.only``) projects the others where ``replicas`` (:func:`read_replicas`) serves them."""
    ids: list[str] = []
    names: list[str] = []
    tiers: list[str] = []
    for holder in run.holders:
        if holder.server.type.is_historical:
            projected = [s.id for s in holder.projected_segments()]
            ids += projected
            names += [holder.name] * len(projected)
            tiers += [holder.tier] * len(projected)
    schema = pa.schema([("segment_id", pa.string()), ("server", pa.string()), ("tier", pa.string())])
    table = pa.table({"segment_id": ids, "server": names, "tier": tiers}, schema=schema)
    if run.state.only is not None:
        historicals = [h for h in run.holders if h.server.type.is_historical]
        rest = _served_beyond(run, replicas, [h.name for h in historicals])
        server = rest["server"].cast(pa.string()).combine_chunks()
        tier = pa_array([h.tier for h in historicals]).take(
            pc.index_in(server, pa_array([h.name for h in historicals]))
        )
        columns = {"segment_id": rest["segment_id"].cast(pa.string()), "server": server, "tier": tier}
        table = pa.concat_tables([table, pa.table(columns, schema=schema)])
    keys = [("segment_id", "ascending"), ("server", "ascending"), ("tier", "ascending")]
    write_parquet_atomic(table.sort_by(keys), work / DRUID_DIR / "assignment.parquet")


def _merged_stats(parts: list[dict]) -> RunStats:
    """The run's metrics: the rows of every application's tasks, in run order."""
    stats = RunStats()
    for part in parts:
        for row in part["stats"]:
            stats.add(row["metric"], row["value"], **row["dims"])
    return stats


DECISION_METRICS = (m.ASSIGNED, m.DROPPED, m.MOVED, m.UNNEEDED)
"""The run's metrics that count its decisions, summed per tier into the plan's ``druid_metrics``."""


def druid_record(work: Path) -> dict | None:
    """``WORK/druid/run.json`` when the op log holds the ``druid`` coordinator's last step, else None."""
    manifest = Path(work) / "ops" / "manifest.json"
    last = _step(DUTY_APPS[LAST_APP][-1])
    if not manifest.exists() or not any(s["step"] == last for s in json.loads(manifest.read_text())["steps"]):
        return None
    return json.loads((Path(work) / DRUID_DIR / RUN_FILE).read_text())


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
        "release_from": record.get("druid_release_from", "default"),
        "release_note": record.get("druid_release_note"),
        "metrics": record["metrics"],
        "marked_unused": len(record["marked_unused"]),
        "overshadowed_marked_unused": len(record["overshadowed_marked_unused"]),
        "max_segments_to_move": record["max_segments_to_move"],
        "config": record["config"],
    }


def balance_tier_order(server_tiers) -> list[str]:
    """The historical tiers in ``DruidCluster``'s order (Java's hash order of a map filled tier by
    tier, :func:`java_hash_order`), ``server_tiers`` being each historical's tier in the order of
    ``prepared/servers.parquet``, the order the model's cluster adds them in: tiers of one hash
    bucket keep that order, whatever the process's string hashing."""
    names = list(dict.fromkeys(server_tiers))
    return java_hash_order(names, java_map_capacity(len(names)))


def run_druid_app(spark, app: str, snapshot: Path, work: Path, overrides: dict | None = None) -> dict:
    """Run the ``druid`` coordinator's application ``app`` (``DUTY_APPS``) on ``work`` (after
    ``used_segments``, ``prepare`` and the applications before it): its Spark task(s), its record
    ``WORK/druid/<app>.json``, its operations appended to the run's op log (step ``druid_<duty>``
    at the duty's stage), where ``assemble`` finds them; the last one writes ``run.json``. Returns
    its record. Raises ``InputError`` for a dynamic config Druid would refuse."""
    work = Path(work).absolute()
    for where, values in (("config overrides", overrides or {}), (CONFIG_FILE, given_config(snapshot, overrides))):
        try:
            druid_config(values)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
    _refuse_rules_of_a_later_release(snapshot, run_config(snapshot, overrides))
    run = Run(spark, work)
    run.reset_from(DUTY_STAGES[DUTY_APPS[app][0]])
    spec = {"app": app, "work": str(work), "snapshot": str(Path(snapshot).absolute()), "overrides": overrides}
    if app == "druid_balance":
        tiers = balance_tier_order(run.servers_pdf["tier"])
        specs = [{**spec, "tier": t} for t in tiers]
        if _read_part(work, list(DUTY_APPS)[0])["used_count"] > BALANCE_TIERS_AT_ONCE_AT_MOST_SEGMENTS:
            parts = [run_tasks(spark, [one], _duty_task)[0] for one in specs]
        else:
            parts = run_tasks(spark, specs, _duty_task)
        record = {
            "max_segments_to_move": max((p["max_segments_to_move"] for p in parts), default=0),
            "stats": [row for p in parts for row in p["stats"]],
            "unmarked": {},
        }
        step, offset = _step("balance"), 0
        tables = []
        for p in parts:
            table = pq.read_table(p["files"][step])
            for position, server, segment_id in p["unmarked"].get(step, []):
                record["unmarked"].setdefault(step, []).append([offset + position, server, segment_id])
            tables.append(table)
            offset += sum(1 for r in table.column("reason").to_pylist() if r != SegmentAction.MOVE_FROM.value)
        ops = concat_ops(tables) if tables else pa.Table.from_pylist([], schema=OPS_ARROW_SCHEMA)
        write_json_atomic(record, work / DRUID_DIR / f"{app}.json")
        run.append_ops(DUTY_STAGES["balance"], step, ops)
        _commit_held(spec, tiers)
        return record
    record = run_tasks(spark, [spec], _duty_task)[0]
    write_json_atomic(record, work / DRUID_DIR / f"{app}.json")
    for duty in DUTY_APPS[app]:
        run.append_ops(DUTY_STAGES[duty], _step(duty), pq.read_table(record["files"][_step(duty)]))
    _commit_held(spec)
    if app == LAST_APP:
        _write_record(work, run_config(snapshot, overrides))
    return record


def concat_ops(tables: list) -> object:
    """Several applications' op tables as one, each one's ``op_id`` and ``depends_on`` (positions
    in its own table) moved on by the rows before it."""
    out, offset = [], 0
    for table in tables:
        if table.num_rows:
            table = table.set_column(
                table.schema.get_field_index("op_id"), "op_id", pc.add(table["op_id"].cast(pa.int64()), offset)
            )
            table = table.set_column(
                table.schema.get_field_index("depends_on"),
                "depends_on",
                pc.add(table["depends_on"].cast(pa.int64()), offset),
            )
            out.append(table)
        offset += table.num_rows
    if not out:
        return tables[0] if tables else None
    return pa.concat_tables([t.cast(out[0].schema) for t in out])


def _write_record(work: Path, config) -> None:
    """``WORK/druid/run.json`` from every application's record: Druid's metrics of the run in run
    order, the segments it marks unused, the balancer's maximum of moves, the ``config``
    (``DruidConfig``)."""
    parts = [_read_part(work, app) for app in DUTY_APPS]
    rules, unload, balance = (_read_part(work, app) for app in ("druid_rules", "druid_unload", "druid_balance"))
    record = {
        "coordinator": DRUID.name,
        "druid_release": config.release,
        "druid_release_from": config.release_from,
        "druid_release_note": config.release_note,
        "metrics": [{"metric": r.metric, **r.dims, "value": r.value} for r in _merged_stats(parts).rows()],
        "marked_unused": rules["deleted"],
        "overshadowed_marked_unused": unload["overshadowed"],
        "max_segments_to_move": balance["max_segments_to_move"],
        "config": dict(config.values),
        "period_ms": config.period_ms,
    }
    write_json_atomic(record, work / DRUID_DIR / RUN_FILE)
