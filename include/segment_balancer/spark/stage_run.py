"""A run's work directory with the ways a stage schedules: the Spark side of
:class:`segment_balancer.planner.stages.run.StageRun`.

Each method is a thin translation to the Spark passes: :mod:`.tierpass` (one task per tier over the
run state, the step committed), :mod:`.callbacks` (stage 3's dependent drops), :mod:`.unload`
(stage 12). The stage modules under :mod:`segment_balancer.planner.stages` only call these.
"""

from __future__ import annotations

import json

from pyroaring import BitMap

from segment_balancer.planner.operations import OpOrder
from segment_balancer.planner.stages.run import Body
from segment_balancer.spark import callbacks, tierpass, unload
from segment_balancer.spark.workdir import Run, read_output


class SparkStageRun(Run):
    """:class:`~segment_balancer.spark.workdir.Run` plus the :class:`StageRun` methods
    (``spark``: the session; ``work``: the run's work directory)."""

    def kernel_pass(
        self,
        stage: int,
        step: str,
        tiers: list[str],
        body: Body,
        ranked: bool = True,
        one_task: bool = False,
        keep_state: bool = True,
    ) -> tierpass.PassResult:
        """:func:`.tierpass.kernel_pass` on this run."""
        return tierpass.kernel_pass(self, stage, step, tiers, body, ranked, one_task, keep_state)

    def finish(
        self, stage: int, step: str, result: tierpass.PassResult, facts: dict | None = None
    ) -> dict[str, BitMap]:
        """:func:`.tierpass.finish` on this run."""
        return tierpass.finish(self, stage, step, result, facts)

    def pass_rows(self, result: tierpass.PassResult, kind: str) -> list[dict]:
        """The ``kind`` rows of the pass's output files, read with pyarrow on the driver (no Spark
        job), their ``detail`` parsed, by tier (a tier's rows in the order its kernel returned them)."""
        rows = read_output(self.work_uri, result.out_dir, ["tier", "detail"], kind)
        pairs = zip(rows.column("tier").to_pylist(), rows.column("detail").to_pylist())
        return [json.loads(d) for _, d in sorted(pairs, key=lambda td: td[0])]

    def callback_drops(self, result: tierpass.PassResult) -> int:
        """:func:`.callbacks.callback_drops` over the pass's output files, which get the drops;
        0 at once when the kernels returned no ``over`` row (no callback can come of the pass)."""
        if not result.extra.get("over"):
            return 0
        return callbacks.callback_drops(self.spark, self.work_uri, result)

    def unload(self, stage: int) -> None:
        """:func:`.unload.unload_pass` on this run (``stage`` is 12)."""
        if stage != unload.STAGE:
            raise ValueError(f"stage {stage} is not the unloading stage {unload.STAGE}")
        unload.unload_pass(self)

    def drop_served(self, stage: int, step: str, servers: list[str], reason: str) -> None:
        """One step that drops every used segment ``servers`` serve with no drop (ops ordered by
        server, then segment): one task per tier of those servers."""
        servers = sorted(servers)
        tiers = sorted(set(self.servers_pdf.loc[self.servers_pdf["server"].isin(servers), "tier"]))

        def body(runs, sink):
            for tier_run in runs.values():
                for server in (s for s in servers if s in tier_run.pos):
                    for idx in tier_run.served_by(server):
                        tier_run.drop(tier_run.segment(int(idx)), server, reason, OpOrder(0, server, int(idx)))

        self.finish(stage, step, self.kernel_pass(stage, step, tiers, body, ranked=False))
