"""Many Coordinator runs in a row: plan, apply the plan to the snapshot as a cluster would, plan again.

``simulate(spark, snapshot, out, runs)`` answers "where does the cluster end?" (Druid #9087): each
run plans on the current snapshot with the CLI path (:func:`segment_balancer.tools.pipeline.make_plan`, Spark;
the gate checks the plan in its own process while the next run is planned, and the plan is published
once it passed), then :func:`apply_plan` writes the next snapshot:

- every historical completes up to ``loads_per_run`` loads of its queue (default: all), in queue
  order: the loads queued in the snapshot first, then the plan's by ``op_id``; a load fails with
  probability ``load_failure_rate`` (numpy ``default_rng([seed, run])``, servers by name), and a
  failed load leaves the queue; loads not reached stay queued for the next run (with their queue
  type and the time they were requested);
- a drop that depends on a load (a move, a callback) happens only once that load completed; if the
  load failed the drop is cancelled; while the load is still queued the drop stays queued on its
  server (the next plan sees the replica as dropping, as Druid's Coordinator keeps the move's
  callback) and :data:`PENDING_FILE` in the snapshot remembers which load it waits for. Every other
  drop, queued or planned, happens;
- ``curr_size`` of each historical follows its loads and drops (bytes); the snapshot time moves on
  by one Coordinator period (``coordinatorPeriodMillis`` of the effective config).

Segments, rules and the dynamic config are carried over unchanged. Every run's plan and the snapshot
it produced are kept under ``out/run-NNN/``, and ``out/runs.csv`` has one row per run
(:data:`RUN_COLUMNS`), ``out/run-NNN/historicals.csv`` the segments and bytes (and ``max_size``) per historical after
the run; ``out/report.html`` charts the runs and links every run's plan report
(:func:`segment_balancer.plan.report.write_simulation_report`).

Source: issue #9 of this project; Druid's test-only simulator
(``server/src/test/java/org/apache/druid/server/coordinator/simulate/``) loads queued segments the
same way (``loadQueuedSegments``: every queued load completes).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import shutil
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import WriteError, link_or_copy, replace_dir, write_json_atomic, write_text_atomic
from segment_balancer.druid.importer import segment_id
from segment_balancer.druid.instants import format_instant_ms
from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.druid.snapshot.files import server_segments_path
from segment_balancer.druid.snapshot.loader import load_load_queues, load_servers, load_snapshot_meta, read_json
from segment_balancer.plan import validation_process
from segment_balancer.plan.publish import publish_plan
from segment_balancer.plan.report import (
    COORDINATORS_DIR,
    COORDINATORS_FILE,
    MARGINS_FILE,
    margin_name,
    write_simulation_report,
)
from segment_balancer.planner import coordinators
from segment_balancer.planner.balancer_state import NEXT_STATE_FILE, STATE_FILE
from segment_balancer.planner.config import load_config
from segment_balancer.planner.livecost import total_cost
from segment_balancer.planner.operations import Action
from segment_balancer.planner.summary import PlanSummary, read_plan_summary
from segment_balancer.spark.apps import read_overrides
from segment_balancer.spark.session import get_session
from segment_balancer.tools.pipeline import make_plan

log = logging.getLogger(__name__)

RUN_COLUMNS = [
    "run",
    "snapshot_time",
    "operations",
    "loads",
    "drops",
    "moves",
    "balancing_moves",
    "balancing_bytes",
    "moved_bytes",
    "unreplicated_before",
    "underreplicated_before",
    "overreplicated_before",
    "loads_completed",
    "loads_failed",
    "loads_still_queued",
    "drops_done",
    "drops_cancelled",
    "drops_pending",
    "segments_max_minus_min",
    "bytes_max_minus_min",
    "usage_max_minus_min",
    "fullest_usage",
    "total_cost",
    "stable",
]
"""Columns of ``runs.csv``. ``balancing_bytes``: bytes of the balancing moves' loads (stages 7, 10,
11; the ``druid`` coordinator's ``BalanceSegments``); ``moved_bytes``: bytes of the loads of every
move of the plan (a load a drop waits for); ``*_before``: the replication status the run's plan
started from (``status_before`` of its summary, summed over tiers); ``segments_max_minus_min`` and
``bytes_max_minus_min``: after applying, the largest max − min of segments (of bytes) per
historical over the tiers (decommissioning historicals left out); ``usage_max_minus_min``:
likewise of usage, the bytes a historical serves as a percentage of its ``max_size`` (percentage
points); ``fullest_usage``: the largest usage of a historical after applying (%); ``total_cost``:
after applying, the cluster's total placement cost
(:func:`segment_balancer.planner.livecost.total_cost`, Druid's units); ``stable``: the plan had
nothing to load and no balancing move."""
MARGIN_KEY = "balancingMinCostReductionPercent"

PENDING_FILE = "pending_drops.json"
"""Simulator-only file of a snapshot: ``[{"server", "segment_id", "after"}]``, the queued drops that
wait for the load of the same segment on server ``after`` (the planner does not read it)."""
CARRIED = ("segments.jsonl.gz", "segments.jsonl", "rules.json", "coordinator_config.json")


@dataclass
class Applied:
    """What :func:`apply_plan` did: counts of loads completed / failed / still queued and of drops
    done / cancelled / pending (waiting for a queued load), ``historicals`` (DataFrame ``server``,
    ``tier`` str, ``max_size``, ``segments`` and ``bytes`` int64) and ``served`` (DataFrame
    ``server``, ``segment_id`` str: every replica a historical serves) after the run."""

    loads_completed: int = 0
    loads_failed: int = 0
    loads_still_queued: int = 0
    drops_done: int = 0
    drops_cancelled: int = 0
    drops_pending: int = 0
    historicals: pd.DataFrame = field(default_factory=pd.DataFrame)
    served: pd.DataFrame = field(default_factory=pd.DataFrame)


def _read_replicas(snapshot: Path) -> pd.DataFrame:
    """``server``, ``segment_id`` of the snapshot's replica file (any of its accepted forms)."""
    path = server_segments_path(snapshot)
    lines = path.name.endswith((".jsonl", ".jsonl.gz"))
    frame = pd.read_json(path, lines=lines, orient="records", dtype=False)
    if frame.empty:
        return pd.DataFrame({"server": pd.Series(dtype=str), "segment_id": pd.Series(dtype=str)})
    return frame[["server", "segment_id"]]


def _resized(server: dict, delta: int) -> dict:
    """A ``servers.json`` row with its size (``current_size`` and/or ``curr_size``, whichever the
    row has; ``curr_size`` when neither) moved by ``delta`` bytes, at least 0."""
    keys = [k for k in ("current_size", "curr_size") if k in server] or ["curr_size"]
    return {**server, **{k: max(0, int(server.get(k) or 0) + delta) for k in keys}}


def apply_plan(
    snapshot: Path,
    plan: Path,
    sizes: pd.Series,
    out: Path,
    run: int,
    *,
    loads_per_run: int | None = None,
    load_failure_rate: float = 0.0,
    seed: int = 0,
    period_ms: int = 60_000,
    marked_unused: frozenset[str] = frozenset(),
) -> Applied:
    """Write the snapshot that follows ``snapshot`` once the cluster has worked on ``plan`` for one
    run (module docstring), atomically into ``out`` (replaced if present). A ``CANCEL`` (the
    ``druid`` coordinator's) takes the queued load (or, without a queue type, the queued drop) of
    its segment off its server's queue. ``marked_unused``: segment ids the run marked unused in the
    metadata (the ``druid`` coordinator's drop rules and overshadowed segments), written unused in
    the next snapshot's ``segments.jsonl``.

    ``sizes``: bytes by segment id (``prepared/segments.parquet`` of the run), for the loads queued
    in the snapshot. Raises ``ValueError`` for a failure rate outside [0, 1] or ``loads_per_run`` < 0.
    """
    if not 0.0 <= load_failure_rate <= 1.0:
        raise InputError(f"load failure rate must be within [0, 1], got {load_failure_rate}")
    if loads_per_run is not None and loads_per_run < 0:
        raise InputError(f"loads per run must be >= 0, got {loads_per_run}")
    servers = read_json(snapshot, "servers.json")  # every row as it is, for the next snapshot's file
    waiting = {
        (p["server"], p["segment_id"]): p["after"] for p in read_json(snapshot, PENDING_FILE, required=False) or []
    }
    meta = read_json(snapshot, "snapshot.json")
    now_ms = load_snapshot_meta(snapshot).snapshot_time_ms
    ops = pd.read_parquet(plan / "operations.parquet").sort_values("op_id")
    replicas = _read_replicas(snapshot)
    # which rows are historicals, their tier and size: the planner's reading of servers.json
    historicals = {s.server: s for s in load_servers(snapshot)}

    # Queues: what the snapshot had queued (read and validated as the planner reads them), then
    # the plan's loads by op_id.
    loads: dict[str, list[dict]] = {name: [] for name in sorted(historicals)}
    drops: list[dict] = []
    for e in load_load_queues(snapshot, set(historicals)):
        if e.action == "LOAD":
            loads[e.server].append(
                {
                    "segment_id": e.segment_id,
                    "queue_type": e.queue_type,
                    "requested_at": None if e.requested_at_ms is None else format_instant_ms(e.requested_at_ms),
                    "size_bytes": int(sizes.get(e.segment_id, 0)),
                }
            )
        else:
            drops.append(
                {
                    "server": e.server,
                    "segment_id": e.segment_id,
                    "size_bytes": int(sizes.get(e.segment_id, 0)),
                    "after": waiting.get((e.server, e.segment_id)),
                }
            )
    requested = format_instant_ms(now_ms)
    load_server = dict(zip(ops["op_id"], ops["server"]))
    for op in ops.itertuples():
        if op.action == Action.CANCEL:
            if isinstance(op.queue_type, str):
                queue = loads[op.server]
                at = max(i for i, item in enumerate(queue) if item["segment_id"] == op.segment_id)
                del queue[at]
            else:
                at = max(i for i, d in enumerate(drops) if (d["server"], d["segment_id"]) == (op.server, op.segment_id))
                del drops[at]
        elif op.action == Action.LOAD:
            loads[op.server].append(
                {
                    "segment_id": op.segment_id,
                    "queue_type": op.queue_type,
                    "requested_at": requested,
                    "size_bytes": int(op.size_bytes),
                }
            )
        else:
            after = None if pd.isna(op.depends_on) else load_server[int(op.depends_on)]
            drops.append(
                {"server": op.server, "segment_id": op.segment_id, "size_bytes": int(op.size_bytes), "after": after}
            )

    rng = np.random.default_rng([int(seed), int(run)])
    applied = Applied()
    served = set(zip(replicas["server"], replicas["segment_id"]))
    delta = {name: 0 for name in historicals}
    completed, remaining = set(), {}
    for name in sorted(loads):
        queue = loads[name]
        budget = len(queue) if loads_per_run is None else min(loads_per_run, len(queue))
        for item in queue[:budget]:
            if load_failure_rate and rng.random() < load_failure_rate:
                applied.loads_failed += 1
                continue
            applied.loads_completed += 1
            if (name, item["segment_id"]) not in served:
                served.add((name, item["segment_id"]))
                delta[name] += item["size_bytes"]
            completed.add((name, item["segment_id"]))
        remaining[name] = queue[budget:]
        applied.loads_still_queued += len(remaining[name])
    queued = {(name, item["segment_id"]) for name, items in remaining.items() for item in items}
    pending = []
    for d in drops:
        if d["after"] is not None and (d["after"], d["segment_id"]) not in completed:
            if (d["after"], d["segment_id"]) in queued:
                pending.append(d)
            else:
                applied.drops_cancelled += 1
            continue
        applied.drops_done += 1
        if (d["server"], d["segment_id"]) in served:
            served.discard((d["server"], d["segment_id"]))
            if d["server"] in delta:
                delta[d["server"]] -= d["size_bytes"]

    def fill(tmp: Path) -> None:
        for name in CARRIED:
            if (snapshot / name).exists():
                if marked_unused and name.startswith("segments.jsonl"):
                    _write_unused(snapshot / name, tmp / name, marked_unused)
                else:
                    link_or_copy(snapshot / name, tmp / name)
        new_servers = [_resized(s, delta.get(s["server"], 0)) for s in servers]
        write_json_atomic(new_servers, tmp / "servers.json")
        write_json_atomic(
            {
                name: {
                    "segmentsToLoad": [
                        {k: item[k] for k in ("segment_id", "queue_type", "requested_at") if item.get(k)}
                        for item in remaining.get(name, [])
                    ],
                    "segmentsToDrop": [d["segment_id"] for d in pending if d["server"] == name],
                }
                for name in sorted(historicals)
            },
            tmp / "load_queues.json",
        )
        write_json_atomic(
            [{"server": d["server"], "segment_id": d["segment_id"], "after": d["after"]} for d in pending],
            tmp / PENDING_FILE,
        )
        write_json_atomic({**meta, "snapshot_time": format_instant_ms(now_ms + int(period_ms))}, tmp / "snapshot.json")
        pairs.to_json(tmp / "server_segments.jsonl", orient="records", lines=True)

    applied.drops_pending = len(pending)
    pairs = pd.DataFrame(sorted(served), columns=["server", "segment_id"])
    replace_dir(out, fill, durable=False)

    applied.served = pairs[pairs["server"].isin(historicals)].reset_index(drop=True)
    on = pairs[pairs["server"].isin(historicals)].assign(
        size_bytes=lambda f: f["segment_id"].map(sizes).fillna(0).astype("int64")
    )
    per = on.groupby("server").agg(segments=("segment_id", "size"), bytes=("size_bytes", "sum"))
    applied.historicals = (
        pd.DataFrame(
            [(n, historicals[n].tier, int(historicals[n].max_size)) for n in sorted(historicals)],
            columns=["server", "tier", "max_size"],
        )
        .astype({"server": object, "tier": object, "max_size": "int64"})  # typed with no historical too
        .merge(per, left_on="server", right_index=True, how="left")
        .fillna({"segments": 0, "bytes": 0})
        .astype({"segments": "int64", "bytes": "int64"})
    )
    return applied


def _write_unused(source: Path, dest: Path, ids: frozenset[str]) -> None:
    """Copy ``segments.jsonl`` (gzipped or not) from ``source`` to ``dest`` with the segments of
    ``ids`` marked ``"used": false``; every other line as it was."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt") as lines, opener(dest, "wt") as out:
        for line in lines:
            if line.strip():
                payload = json.loads(line)
                if segment_id(payload) in ids:
                    line = json.dumps({**payload, "used": False}) + "\n"
            out.write(line)


def run_row(
    run: int, snapshot: Path, summary: PlanSummary, applied: Applied, ops: pd.DataFrame, segments: pd.DataFrame
) -> dict:
    """One row of ``runs.csv`` (:data:`RUN_COLUMNS`) from a run's plan summary, its ops
    (``operations.parquet``: ``op_id``, ``stage``, ``action``, ``size_bytes``, ``depends_on``), what
    applying it did and the run's segments (``segment_id``, ``datasource``, ``start_ms``, ``end_ms``, one row each)."""
    before = summary.status_before
    tiers = before.tiers.values()
    stages = coordinators.coordinator(summary.coordinator).balancing_stages
    balancing = ops[ops["stage"].isin(stages) & (ops["action"] == Action.LOAD)]
    moved = ops[(ops["action"] == Action.LOAD) & ops["op_id"].isin(set(ops["depends_on"].dropna().astype("int64")))]
    decommissioning = set(summary.config.get("decommissioningNodes") or [])
    live = applied.historicals[~applied.historicals["server"].isin(decommissioning)]
    live = live.assign(usage=100.0 * live["bytes"] / live["max_size"].where(live["max_size"] > 0))
    spread = (
        live.groupby("tier")[["segments", "bytes", "usage"]].agg(lambda s: s.max() - s.min()) if len(live) else None
    )
    placed = applied.served.merge(segments, on="segment_id")
    meta = json.loads((snapshot / "snapshot.json").read_text())
    return {
        "run": run,
        "snapshot_time": meta["snapshot_time"],
        "operations": summary.operations,
        "loads": summary.loads,
        "drops": summary.drops,
        "moves": summary.moves,
        "balancing_moves": len(balancing),
        "balancing_bytes": int(balancing["size_bytes"].sum()),
        "moved_bytes": int(moved["size_bytes"].sum()),
        "unreplicated_before": before.unreplicated,
        "underreplicated_before": sum(t.get("underreplicated", 0) for t in tiers),
        "overreplicated_before": sum(t.get("overreplicated", 0) for t in tiers),
        "loads_completed": applied.loads_completed,
        "loads_failed": applied.loads_failed,
        "loads_still_queued": applied.loads_still_queued,
        "drops_done": applied.drops_done,
        "drops_cancelled": applied.drops_cancelled,
        "drops_pending": applied.drops_pending,
        "segments_max_minus_min": int(spread["segments"].max()) if spread is not None else 0,
        "bytes_max_minus_min": int(spread["bytes"].max()) if spread is not None else 0,
        "usage_max_minus_min": round(float(spread["usage"].max()), 4)
        if spread is not None and spread["usage"].notna().any()
        else 0.0,
        "fullest_usage": round(float(live["usage"].max()), 4) if live["usage"].notna().any() else 0.0,
        "total_cost": total_cost(
            placed["datasource"].to_numpy(object),
            placed["start_ms"].to_numpy("int64"),
            placed["end_ms"].to_numpy("int64"),
            placed["server"].to_numpy(object),
        ),
        "stable": summary.loads == 0 and len(balancing) == 0,
    }


@dataclass
class _Pending:
    """A run's plan (``plan``, in its work directory ``work``) applied while the validation process
    checks it (``answer``, the future of ``ValidationProcess.validate``): its run directory
    ``base`` gets the plan once the check passed (:meth:`publish`), so that the next run is planned
    while this one's plan is checked, on the other core."""

    answer: Future
    plan: Path
    base: Path
    work: Path

    def publish(self, cleanup: Path | None = None) -> None:
        """Wait for the check, publish the plan to ``base/plan`` and remove the work directory.
        A failed check raises its error (``PlanValidationError``) with nothing of this run left but
        the run directory (what the run applied is removed), nor of the run ``cleanup`` begun."""
        try:
            self.wait()
        except BaseException:
            for path in (self.base / "snapshot", self.base / STATE_FILE, self.base / "historicals.csv", self.work):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            if cleanup is not None:
                shutil.rmtree(cleanup / "work", ignore_errors=True)
            raise
        publish_plan(self.plan, self.base / "plan")
        shutil.rmtree(self.work, ignore_errors=True)

    def wait(self) -> dict:
        """The check's report, once it is done; raises what the check raised."""
        return self.answer.result()

    def abandon(self) -> None:
        """After an error elsewhere: wait for the check to end, publish nothing."""
        try:
            self.wait()
        except BaseException:  # noqa: BLE001 - the error being raised is the one that counts
            pass


def simulate(
    spark,
    snapshot: Path,
    out: Path,
    runs: int,
    overrides: dict | None = None,
    *,
    loads_per_run: int | None = None,
    load_failure_rate: float = 0.0,
    seed: int = 0,
    first_plan: Path | None = None,
    first_work: Path | None = None,
    balancer_state: Path | None = None,
    plan_on=None,
    coordinator: str | None = None,
    validator=None,
) -> pd.DataFrame:
    """Plan and apply ``runs`` times from ``snapshot``; returns the ``runs.csv`` frame
    (:data:`RUN_COLUMNS`, one row per run) and writes ``out/`` (module docstring).

    ``first_plan`` and ``first_work``: run 1's plan, already made on ``snapshot`` with ``overrides``
    (a published plan directory and the work directory it was planned in, e.g. by the DAG): run 1
    applies a copy of it instead of planning again; ``first_work`` is left as it is.
    ``balancer_state``: the state run 1 starts from (a plan's ``balancer_state.json``); every later
    run starts from the state the run before it left (``run-NNN/balancer_state.json``, what-if
    runs included: a simulation is one hypothetical history). ``plan_on``: None, or
    ``plan_on(run, snapshot, run_dir) -> Path``, the snapshot run ``run`` plans on instead of
    ``snapshot`` (e.g. a copy showing a blip the cluster does not have: the plan is applied to
    ``snapshot`` all the same; ``benchmarks/sim_strategies.py``'s jitter case). ``coordinator``:
    who plans each run (``issue7458`` or ``druid``, Druid's own Coordinator; None: the config key
    ``coordinator``). The segments a ``druid`` run marks unused (drop rules, overshadowed segments)
    are unused in the next snapshot, as in Druid's metadata. ``validator``: the
    ``ValidationProcess`` that validates every run's plan (None: one started at the first plan and
    ended on return); a run's plan is checked while the next run is planned, and published to its
    run directory once the check passed (a failed check raises before the run after it goes on).

    Raises ``ValueError`` for ``runs`` < 1 or only one of ``first_plan``/``first_work``, and what
    :func:`apply_plan` and ``make_plan`` raise (``SnapshotError`` on bad input), and ``PlanValidationError``.
    """
    from segment_balancer.spark.druid_plan import druid_record

    if runs < 1:
        raise InputError(f"runs must be >= 1, got {runs}")
    if (first_plan is None) != (first_work is None):
        raise ValueError("first_plan and first_work go together")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    current, rows, state = Path(snapshot), [], balancer_state
    gate = validator
    pending: _Pending | None = None
    waiter = ThreadPoolExecutor(1, thread_name_prefix="simulate-validation")
    try:
        for run in range(1, runs + 1):
            base = out / f"run-{run:03d}"
            base.mkdir(exist_ok=True)
            if run == 1 and first_plan is not None:
                work = Path(first_work)
                shutil.rmtree(base / "plan", ignore_errors=True)
                shutil.copytree(first_plan, base / "plan", ignore=shutil.ignore_patterns(".*"))
                plan = base / "plan"
            else:
                work = base / "work"
                shutil.rmtree(work, ignore_errors=True)
                planned = current if plan_on is None else Path(plan_on(run, current, base))
                gate = gate or validation_process.ValidationProcess()  # GX imported once, for every run
                try:
                    plan = make_plan(spark, planned, work, overrides, balancer_state=state, coordinator=coordinator)
                finally:
                    # the run before is published (or its failed check raised) before this one goes on
                    pending, done = None, pending
                    if done is not None:
                        done.publish(cleanup=base)
                pending = _Pending(waiter.submit(gate.validate, plan, work), plan, base, work)
            summary = read_plan_summary(plan)
            if (work / NEXT_STATE_FILE).exists():
                state = base / STATE_FILE
                link_or_copy(work / NEXT_STATE_FILE, state)
            segments = pd.read_parquet(
                work / "prepared" / "segments.parquet",
                columns=["segment_id", "datasource", "start_ms", "end_ms", "size_bytes"],
            )
            segments = segments.drop_duplicates("segment_id")
            sizes = segments.set_index("segment_id")["size_bytes"]
            record = druid_record(work)
            unused = (
                frozenset(record["marked_unused"] + record["overshadowed_marked_unused"]) if record else frozenset()
            )
            applied = apply_plan(
                current,
                plan,
                sizes,
                base / "snapshot",
                run,
                loads_per_run=loads_per_run,
                load_failure_rate=load_failure_rate,
                seed=seed,
                period_ms=int(summary.config.get("coordinatorPeriodMillis", 60_000)),
                marked_unused=unused,
            )
            applied.historicals.to_csv(base / "historicals.csv", index=False)
            ops = pd.read_parquet(
                plan / "operations.parquet", columns=["op_id", "stage", "action", "size_bytes", "depends_on"]
            )
            rows.append(run_row(run, current, summary, applied, ops, segments.drop(columns="size_bytes")))
            log.info(
                "run %d of %d: %d loads (%d balancing moves), %d drops; max - min segments %d%s",
                run,
                runs,
                summary.loads,
                rows[-1]["balancing_moves"],
                summary.drops,
                rows[-1]["segments_max_minus_min"],
                " (stable)" if rows[-1]["stable"] else "",
            )
            current = base / "snapshot"
        pending, done = None, pending
        if done is not None:
            done.publish()
    finally:
        if pending is not None:
            pending.abandon()
        waiter.shutdown(wait=True)
        if gate is not None and validator is None:
            gate.close()
    table = pd.DataFrame(rows, columns=RUN_COLUMNS)
    write_text_atomic(table.to_csv(index=False), out / "runs.csv")
    write_simulation_report(out)
    return table


def simulate_margins(
    spark, snapshot: Path, out: Path, runs: int, margins: list[float], overrides: dict | None = None, **options
) -> pd.DataFrame:
    """``simulate --compare-margins``: the simulation of ``overrides`` into ``out`` as
    :func:`simulate` writes it, and the same runs once per ``balancingMinCostReductionPercent`` of
    ``margins`` into ``out/margins/<margin>/`` (each a whole simulation with its report); then
    ``out/margins.csv`` (:data:`MARGINS_FILE`) and ``out/report.html`` with the balancing moves and
    bytes moved per run by margin (the trade-off between churn and spread). A margin
    equal to the overrides' own is not simulated twice. ``options``: :func:`simulate`'s keywords.
    Returns the ``margins.csv`` frame. Raises ``ValueError`` for an empty ``margins`` and what
    :func:`simulate` raises."""
    if not margins:
        raise InputError("compare at least one margin")
    overrides = dict(overrides or {})
    # a bad override or margin is refused before any run
    own_margin = load_config(snapshot, overrides).balancing_min_cost_reduction_percent
    for margin in margins:
        load_config(snapshot, {**overrides, MARGIN_KEY: margin})
    frames = {float(own_margin): simulate(spark, snapshot, out, runs, overrides, **options)}
    for margin in sorted({float(m) for m in margins}):
        if margin not in frames:
            log.info("margin %s%%: simulating %d runs", margin_name(margin), runs)
            frames[margin] = simulate(
                spark,
                snapshot,
                out / "margins" / margin_name(margin),
                runs,
                {**overrides, MARGIN_KEY: margin},
                **options,
            )
    table = pd.concat([f.assign(margin=m) for m, f in sorted(frames.items())], ignore_index=True)
    table = table[["margin", *RUN_COLUMNS]]
    write_text_atomic(table.to_csv(index=False), out / MARGINS_FILE)
    write_simulation_report(out)
    return table


def simulate_coordinators(
    spark,
    snapshot: Path,
    out: Path,
    runs: int,
    overrides: dict | None = None,
    coordinator: str | None = None,
    **options,
) -> pd.DataFrame:
    """``simulate --compare-coordinators``: the simulation of ``coordinator`` (None: the config key
    ``coordinator``, default ``issue7458``) into ``out`` as :func:`simulate` writes it, and the same
    runs of the other coordinator into ``out/coordinators/<coordinator>/`` (a whole simulation with
    its report); then ``out/coordinators.csv`` (:data:`COORDINATORS_FILE`: ``coordinator`` and the
    ``runs.csv`` columns) and ``out/report.html`` with both run by run (unavailable and
    under-replicated segments, moves, bytes moved, the fullest disk, the spread). ``options``:
    :func:`simulate`'s keywords. Returns the ``coordinators.csv`` frame. Raises what
    :func:`simulate` raises (a bad override before any run)."""
    overrides = dict(overrides or {})
    own = coordinator or load_config(snapshot, overrides).coordinator
    other = coordinators.coordinator(own).compared_with
    frames = {own: simulate(spark, snapshot, out, runs, overrides, coordinator=own, **options)}
    log.info("%s: simulating the same %d runs", other, runs)
    frames[other] = simulate(
        spark, snapshot, out / COORDINATORS_DIR / other, runs, overrides, coordinator=other, **options
    )
    table = pd.concat([f.assign(coordinator=c) for c, f in frames.items()], ignore_index=True)
    table = table[["coordinator", *RUN_COLUMNS]]
    write_text_atomic(table.to_csv(index=False), out / COORDINATORS_FILE)
    write_simulation_report(out)
    return table


# ---- the DAG's simulation after a published plan (spark_apps/simulate.py, the Connect task) ----
def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a simulation, shared by ``python -m segment_balancer simulate`` and
    ``spark_apps/simulate.py``: ``--snapshot``, ``--runs``, ``--out``, ``--config``,
    ``--loads-per-run``, ``--load-failure-rate``, ``--seed``."""

    parser.add_argument("--snapshot", required=True, type=Path)
    parser.add_argument("--runs", required=True, type=int, help="Coordinator runs to simulate")
    parser.add_argument(
        "--out", required=True, type=Path, help="run-NNN/{plan,snapshot,historicals.csv} and runs.csv go here"
    )
    parser.add_argument("--config", type=Path, help="JSON object of dynamic config overrides, for every run")
    parser.add_argument("--loads-per-run", type=int, help="loads each historical completes per run (default: all)")
    parser.add_argument(
        "--load-failure-rate", type=float, default=0.0, help="probability that a load fails (default 0)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the load failures")


class SimulationRefused(InputError):
    """A simulation that cannot start: a refused snapshot or bad options (``runs`` < 1); nothing
    was written."""


def simulate_published(
    spark,
    snapshot: Path,
    plan: Path,
    work: Path,
    runs: int,
    out: Path,
    overrides: dict | None = None,
    loads_per_run: int | None = None,
    load_failure_rate: float = 0.0,
    seed: int = 0,
) -> None:
    """Simulate ``runs`` Coordinator runs of which the first is the plan ``plan`` already made in
    work directory ``work`` (a DAG run's published plan), with
    :func:`simulate`, into ``out``, written whole or not at all
    (:func:`segment_balancer.common.files.replace_dir`). Shared by ``spark_apps/simulate.py`` and the
    DAG's Spark Connect task. Every run is planned by the coordinator that made ``plan``. Raises
    :class:`SimulationRefused` on bad input, leaving an earlier ``out`` as it was.
    """
    snapshot, plan, work, out = (Path(p).absolute() for p in (snapshot, plan, work, out))
    try:
        replace_dir(
            out,
            lambda tmp: simulate(
                spark,
                snapshot,
                tmp,
                runs,
                overrides,
                loads_per_run=loads_per_run,
                load_failure_rate=load_failure_rate,
                seed=seed,
                first_plan=plan,
                first_work=work,
                coordinator=read_plan_summary(plan).coordinator,
            ),
        )
    except WriteError as exc:
        cause = exc.__cause__
        if isinstance(cause, (SnapshotError, ValueError)):
            raise SimulationRefused(f"simulation refused: {cause}") from exc
        raise


def main(argv=None) -> int:
    """``spark-submit spark_apps/simulate.py --snapshot S --plan P --work W --runs N --out O
    [--config C] [--loads-per-run N] [--load-failure-rate P] [--seed N]``: :func:`simulate_published`.
    Returns 0; exits with code 2 on bad input (a refused snapshot, ``runs`` < 1), leaving an
    earlier ``O`` as it was.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="simulate", description="segment_balancer what-if simulation of a DAG run")
    add_simulate_arguments(parser)
    parser.add_argument("--plan", required=True, type=Path, help="run 1's plan, already made (published)")
    parser.add_argument("--work", required=True, type=Path, help="the work directory run 1's plan was made in")
    args = parser.parse_args(argv)
    log = logging.getLogger("simulate")
    spark = get_session("segment_balancer.tools.simulate")
    try:
        simulate_published(
            spark,
            args.snapshot,
            args.plan,
            args.work,
            args.runs,
            args.out,
            read_overrides(args.config),
            loads_per_run=args.loads_per_run,
            load_failure_rate=args.load_failure_rate,
            seed=args.seed,
        )
    except SimulationRefused as exc:
        log.error("%s", exc)
        print(str(exc), file=sys.stderr)
        spark.stop()
        raise SystemExit(2) from exc
    log.info("simulation of %d runs written to %s", args.runs, args.out)
    spark.stop()
    return 0
