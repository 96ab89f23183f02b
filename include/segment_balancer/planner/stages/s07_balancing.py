"""Stage 7: cost-based balancing of each tier; moves that cannot be made now are recorded in
``ToBeBalanced[T]`` for stage 10 (ALGORITHM.md stage 7; seed 000 stage 7). With
``balancerStrategy: "avgShedder"`` it is the usage-pair shedding pass instead (ALGORITHM.md
"Balancing strategy ``avgShedder``", :mod:`segment_balancer.planner.kernels.shedding`), and stages 10
and 11 schedule nothing.

Reads ``Balanceable[T]`` and ``VisitedInBalancing[T]``; writes ``VisitedInBalancing[T]`` and
``ToBeBalanced[T]`` (cost). Limit: ``run.limit(7)`` (balancing queue). One Spark task per tier;
segments drawn with a generator seeded by ``balancerRandomSeed``, the stage and the tier (cost);
pairs scored, and their hit counts carried from the previous plan's balancer state (avgShedder: the
step's pairs are its facts, ``avg_shedder_pairs``, from which ``assemble`` writes the next state).
"""

from __future__ import annotations

import json

import numpy as np
from pyroaring import BitMap

from segment_balancer.planner.balancer_state import counts_from_json
from segment_balancer.planner.groups import group_name, merge, packed, split_group_name, tier_groups, unpacked
from segment_balancer.planner.kernels import balancing, shedding
from segment_balancer.planner.runstate import StageLimit
from segment_balancer.planner.stages.run import StageRun, configured_strategy

STAGE = 7
READS = ("Balanceable[T]", "VisitedInBalancing[T]")
WRITES = ("VisitedInBalancing[T]", "ToBeBalanced[T]")
PAIRS_FACT = "avg_shedder_pairs"
"""The stage-7 step's fact (``avgShedder``): every tier's pairs, ``kernels.shedding.pair_record``s."""


def idle(groups, work) -> bool:
    """Cost: nothing is balanceable. ``avgShedder`` always runs: every run counts its pairs' hits."""
    if configured_strategy(work) == "avgShedder":
        return False
    return not any(len(bm) for name, bm in groups.items() if split_group_name(name)[0] == "Balanceable")


def stage(run: StageRun, groups) -> None:
    """Run stage 7 on ``groups`` (updated in place)."""
    if run.config.balancer_strategy == "avgShedder":
        shed(run, groups)
    else:
        step(run, groups, STAGE, run.limit(STAGE), record=True)


def shed(run: StageRun, groups) -> None:
    """The ``avgShedder`` pass: per tier with two candidate historicals or more, its pairs and the
    moves of those that shed (:func:`shedding.shed_tier`), with the hit counts of the previous
    plan (``meta["balancer_state"]``); the pairs are the step's facts (:data:`PAIRS_FACT`)."""
    servers = run.servers_pdf[~run.servers_pdf["decommissioning"].astype(bool)]
    tiers = sorted(t for t, n in servers.groupby("tier").size().items() if n >= 2)
    if not tiers:
        return
    previous = counts_from_json(run.meta.get("balancer_state", {}).get("counts", {}))
    data, limit, cfg = packed(tier_groups(groups, "Balanceable")), run.limit(STAGE), run.config
    thresholds = {
        "low_threshold": cfg.avg_shedder_low_threshold_percent,
        "high_threshold": cfg.avg_shedder_high_threshold_percent,
        "hit_count_low": cfg.avg_shedder_hit_count_low_threshold,
        "hit_count_high": cfg.avg_shedder_hit_count_high_threshold,
    }

    def body(runs, sink):
        pops, rows = unpacked(data), []
        for tier, tier_run in runs.items():
            population = np.array(sorted(pops.get(tier, BitMap())), dtype=np.int64)
            for record in shedding.shed_tier(tier_run, population, previous.get(tier, {}), limit, sink, **thresholds):
                rows.append({"kind": "pair", "tier": tier, "detail": json.dumps(record)})
        return rows

    result = run.kernel_pass(STAGE, "avg_shedder", tiers, body)
    run.finish(STAGE, "avg_shedder", result, facts={PAIRS_FACT: run.pass_rows(result, "pair")})


def step(run: StageRun, groups, stage: int, limit: StageLimit, record: bool) -> None:
    """Balance every tier's ``Balanceable[T]`` (stage 7 with ``record``: moves that do not fit go
    to ``ToBeBalanced[T]``; stage 11 without)."""
    eligible = tier_groups(groups, "Balanceable")
    if not eligible:
        return
    visited = {t: groups.get(group_name("VisitedInBalancing", t), BitMap()) for t in eligible}
    data, seen = packed(eligible), packed(visited)
    seed = run.config.balancer_random_seed
    how = balancing.Balancing.of(run.config, limit, record)

    def body(runs, sink):
        pops, vis = unpacked(data), unpacked(seen)
        for tier, tier_run in runs.items():
            population = np.array(list(pops[tier]), dtype=np.int64)
            done = set(vis.get(tier, BitMap()))
            balancing.balance_tier(tier_run, population, balancing.tier_rng(seed, stage, tier), done, sink, how)
            for i in sorted(done):
                sink.member(i, group_name("VisitedInBalancing", tier))

    result = run.kernel_pass(stage, "balancing", list(eligible), body)
    members = run.finish(stage, "balancing", result)
    merge(groups, members, [n for n in members if split_group_name(n)[0] == "VisitedInBalancing"])
