"""One run's work directory as the stages see it: prepared tables, the run state, the op log.

A stage sees the snapshot plus every operation scheduled by the stages before it, as the run state
(:mod:`.runstate`, ``WORK/state/NN_step/``) of the last step that wrote one. The op log is
``WORK/ops/*.parquet`` (one file per step) with a manifest that keeps the order, the count and each
step's state, so ``op_id`` stays global and increasing in scheduling order.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from segment_balancer.common.files import filesystem, link_or_copy, write_json_atomic, write_parquet_atomic
from segment_balancer.planner.config import EffectiveConfig, config_from_dict
from segment_balancer.planner.operations import (
    OP_FIELDS,
    OPS_COLUMNS,
    ORDER_COLUMNS,
    ORDER_FIELDS,
    PARTIAL_OP_COLUMNS,
    Action,
)
from segment_balancer.planner.runstate import STATE_FIELDS, StageLimit
from segment_balancer.planner.status import holds
from segment_balancer.spark.session import read_parquet, run_tasks
from segment_balancer.spark.state_store import (
    arrow_schema,
    initial_state_dirs,
    read_segment_table,
    read_tier,
    server_names,
    spark_fields,
    tier_dir_name,
)

log = logging.getLogger(__name__)

RECORD_FILE = "whatif.json"
"""The what-if edits a run applied to its snapshot, in the work directory (written by
:func:`segment_balancer.tools.whatif.apply_to_run`, read by :func:`load_record`)."""

OUT_FIELDS = STATE_FIELDS + [
    ("action", "string"),
    ("queue_type", "string"),
    ("reason", "string"),
    ("dep_server", "string"),
    *spark_fields(ORDER_FIELDS),
    ("deferred_drops", "long"),
    ("group", "string"),
    ("detail", "string"),
]
"""What a stage kernel's task writes (``WORK/passes/NN_step/``), one ``kind`` per row: ``op`` (an
operation: ``action``, ``queue_type``, ``reason``, ``dep_server``, and the ``order_*`` columns of its
:class:`~segment_balancer.planner.operations.OpOrder`), ``member`` (``idx`` joins ``group``),
``deferred`` (``deferred_drops`` drops of ``idx`` held back by the availability rule), ``decision`` (why the step
left segment ``idx`` undone in ``tier``: outcome code in ``reason``, JSON in ``detail``;
:meth:`~segment_balancer.planner.runstate.OpSink.decide`) and ``over``/``candidates`` (stage-3
callback and stage-12 inputs, as JSON in ``detail``: no array columns, which Spark hands to Python
row by row)."""
OUT_COLUMNS = [n for n, _ in OUT_FIELDS]
OUT_SCHEMA = ", ".join(f"`{n}` {t}" for n, t in OUT_FIELDS)


def _ops_arrow_schema():
    return pa.schema([(name, getattr(pa, kind)()) for name, kind in OP_FIELDS])


OPS_ARROW_SCHEMA = _ops_arrow_schema()
"""The op log's parquet schema (``WORK/ops/stage_NN_step.parquet``), of
``planner.operations.OP_FIELDS``."""


DECISION_COLUMNS = ["stage", "step", "idx", "segment_id", "tier", "outcome", "detail"]
"""The decision log (the ``kind = 'decision'`` rows of each step's output, ``WORK/passes/NN_step/``,
then the plan's ``decisions.parquet``): why a stage that considered a segment left it undone.
``stage`` int, ``step`` str, ``idx`` long, ``segment_id`` str, ``tier`` str (null: every tier),
``outcome`` str (code), ``detail`` str (JSON)."""


ASSIGNMENT_FIELDS = [("segment_id", "string"), ("server", "string"), ("tier", "string")]
"""The plan's ``assignment.parquet`` ((name, Spark type) pairs): every replica of the projected end
state (:meth:`Run.assignment`), by ``segment_id`` then ``server``."""


def read_decisions(work_uri: str, steps: list[tuple[int, str, str]]):
    """The decision log (a pyarrow Table of :data:`DECISION_COLUMNS`: ``stage`` int32 and ``step``
    string not null, the rest nullable) of ``steps`` (:meth:`Run.decision_steps`), step after step
    in the order given, each step's rows in file order; read with pyarrow where the caller runs (a
    task). No step: an empty table whose columns are all nullable."""
    types = {"stage": pa.int32(), "idx": pa.int64()}
    nullable = pa.schema([(c, types.get(c, pa.string())) for c in DECISION_COLUMNS])
    if not steps:
        return nullable.empty_table()
    schema = pa.schema([f.with_nullable(f.name not in ("stage", "step")) for f in nullable])
    parts = []
    for stage, step, rel in steps:
        rows = read_output(work_uri, rel, ["idx", "segment_id", "tier", "reason", "detail"], "decision")
        n = rows.num_rows
        parts.append(
            pa.table(
                [pa.array([stage] * n, pa.int32()), pa.array([step] * n, pa.string()), *rows.columns],
                schema=schema,
            )
        )
    return pa.concat_tables(parts)


def output_rel(stage: int, step: str) -> str:
    """``passes/NN_step/out.parquet``: where a step whose output is not its kernel pass's task files
    writes it (relative to the work directory)."""
    return f"passes/{stage:02d}_{step}/out.parquet"


def read_output(work_uri: str, rel: str, columns: list[str], kind: str, **equal):
    """The rows of a step's output files (:data:`OUT_COLUMNS`, the directory or file ``rel`` under
    the work directory ``work_uri``) of ``kind`` (``op``, ``decision``, ``deferred``, …) whose
    columns equal ``equal`` (e.g. ``tier=``, ``action=``), as a pyarrow Table of ``columns``: read
    with pyarrow where the caller runs (a Spark task, or the driver for what the load queues
    bound), never through a Spark job."""
    fs, base = filesystem(work_uri)
    cond = ds.field("kind") == kind
    for name, value in equal.items():
        cond = cond & (ds.field(name) == value)
    return ds.dataset(f"{base}/{rel}", format="parquet", filesystem=fs, schema=arrow_schema(OUT_FIELDS)).to_table(
        filter=cond, columns=columns
    )


def num_best_function(values: dict):
    """``B(numServersInTier, targetReplicants)`` from the effective config's ``meta.json`` form:
    clamp(floor(f(n, t)), t, n) (ALGORITHM.md "Best servers"). Picklable inputs, so a Spark task
    rebuilds it from the dict (:func:`~segment_balancer.planner.config.config_from_dict`)."""
    return config_from_dict(values).num_best_servers


def out_frame(sink, extra: list[dict] | None = None) -> pd.DataFrame:
    """One pandas frame of ``OUT_COLUMNS``: the ops, memberships and deferred drops of ``sink``
    and ``extra`` rows (``over``/``candidates``)."""
    rows = [
        {
            "kind": "op",
            "action": o.action,
            "queue_type": o.queue_type,
            "idx": o.idx,
            "code": o.idx if o.code is None else o.code,
            "segment_id": o.segment_id,
            "datasource": o.datasource,
            "tier": o.tier,
            "server": o.server,
            "size_bytes": o.size_bytes,
            "reason": o.reason,
            "dep_server": o.dep_server,
            **dict(zip(ORDER_COLUMNS, o.order)),
        }
        for o in sink.ops
    ]
    rows += [{"kind": "member", "idx": idx, "group": g} for idx, g in sink.members]
    rows += [{"kind": "deferred", "idx": idx, "segment_id": sid, "deferred_drops": n} for idx, sid, n in sink.deferred]
    rows += [
        {
            "kind": "decision",
            "idx": idx,
            "segment_id": sid,
            "tier": tier,
            "reason": outcome,
            "detail": json.dumps(detail, separators=(",", ":"), sort_keys=True),
        }
        for idx, sid, tier, outcome, detail in sink.decisions
    ]
    rows += extra or []
    frame = pd.DataFrame(rows, columns=OUT_COLUMNS)
    for col in ("idx", "start_ms", "end_ms", "size_bytes", "order_idx", "order_seq", "deferred_drops"):
        frame[col] = frame[col].astype("Int64").fillna(0).astype("int64")
    frame["code"] = frame["code"].astype("Int64")
    frame["order_after"] = frame["order_after"].astype("Int32").fillna(0).astype("int32")
    for col in ("target", "tier_pos", "required"):
        frame[col] = frame[col].astype("Int32")
    for col in ("served", "dropping", "drop_dependent"):
        frame[col] = frame[col].astype("boolean")
    strings = [
        "tier",
        "kind",
        "segment_id",
        "datasource",
        "server",
        "load_type",
        "rule_kind",
        "topb",
        "action",
        "queue_type",
        "reason",
        "dep_server",
        "order_key",
        "group",
        "detail",
    ]
    frame[strings] = frame[strings].astype(object).where(frame[strings].notna(), None)
    return frame


def reset_manifest(work: Path, stage: int) -> None:
    """Forget the steps of ``stage`` and later in ``work/ops/manifest.json`` (a retried or skipped
    application starts clean); no Spark needed."""
    path = Path(work) / "ops" / "manifest.json"
    if not path.exists():
        return
    manifest = json.loads(path.read_text())
    keep = [s for s in manifest["steps"] if int(s["stage"]) < stage]
    if len(keep) == len(manifest["steps"]):
        return
    files = [f"stage_{s['stage']:02d}_{s['step']}.parquet" for s in keep]
    write_json_atomic({"files": files, "count": sum(int(s["ops"]) for s in keep), "steps": keep}, path)


class Run:
    """One run's work directory, as the stages see it.

    ``spark``: the session; ``work``: the run's work directory (prepared tables under
    ``work/prepared``); ``meta``: ``prepared/meta.json``.
    """

    def __init__(self, spark, work: Path):
        self.spark = spark
        self.work = Path(work)
        self.prepared = self.work / "prepared"
        self.meta = json.loads((self.prepared / "meta.json").read_text())
        self.servers_pdf = pd.read_parquet(self.prepared / "servers.parquet")
        self._tables: dict = {}
        self._config: EffectiveConfig | None = None

    # ---- tables -------------------------------------------------------------------------------
    def table(self, name: str):
        """A prepared table as a Spark DataFrame (``segments``, ``replicas``, ``targets``)."""
        if name not in self._tables:
            self._tables[name] = read_parquet(self.spark, self.prepared / f"{name}.parquet")
        return self._tables[name]

    @property
    def config(self) -> EffectiveConfig:
        """The run's effective dynamic config (typed), as ``prepare`` kept it in ``meta.json``."""
        if self._config is None:
            self._config = config_from_dict(self.meta["config"])
        return self._config

    def limit(self, stage: int) -> StageLimit:
        return StageLimit.from_meta(self.meta["stage_limits"].get(str(stage)))

    # ---- op log -------------------------------------------------------------------------------
    @property
    def _manifest_path(self) -> Path:
        return self.work / "ops" / "manifest.json"

    def manifest(self) -> dict:
        if self._manifest_path.exists():
            return json.loads(self._manifest_path.read_text())
        return {"files": [], "count": 0, "steps": []}

    def reset_from(self, stage: int) -> None:
        """Forget the ops of ``stage`` and later (a retried application starts clean)."""
        reset_manifest(self.work, stage)

    def step_facts(self) -> list[dict]:
        """``{"stage", "step", **facts}`` of every step so far that reported facts."""
        return [
            {"stage": s["stage"], "step": s["step"], **s["facts"]} for s in self.manifest()["steps"] if s.get("facts")
        ]

    def decision_steps(self) -> list[tuple[int, str, str]]:
        """``(stage, step, output)`` of every step so far that recorded decisions, in run order:
        ``output`` (relative to the work directory) holds the step's ``kind = 'decision'`` rows
        (:func:`read_decisions`)."""
        return [(int(s["stage"]), s["step"], s["decisions"]) for s in self.manifest()["steps"] if s.get("decisions")]

    def ops(self):
        """Every op scheduled so far (Spark DataFrame of ``OPS_COLUMNS``), or None."""
        files = self.manifest()["files"]
        if not files:
            return None
        return read_parquet(self.spark, *[self.work / "ops" / f for f in files])

    # ---- run state ----------------------------------------------------------------------------
    @property
    def work_uri(self) -> str:
        """The work directory as Spark tasks address it (absolute)."""
        return str(self.work.absolute())

    @property
    def server_names(self) -> tuple[str, ...]:
        """The names of the run state's server codes (``prepared/servers.parquet``, by name)."""
        return server_names(self.servers_pdf)

    def initial_state_dirs(self) -> dict[str, str]:
        """``{tier: directory}`` (relative to the work directory) of the state ``prepare`` wrote."""
        return initial_state_dirs(self.work)

    def state_spec(self, initial: bool = False) -> dict:
        """What a task reads to rebuild a tier's current state
        (:func:`~segment_balancer.spark.state_store.read_tier`), every path relative to the work
        directory: ``start`` (``{tier: directory}`` of the start state), ``ops`` (the op log's
        files so far, in order) and ``topb`` (``{tier: [file, …]}``, the top ``B`` the steps so far
        cached, in order). With ``initial``: the start of the run (no ops, no top ``B``)."""
        spec = {"start": self.initial_state_dirs(), "ops": [], "topb": {}}
        if initial:
            return spec
        manifest = self.manifest()
        spec["ops"] = [f"ops/{f}" for f in manifest["files"]]
        for step in manifest["steps"]:
            for tier, rel in sorted(step.get("topb", {}).items()):
                spec["topb"].setdefault(tier, []).append(rel)
        return spec

    def assignment(self, out_rel: str) -> None:
        """Write the projected end state: (``segment_id``, ``server``, ``tier``) of every replica the
        current run state holds (served with no drop, or loading), one parquet file of
        :data:`ASSIGNMENT_FIELDS` per tier under ``out_rel`` (relative to the work directory),
        unordered: one task per tier (:func:`~segment_balancer.spark.session.run_tasks`) rebuilds
        its state (:func:`~segment_balancer.spark.state_store.read_tier`) and writes its rows with
        pyarrow. No tier, no file."""
        spec, work, names = self.state_spec(), self.work_uri, self.server_names

        def write(tier: str) -> None:
            fs, base = filesystem(work)
            table, state = read_segment_table(work), read_tier(work, spec, tier, names)
            mine = holds(state)
            codes = state.rep_code[mine]
            rows = pa.table(
                {
                    "segment_id": pa.array(table.segment_ids(codes), pa.string()),
                    "server": pa.array(
                        np.array(names, dtype=object)[state.rep_server[mine]] if len(codes) else [], pa.string()
                    ),
                    "tier": pa.array([tier] * len(codes), pa.string()),
                },
                schema=arrow_schema(ASSIGNMENT_FIELDS),
            )
            fs.create_dir(f"{base}/{out_rel}", recursive=True)
            pq.write_table(rows, f"{base}/{out_rel}/{tier_dir_name(tier)}.parquet", filesystem=fs)

        run_tasks(self.spark, sorted(spec["start"]), write)

    def append_ops(self, stage: int, step: str, ops) -> int:
        """Append ops already in scheduling order (a pyarrow table of :data:`OPS_COLUMNS` but
        ``op_id`` and ``depends_on``, which refer to positions in ``ops``: ``op_id`` 0, 1, …) to the
        op log, numbered after the ops so far, and commit the step in the manifest; the ``druid``
        coordinator's one step. Returns the number of ops."""
        manifest = self.manifest()
        offset = manifest["count"]
        n = ops.num_rows
        ops = ops.set_column(
            ops.schema.get_field_index("op_id"), "op_id", pa.array(range(offset, offset + n), pa.int64())
        )
        depends = pc.add(ops.column("depends_on").cast(pa.int64()), offset)
        ops = ops.set_column(ops.schema.get_field_index("depends_on"), "depends_on", depends)
        name = f"stage_{stage:02d}_{step}.parquet"
        write_parquet_atomic(ops.select(OPS_COLUMNS).cast(OPS_ARROW_SCHEMA), self.work / "ops" / name)
        manifest["files"].append(name)
        manifest["count"] = offset + n
        manifest["steps"].append({"stage": stage, "step": step, "ops": n})
        write_json_atomic(manifest, self._manifest_path)
        log.info("stage %d step %s: %d operations", stage, step, n)
        return n

    def write_ops(
        self, stage: int, step: str, kernel_out: str, facts: dict | None = None, topb: dict[str, str] | None = None
    ) -> int:
        """Give the ops of one step their global ``op_id`` (in the order of their
        :class:`~segment_balancer.planner.operations.OpOrder`, then ``action``, ``server``),
        resolve ``depends_on`` and append them to the op log; keep the step's decisions where
        they are. ``kernel_out``: the file or directory of the step's output rows
        (:data:`OUT_COLUMNS`, relative to the work directory: the files its tasks wrote). ``facts``: counts the
        step reports (e.g. deferred drops), kept with the step in the manifest for the summary.
        ``topb``: ``{tier: file}`` of the top ``B`` the step cached (:mod:`.tierpass` wrote them);
        with the ops, all a step changes of the run state. The manifest written last commits the
        step. Returns the number of ops written.

        No Spark job: the step's ops (bounded by the load queues: M x servers, and stage 12's
        drops) are read from the output files with pyarrow and numbered in pandas; the decisions
        stay in the output files, which :meth:`decisions` reads.
        """
        manifest = self.manifest()
        offset = manifest["count"]
        cols = [
            *ORDER_COLUMNS,
            "action",
            "queue_type",
            "idx",
            "code",
            "segment_id",
            "datasource",
            "tier",
            "server",
            "size_bytes",
            "reason",
            "dep_server",
        ]
        ops = read_output(self.work_uri, kernel_out, cols, "op").to_pandas()
        ops = ops.sort_values([*ORDER_COLUMNS, "action", "server"], kind="stable", na_position="first")
        ops = ops.reset_index(drop=True)
        ops["op_id"] = range(offset, offset + len(ops))
        loads = ops.loc[ops["action"] == Action.LOAD, ["idx", "server", "op_id"]].rename(
            columns={"server": "dep_server", "op_id": "depends_on"}
        )
        final = ops.merge(loads, on=["idx", "dep_server"], how="left")
        final["depends_on"] = final["depends_on"].astype("Int64")
        final["stage"] = stage
        final = self._with_partial_loads(final).sort_values("op_id", kind="stable")[OPS_COLUMNS]
        name = f"stage_{stage:02d}_{step}.parquet"
        write_parquet_atomic(
            pa.Table.from_pandas(final, schema=OPS_ARROW_SCHEMA, preserve_index=False), self.work / "ops" / name
        )
        n = len(final)
        entry = {"stage": stage, "step": step, "ops": n, **({"facts": facts} if facts else {}), "decisions": kernel_out}
        if topb:
            entry["topb"] = dict(sorted(topb.items()))
        manifest["files"].append(name)
        manifest["count"] = offset + n
        manifest["steps"].append(entry)
        write_json_atomic(manifest, self._manifest_path)
        log.info("stage %d step %s: %d operations", stage, step, n)
        return n

    def partial_loads(self):
        """``idx`` -> the ``partial_*`` columns of the used segments whose rule loads a part of them
        (a pandas frame indexed by ``idx``; empty when no rule is a partial-load rule), read once."""
        if getattr(self, "_partial_loads", None) is None:
            path = self.prepared / "segments.parquet"
            if not path.exists() or "partial_type" not in ds.dataset(path, format="parquet").schema.names:
                table = pa.table(
                    {"idx": pa.array([], pa.int64()), **{c: pa.array([], pa.string()) for c in PARTIAL_OP_COLUMNS}}
                )
            else:
                table = pq.read_table(path, columns=["idx", *PARTIAL_OP_COLUMNS])
                table = table.filter(pc.and_(pc.is_valid(table["partial_type"]), pc.is_valid(table["idx"])))
            self._partial_loads = table.to_pandas().set_index("idx")
        return self._partial_loads

    def _with_partial_loads(self, ops):
        """``ops`` (a step's op frame) with the ``partial_*`` columns of its LOADs filled from
        :meth:`partial_loads` (ALGORITHM.md "Rules of Druid 38": a LOAD under a matching partial
        rule says what part it loads)."""
        partial = self.partial_loads()
        for column in PARTIAL_OP_COLUMNS:
            if column not in ops.columns:
                ops[column] = pd.Series([None] * len(ops), index=ops.index, dtype=object)
        if len(partial):
            loads = ops["action"].eq(Action.LOAD) & ops["idx"].isin(partial.index)
            if loads.any():
                filled = partial.loc[ops.loc[loads, "idx"].to_numpy(), PARTIAL_OP_COLUMNS].to_numpy()
                ops.loc[loads, PARTIAL_OP_COLUMNS] = filled
        return ops


def load_record(work: Path) -> dict | None:
    """The run's applied edits (:data:`RECORD_FILE` in ``work``), or None when the run has none."""
    path = Path(work) / RECORD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


COMPARE_REQUEST_FILE = "compare_coordinators.json"
"""In a work directory: the run plans with the other coordinator too (:func:`request_compare`)."""
COMPARED_WORK = "compared_work"
"""``WORK/compared_work/<coordinator>/``: the other coordinator's work directory (:func:`fork_work`)."""
FORKED = (
    "timeline",
    "prepared",
    "state/00_prepare",
    "groups/used_segments.json",
    "groups/prepare.json",
    "timings.json",
)
"""What ``used_segments`` and ``prepare`` leave in a work directory that another coordinator's run
starts from."""


def request_compare(work: Path) -> None:
    """Ask that the run in ``work`` be planned by both coordinators (the DAG param
    ``compare_with_druid``, the CLI's ``plan --compare``): its ``compare_coordinators`` application
    then runs the other coordinator's applications (otherwise it hands the groups on)."""
    write_json_atomic({"compare": True}, Path(work) / COMPARE_REQUEST_FILE)


def compare_requested(work: Path) -> bool:
    """Whether :func:`request_compare` asked for a comparison in ``work``."""
    return (Path(work) / COMPARE_REQUEST_FILE).is_file()


def compared_work(work: Path, coordinator: str) -> Path:
    """The work directory of ``coordinator``'s plan of the run in ``work`` (:data:`COMPARED_WORK`)."""
    return Path(work) / COMPARED_WORK / coordinator


def fork_work(work: Path, coordinator: str) -> Path:
    """``coordinator``'s work directory (:func:`compared_work`, replaced) that starts where ``work``
    stood after ``prepare``: its :data:`FORKED` files hard-linked (never written again: every later
    application writes aside and renames), ``prepared/meta.json`` copied with ``coordinator`` as
    the run's coordinator. Returns the fork's path."""
    fork = compared_work(work, coordinator)
    shutil.rmtree(fork, ignore_errors=True)
    for rel in FORKED:
        src = work / rel
        if src.is_dir():
            for path in sorted(src.rglob("*")):
                dst = fork / rel / path.relative_to(src)
                if path.is_dir():
                    dst.mkdir(parents=True, exist_ok=True)
                else:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    link_or_copy(path, dst)
        elif src.exists():
            (fork / rel).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(src, fork / rel)
    meta_path = fork / "prepared" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.unlink()
    write_json_atomic({**meta, "config": {**meta["config"], "coordinator": coordinator}}, meta_path)
    return fork
