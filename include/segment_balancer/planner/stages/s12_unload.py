"""Stage 12: drop what no rule wants any more: excess replicas (under the availability rule),
segments of drop rules, unused segments, and overshadowed segments once what overshadows them is
served (ALGORITHM.md stage 12 and "Availability"; seed 000 stage 12).

Reads the run state only (no groups). Unlimited (drops take no load queue). The excess replicas
are chosen by :func:`segment_balancer.planner.kernels.unload.unload_tiers`, segment after segment
in index order against the stage's own running projection (each drop counts at once), under the
availability rule (:func:`~segment_balancer.planner.kernels.unload.unload_excess`).

The stage's decisions over the whole run state are the functions of this module, on arrays and
frames (no Spark, no files); :meth:`~segment_balancer.planner.stages.run.StageRun.unload` runs
them where the data is (in Spark: :mod:`segment_balancer.spark.unload`, which reads their inputs
and writes their outputs):

1. per tier, :func:`tally` (the replica counts), :func:`over_in_tier` (the segments with more
   replicas than their target there), :func:`everywhere_drops` (the drops of drop-rule, unused and
   overshadowed segments) and :func:`waiting_replicas` (the served replicas of the overshadowed
   segments that wait);
2. per tier, :func:`tally_of` (the tally of the segments over in some tier), then over every
   tier's tallies at once :func:`overreplicated` (the overreplicated (segment, tier) pairs and
   the tiers some segment's drops couple) and :func:`task_groups` (the tiers decided together);
3. per tier or group of tiers, :func:`excess_items` (the overreplicated segments as
   :class:`~segment_balancer.planner.kernels.unload.Excess`) and
   :func:`~segment_balancer.planner.kernels.unload.unload_tiers`;
4. :func:`waiting_decisions` (one ``waiting`` decision per segment) and, from the stage's output,
   :func:`deferred_facts`.

Units: sizes in bytes; counts in replicas (servers); a segment is its *code* (its row of the run's
:class:`~segment_balancer.planner.runstate.SegmentTable`, the used-segment index ``idx`` for a used
segment).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow.compute as pc

from segment_balancer.planner.kernels import unload
from segment_balancer.planner.runstate import (
    FATES,
    NO_LOAD,
    RULE_CODES,
    SegmentTable,
    TierState,
)
from segment_balancer.planner.stages.run import StageRun

STAGE = 12
READS = WRITES = ()

EVERYWHERE = ("drop_rule", "unused", "overshadowed")
"""The :data:`~segment_balancer.planner.runstate.FATES` whose served replicas stage 12 drops from
every server, whatever else holds them (ALGORITHM.md stage 12: drop rules, unused and overshadowed
segments); the fate's name is the drop's reason."""
UNUSED_LAST = 1 << 62
"""The first sort key of an everywhere-drop of a segment outside the used set (``idx`` -1): after
every used segment's, so unused and overshadowed segments come after the used ones, by id."""
OVER_COLUMNS = ("idx", "target", "count", "cap", "excess", "loaded", "required", "counts", "tier")
"""The columns of :func:`overreplicated`'s rows, in this order."""


def stage(run: StageRun, groups) -> None:
    """Run stage 12 (``groups`` unchanged)."""
    run.unload(STAGE)


def tally(state: TierState, table: SegmentTable) -> dict[str, np.ndarray]:
    """The replica tally of every used load-rule segment of one tier (ALGORITHM.md "Terms":
    "Replica count", "Loaded and required"; seed 000 stage 12).

    ``state``: the tier's current state (``seg_code`` ascending); ``table``: the run's segment
    table. Returns int64 arrays of one length (one row per segment of ``state`` that is used and
    under a load rule, in ``seg_code`` order): ``code``, ``target``, ``count`` (servers holding it:
    serving with no drop, or loading), ``loaded`` (servers serving it with no drop or only a
    dependent one, 0 where the target is 0) and ``droppable`` (servers serving it with no drop)."""
    n = len(state.seg_code)
    pos = np.searchsorted(state.seg_code, state.rep_code)
    mine = pos < n
    mine[mine] = state.seg_code[pos[mine]] == state.rep_code[mine]
    held = (state.served | (state.load != NO_LOAD)) & ~state.dropping
    serving = state.served & (~state.dropping | state.dependent)
    droppable = state.served & ~state.dropping

    def per(values):
        return np.bincount(pos[mine], weights=values[mine], minlength=n).astype(np.int64)

    code = state.seg_code
    load = (code < table.n_used) & (table.rule[code] == RULE_CODES["load"])
    target = state.target.astype(np.int64)
    loaded = np.where(target > 0, per(serving), 0)
    return {
        "code": code[load],
        "target": target[load],
        "count": per(held)[load],
        "loaded": loaded[load],
        "droppable": per(droppable)[load],
    }


def over_in_tier(tal: Mapping[str, np.ndarray]) -> np.ndarray:
    """The codes (int64, ascending) of the segments of one tier's :func:`tally` whose ``count``
    exceeds their ``target`` there: the only segments that can be overreplicated overall."""
    return tal["code"][tal["count"] > tal["target"]]


def tally_of(state: TierState, table: SegmentTable, codes: np.ndarray) -> dict[str, np.ndarray]:
    """One tier's :func:`tally` of the segments ``codes`` (int64, any order) only, plus
    ``required`` (int32: min(2, Σ of the rule's tieredReplicants), ALGORITHM.md "Loaded and
    required"; -1: not a load rule). ``target`` stays int64; rows in ``code`` order."""
    tal = tally(state, table)
    keep = np.isin(tal["code"], codes)
    out = {name: values[keep] for name, values in tal.items()}
    out["required"] = table.required[out["code"]]
    return out


def everywhere_drops(state: TierState, table: SegmentTable) -> dict[str, np.ndarray]:
    """The DROPs of one tier whatever else holds the segment (ALGORITHM.md stage 12): one per
    replica that serves, with no drop, a segment whose fate is one of :data:`EVERYWHERE` (every
    replica of a drop-rule or unused segment, and of an overshadowed segment that no longer waits),
    in the replica order of ``state``.

    Returns arrays of one length k: ``idx``, ``code``, ``size_bytes`` (bytes) and ``order_idx``
    (:class:`~segment_balancer.planner.operations.OpOrder`'s ``idx``: ``idx``, or
    :data:`UNUSED_LAST` outside the used set) int64; ``segment_id``, ``datasource``, ``server``
    (name), ``reason`` (the fate's name) and ``order_key`` (``"<segment_id>|<server>"``) object
    arrays of str."""
    serving = state.served & ~state.dropping
    fate = table.fate[state.rep_code]
    drop = serving & np.isin(fate, [FATES.index(r) for r in EVERYWHERE])
    codes, servers = state.rep_code[drop], state.rep_server[drop]
    ids = np.array(table.segment_ids(codes), dtype=object)
    names = np.array([state.servers[s] for s in servers], dtype=object)
    idx = table.idx_of(codes)
    return {
        "idx": idx,
        "code": codes,
        "segment_id": ids,
        "datasource": np.array([table.datasource_of(c) for c in codes], dtype=object),
        "server": names,
        "size_bytes": table.size_bytes[codes].astype(np.int64),
        "reason": np.array([FATES[int(f)] for f in table.fate[codes]], dtype=object),
        "order_idx": np.where(idx >= 0, idx, UNUSED_LAST).astype(np.int64),
        "order_key": np.array([f"{sid}|{srv}" for sid, srv in zip(ids, names)], dtype=object),
    }


def waiting_replicas(state: TierState, table: SegmentTable) -> tuple[np.ndarray, np.ndarray]:
    """The replicas of one tier that serve, with no drop, an overshadowed segment that waits for a
    segment overshadowing it to be served (fate ``waiting``, ALGORITHM.md stage 12): their segment
    codes (int64) and server codes (int32, into ``state.servers``), in the replica order of
    ``state``."""
    serving = state.served & ~state.dropping
    wait = serving & (table.fate[state.rep_code] == FATES.index("waiting"))
    return state.rep_code[wait], state.rep_server[wait]


def waiting_decisions(
    idx: Sequence[int], segment_id: Sequence[str], server: Sequence[str]
) -> tuple[list[int], list[str], list[list[str]]]:
    """One ``waiting`` decision per overshadowed segment stage 12 keeps (ALGORITHM.md stage 12),
    from its served replicas in every tier (:func:`waiting_replicas`; three sequences of one
    length: ``idx``, ``segment_id``, ``server`` name). Returns, by segment id: the lowest ``idx``
    of each segment's rows, the segment ids, and each segment's servers sorted."""
    per: dict[str, tuple[int, list[str]]] = {}
    for i, sid, srv in zip(idx, segment_id, server):
        low, servers = per.get(sid, (i, []))
        servers.append(srv)
        per[sid] = (min(low, i), servers)
    ids = sorted(per)
    return [per[s][0] for s in ids], ids, [sorted(per[s][1]) for s in ids]


def overreplicated(tallies) -> tuple[dict[str, list], list[list[str]]]:
    """Stage 12's overreplicated (segment, tier) pairs (ALGORITHM.md stage 12: its excess replicas)
    from every tier's :func:`tally_of` rows at once.

    ``tallies``: a pyarrow Table with columns ``idx`` (int64, the code), ``tier`` (string),
    ``target`` (int32), ``count``, ``loaded``, ``droppable`` (int64), ``required`` (int32, null:
    not a load rule), one row per (segment, tier). A segment is overreplicated when its ``count``
    summed over its tiers exceeds its ``target`` summed over them.

    Returns the columns :data:`OVER_COLUMNS` as lists, one row per tier where an overreplicated
    segment's count exceeds its target, by ``idx`` then ``tier``: ``cap`` = min(count − target,
    droppable); ``excess`` (Σ count − Σ target), ``loaded`` (Σ loaded) and ``required`` of the
    segment; ``counts``: JSON ``{tier: [target, count]}`` of every tier of the segment, by tier.
    And the distinct sorted tier lists some segment's drops couple
    (:func:`~segment_balancer.planner.kernels.unload.couples_tiers`, ``required`` null as 0),
    sorted."""
    totals = tallies.group_by("idx").aggregate([("count", "sum"), ("target", "sum"), ("loaded", "sum")])
    totals = totals.filter(pc.greater(totals["count_sum"], totals["target_sum"]))
    rows = (
        tallies.join(totals, "idx", join_type="inner")
        .sort_by([("idx", "ascending"), ("tier", "ascending")])
        .to_pydict()
    )
    counts: dict[int, dict[str, list[int]]] = {}
    for idx, tier, target, count in zip(rows["idx"], rows["tier"], rows["target"], rows["count"]):
        counts.setdefault(idx, {})[tier] = [target, count]
    text = {idx: json.dumps(c, separators=(",", ":"), ensure_ascii=False) for idx, c in counts.items()}
    over: dict[str, list] = {name: [] for name in OVER_COLUMNS}
    for k in (k for k, (t, c) in enumerate(zip(rows["target"], rows["count"])) if c > t):
        idx, count, target = rows["idx"][k], rows["count"][k], rows["target"][k]
        over["idx"].append(idx)
        over["target"].append(target)
        over["count"].append(count)
        over["cap"].append(min(count - target, rows["droppable"][k]))
        over["excess"].append(rows["count_sum"][k] - rows["target_sum"][k])
        over["loaded"].append(rows["loaded_sum"][k])
        over["required"].append(rows["required"][k])
        over["counts"].append(text[idx])
        over["tier"].append(rows["tier"][k])
    caps: dict[int, dict[str, tuple[int, int]]] = {}
    first: dict[int, tuple[int, int, int]] = {}
    for idx, tier, target, cap, excess, loaded, required in zip(
        over["idx"], over["tier"], over["target"], over["cap"], over["excess"], over["loaded"], over["required"]
    ):
        caps.setdefault(idx, {})[tier] = (target, cap)
        first.setdefault(idx, (excess, loaded, required or 0))
    coupled = {tuple(sorted(c)) for idx, c in caps.items() if len(c) > 1 and unload.couples_tiers(*first[idx], c)}
    return over, [list(t) for t in sorted(coupled)]


def task_groups(tiers: Sequence[str], coupled: Iterable[Sequence[str]]) -> list[list[str]]:
    """The tiers decided together (one
    :func:`~segment_balancer.planner.kernels.unload.unload_tiers` call each): one group per tier
    of ``tiers``, except that the tiers of each list of ``coupled`` (:func:`overreplicated`) share
    a group, closed over chains (their union). Each group in the order of ``tiers``; the groups
    sorted. Raises ``KeyError`` for a coupled tier not in ``tiers``."""
    root = {t: t for t in tiers}

    def find(t: str) -> str:
        while root[t] != t:
            t = root[t]
        return t

    for first, *rest in coupled:
        for t in rest:
            root[find(t)] = find(first)
    groups: dict[str, list[str]] = {}
    for t in tiers:
        groups.setdefault(find(t), []).append(t)
    return sorted(groups.values())


def excess_items(rows: Mapping[str, Sequence]) -> list[unload.Excess]:
    """The overreplicated segments of some tiers as the excess kernel takes them, one per segment
    in the order of its first row, from rows of :func:`overreplicated` (columns ``idx``,
    ``excess``, ``loaded``, ``required`` (None: 0), ``counts`` (the JSON text), as lists of one
    length)."""
    items: dict[int, unload.Excess] = {}
    for idx, excess, loaded, required, counts in zip(
        rows["idx"], rows["excess"], rows["loaded"], rows["required"], rows["counts"]
    ):
        if idx not in items:
            items[idx] = unload.Excess(
                int(idx),
                int(excess),
                int(loaded),
                int(required or 0),
                {t: (int(a), int(b)) for t, (a, b) in json.loads(counts).items()},
            )
    return list(items.values())


def deferred_facts(segment_ids: Sequence[str], drops: Sequence[int | None]) -> dict:
    """What stage 12 reports of the drops the availability rule held back (ALGORITHM.md
    "Availability"), from its ``deferred`` rows (one per segment: its id and how many drops,
    None as 0): ``deferred_drops`` (their sum), ``deferred_segments`` (the rows) and
    ``deferred_examples`` (the first five segment ids, sorted)."""
    return {
        "deferred_drops": int(sum(x or 0 for x in drops)),
        "deferred_segments": len(segment_ids),
        "deferred_examples": sorted(segment_ids)[:5],
    }
