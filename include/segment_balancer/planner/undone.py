"""What a plan leaves undone, per tier, what stopped it and how many more runs would finish it: the
``undone`` part of ``summary.json`` (:class:`~segment_balancer.planner.summary.Undone`), which the
report and ``segment_balancer summary`` show.

What stays once the plan succeeded comes from the final status (under-replicated segments and the
replicas they miss, the spread of the tier) and the holdings (segments still on decommissioning
historicals). What stopped each segment comes from the run's decisions (``decisions.parquet``,
:mod:`segment_balancer.planner.kernels.decisions`): an outcome that left work undone, and the reason
every server of top B refused it (:meth:`~segment_balancer.planner.runstate.Limit.refusal`,
``ServerState.capacity_refusal``), classified into :data:`CAUSES`.

The estimate of runs: the loads a tier still needs (the replicas it misses plus the segments on its
decommissioning historicals) over what one run can queue on its live historicals,
``maxSegmentsInNodeLoadingQueue`` each, assuming each run's loads complete before the next run.
None when capacity stopped loads (more runs do not help until the tier has room: a decision says
so, or no live historical holds less than its ``max_size`` once the plan succeeded), or when no
queue limit applies (the next run is bounded by capacity alone).

A tier a load rule names that has no historical server (a typo, a tier not started yet, every
historical of it down) gets a row too: every segment whose rule asks replicas of it misses them
all, stopped by :data:`CAUSES` ``no_historical``, and no number of runs finishes it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping

from segment_balancer.planner.summary import TierUndone, Undone

NOTHING_UNDONE = frozenset({"balanced", "already_visited", "excess_on_decomm", "shed", "not_shed"})
"""Decision outcomes where the stage had nothing left to do for the segment."""

QUEUE_LIMIT = "maxSegmentsInNodeLoadingQueue"
CAUSES = {
    "queue": "load queues full ({limit})",
    "stage_queue": "stage {stage}'s share of the load queues full",
    "capacity": "no room (capacity)",
    "availability": "availability rule (drops kept)",
    "waiting": "overshadowed, waiting for what overshadows it",
    "no_target": "no rule targets it",
    "no_destination": "no cheaper destination could take it",
    "no_historical": "the tier has no historical server",
    "no_candidate": "no historical of the tier that is not decommissioning",
    "other": "every server refused it for another reason",
}
"""The causes a segment's work is left undone, as the report words them."""
_STAGE_QUEUE = re.compile(r"load queue full for stage (\d+)")


def refusal_cause(reason: str) -> str:
    """The cause (a :data:`CAUSES` wording) of one server's refusal text."""
    stage = _STAGE_QUEUE.match(reason)
    if stage:
        return CAUSES["stage_queue"].format(stage=stage.group(1))
    if reason.startswith("load queue full"):
        return CAUSES["queue"].format(limit=QUEUE_LIMIT)
    if reason.startswith("capacity"):
        return CAUSES["capacity"]
    return CAUSES["other"]


def decision_causes(outcome: str, detail: Mapping, tier: str | None) -> dict[str, str]:
    """``{tier: cause}`` of one decision that left work undone: by its outcome, or, for a
    segment no server took, by what its servers tried said (capacity when any refused for room,
    else the queue limits they hit; no candidate at all when its top ``B`` was empty). ``detail``
    as ``decisions.parquet`` holds it (parsed)."""
    if outcome == "deferred":
        return {tier or "": CAUSES["availability"]}
    if outcome == "waiting":
        return {tier or "": CAUSES["waiting"]}
    if outcome == "no_target":
        return {tier or "": CAUSES["no_target"]}
    parts = detail.get("tiers") if isinstance(detail.get("tiers"), Mapping) else {tier or "": detail}
    causes = {}
    for t, sub in parts.items():
        found = {refusal_cause(str(why)) for _, why in sub.get("tried", []) or []}
        if CAUSES["capacity"] in found:
            causes[t] = CAUSES["capacity"]
        elif found - {CAUSES["other"]}:
            causes[t] = sorted(found - {CAUSES["other"]})[0]
        elif outcome == "no_destination":
            causes[t] = CAUSES["no_destination"]
        elif sub.get("b") == 0:
            causes[t] = CAUSES["no_candidate"]
        else:
            causes[t] = CAUSES["other"]
    return causes


def stopped_by(
    decisions: Iterable[Mapping], last_operation: Mapping[tuple[str, str], int] | None = None
) -> dict[str, dict[str, int]]:
    """``{tier: {cause: segments}}`` over the decisions (rows with ``idx``, ``segment_id``,
    ``stage``, ``tier``, ``outcome``, ``detail`` as JSON text or a dict) whose outcome left work
    undone and that no later stage made up for: a decision is left out when the segment has an
    operation in that tier at a later stage (``last_operation``: ``{(segment_id, tier): the stage
    of its last operation there}``). Each segment counted once per tier, under the cause of its
    last such decision."""
    last_operation = last_operation or {}
    last: dict[tuple[str, int], str] = {}
    for row in decisions:
        if row["outcome"] in NOTHING_UNDONE:
            continue
        detail = row["detail"]
        detail = json.loads(detail) if isinstance(detail, str) else (detail or {})
        for tier, cause in decision_causes(row["outcome"], detail, row.get("tier")).items():
            if last_operation.get((row.get("segment_id"), tier), -1) > int(row.get("stage", 0)):
                continue
            last[(tier, int(row["idx"]))] = cause
    out: dict[str, dict[str, int]] = {}
    for (tier, _), cause in last.items():
        out.setdefault(tier, {})
        out[tier][cause] = out[tier].get(cause, 0) + 1
    return {t: dict(sorted(c.items())) for t, c in sorted(out.items())}


NO_ROOM_HOW = "no live historical of the tier has a free byte: more runs do not help until one has room"
"""``runs_how`` of a tier whose live historicals are all at or over their ``max_size``."""


def runs_to_finish(
    loads_needed: int, live_servers: int, queue_limit: int | None, causes: Mapping[str, int], room: bool = True
) -> tuple[int | None, str]:
    """``(runs, how)``: the estimate of the module docstring and the sentence that says how it was
    made. ``queue_limit`` 0 or None: no limit. ``room``: some live historical of the tier has a
    free byte once the plan succeeded (bytes held below ``max_size``)."""
    if loads_needed == 0:
        return 0, "nothing left to load"
    if causes.get(CAUSES["capacity"]):
        return None, "capacity stopped loads: more runs do not help until the tier has room"
    if live_servers and not room:
        return None, NO_ROOM_HOW
    if not queue_limit:
        return None, f"no {QUEUE_LIMIT}: the next run is bounded by capacity alone"
    if live_servers == 0:
        return None, "no live historical in the tier"
    per_run = queue_limit * live_servers
    runs = math.ceil(loads_needed / per_run)
    return runs, (
        f"{loads_needed:,} loads at most {queue_limit:,} per historical per run on {live_servers} historicals "
        f"({per_run:,} a run), each run's loads done before the next"
    )


NO_HISTORICAL_HOW = "no historical server in the tier: nothing loads there until one joins"
"""``runs_how`` of a tier that a rule names and that has no historical server."""


def left_undone(
    status_after,
    balance_after: Mapping,
    servers: Iterable,
    decisions: Iterable[Mapping],
    config: Mapping,
    missing_after: Mapping[str, int],
    unavailable: int,
    absent_tiers: Mapping[str, Mapping[str, int]],
    last_operation: Mapping[tuple[str, str], int] | None = None,
):
    """The ``undone`` part of a summary (:class:`~segment_balancer.planner.summary.Undone`) from its
    ``status_after``, ``balance_after`` and ``servers`` parts, the run's decisions (rows of
    ``decisions.parquet``), its effective ``config``, the replicas each tier misses once the
    plan succeeded (``missing_after``), the used segments with no replica in any tier then
    (``unavailable``, :func:`segment_balancer.planner.status.unavailable`), the tiers rules name
    that have no historical server (``absent_tiers``: ``{tier: {"segments", "replicas"}}``, the
    used segments whose rule asks replicas of the tier and how many; ``prepared/meta.json``) and
    the stage of each segment's last operation per tier (``last_operation``, :func:`stopped_by`)."""
    causes = stopped_by(decisions, last_operation)
    servers = list(servers)
    tiers = sorted({s.tier for s in servers} | set(status_after.tiers) | set(missing_after))
    queue_limit = config.get(QUEUE_LIMIT)
    out = {}
    for tier in tiers:
        mine = [s for s in servers if s.tier == tier]
        live = [s for s in mine if not s.decommissioning]
        on_decommissioning = sum(s.segments_after for s in mine if s.decommissioning)
        missing = int(missing_after.get(tier, 0))
        tier_causes = causes.get(tier, {})
        room = any(s.bytes_after < s.max_size for s in live)
        runs, how = runs_to_finish(missing + on_decommissioning, len(live), queue_limit, tier_causes, room)
        balance = balance_after.get(tier)
        out[tier] = TierUndone(
            underreplicated=int(status_after.tiers.get(tier, {}).get("underreplicated", 0)),
            missing_replicas=missing,
            on_decommissioning=on_decommissioning,
            spread_segments=int(balance.segments_max_minus_min) if balance is not None else 0,
            stopped_by=tier_causes,
            runs_to_finish=runs,
            runs_how=how,
        )
    for tier, asked in absent_tiers.items():
        out[tier] = TierUndone(
            underreplicated=int(asked["segments"]),
            missing_replicas=int(asked["replicas"]),
            on_decommissioning=0,
            spread_segments=0,
            stopped_by={CAUSES["no_historical"]: int(asked["segments"])},
            runs_to_finish=None,
            runs_how=NO_HISTORICAL_HOW,
        )
    return Undone(unavailable=int(unavailable), tiers=dict(sorted(out.items())))
