"""Stage 6: revisit stages 1–4 with the loading queue's limit of stage 6, on what they left
(ALGORITHM.md stage 6; seed 000 stage 6).

Reads and writes ``StillUnreplicated``, ``StillUnderbroadcast[T]``, ``StillUnderreplicated[T]``,
``ToBecomeUnderreplicated[T]``. Limit: ``run.limit(6)``.
"""

from __future__ import annotations

from segment_balancer.planner.stages import (
    s01_unreplicated,
    s02_underbroadcast,
    s03_underreplicated,
    s04_to_become_underreplicated,
)
from segment_balancer.planner.stages.run import StageRun

STAGE = 6
READS = WRITES = (
    "StillUnreplicated",
    "StillUnderbroadcast[T]",
    "StillUnderreplicated[T]",
    "ToBecomeUnderreplicated[T]",
)


def revisit(run: StageRun, groups, stage: int) -> None:
    """Steps of stages 1, 2, 3 and 4 in order, each with the limit of ``stage`` (6 or 8)."""
    limit = run.limit(stage)
    s01_unreplicated.step(run, groups, stage, limit)
    s02_underbroadcast.step(run, groups, stage, limit)
    s03_underreplicated.step(run, groups, stage, limit)
    s04_to_become_underreplicated.step(run, groups, stage, limit)


def stage(run: StageRun, groups) -> None:
    """Run stage 6 on ``groups`` (updated in place)."""
    revisit(run, groups, STAGE)
