"""Per-tier Spark tasks over the run state: how a stage step runs its greedy kernel.

A pass is one Spark job with one task per tier (ALGORITHM.md "Stages": tiers are independent
within a stage), or one task for every tier (stage 1 falls back across tiers). Each task:

1. rebuilds its tiers' current state from the work directory (pyarrow, through the filesystem the
   work-directory URI names: nothing is shuffled through the JVM): the start state, memory-mapped,
   with the op log so far applied (:func:`~segment_balancer.spark.state_store.read_tier`);
2. builds a :class:`~segment_balancer.planner.runstate.TierRun` per tier and runs the stage's kernel;
3. writes its output rows (``WORK/passes/NN_step/tasks/task-K.parquet``,
   :data:`~segment_balancer.spark.workdir.OUT_COLUMNS`: ops, deferred drops, stage-3 callback and
   stage-12 inputs, decisions) and the top ``B`` it cached (``WORK/state/NN_step/tier=T/topb.arrow``);
4. returns its group memberships as serialized bitmaps (a few bytes per tier).

A step changes the run state only by its ops and its top ``B``: the manifest entry of the step
names its op-log file and top-``B`` files, and writing the manifest commits the step. Drops a stage
decides outside the tier pass (stage-3 callbacks, stages 12 and 13) are ops of the step like the
others, so they count from the next step on.

Source: ALGORITHM.md "Stages"; Druid ``BalanceSegments``/``RunRules`` run tier by tier.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileType
from pyroaring import BitMap

from segment_balancer.common.files import filesystem, sibling_tmp
from segment_balancer.planner.runstate import OpSink, TierRun
from segment_balancer.planner.stages.run import Body
from segment_balancer.spark.session import run_tasks
from segment_balancer.spark.state_store import arrow_schema, read_segment_table, read_tier, tier_dir_name, write_topb
from segment_balancer.spark.workdir import OUT_FIELDS, Run, num_best_function, out_frame

log = logging.getLogger(__name__)


@dataclass
class PassResult:
    """What a pass leaves: ``out_dir`` (the task files of ``OUT_COLUMNS`` rows, relative to the work
    directory; the step's output), ``topb`` (``{tier: file}`` of the top ``B`` the kernels cached),
    ``members`` (``{group name: BitMap}`` of the memberships the kernels recorded) and ``extra``
    (``{kind: rows}``: how many extra rows of each kind the kernels returned, e.g. stage 3's
    ``over``)."""

    topb: dict[str, str]
    members: dict[str, BitMap]
    out_dir: str = ""
    extra: dict[str, int] = field(default_factory=dict)


def step_dir(stage: int, step: str) -> str:
    """``state/NN_step``: where a step writes the top ``B`` it cached (relative to the work dir)."""
    return f"state/{stage:02d}_{step}"


def pass_dir(stage: int, step: str) -> str:
    """``passes/NN_step``: the step's intermediate files (relative to the work directory); the
    kernel tasks' outputs are under ``tasks/`` there."""
    return f"passes/{stage:02d}_{step}"


def _clear(run: Run, *rels: str) -> None:
    """Remove what a failed or retried attempt of the step left."""
    fs, base = filesystem(run.work_uri)
    for rel in rels:
        if fs.get_file_info(f"{base}/{rel}").type != FileType.NotFound:
            fs.delete_dir(f"{base}/{rel}")


def write_out(fs, path: str, frame: pd.DataFrame) -> None:
    """Write ``frame`` (pandas, :data:`OUT_FIELDS`) to the parquet file ``path`` of filesystem ``fs``
    (its directory made first): written aside under a hidden name (``common.files.sibling_tmp``,
    which a dataset read of the directory skips), then moved into place, so a task reading the
    directory while another writes into it (stage 3's callbacks) never sees a file half written."""
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = str(sibling_tmp(PurePosixPath(path)))
    pq.write_table(
        pa.Table.from_pandas(frame, schema=arrow_schema(OUT_FIELDS), preserve_index=False), tmp, filesystem=fs
    )
    fs.move(tmp, path)


def kernel_pass(
    run: Run,
    stage: int,
    step: str,
    tiers: list[str],
    body: Body,
    ranked: bool = True,
    one_task: bool = False,
    keep_state: bool = True,
    groups: list[list[str]] | None = None,
) -> PassResult:
    """Run ``body`` on the live state of ``tiers``: one Spark task per tier, or one for all of them
    (``one_task``), or one per list of ``groups`` (tiers that must be decided together: stage 12's
    segments whose drops depend on the order across tiers; ``tiers`` is then ignored). ``ranked``:
    build the live placement costs (stages that never rank skip it). ``keep_state``: keep the top
    ``B`` the kernels cached (False for a pass whose kernels change nothing they keep). Tiers
    without state get no ``TierRun``. Returns the :class:`PassResult`."""
    spec, names = run.state_spec(), run.server_names
    work, sdir, pdir = run.work_uri, step_dir(stage, step), f"{pass_dir(stage, step)}/tasks"
    _clear(run, sdir, pdir)
    servers_pdf, cfg, reuse_top_b = run.servers_pdf, run.meta["config"], run.config.top_b_reuse
    tasks = groups if groups is not None else [list(tiers)] if one_task else [[t] for t in tiers]

    def task(item):
        k, tier_names = item
        fs, base = filesystem(work)
        table = read_segment_table(work)
        sink, runs = OpSink(), {}
        for tier in tier_names:
            state = read_tier(work, spec, tier, names)
            if state is not None and (len(state.seg_code) or len(state.rep_code)):
                runs[tier] = TierRun(
                    state,
                    table,
                    servers_pdf[servers_pdf["tier"] == tier],
                    num_best_function(cfg),
                    ranked,
                    sink,
                    reuse_top_b=reuse_top_b,
                )
        extra = body(runs, sink)
        written = {}
        for tier, tier_run in runs.items():
            topb = tier_run.new_topb()
            if keep_state and topb:
                written[tier] = f"{sdir}/{tier_dir_name(tier)}/topb.arrow"
                write_topb(fs, f"{base}/{written[tier]}", topb)
        write_out(fs, f"{base}/{pdir}/task-{k:05d}.parquet", out_frame(sink, extra))
        members: dict[str, BitMap] = {}
        for idx, group in sink.members:
            members.setdefault(group, BitMap()).add(idx)
        return written, {g: bm.serialize() for g, bm in members.items()}, dict(Counter(r["kind"] for r in extra or ()))

    results = run_tasks(run.spark, list(enumerate(tasks)), task)
    topb, members, extra = {}, {}, Counter()
    for written, packed, kinds in results:
        topb.update(written)
        extra.update(kinds)
        for group, data in packed.items():
            members[group] = members.get(group, BitMap()) | BitMap.deserialize(data)
    return PassResult(topb, members, pdir, dict(extra))


def finish(run: Run, stage: int, step: str, result: PassResult, facts: dict | None = None) -> dict[str, BitMap]:
    """Commit a step: the ops of its output files (the pass's tasks' and the stage-3 callbacks'
    beside them) and the top ``B`` its pass cached, to the op log and the manifest. Returns the
    memberships the kernels recorded."""
    run.write_ops(stage, step, result.out_dir, facts, topb=result.topb)
    return result.members
