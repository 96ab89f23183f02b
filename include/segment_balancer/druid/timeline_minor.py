"""One time chunk of the segment timeline: atomic update groups and partition-set completeness.

A *time chunk* is the set of used segments of one datasource with the same interval and the same
(major) version: Druid's ``VersionedIntervalTimeline.TimelineEntry`` with its ``PartitionHolder``.
This module decides, for the segments of one time chunk,

* the state of each segment's atomic update group (``VISIBLE``, ``STANDBY``, ``OVERSHADOWED``), as
  Druid's ``OvershadowableManager`` keeps it, and
* whether the time chunk is *complete* (``PartitionHolder.isComplete``): only complete time chunks
  overshadow older versions and are queried by brokers.

Sources (apache/druid, read via the fork gargvishesh/druid, ``processing/src/main/java/org/apache/
druid/timeline/``): ``partition/OvershadowableManager.java``, ``partition/PartitionHolder.java``,
``partition/AtomicUpdateGroup.java``, ``partition/NumberedPartitionChunk.java``,
``partition/NumberedOverwritingPartitionChunk.java``, ``partition/NumberedOverwriteShardSpec.java``,
``partition/ShardSpec.java`` (default root range ``[partitionNum, partitionNum + 1)``, minor version
0, group size 1), ``Overshadowable.java``; design in Druid issue #7491 ("Timeline management").

Druid's ``OvershadowableManager`` is incremental: it moves groups between states as chunks are
added and removed.  Here the states are computed from the final set of segments in one pass (a
removed segment is simply absent).  The rules, checked against every state asserted in Druid's
``OvershadowableManagerTest``:

1. Group A *overshadows* group B when A's root range contains B's and A's minor version is higher.
   A group is *full* when all ``atomicUpdateGroupSize`` members are present (plain shard specs are
   groups of one, always full; an unknown size, -1 or null, is never full).
2. A group overshadowed by a full group is OVERSHADOWED.  Full groups not overshadowed by a full
   group are the *newest complete generation* and VISIBLE (subject to rule 4).
3. A non-full group that nobody full overshadows is STANDBY when the newest complete generation
   below it tiles its root range exactly (the older generation stays visible until it is full).
   Otherwise nothing complete can stand in for it, and Druid falls back to the newest incomplete
   group: the non-full groups of this kind that no other such group overshadows are VISIBLE, the
   rest OVERSHADOWED.
4. Whatever a VISIBLE non-full group (rule 3) overshadows is OVERSHADOWED.

Completeness follows ``PartitionHolder.isComplete`` literally: walk the visible chunks in root
range order; the first must be a start chunk, each next must "abut" the previous, and the walk
ends well at the first end chunk, provided every visible group is full.  For ``numbered``-style
chunks (``NumberedPartitionChunk``: numbered, hashed, range and single with known core partitions)
with N core partitions, chunk 0 starts and chunk N-1 ends, and appended chunks >= N do not matter;
with N = 0 every chunk both starts and ends (always complete).  ``none``, ``linear``, ``tombstone``
and ``numbered_overwrite`` chunks always start and end.  A quirk kept from Druid: a numbered chunk
with N > 0 does not abut an overwriting chunk, so a visible minor-compacted group that follows
partition 0 of a core partition set leaves the time chunk incomplete.

Work is O(groups x overwriting groups) per time chunk; plain (first-generation) segments never
overshadow each other, so a time chunk without ``numbered_overwrite`` segments costs O(n log n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Group / segment states inside one time chunk.
VISIBLE, STANDBY, OVERSHADOWED = 0, 1, 2
STATE_NAMES = ("visible", "standby", "overshadowed")

# Chunk kinds (which PartitionChunk class Druid's ShardSpec.createChunk returns).
KIND_SINGLE = 0  # none -> SingleElementPartitionChunk
KIND_LINEAR = 1  # linear -> LinearPartitionChunk
KIND_NUMBERED = 2  # numbered, hashed, range, single, unknown types -> NumberedPartitionChunk
KIND_OVERWRITE = 3  # numbered_overwrite -> NumberedOverwritingPartitionChunk
KIND_TOMBSTONE = 4  # tombstone -> TombstonePartitionedChunk


@dataclass
class ChunkResult:
    """States of the segments of one time chunk (arrays aligned with the input rows).

    ``state``: int8 per segment (VISIBLE / STANDBY / OVERSHADOWED) of its atomic update group.
    ``group``: group index per segment; ``g_start``, ``g_end``, ``g_minor``, ``g_size``,
    ``g_count``, ``g_full``: per group root range [start, end), minor version, declared size
    (-1 unknown), members present, and fullness.  ``complete``: PartitionHolder.isComplete.
    ``incomplete_detail``: why it is not complete ("" when complete).
    """

    state: np.ndarray
    group: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_minor: np.ndarray
    g_size: np.ndarray
    g_count: np.ndarray
    g_full: np.ndarray
    complete: bool
    incomplete_detail: str

    def overshadowing_groups(self, g: int) -> np.ndarray:
        """Indices of VISIBLE groups that overshadow group ``g`` (containment + higher minor)."""
        g_state = self.group_states()
        mask = (
            (self.g_start <= self.g_start[g])
            & (self.g_end >= self.g_end[g])
            & (self.g_minor > self.g_minor[g])
            & (g_state == VISIBLE)
        )
        return np.flatnonzero(mask)

    def group_states(self) -> np.ndarray:
        out = np.full(len(self.g_start), OVERSHADOWED, dtype=np.int8)
        out[self.group] = self.state
        return out


def _contained(gs, ge, gm, s, e, m):
    """Mask of groups overshadowed by a group with root range [s, e) and minor version m."""
    return (gs >= s) & (ge <= e) & (gm < m)


def _tiles(starts: np.ndarray, ends: np.ndarray, s: int, e: int) -> bool:
    """Do the ranges [starts[i], ends[i]) tile [s, e) exactly (adjacent, no gap, no overlap)?"""
    if len(starts) == 0:
        return False
    order = np.lexsort((ends, starts))
    st, en = starts[order], ends[order]
    return bool(st[0] == s and en[-1] == e and np.all(st[1:] == en[:-1]))


def classify_chunk(
    kind: np.ndarray,
    part: np.ndarray,
    n_core: np.ndarray,
    root_start: np.ndarray,
    root_end: np.ndarray,
    minor: np.ndarray,
    aug_size: np.ndarray,
) -> ChunkResult:
    """States and completeness for the segments of ONE time chunk (same interval and version).

    Arguments are int64 arrays aligned by segment: chunk kind (``KIND_*``), partition number
    (``partitionNum`` / ``partitionId``), core partitions (<= 0 when unknown), root partition range
    [root_start, root_end), minor version and atomic update group size (-1 when unknown).  For
    plain segments the caller passes root range [p, p + 1), minor 0 and size 1.

    Raises ValueError when two segments share a root range and minor version but declare
    different group sizes, or a group has more members than its declared size (Druid throws when
    adding such chunks).
    """
    # Groups: (root_start, root_end, minor).
    keys = np.stack([root_start, root_end, minor], axis=1)
    uniq, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    gs, ge, gm = uniq[:, 0], uniq[:, 1], uniq[:, 2]
    n_groups = len(uniq)
    g_count = np.bincount(group, minlength=n_groups)
    g_size = np.full(n_groups, -2, dtype=np.int64)
    g_size[group] = aug_size
    size_min = np.full(n_groups, np.iinfo(np.int64).max)
    np.minimum.at(size_min, group, aug_size)
    if np.any(size_min != g_size):
        bad = int(np.flatnonzero(size_min != g_size)[0])
        raise ValueError(
            f"atomic update group root range [{gs[bad]}, {ge[bad]}) minor version {gm[bad]} "
            "has members with different atomicUpdateGroupSize"
        )
    over = (g_size > 0) & (g_count > g_size)
    if np.any(over):
        bad = int(np.flatnonzero(over)[0])
        raise ValueError(
            f"atomic update group root range [{gs[bad]}, {ge[bad]}) minor version {gm[bad]} "
            f"has {g_count[bad]} members but atomicUpdateGroupSize {g_size[bad]}"
        )
    g_full = (g_size > 0) & (g_count == g_size)

    g_state = np.full(n_groups, VISIBLE, dtype=np.int8)
    if np.any(gm > 0):
        g_state = _group_states(gs, ge, gm, g_full)
    state = g_state[group]

    complete, detail = _is_complete(kind, part, n_core, gs, ge, gm, g_full, g_count, g_size, group, state)
    return ChunkResult(state.astype(np.int8), group, gs, ge, gm, g_size, g_count, g_full, complete, detail)


def _group_states(gs, ge, gm, full) -> np.ndarray:
    """Rules 1-4 of the module docstring, over the groups of one time chunk."""
    n_groups = len(gs)
    over_by_full = np.zeros(n_groups, dtype=bool)
    for w in np.flatnonzero(full & (gm > 0)):
        over_by_full |= _contained(gs, ge, gm, gs[w], ge[w], gm[w])
    top_full = full & ~over_by_full

    candidates = np.flatnonzero(~full & ~over_by_full)
    covered = np.zeros(n_groups, dtype=bool)
    for c in candidates:
        below = top_full & _contained(gs, ge, gm, gs[c], ge[c], gm[c])
        covered[c] = _tiles(gs[below], ge[below], gs[c], ge[c])
    fallback = np.zeros(n_groups, dtype=bool)
    fallback[candidates] = ~covered[candidates]

    fallback_over = np.zeros(n_groups, dtype=bool)
    for f in np.flatnonzero(fallback):
        fallback_over |= fallback & _contained(gs, ge, gm, gs[f], ge[f], gm[f])
    fallback_visible = fallback & ~fallback_over

    demoted = np.zeros(n_groups, dtype=bool)
    for v in np.flatnonzero(fallback_visible):
        demoted |= _contained(gs, ge, gm, gs[v], ge[v], gm[v])

    state = np.full(n_groups, OVERSHADOWED, dtype=np.int8)
    state[(top_full & ~demoted) | fallback_visible] = VISIBLE
    state[covered & ~demoted] = STANDBY
    return state


def _is_complete(kind, part, n_core, gs, ge, gm, g_full, g_count, g_size, group, state):
    """``PartitionHolder.isComplete`` over the visible chunks; returns (complete, why-not)."""
    vis = np.flatnonzero(state == VISIBLE)
    if len(vis) == 0:
        return False, "no visible partition"
    # Visible chunks in RootPartitionRange order (start, end), then partition number.
    order = np.lexsort((part[vis], ge[group[vis]], gs[group[vis]]))
    rows = vis[order]
    vis_groups = np.unique(group[vis])
    not_full = vis_groups[~g_full[vis_groups]]
    if len(not_full):
        g = int(not_full[0])
        size = "unknown" if g_size[g] < 0 else str(g_size[g])
        full_why = (
            f"atomic update group incomplete ({g_count[g]} of {size}) for root range "
            f"[{gs[g]}, {ge[g]}), minor version {gm[g]}"
        )
    else:
        full_why = ""

    def numbered(r):
        return kind[r] == KIND_NUMBERED

    def is_start(r):
        return not numbered(r) or n_core[r] <= 0 or part[r] == 0

    def is_end(r):
        return not numbered(r) or n_core[r] <= 0 or part[r] == n_core[r] - 1

    def chain_why(r):
        if numbered(r) and n_core[r] > 0:
            present = np.unique(part[rows][(kind[rows] == KIND_NUMBERED) & (part[rows] < n_core[r])])
            return f"core partitions incomplete ({len(present)} of {n_core[r]} present)"
        return "visible partitions do not form a complete chain (PartitionHolder.isComplete)"

    curr = rows[0]
    if not is_start(curr):
        return False, chain_why(curr)
    if is_end(curr):
        return (not full_why), full_why
    for nxt in rows[1:]:
        if kind[curr] == KIND_LINEAR:
            abuts = True
        elif kind[curr] == KIND_NUMBERED and kind[nxt] == KIND_NUMBERED:
            abuts = part[nxt] == part[curr] + 1 if part[nxt] < n_core[nxt] else part[nxt] > part[curr]
        else:
            abuts = False
        if not abuts:
            return False, chain_why(curr)
        if is_end(nxt):
            return (not full_why), full_why
        curr = nxt
    return False, chain_why(curr)


def complete_plain(
    kind: np.ndarray, part: np.ndarray, n_core: np.ndarray, first: np.ndarray, length: np.ndarray
) -> np.ndarray:
    """``PartitionHolder.isComplete`` for many time chunks without overwriting segments at once.

    Rows are sorted by (time chunk, partition number); time chunk i owns rows
    ``first[i] : first[i] + length[i]``.  Every plain segment is its own full, visible group, so
    only the chain walk of ``_is_complete`` matters; it is evaluated with array operations:
    complete iff the first chunk starts and, unless it also ends, the first later chunk that
    either ends or fails to abut its predecessor does abut it (and so ends the walk well).
    """
    n = len(kind)
    is_num = kind == KIND_NUMBERED
    known = is_num & (n_core > 0)
    starts = ~known | (part == 0)
    ends = ~known | (part == n_core - 1)
    prev_part = np.concatenate([[-1], part[:-1]])
    prev_num = np.concatenate([[False], is_num[:-1]])
    abuts = prev_num & is_num & np.where(part < n_core, part == prev_part + 1, part > prev_part)
    stop = np.flatnonzero(ends | ~abuts)
    complete = starts[first] & ends[first]
    todo = np.flatnonzero(starts[first] & ~ends[first])
    if len(todo):
        nxt = np.searchsorted(stop, first[todo] + 1)
        j = stop[np.minimum(nxt, len(stop) - 1)] if len(stop) else np.full(len(todo), n)
        inside = (nxt < len(stop)) & (j < first[todo] + length[todo])
        complete[todo] = inside & abuts[np.minimum(j, n - 1)]
    return complete
