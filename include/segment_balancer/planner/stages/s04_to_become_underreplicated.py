"""Stage 4: load the segments that will be underreplicated once the decommissioning servers are
gone, up to the target (ALGORITHM.md stage 4; seed 000 stage 4).

Reads ``ToBecomeUnderreplicated[T]`` (start of run); writes it (the segments still short).
Limit: ``run.limit(4)`` (loading queue). The step of stage 3 without callbacks.
"""

from __future__ import annotations

from segment_balancer.planner.stages import s03_underreplicated
from segment_balancer.planner.stages.run import StageRun

STAGE = 4
READS = ("ToBecomeUnderreplicated[T]",)
WRITES = ("ToBecomeUnderreplicated[T]",)


def stage(run: StageRun, groups) -> None:
    """Run stage 4 on ``groups`` (updated in place)."""
    step(run, groups, STAGE, run.limit(STAGE))


def step(run: StageRun, groups, stage: int, limit) -> None:
    """``ToBecomeUnderreplicated[T]`` → loads up to the target (stage 4 and its revisits)."""
    s03_underreplicated.step(run, groups, stage, limit, "ToBecomeUnderreplicated")
