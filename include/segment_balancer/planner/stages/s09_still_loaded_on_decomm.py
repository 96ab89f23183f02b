"""Stage 9: move what stage 5 could not from the decommissioning servers, with the limit of stage 9
(ALGORITHM.md stage 9; seed 000 stage 9).

Reads and writes ``StillLoadedOnDecommServers[T]``. Limit: ``run.limit(9)`` (decommissioning
queue). The step of stage 5.
"""

from __future__ import annotations

from segment_balancer.planner.stages import s05_decommissioning
from segment_balancer.planner.stages.run import StageRun

STAGE = 9
READS = WRITES = ("StillLoadedOnDecommServers[T]",)


def stage(run: StageRun, groups) -> None:
    """Run stage 9 on ``groups`` (updated in place)."""
    s05_decommissioning.step(run, groups, STAGE, run.limit(STAGE))
