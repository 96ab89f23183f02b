"""Stage 8: revisit stages 1–4 once more after balancing, with the limit of stage 8
(ALGORITHM.md stage 8; seed 000 stage 8).

Reads and writes the groups of stage 6. Limit: ``run.limit(8)``.
"""

from __future__ import annotations

from segment_balancer.planner.stages import s06_first_revisit
from segment_balancer.planner.stages.run import StageRun
from segment_balancer.planner.stages.s06_first_revisit import revisit

STAGE = 8
READS = WRITES = s06_first_revisit.READS


def stage(run: StageRun, groups) -> None:
    """Run stage 8 on ``groups`` (updated in place)."""
    revisit(run, groups, STAGE)
