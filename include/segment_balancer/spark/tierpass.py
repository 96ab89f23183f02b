"""Per-tier Spark tasks over the run state: how a stage step runs its greedy kernel.

A pass is one Spark job with one task per tier (ALGORITHM.md "Stages": tiers are independent
within a stage), or one task for every tier (stage 1 falls back across tiers). Each task:

1. reads its tiers' state directories straight from the work directory (pyarrow, through the
   filesystem the work-directory URI names: nothing is shuffled through the JVM);
2. builds a :class:`~segment_balancer.planner.runstate.TierRun` per tier and runs the stage's kernel;
3. writes back only the tiers it changed (``WORK/state/NN_step/tier=T/``) and its output rows
   (``WORK/passes/NN_step/task-K.parquet``, :data:`~segment_balancer.spark.workdir.OUT_COLUMNS`: ops,
   deferred drops, stage-3 callback and stage-12 inputs);
4. returns its group memberships as serialized bitmaps (a few bytes per tier).

Tiers a step does not change keep their directory: the manifest entry of the step maps every tier
to its current directory, and writing the manifest commits the step. Drops a stage decides outside
the tier pass (stage-3 callbacks, stages 12 and 13) are applied by :func:`apply_drops_pass`, a
second pass over the tiers they touch.

Source: ALGORITHM.md "Stages"; Druid ``BalanceSegments``/``RunRules`` run tier by tier.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd
from pyroaring import BitMap

from segment_balancer.common.files import filesystem
from segment_balancer.planner.runstate import OpSink, TierRun
from segment_balancer.planner.stages.run import Body
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.state_store import arrow_schema, read_tier_state, tier_dir_name, write_tier_state
from segment_balancer.spark.workdir import OUT_FIELDS, OUT_SCHEMA, Run, num_best_function, out_frame, read_output

log = logging.getLogger(__name__)

@dataclass
class PassResult:
    """What a pass leaves: ``out_dir`` (the task files of ``OUT_COLUMNS`` rows, relative to the work
    directory), ``out`` (a Spark DataFrame over them), ``state`` (``{tier: directory}`` of every
    tier after the pass) and ``members`` (``{group name: BitMap}`` of the memberships the kernels
    recorded)."""

    out: object
    state: dict[str, str]
    members: dict[str, BitMap]
    out_dir: str = ""


def step_dir(stage: int, step: str) -> str:
    """``state/NN_step``: where a step writes the tiers it changes (relative to the work dir)."""
    return f"state/{stage:02d}_{step}"


def pass_dir(stage: int, step: str) -> str:
    """``passes/NN_step``: the step's intermediate files (relative to the work directory); the
    kernel tasks' outputs are under ``tasks/`` there."""
    return f"passes/{stage:02d}_{step}"


def _clear(run: Run, *rels: str) -> None:
    """Remove what a failed or retried attempt of the step left."""
    from pyarrow.fs import FileType

    fs, base = filesystem(run.work_uri)
    for rel in rels:
        if fs.get_file_info(f"{base}/{rel}").type != FileType.NotFound:
            fs.delete_dir(f"{base}/{rel}")


def _write_out(fs, path: str, frame: pd.DataFrame) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(pa.Table.from_pandas(frame, schema=arrow_schema(OUT_FIELDS), preserve_index=False), path,
                   filesystem=fs)


def kernel_pass(run: Run, stage: int, step: str, tiers: list[str], body: Body, ranked: bool = True,
                one_task: bool = False, keep_state: bool = True, groups: list[list[str]] | None = None) -> PassResult:
    """Run ``body`` on the live state of ``tiers``: one Spark task per tier, or one for all of them
    (``one_task``), or one per list of ``groups`` (tiers that must be decided together: stage 12's
    segments whose drops depend on the order across tiers; ``tiers`` is then ignored). ``ranked``: build the live placement costs (stages that never rank skip it).
    ``keep_state``: write back the tiers the kernel changed (False for a pass that only reads).
    Tiers without state rows get no ``TierRun``. Returns the :class:`PassResult`."""
    current = run.state_dirs()
    work, sdir, pdir = run.work_uri, step_dir(stage, step), f"{pass_dir(stage, step)}/tasks"
    _clear(run, sdir, pdir)
    servers_pdf, cfg, reuse_top_b = run.servers_pdf, run.meta["config"], run.config.top_b_reuse
    tasks = groups if groups is not None else [list(tiers)] if one_task else [[t] for t in tiers]

    def task(item):
        k, names = item
        fs, base = filesystem(work)
        sink, runs = OpSink(), {}
        for tier in names:
            if tier in current:
                rows = read_tier_state(fs, f"{base}/{current[tier]}")
                if len(rows):
                    runs[tier] = TierRun(tier, rows, servers_pdf[servers_pdf["tier"] == tier], num_best_function(cfg),
                                         ranked, sink, reuse_top_b=reuse_top_b)
        extra = body(runs, sink)
        written = {}
        for tier, tier_run in runs.items():
            if keep_state and tier_run.changed:
                written[tier] = f"{sdir}/{tier_dir_name(tier)}"
                write_tier_state(fs, f"{base}/{written[tier]}", tier_run.rows())
        _write_out(fs, f"{base}/{pdir}/task-{k:05d}.parquet", out_frame(sink, extra))
        members: dict[str, BitMap] = {}
        for idx, group in sink.members:
            members.setdefault(group, BitMap()).add(idx)
        return written, {g: bm.serialize() for g, bm in members.items()}

    results = run_tasks(run.spark, list(enumerate(tasks)), task)
    state, members = dict(current), {}
    for written, packed in results:
        state.update(written)
        for group, data in packed.items():
            members[group] = members.get(group, BitMap()) | BitMap.deserialize(data)
    out = run.spark.read.schema(OUT_SCHEMA).parquet(f"{work}/{pdir}")
    return PassResult(out, state, members, pdir)


def apply_drops_pass(run: Run, stage: int, step: str, output: str, state: dict[str, str]) -> dict[str, str]:
    """Mark ``dropping`` (and ``drop_dependent`` for a drop that waits for a load: the stage-3
    callbacks) on the replica rows that the DROP ops of the step's output name, one task
    per tier of ``state`` (one Spark job); a tier with such drops is written into the step's
    directory. ``output``: the step's output files (:data:`OUT_COLUMNS`, relative to the work
    directory: :meth:`Run.write_output`); a DROP the kernel itself scheduled is marked already, so
    marking it again changes nothing. ``state``: ``{tier: directory}`` before; returns it after."""
    tiers = sorted(state)
    if not tiers:
        return dict(state)
    work, sdir = run.work_uri, step_dir(stage, step)

    def task(tier):
        fs, base = filesystem(work)
        named = read_output(work, output, ["server", "segment_id", "dep_server"], "op", tier=tier, action="DROP")
        pairs = {(s, i): d is not None for s, i, d in zip(named.column("server").to_pylist(),
                                                         named.column("segment_id").to_pylist(),
                                                         named.column("dep_server").to_pylist())}
        if not pairs:
            return tier, None
        rows = read_tier_state(fs, f"{base}/{state[tier]}")
        hit = [(k == "replica" and (s, i) in pairs)
               for k, s, i in zip(rows["kind"], rows["server"], rows["segment_id"])]
        dependent = [h and pairs[(s, i)] for h, s, i in zip(hit, rows["server"], rows["segment_id"])]
        rows["dropping"] = rows["dropping"].astype("boolean").mask(pd.Series(hit, index=rows.index), True)
        rows["drop_dependent"] = rows["drop_dependent"].astype("boolean").mask(pd.Series(dependent, index=rows.index), True)
        out = f"{sdir}/{tier_dir_name(tier)}"
        write_tier_state(fs, f"{base}/{out}", rows)
        return tier, out

    written = {tier: out for tier, out in run_tasks(run.spark, tiers, task) if out is not None}
    return {**state, **written}


def commit_with_drops(run: Run, stage: int, step: str, output, state: dict[str, str], facts: dict | None = None) -> None:
    """Commit a step whose output (Spark DataFrame of :data:`OUT_COLUMNS`) holds drops decided
    outside a tier pass (stage-3 callbacks, stages 12 and 13): write the output once, mark its
    drops in the state (:func:`apply_drops_pass`), append its ops to the op log. Two Spark jobs."""
    rel = run.write_output(stage, step, output)
    run.write_ops(stage, step, rel, facts, state=apply_drops_pass(run, stage, step, rel, state))


def finish(run: Run, stage: int, step: str, result: PassResult, drops=None, facts: dict | None = None) -> dict[str, BitMap]:
    """Commit a step: its ops (``result.out``'s and ``drops``') to the op log and its state (with
    ``drops`` applied) to the manifest. Returns the memberships the kernels recorded."""
    if drops is None:
        run.write_ops(stage, step, result.out_dir, facts, state=result.state)
    else:
        commit_with_drops(run, stage, step, result.out.unionByName(drops), result.state, facts)
    return result.members
