"""Stage 5: move replicas away from decommissioning servers to the segment's top ``B`` servers
(ALGORITHM.md stage 5; seed 000 stage 5).

Reads ``ToMoveAwayFromDecommServers[T]`` (start of run) as ``StillLoadedOnDecommServers[T]``;
writes ``StillLoadedOnDecommServers[T]``. Limit: ``run.limit(5)`` (decommissioning queue). One
Spark task per tier.
"""

from __future__ import annotations

from segment_balancer.planner.groups import copy_groups
from segment_balancer.planner.kernels import loading
from segment_balancer.planner.runstate import StageLimit
from segment_balancer.planner.stages.run import StageRun, per_tier_step

STAGE = 5
READS = ("ToMoveAwayFromDecommServers[T]",)
WRITES = ("StillLoadedOnDecommServers[T]",)


def start_groups(groups) -> None:
    """``StillLoadedOnDecommServers[T]`` starts as ``ToMoveAwayFromDecommServers[T]``."""
    copy_groups(groups, "ToMoveAwayFromDecommServers", "StillLoadedOnDecommServers")


def stage(run: StageRun, groups) -> None:
    """Run stage 5 on ``groups`` (after :func:`start_groups`; updated in place)."""
    step(run, groups, STAGE, run.limit(STAGE))


def step(run: StageRun, groups, stage: int, limit: StageLimit) -> None:
    """``StillLoadedOnDecommServers[T]`` → a load on a top-``B`` server plus the dependent drop from
    the decommissioning one (stages 5 and 9)."""
    per_tier_step(
        run,
        groups,
        stage,
        "StillLoadedOnDecommServers",
        "decommissioning",
        lambda r, bm, sink: loading.move_from_decommissioning(r, bm, limit, sink),
    )
