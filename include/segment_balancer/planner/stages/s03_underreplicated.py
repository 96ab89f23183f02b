"""Stage 3: load underreplicated segments on their top ``B`` servers of the tier up to the target,
with the callbacks that drop the replica a load makes excess elsewhere (ALGORITHM.md stage 3 and
"Callbacks"; seed 000 stage 3).

Reads ``Underreplicated[T]`` (start of run) as ``StillUnderreplicated[T]``; writes
``StillUnderreplicated[T]``. Limit: ``run.limit(3)`` (loading queue). Two passes: one Spark task
per tier loads and reports, for the segments loaded in other tiers, whether it is overreplicated
here and its holders in drop order (the state at the start of the stage); a second Spark job per
bucket of segments decides the dependent drops
(:func:`segment_balancer.planner.kernels.callbacks.add_callbacks`, run by
:meth:`~segment_balancer.planner.stages.run.StageRun.callback_drops`), which are applied to their
tiers before the stage commits.
"""

from __future__ import annotations

import json

from pyroaring import BitMap

from segment_balancer.planner.groups import copy_groups, group_name, merge, packed, tier_groups, unpacked
from segment_balancer.planner.kernels import loading
from segment_balancer.planner.operations import Reason
from segment_balancer.planner.runstate import StageLimit
from segment_balancer.planner.stages.run import StageRun

STAGE = 3
READS = ("Underreplicated[T]",)
WRITES = ("StillUnderreplicated[T]",)


def start_groups(groups) -> None:
    """``StillUnderreplicated[T]`` starts as ``Underreplicated[T]``."""
    copy_groups(groups, "Underreplicated", "StillUnderreplicated")


def stage(run: StageRun, groups) -> None:
    """Run stage 3 on ``groups`` (after :func:`start_groups`; updated in place)."""
    step(run, groups, STAGE, run.limit(STAGE))


def step(run: StageRun, groups, stage: int, limit: StageLimit, kind: str = "StillUnderreplicated") -> None:
    """Loads up to the target for the members of ``kind[T]`` in each tier: stage 3
    (``StillUnderreplicated``, with callbacks), stage 4 (``ToBecomeUnderreplicated``, without)
    and their revisits. Replaces ``kind[T]`` with the segments still short."""
    members = tier_groups(groups, kind)
    if not members:
        return
    reason = Reason.UNDERREPLICATED if kind == "StillUnderreplicated" else Reason.TO_BECOME_UNDERREPLICATED
    with_callbacks = kind == "StillUnderreplicated"
    data = packed(members)
    tiers = sorted(run.meta["tiers"]) if with_callbacks else list(members)

    def body(runs, sink):
        bms = unpacked(data)
        extra = []
        for tier, tier_run in runs.items():
            if with_callbacks:
                extra += _overreplicated_here(tier_run, bms)
            if tier in bms:
                loading.load_underreplicated(tier_run, bms[tier], limit, sink, kind, reason)
        return extra

    result = run.kernel_pass(stage, reason, tiers, body)
    if with_callbacks:
        run.callback_drops(result)
    merge(groups, run.finish(stage, reason, result), [group_name(kind, t) for t in members])


def _overreplicated_here(tier_run, bms: dict[str, BitMap]) -> list[dict]:
    """``over`` rows: the segments this step loads in other tiers that are overreplicated in
    ``tier_run``'s tier, with their count and holders in drop order, at the start of the stage."""
    elsewhere = BitMap()
    for other, bm in bms.items():
        if other != tier_run.tier:
            elsewhere |= bm
    rows = []
    for idx in elsewhere:
        if not tier_run.has(idx):
            continue
        seg = tier_run.segment(idx)
        count = seg.count()
        if count > seg.target:
            rows.append(
                {
                    "kind": "over",
                    "idx": idx,
                    "tier": tier_run.tier,
                    "target": seg.target,
                    "detail": json.dumps({"count": count, "drop_order": tier_run.drop_order(seg, seg.serving())}),
                }
            )
    return rows
