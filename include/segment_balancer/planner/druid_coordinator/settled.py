"""The used segments Druid's ``RunRules`` leaves as they are, found on arrays, so that a run holds
only the others (Druid 35.0.0 and 38.0.0 ``RunRules``, ``StrategicSegmentAssigner.replicateSegment``,
``CollectSegmentStats``; docs/DRUID_COORDINATOR.md "The rules on the segments that act").

A used segment is *settled* when it is visited by ``RunRules`` (not overshadowed), its first
applying rule is an interval-based load rule the assigner can settle at once
(:meth:`StrategicSegmentAssigner.settled_plan`: one replica required at least, every tier it names
one of historicals), nothing is queued for it on any server, and in every tier of the cluster its
replicas served on managed historicals are as many as the rule requires. For such a segment
``replicateSegment`` does no more than take the rule's two metrics (``tier/replication/factor``,
``tier/required/capacity``) and the required counts, and ``CollectSegmentStats`` finds nothing
missing: both are computed here for all of them at once, in the order the run would first add
each metric row (:class:`SettledApart`). Every other used segment, and every segment queued
anywhere, is held by the run as objects and goes through the assigner's steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from segment_balancer.druid.rules import Rule, rule_index_for, rules_for


@dataclass
class SettledApart:
    """What a run that holds only the acting segments needs of the settled ones.

    ``used_count``: the used segments of the cluster (overshadowed ones included), held or not.
    ``visit_positions``: each held segment that ``RunRules`` visits -> its position in the run's
    newest-first order of every visited segment. ``used_positions``: each held used segment -> its
    position among the used segments in the run's order of them (the timeline's).
    ``touches``: per distinct ``tieredReplicants`` of the settled segments' rules, (the visit position
    of its first settled segment, the ``tieredReplicants``, the settled segments' bytes summed),
    sorted by position. ``datasources``: the used segments' datasources in order of first
    appearance. ``under_first``: per (tier, datasource) of the settled segments, (the used position
    of its first one, the tier's place in the cluster's managed tiers, tier, datasource), in no
    particular order."""

    used_count: int
    visit_positions: dict[str, int] = field(default_factory=dict)
    used_positions: dict[str, int] = field(default_factory=dict)
    touches: list[tuple[int, dict[str, int], int]] = field(default_factory=list)
    datasources: list[str] = field(default_factory=list)
    under_first: list[tuple[int, int, str, str]] = field(default_factory=list)


@dataclass
class SettledRows:
    """:func:`settled_rows`' answer over the used segments (``U`` rows): ``settled`` bool ``(U,)``;
    ``visit_position`` int64 ``(U,)`` (-1: not visited); the rest as :class:`SettledApart` has it."""

    settled: np.ndarray
    visit_position: np.ndarray
    touches: list[tuple[int, dict[str, int], int]]
    datasources: list[str]
    under_first: list[tuple[int, int, str, str]]


def newest_first_order(
    end_ms: np.ndarray,
    start_ms: np.ndarray,
    datasource_rank: np.ndarray,
    version_rank: np.ndarray,
    partition: np.ndarray,
) -> np.ndarray:
    """The stable order of ``SegmentHolder.NEWEST_SEGMENT_FIRST`` (:meth:`DataSegment.newest_first`)
    of rows given as int64 arrays of one length (ranks: of the strings in code point order): later
    end first, then later start, then datasource, version and partition descending. int64 indices."""
    return np.lexsort((-partition, -version_rank, -datasource_rank, -start_ms, -end_ms))


def settled_rows(
    *,
    datasource_codes: np.ndarray,
    datasources: list[str],
    start_ms: np.ndarray,
    end_ms: np.ndarray,
    datasource_rank: np.ndarray,
    version_rank: np.ndarray,
    partition: np.ndarray,
    size_bytes: np.ndarray,
    overshadowed: np.ndarray,
    queued: np.ndarray,
    loaded: np.ndarray,
    managed_tiers: list[str],
    rules: Mapping[str, list[Rule]],
    now_ms: int,
    plan_of: Callable[[Mapping[str, int]], tuple | None],
) -> SettledRows:
    """Which of ``U`` used segments (rows in the run's order of them) are settled (module
    docstring). Per row: ``datasource_codes`` (int, into ``datasources``), ``start_ms``,
    ``end_ms`` (int64 epoch ms), ``datasource_rank`` and ``version_rank`` (int64, code point order),
    ``partition`` and ``size_bytes`` (int64), ``overshadowed`` and ``queued`` (bool: a request
    queued for it on any server); ``loaded`` int ``(U, len(managed_tiers))``: its replicas served on
    the managed historicals of each tier, tiers in the cluster's order. ``plan_of``: the assigner's
    :meth:`~segment_balancer.planner.druid_coordinator.assigner.StrategicSegmentAssigner.settled_plan`.
    Every rule must be interval-based (a partial-load rule asks for the segment's shape).

    Raises:
        ValueError: a rule that is not interval-based.
    """
    if any(not rule.is_interval_based for rule_list in rules.values() for rule in rule_list):
        raise ValueError("settled segments are found for interval-based rules only")
    n = len(datasource_codes)
    visited = ~overshadowed
    visit_rows = np.flatnonzero(visited)
    order = newest_first_order(
        end_ms[visit_rows],
        start_ms[visit_rows],
        datasource_rank[visit_rows],
        version_rank[visit_rows],
        partition[visit_rows],
    )
    visit_position = np.full(n, -1, dtype=np.int64)
    visit_position[visit_rows[order]] = np.arange(len(visit_rows), dtype=np.int64)

    column = {tier: j for j, tier in enumerate(managed_tiers)}
    settled = np.zeros(n, dtype=bool)
    plan_key = np.full(n, -1, dtype=np.int64)
    keys: list[dict[str, int]] = []
    key_numbers: dict[tuple, int] = {}
    for code, datasource in enumerate(datasources):
        rows = visit_rows[datasource_codes[visit_rows] == code]
        rule_list = rules_for(dict(rules), datasource)
        if not len(rows) or not rule_list:
            continue
        index = rule_index_for(rule_list, start_ms[rows], end_ms[rows], now_ms)
        for k in np.unique(index[index >= 0]).tolist():
            rule = rule_list[k]
            if rule.kind != "load":
                continue
            plan = plan_of(rule.tiered_replicants)
            if plan is None:
                continue
            checks, _ = plan
            mine = rows[index == k]
            mine = mine[~queued[mine]]
            required = np.zeros(len(managed_tiers), dtype=loaded.dtype)
            for tier, count in checks:
                required[column[tier]] = count
            mine = mine[(loaded[mine] == required).all(axis=1)]
            if not len(mine):
                continue
            settled[mine] = True
            key = tuple(rule.tiered_replicants.items())
            number = key_numbers.get(key)
            if number is None:
                number = key_numbers[key] = len(keys)
                keys.append(dict(rule.tiered_replicants))
            plan_key[mine] = number

    touches = []
    rows = np.flatnonzero(settled)
    for number, tier_replicants in enumerate(keys):
        mine = rows[plan_key[rows] == number]
        touches.append((int(visit_position[mine].min()), tier_replicants, int(size_bytes[mine].sum())))
    touches.sort(key=lambda t: t[0])

    _, first = np.unique(datasource_codes, return_index=True)
    datasource_order = [datasources[datasource_codes[i]] for i in np.sort(first).tolist()]

    under_first = []
    for j, tier in enumerate(managed_tiers):
        mine = rows[loaded[rows, j] > 0]
        if not len(mine):
            continue
        codes, first = np.unique(datasource_codes[mine], return_index=True)
        under_first += [(int(mine[i]), j, tier, datasources[c]) for c, i in zip(codes.tolist(), first.tolist())]
    return SettledRows(settled, visit_position, touches, datasource_order, under_first)
