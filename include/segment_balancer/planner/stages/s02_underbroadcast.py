"""Stage 2: load broadcast segments on every server of a tier that should hold them and does not
(ALGORITHM.md stage 2; seed 000 stage 2).

Reads ``Underbroadcast[T]`` (start of run) as ``StillUnderbroadcast[T]``; writes
``StillUnderbroadcast[T]``. Limit: ``run.limit(2)`` (loading queue). One Spark task per tier; no
ranking (every eligible server gets the segment).
"""

from __future__ import annotations

from segment_balancer.planner.groups import copy_groups
from segment_balancer.planner.kernels import loading
from segment_balancer.planner.runstate import StageLimit
from segment_balancer.planner.stages.run import StageRun, per_tier_step
from segment_balancer.planner.status import should_hold_broadcast

STAGE = 2
READS = ("Underbroadcast[T]",)
WRITES = ("StillUnderbroadcast[T]",)


def start_groups(groups) -> None:
    """``StillUnderbroadcast[T]`` starts as ``Underbroadcast[T]``."""
    copy_groups(groups, "Underbroadcast", "StillUnderbroadcast")


def stage(run: StageRun, groups) -> None:
    """Run stage 2 on ``groups`` (after :func:`start_groups`; updated in place)."""
    step(run, groups, STAGE, run.limit(STAGE))


def step(run: StageRun, groups, stage: int, limit: StageLimit) -> None:
    """``StillUnderbroadcast[T]`` → loads on the tier's servers that should hold them (stage 2 and
    its revisits)."""
    should = should_hold_broadcast(run.servers_pdf).groupby("tier")["server"].apply(list).to_dict()
    per_tier_step(
        run,
        groups,
        stage,
        "StillUnderbroadcast",
        "underbroadcast",
        lambda r, bm, sink: loading.load_underbroadcast(r, bm, should.get(r.tier, []), limit, sink),
        ranked=False,
    )
