"""A run's work directory with the ways a stage schedules: the Spark side of
:class:`segment_balancer.planner.stages.run.StageRun`.

Each method is a thin translation to the Spark passes: :mod:`.tierpass` (one task per tier over the
run state, the step committed), :mod:`.callbacks` (stage 3's dependent drops), :mod:`.unload`
(stage 12). The stage modules under :mod:`segment_balancer.planner.stages` only call these.
"""

from __future__ import annotations

from pyroaring import BitMap

from segment_balancer.planner.stages.run import Body
from segment_balancer.spark import callbacks, tierpass, unload
from segment_balancer.spark.state_store import conform
from segment_balancer.spark.workdir import OUT_FIELDS, Run, read_output


class SparkStageRun(Run):
    """:class:`~segment_balancer.spark.workdir.Run` plus the :class:`StageRun` methods
    (``spark``: the session; ``work``: the run's work directory)."""

    def kernel_pass(self, stage: int, step: str, tiers: list[str], body: Body, ranked: bool = True,
                    one_task: bool = False, keep_state: bool = True) -> tierpass.PassResult:
        """:func:`.tierpass.kernel_pass` on this run."""
        return tierpass.kernel_pass(self, stage, step, tiers, body, ranked, one_task, keep_state)

    def finish(self, stage: int, step: str, result: tierpass.PassResult, drops=None, facts: dict | None = None
               ) -> dict[str, BitMap]:
        """:func:`.tierpass.finish` on this run."""
        return tierpass.finish(self, stage, step, result, drops, facts)

    def pass_rows(self, result: tierpass.PassResult, kind: str) -> list[dict]:
        """The ``kind`` rows of the pass's output files, read with pyarrow on the driver (no Spark
        job), their ``detail`` parsed, by tier (a tier's rows in the order its kernel returned them)."""
        import json

        rows = read_output(self.work_uri, result.out_dir, ["tier", "detail"], kind)
        pairs = zip(rows.column("tier").to_pylist(), rows.column("detail").to_pylist())
        return [json.loads(d) for _, d in sorted(pairs, key=lambda td: td[0])]

    def callback_drops(self, result: tierpass.PassResult):
        """:func:`.callbacks.callback_drops` over the pass's output (a Spark DataFrame of
        ``OUT_COLUMNS``, for :meth:`finish`)."""
        return callbacks.callback_drops(result.out)

    def unload(self, stage: int) -> None:
        """:func:`.unload.unload_pass` on this run (``stage`` is 12)."""
        if stage != unload.STAGE:
            raise ValueError(f"stage {stage} is not the unloading stage {unload.STAGE}")
        unload.unload_pass(self)

    def drop_served(self, stage: int, step: str, servers: list[str], reason: str) -> None:
        """One step that drops every used segment ``servers`` serve with no drop (ops ordered by
        server, then segment), committed with :func:`.tierpass.commit_with_drops`."""
        from pyspark.sql import functions as F

        rows = self.state().filter("kind = 'replica' and idx >= 0 and served and not dropping").filter(
            F.col("server").isin(list(servers)))
        ops = conform(rows.select(
            F.lit("op").alias("kind"), F.lit("DROP").alias("action"), "idx", "code", "segment_id", "datasource", "tier",
            "server", "size_bytes", F.lit(reason).alias("reason"), F.lit(0).cast("long").alias("o1"),
            F.col("server").alias("o2"), F.col("idx").cast("double").alias("o3")), OUT_FIELDS)
        tierpass.commit_with_drops(self, stage, step, ops)
