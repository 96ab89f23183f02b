"""Stage 7: cost-based balancing of each tier; moves that cannot be made now are recorded in
``ToBeBalanced[T]`` for stage 10 (ALGORITHM.md stage 7; seed 000 stage 7).

Reads ``Balanceable[T]`` and ``VisitedInBalancing[T]``; writes ``VisitedInBalancing[T]`` and
``ToBeBalanced[T]``. Limit: ``run.limit(7)`` (balancing queue). One Spark task per tier; segments
drawn with a generator seeded by ``balancerRandomSeed``, the stage and the tier.
"""

from __future__ import annotations

import numpy as np
from pyroaring import BitMap

from segment_balancer.planner.groups import group_name, merge, packed, split_group_name, tier_groups, unpacked
from segment_balancer.planner.kernels import balancing
from segment_balancer.planner.runstate import StageLimit
from segment_balancer.planner.stages.run import StageRun

STAGE = 7
READS = ("Balanceable[T]", "VisitedInBalancing[T]")
WRITES = ("VisitedInBalancing[T]", "ToBeBalanced[T]")


def stage(run: StageRun, groups) -> None:
    """Run stage 7 on ``groups`` (updated in place)."""
    step(run, groups, STAGE, run.limit(STAGE), record=True)


def step(run: StageRun, groups, stage: int, limit: StageLimit, record: bool) -> None:
    """Balance every tier's ``Balanceable[T]`` (stage 7 with ``record``: moves that do not fit go
    to ``ToBeBalanced[T]``; stage 11 without)."""
    eligible = tier_groups(groups, "Balanceable")
    if not eligible:
        return
    visited = {t: groups.get(group_name("VisitedInBalancing", t), BitMap()) for t in eligible}
    data, seen = packed(eligible), packed(visited)
    cfg = run.config
    seed, trigger = cfg.balancer_random_seed, cfg.balancing_move_trigger
    margin = cfg.balancing_min_cost_reduction_percent
    window, threshold = cfg.balancing_iteration_window, cfg.balancing_failed_iteration_threshold

    def body(runs, sink):
        pops, vis = unpacked(data), unpacked(seen)
        for tier, tier_run in runs.items():
            population = np.array(list(pops[tier]), dtype=np.int64)
            done = set(vis.get(tier, BitMap()))
            balancing.balance_tier(tier_run, population, limit, balancing.tier_rng(seed, stage, tier), done,
                                   window, threshold, sink, record, trigger, margin)
            for i in sorted(done):
                sink.member(i, group_name("VisitedInBalancing", tier))

    result = run.kernel_pass(stage, "balancing", list(eligible), body)
    members = run.finish(stage, "balancing", result)
    merge(groups, members, [n for n in members if split_group_name(n)[0] == "VisitedInBalancing"])
