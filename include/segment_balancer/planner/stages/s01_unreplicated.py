"""Stage 1: load one replica of every unreplicated segment, on the best server of the highest-priority
tier that can take it (ALGORITHM.md stage 1; seed 000 stage 1).

Reads ``Unreplicated`` (start of run) as ``StillUnreplicated``; writes ``StillUnreplicated`` (the
segments still without a replica). Limit: ``run.limit(1)`` (loading queue). One Spark task for
every tier: a segment that no server of its first tier can take falls back to the next tier.
"""

from __future__ import annotations

from pyroaring import BitMap

from segment_balancer.planner.groups import merge
from segment_balancer.planner.kernels import loading
from segment_balancer.planner.runstate import StageLimit
from segment_balancer.planner.stages.run import StageRun

STAGE = 1
READS = ("Unreplicated",)
WRITES = ("StillUnreplicated",)


def start_groups(groups) -> None:
    """``StillUnreplicated`` starts as ``Unreplicated``."""
    groups["StillUnreplicated"] = groups.get("Unreplicated", BitMap()).copy()


def stage(run: StageRun, groups) -> None:
    """Run stage 1 on ``groups`` (``{name: BitMap}``, after :func:`start_groups`; updated in place)."""
    step(run, groups, STAGE, run.limit(STAGE))


def step(run: StageRun, groups, stage: int, limit: StageLimit) -> None:
    """``StillUnreplicated`` → one load each, cross-tier (stage 1, and its revisits in 6 and 8)."""
    bm = groups.get("StillUnreplicated", BitMap())
    if not len(bm):
        return
    tiers = sorted(run.meta["tiers"])
    priority = {t: int(v["priority"]) for t, v in run.meta["tiers"].items()}
    data = bm.serialize()

    def body(runs, sink):
        loading.load_unreplicated(runs, BitMap.deserialize(data), priority, limit, sink)

    result = run.kernel_pass(stage, "unreplicated", tiers, body, one_task=True)
    merge(groups, run.finish(stage, "unreplicated", result), ["StillUnreplicated"])
