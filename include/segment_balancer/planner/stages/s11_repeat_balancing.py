"""Stage 11: balance again the segments not yet visited in balancing, with the limit of stage 11
(ALGORITHM.md stage 11; seed 000 stage 11).

Reads ``Balanceable[T]`` and ``VisitedInBalancing[T]``; writes ``VisitedInBalancing[T]``. Limit:
``run.limit(11)`` (balancing queue). The step of stage 7 without recording ``ToBeBalanced``.
With ``balancerStrategy: "avgShedder"`` it schedules nothing (ALGORITHM.md "Balancing strategy
``avgShedder``": stage 7's pass replaces stages 7, 10 and 11).
"""

from __future__ import annotations

from segment_balancer.planner.stages import s07_balancing
from segment_balancer.planner.stages.run import StageRun, configured_strategy

STAGE = 11
READS = ("Balanceable[T]", "VisitedInBalancing[T]")
WRITES = ("VisitedInBalancing[T]",)


def idle(groups, work) -> bool:
    """``avgShedder``: always (nothing to schedule); cost: as stage 7 (nothing balanceable)."""
    return configured_strategy(work) == "avgShedder" or s07_balancing.idle(groups, work)


def stage(run: StageRun, groups) -> None:
    """Run stage 11 on ``groups`` (updated in place; nothing under ``avgShedder``)."""
    if run.config.balancer_strategy == "avgShedder":
        return
    s07_balancing.step(run, groups, STAGE, run.limit(STAGE), record=False)
