"""What a stage needs of the run it schedules in (:class:`StageRun`), and the step most stages are.

The stage modules are the algorithm; they never import Spark. They schedule through a
:class:`StageRun`, which the Spark side implements
(:class:`segment_balancer.spark.stage_run.SparkStageRun`: one Spark task per tier over the run
state in the work directory). A kernel ``body(runs, sink)`` runs inside such a task on the live
:class:`~segment_balancer.planner.runstate.TierRun` of each of its tiers; a step ends with
:meth:`StageRun.finish`, which commits its ops and state.

Source: ALGORITHM.md "Stages" (tiers are independent within a stage); Druid ``BalanceSegments`` and
``RunRules`` run tier by tier.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pyroaring import BitMap

from segment_balancer.planner.config import EffectiveConfig
from segment_balancer.planner.groups import group_name, merge, packed, tier_groups, unpacked
from segment_balancer.planner.runstate import OpSink, StageLimit, TierRun

Body = Callable[[dict[str, TierRun], OpSink], "list[dict] | None"]
"""A kernel over the live tiers of one task: ``body(runs, sink)`` schedules through the
``TierRun`` mutators and ``sink``, and may return extra output rows (dicts of the step output's
columns, :data:`segment_balancer.spark.workdir.OUT_COLUMNS`)."""


class PassResult(Protocol):
    """What a kernel pass leaves: ``members`` (``{group name: BitMap}`` the kernels recorded)."""

    members: dict[str, BitMap]


class StageRun(Protocol):
    """One run as a stage sees it.

    ``meta``: the run's ``prepared/meta.json`` (``tiers``: ``{tier: {"priority": n}}``);
    ``config``: the effective dynamic config (typed); ``servers_pdf``: the historicals
    (pandas rows of ``prepared/servers.parquet``: ``server``, ``tier``, ``max_size``,
    ``current_size`` bytes, ``priority``, ``decommissioning``, ``broadcast_only``).
    """

    meta: dict
    servers_pdf: Any

    @property
    def config(self) -> EffectiveConfig: ...

    def limit(self, stage: int) -> StageLimit:
        """The load-queue limits of ``stage`` (1–13)."""

    def kernel_pass(
        self,
        stage: int,
        step: str,
        tiers: list[str],
        body: Body,
        ranked: bool = True,
        one_task: bool = False,
        keep_state: bool = True,
    ) -> PassResult:
        """Run ``body`` on the live state of ``tiers``: one task per tier, or one for all of them
        (``one_task``, stage 1's cross-tier fallback). ``ranked``: build the live placement costs;
        ``keep_state``: keep the tiers the kernel changed (False for a pass that only reads)."""

    def finish(self, stage: int, step: str, result: PassResult, facts: dict | None = None) -> dict[str, BitMap]:
        """Commit a step: its ops (``result``'s, with the :meth:`callback_drops` written beside
        them) and state. Returns the memberships the kernels recorded."""

    def pass_rows(self, result: PassResult, kind: str) -> list[dict]:
        """The extra output rows of ``kind`` that a pass's kernels returned (their ``detail``
        JSON, parsed), by tier: a few rows per tier, read on the driver."""

    def callback_drops(self, result: PassResult) -> int:
        """The stage-3 callbacks: dependent DROPs for the loads of ``result`` where the segment is
        overreplicated in another tier (the kernel's ``over`` rows), decided per segment by
        :func:`segment_balancer.planner.kernels.callbacks.add_callbacks` and added to the pass's
        output, which :meth:`finish` commits. Returns the number of drops."""

    def unload(self, stage: int) -> None:
        """Stage 12 over the whole run state, committed: excess replicas by
        :func:`segment_balancer.planner.kernels.unload.unload_tiers` (the stage's running
        projection, tier by tier or coupled tiers together), and every served replica of
        drop-rule, unused and (no longer waiting) overshadowed segments."""

    def drop_served(self, stage: int, step: str, servers: list[str], reason: str) -> None:
        """DROP every used segment that ``servers`` serve with no drop, committed as one step."""


def configured_strategy(work) -> str:
    """The run's ``balancerStrategy`` (``prepared/meta.json`` of the work directory ``work``), for a
    stage's ``idle`` test, which runs before any session."""
    meta = json.loads((Path(work) / "prepared" / "meta.json").read_text())
    return meta["config"].get("balancerStrategy", "cost")


def per_tier_step(
    run: StageRun,
    groups,
    stage: int,
    kind: str,
    step: str,
    kernel: Callable[[TierRun, BitMap, OpSink], None],
    ranked: bool = True,
) -> None:
    """A step that runs ``kernel(tier_run, members, sink)`` on each tier's members of ``kind[T]``
    and replaces ``kind[T]`` with what the kernel records back (stages 2, 5, 9, 10)."""
    members = tier_groups(groups, kind)
    if not members:
        return
    data = packed(members)

    def body(runs, sink):
        for tier, bm in unpacked(data).items():
            if tier in runs:
                kernel(runs[tier], bm, sink)

    result = run.kernel_pass(stage, step, list(members), body, ranked=ranked)
    merge(groups, run.finish(stage, step, result), [group_name(kind, t) for t in members])
