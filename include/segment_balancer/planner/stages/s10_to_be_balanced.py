"""Stage 10: make the moves stage 7 chose but could not schedule (ALGORITHM.md stage 10; seed 000
stage 10): each holder that the stage-7 trigger (``balancingMoveTrigger``) selects moves.

Reads ``ToBeBalanced[T]``; writes it (the segments fully moved leave it). Limit:
``run.limit(10)`` (balancing queue). One Spark task per tier. With ``balancerStrategy:
"avgShedder"`` stage 7 records no ``ToBeBalanced[T]``, so this stage has nothing to schedule.
"""

from __future__ import annotations

from segment_balancer.planner.kernels import balancing
from segment_balancer.planner.stages.run import StageRun, per_tier_step

STAGE = 10
READS = WRITES = ("ToBeBalanced[T]",)


def stage(run: StageRun, groups) -> None:
    """Run stage 10 on ``groups`` (updated in place)."""
    limit = run.limit(STAGE)
    trigger, margin = run.config.balancing_move_trigger, run.config.balancing_min_cost_reduction_percent
    per_tier_step(
        run,
        groups,
        STAGE,
        "ToBeBalanced",
        "to_be_balanced",
        lambda r, bm, sink: balancing.balance_listed(r, bm, limit, sink, trigger, margin),
    )
