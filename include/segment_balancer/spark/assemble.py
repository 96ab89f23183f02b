"""``assemble``: the plan tables from the op log (docs/ARCHITECTURE.md "Plan directory").

Writes ``WORK/plan/`` atomically: ``operations.parquet``, ``assignment.parquet``, ``groups.json``,
the tables ``explain --plan`` reads (``decisions.parquet``, ``segments.parquet``,
``stage_groups.json``) and ``summary.json`` (counts per stage/tier/action, replication status before and after, balance
per tier, every historical's holdings before and after, Druid-named metrics, alerts, effective
config, snapshot id, timings, the balancing strategy's pairs: a
:class:`~segment_balancer.planner.summary.PlanSummary`, its JSON schema beside it as
``summary.schema.json``) and ``balancer_state.json`` (the
balancer state the next run of the cluster starts from; not for a what-if). Validation adds
``validation.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow.fs import FileType

from segment_balancer.common.files import filesystem, remove_path, replace_path, sibling_tmp, write_json_atomic
from segment_balancer.druid.instants import format_instant_ms
from segment_balancer.planner import groups as G
from segment_balancer.planner.balancer_state import NEXT_STATE_FILE, STATE_FILE, BalancerState
from segment_balancer.planner.coordinators import STAGE0_APPS, coordinator
from segment_balancer.planner.groups import split_group_name
from segment_balancer.planner.metrics import druid_metrics
from segment_balancer.planner.operations import PLAN_OPS_COLUMNS, Action
from segment_balancer.planner.stages.s07_balancing import PAIRS_FACT
from segment_balancer.planner.status import balance, replication_counts
from segment_balancer.planner.summary import SCHEMA_FILE, SCHEMA_VERSION, SUMMARY_FILE, PlanSummary, summary_schema
from segment_balancer.planner.undone import NOTHING_UNDONE, left_undone
from segment_balancer.spark.druid_plan import decision_events, druid_record, summary_part
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.state_store import arrow_schema
from segment_balancer.spark.status import status_pass
from segment_balancer.spark.workdir import ASSIGNMENT_FIELDS, OPS_ARROW_SCHEMA, Run, load_record, read_decisions


def end_assignment(run: Run, out_rel: str) -> None:
    """Write (``segment_id``, ``server``, ``tier``) of every replica the final run state holds (the
    projected end state once every op succeeded: served with no drop, or loading), one unordered
    file per tier under ``out_rel`` (relative to the work directory): :meth:`Run.assignment`."""
    run.assignment(out_rel)


def assemble(run: Run, groups, snapshot: Path) -> Path:
    """Write the plan to ``WORK/plan`` (replacing an earlier one) and return its path. Three
    calls of :func:`~segment_balancer.spark.session.run_tasks` (each one Spark job, or none on
    the driver of a small run): the end assignment (one task per tier), the final status (one
    task per tier) and the sorted tables (:func:`_sorted_tables`: assignment, decision log,
    segments); the operations and their counts come from the op log's files, read on the driver."""
    plan = run.work / "plan"
    tmp = sibling_tmp(plan)
    tmp.mkdir(parents=True)
    # The op log's files, numbered one step after another by write_ops, already read on the
    # driver once there: one file here, and the summary's counts from it (no Spark job).
    ops = _op_log(run)
    pq.write_table(ops.select(PLAN_OPS_COLUMNS), tmp / "operations.parquet")
    ops = ops.to_pandas()
    parts = sibling_tmp(tmp / "assignment.parquet")
    end_assignment(run, str(parts.relative_to(run.work)))
    # the start of the run as prepare measured it (the same pass over the initial state)
    held_before = {server: tuple(n) for server, n in run.meta.get("held", {}).items()}
    after = status_pass(run)
    _sorted_tables(run, tmp, parts)
    by_stage = [
        {"stage": int(k[0]), "tier": _value(k[1]), "action": _value(k[2]), "count": int(n)}
        for k, n in ops.groupby(["stage", "tier", "action"], dropna=False).size().items()
    ]
    by_stage.sort(key=lambda r: (r["stage"], r["tier"] or "", r["action"] or ""))
    by_reason = {_value(k): int(n) for k, n in ops.groupby("reason", dropna=False).size().items()}
    totals = {
        "operations": len(ops),
        "loads": int((ops["action"] == Action.LOAD).sum()),
        "drops": int((ops["action"] == Action.DROP).sum()),
        "moves": int(ops["depends_on"].notna().sum()),
    }
    metrics = (
        ops.groupby(["tier", "action", "queue_type", "reason"], dropna=False)
        .size()
        .rename("count")
        .reset_index()
        .astype({"count": "int64"})
    )
    keys = ["tier", "action", "queue_type", "reason"]
    metrics[keys] = metrics[keys].astype(object).where(metrics[keys].notna(), None)
    druid = druid_record(run.work)
    _stage_groups(run, tmp)
    final_groups = [
        {
            "name": name,
            "kind": split_group_name(name)[0],
            "tier": split_group_name(name)[1],
            "count": len(bm),
            "bitset": G.encode(bm),
        }
        for name, bm in sorted(groups.items())
    ]
    write_json_atomic(final_groups, tmp / "groups.json")
    timings_path = run.work / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    summary = PlanSummary(
        schema_version=SCHEMA_VERSION,
        snapshot_id=run.meta["snapshot_id"],
        cluster=run.meta["cluster"],
        snapshot_time=format_instant_ms(int(run.meta["now_ms"])),
        snapshot=str(snapshot),
        operations=int(totals["operations"]),
        loads=int(totals["loads"]),
        drops=int(totals["drops"]),
        moves=int(totals["moves"]),
        by_stage_tier_action=by_stage,
        by_reason=by_reason,
        status_before=replication_counts(run.meta.get("status_counts", {})),
        status_after=replication_counts(after.counts),
        groups_before=run.meta.get("status_counts", {}),
        groups_after={g["name"]: g["count"] for g in final_groups},
        balance_before=balance(held_before, run.servers_pdf),
        balance_after=balance(after.held, run.servers_pdf),
        servers=server_rows(run.servers_pdf, held_before, after.held),
        druid_metrics=druid_metrics(
            metrics,
            run.servers_pdf,
            run.meta.get("missing_replicas", {}),
            after.missing,
            run.meta["unavailable"],
            after.unavailable,
            decisions=decision_events(druid) if druid else None,
        ),
        timeline=run.meta.get("timeline", {}),
        availability=availability(run),
        overshadowed_waiting=run.meta.get("overshadowed_waiting", {}),
        unlisted=run.meta.get("unlisted", {}),
        alerts=run.meta.get("alerts", []),
        balancer=balancer(run, tmp),
        # who planned is the summary's own key (absent: issue7458), not one of the config's
        config={k: v for k, v in run.meta["config"].items() if k != "coordinator"},
        ignored_config=run.meta.get("ignored_config", []),
        whatif=load_record(run.work),
        timings_seconds=timings,
        # when the run began (UTC, the first application's start): LATEST names the plan of the newest
        # snapshot, and of two plans of one snapshot the later run's (plan.publish)
        planned_at=timings.get(STAGE0_APPS[0], {}).get("started_at"),
        coordinator=coordinator(run.meta["config"].get("coordinator")).name,
        druid_run=summary_part(druid) if druid else None,
    )
    summary.undone = left_undone(
        summary.status_after,
        summary.balance_after,
        summary.servers,
        pq.read_table(
            tmp / "decisions.parquet",
            columns=["idx", "segment_id", "stage", "tier", "outcome", "detail"],
            filters=[("outcome", "not in", sorted(NOTHING_UNDONE))],
        ).to_pylist(),
        summary.config,
        after.missing,
        after.unavailable,
        run.meta["absent_tiers"],
        ops.groupby(["segment_id", "tier"])["stage"].max().to_dict(),
    )
    write_json_atomic(summary.model_dump(mode="json"), tmp / SUMMARY_FILE)
    write_json_atomic(summary_schema(), tmp / SCHEMA_FILE)
    replace_path(tmp, plan)
    return plan


PLAN_SEGMENT_COLUMNS = [
    "segment_id",
    "idx",
    "datasource",
    "size_bytes",
    "used",
    "overshadowed",
    "rule_kind",
    "required",
    "waiting",
    "targets",
]
"""The plan's ``segments.parquet``: every segment of the snapshot, with what ``explain`` needs of it:
``idx`` (null when unused), ``size_bytes``, ``used``, ``overshadowed``, ``rule_kind``, ``required``
(loaded replicas stage 12 keeps), ``waiting`` and ``targets`` (JSON ``{tier: target}``, in the
rule's tier order)."""


def _sorted_tables(run: Run, plan: Path, parts: Path) -> None:
    """Write the plan's sorted tables into ``plan`` (under the work directory), each one parquet
    file written with pyarrow by a task of one :func:`~segment_balancer.spark.session.run_tasks`
    call (:func:`_write_sorted`), aside, then moved into place here: ``assignment.parquet``
    (:data:`~segment_balancer.spark.workdir.ASSIGNMENT_FIELDS`, from the per-tier files under
    ``parts``, which are removed; by segment id, server), ``decisions.parquet`` (the decision log,
    :data:`~segment_balancer.spark.workdir.DECISION_COLUMNS`, by segment id, stage, tier; of one
    segment, stage and tier in step order) and ``segments.parquet`` (:data:`PLAN_SEGMENT_COLUMNS`
    of ``prepared/segments.parquet``, by segment id). Strings sort by their UTF-8 bytes, nulls
    first, as Spark sorts."""
    work = run.work_uri
    asides = {name: sibling_tmp(plan / f"{name}.parquet") for name in ("assignment", "decisions", "segments")}
    out = {name: str(path.relative_to(run.work)) for name, path in asides.items()}
    tasks = [
        ("assignment", str(parts.relative_to(run.work)), ["segment_id", "server"]),
        ("decisions", run.decision_steps(), ["segment_id", "stage", "tier"]),
        ("segments", str(run.prepared.relative_to(run.work) / "segments.parquet"), ["segment_id"]),
    ]
    tasks = [(name, source, keys, out[name]) for name, source, keys in tasks]
    try:
        run_tasks(run.spark, tasks, lambda task: _write_sorted(work, *task))
    finally:
        remove_path(parts)
    for name, path in asides.items():
        replace_path(path, plan / f"{name}.parquet")


def _write_sorted(work: str, name: str, source, keys: list[str], out_rel: str) -> None:
    """One of :func:`_sorted_tables`' tables: read ``source`` (relative to the work directory
    ``work``; the decision log's steps for ``decisions``), sort it stably by the columns ``keys``,
    ascending (nulls first), and write it at ``out_rel`` with pyarrow. A task function."""
    fs, base = filesystem(work)
    if name == "decisions":
        table = read_decisions(work, source)
    elif name == "assignment":
        schema = arrow_schema(ASSIGNMENT_FIELDS)
        found = fs.get_file_info(f"{base}/{source}").type != FileType.NotFound
        table = (
            ds.dataset(f"{base}/{source}", format="parquet", filesystem=fs, schema=schema).to_table()
            if found
            else schema.empty_table()
        )
    else:
        table = ds.dataset(f"{base}/{source}", format="parquet", filesystem=fs).to_table(columns=PLAN_SEGMENT_COLUMNS)
        # as Spark reads a parquet table: every column nullable
        table = table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))
    pq.write_table(table.sort_by([(k, "ascending", "at_start") for k in keys]), f"{base}/{out_rel}", filesystem=fs)


def _stage_groups(run: Run, plan: Path) -> None:
    """Write ``stage_groups.json`` into ``plan`` (what ``explain --plan`` reads besides the tables
    of :func:`_sorted_tables`): ``{application: {"names": [group, ...], "changed": {group: base64
    bitmap}}}``, in run order: the groups each application handed on, with only the bitmaps that
    differ from the previous application's (stage 0's only, for a coordinator whose applications hand
    no groups on)."""
    planner = coordinator(run.meta["config"].get("coordinator"))
    stage_groups, previous = {}, {}
    for name in planner.run_apps if planner.hands_groups else STAGE0_APPS:
        path = run.work / "groups" / f"{name}.json"
        if path.exists():
            groups = json.loads(path.read_text())
            stage_groups[name] = {
                "names": sorted(groups),
                "changed": {g: text for g, text in sorted(groups.items()) if previous.get(g) != text},
            }
            previous = groups
    write_json_atomic(stage_groups, plan / "stage_groups.json")


def _op_log(run: Run):
    """Every op of the run's op log as one pyarrow Table (:data:`~segment_balancer.spark.workdir.OPS_ARROW_SCHEMA`),
    in ``op_id`` order."""
    files = [run.work / "ops" / f for f in run.manifest()["files"]]
    tables = [pq.read_table(f, schema=OPS_ARROW_SCHEMA) for f in files]
    table = pa.concat_tables(tables) if tables else OPS_ARROW_SCHEMA.empty_table()
    return table.sort_by("op_id")


def _value(x):
    """A pandas group key as JSON wants it: None for a missing value."""
    return None if x is None or (isinstance(x, float) and x != x) else x


def server_rows(servers_pdf, held_before: dict, held_after: dict) -> list[dict]:
    """One row per historical (sorted by tier, server): ``server``, ``tier``, ``max_size``,
    ``decommissioning``, and the ``segments``/``bytes`` it holds at the snapshot (``*_before``)
    and once the plan succeeded (``*_after``); holdings as :func:`status.held_per_server`."""
    rows = []
    for r in servers_pdf.sort_values(["tier", "server"]).itertuples(index=False):
        before, after = held_before.get(r.server, (0, 0)), held_after.get(r.server, (0, 0))
        rows.append(
            {
                "server": r.server,
                "tier": r.tier,
                "max_size": int(r.max_size),
                "decommissioning": bool(r.decommissioning),
                "segments_before": int(before[0]),
                "bytes_before": int(before[1]),
                "segments_after": int(after[0]),
                "bytes_after": int(after[1]),
            }
        )
    return rows


def availability(run: Run) -> dict:
    """Drops deferred by the availability rule (ALGORITHM.md "Availability"), summed over the steps
    that report them (stage 12): ``deferred_drops``, ``deferred_segments``, a few examples."""
    facts = [f for f in run.step_facts() if "deferred_drops" in f]
    return {
        "deferred_drops": sum(f["deferred_drops"] for f in facts),
        "deferred_segments": sum(f["deferred_segments"] for f in facts),
        "deferred_examples": sorted(x for f in facts for x in f.get("deferred_examples", []))[:5],
    }


def balancer(run: Run, plan: Path) -> dict:
    """The balancing strategy's part of the summary, and the balancer state the next run starts
    from (ALGORITHM.md "The result"): written to ``WORK/``:data:`NEXT_STATE_FILE` always (a
    simulation's next run reads it there) and to ``plan/balancer_state.json`` unless the run is a
    what-if (a what-if uses the state without writing it back). ``strategy``; ``pairs`` (the
    ``avgShedder`` pairs of stage 7, ``kernels.shedding.pair_record``s, by tier then widest
    difference; empty for ``cost``); ``previous_counts`` (the hit counts the run started from,
    ``{tier: [[server, server, n], …]}``); ``state_warning`` (why a state given was not used);
    ``state_written`` (into the plan)."""
    pairs = [p for f in run.step_facts() for p in f.get(PAIRS_FACT, [])]
    given = run.meta.get("balancer_state", {})
    whatif = load_record(run.work) is not None
    state = BalancerState.from_pairs(run.meta["cluster"], int(run.meta["now_ms"]), pairs)
    write_json_atomic(state.to_dict(), run.work / NEXT_STATE_FILE)
    if not whatif:
        write_json_atomic(state.to_dict(), plan / STATE_FILE)
    return {
        "strategy": run.config.balancer_strategy,
        "pairs": pairs,
        "previous_counts": given.get("counts", {}),
        "state_warning": given.get("warning"),
        "state_written": not whatif,
    }
