"""Stage 12: drop what no rule wants any more: excess replicas (under the availability rule),
segments of drop rules, unused segments, and overshadowed segments once what overshadows them is
served (ALGORITHM.md stage 12 and "Availability"; seed 000 stage 12).

Reads the run state only (no groups). Unlimited (drops take no load queue). The excess replicas
are chosen by :func:`segment_balancer.planner.kernels.unload.unload_tiers`, segment after segment
in index order against the stage's own running projection (each drop counts at once), under the
availability rule (:func:`~segment_balancer.planner.kernels.unload.unload_excess`); the replica
counts and the everywhere-drops are joins over the whole run state, which
:meth:`~segment_balancer.planner.stages.run.StageRun.unload` runs (in Spark:
:mod:`segment_balancer.spark.unload`).
"""

from __future__ import annotations

from segment_balancer.planner.stages.run import StageRun

STAGE = 12
READS = WRITES = ()


def stage(run: StageRun, groups) -> None:
    """Run stage 12 (``groups`` unchanged)."""
    run.unload(STAGE)
