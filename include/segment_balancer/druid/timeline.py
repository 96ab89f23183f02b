"""Segment timeline of one datasource: which used segments are visible, standby or overshadowed.

Pure pandas/numpy; the pipeline runs :func:`classify_datasource` once per datasource (e.g. Spark
``groupBy("datasource").applyInPandas``).

Sources (apache/druid, read via the fork gargvishesh/druid): ``processing/src/main/java/org/apache/
druid/timeline/VersionedIntervalTimeline.java`` (``addAll``, ``add``/``addAtKey``, ``lookup``,
``isOvershadowed``), ``SegmentTimeline.java``, ``DataSegment.overshadows``, and
``server/.../client/DataSourcesSnapshot.java`` (the coordinator marks a used segment overshadowed
with ``SegmentTimeline.isOvershadowed``); Druid issue #7491 for minor versions.  Per-time-chunk
rules (atomic update groups, ``PartitionHolder.isComplete``) are in :mod:`.timeline_minor`.

Input frame (one row per used segment of ONE datasource; any index, extra columns are kept):

=========================  ==============  =================================================
column                     dtype           meaning
=========================  ==============  =================================================
segment_id                 str             unique id
start_ms, end_ms           int64           interval [start, end), epoch milliseconds UTC
version                    str             major version; compared as Java ``String.compareTo``
shard_type                 str             ``none``, ``linear``, ``numbered``, ``hashed``,
                                           ``range``, ``single``, ``numbered_overwrite``,
                                           ``tombstone``; other values behave like ``numbered``
partition_num              int             ``partitionNum`` (``partitionId`` for overwrite)
num_core_partitions        nullable int    ``partitions`` / ``numCorePartitions``; null, 0 or
                                           negative = unknown (the set counts as complete)
start_root_partition_id,   nullable int    ``numbered_overwrite`` only: root range [start, end),
end_root_partition_id,                     minor version (> 0) and atomic update group size
minor_version,                             (null or -1 = unknown, never complete)
atomic_update_group_size
=========================  ==============  =================================================

The four overwrite columns may be absent when no ``numbered_overwrite`` segment is present.

Semantics (what Druid's coordinator and brokers would do with this set of used segments):

* A *time chunk* is all segments with the same interval and version.  It is *complete* when its
  partition set is (``PartitionHolder.isComplete``, see :mod:`.timeline_minor`).
* The *complete timeline* maps every instant to the complete time chunk of the highest version
  containing it (``lookup`` with ``Partitions.ONLY_COMPLETE``; :func:`timeline_pieces`).
* ``overshadowed``: ``SegmentTimeline.isOvershadowed`` is true: the segment's whole interval is
  covered by complete time chunks of higher versions (any granularity; a partial cover is not
  enough, an incomplete higher version never counts), or its own time chunk is complete and a
  visible atomic update group of it overshadows the segment's group (higher minor version over a
  containing root range).  Druid's coordinator never loads these and marks them unused.
* ``standby``: not overshadowed, so Druid's coordinator loads it, but brokers do not query it yet:
  its atomic update group waits to be complete while the older generation stays visible, or its
  time chunk is incomplete (e.g. core partitions missing) so an older version (if any) is served.
* ``visible``: everything else; queried by brokers for at least part of its interval.  Tombstones
  are reported ``visible`` (they overshadow like any complete time chunk but hold no data).

Where this departs from Druid: Druid's timeline rejects two overlapping *different* intervals with
the same version (``UnsupportedOperationException``); here that raises ``ValueError`` whatever
the insertion order.  ``findFullyOvershadowed`` (used by some tasks) also counts an incomplete
time chunk hidden by a newer incomplete one as overshadowed; we follow the coordinator's
``isOvershadowed`` and call it ``standby``.  ``range``/``single`` segments with unknown core
partitions are completed in Druid by their dimension boundaries, which the input lacks; they are
taken as complete.

Complexity: O(n log n) for n segments (sorts plus vectorised segment-tree range updates and range
queries over the interval boundaries); pairwise work only among the groups of one time chunk that contain
``numbered_overwrite`` segments.  The ``overshadowed_by`` lists share one list object per time
chunk; do not mutate them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from segment_balancer.druid import timeline_minor as tm

REQUIRED_COLUMNS = ("segment_id", "start_ms", "end_ms", "version", "shard_type", "partition_num")
OPTIONAL_COLUMNS = (
    "num_core_partitions",
    "start_root_partition_id",
    "end_root_partition_id",
    "minor_version",
    "atomic_update_group_size",
)
STATUS_VISIBLE, STATUS_STANDBY, STATUS_OVERSHADOWED = "visible", "standby", "overshadowed"

_KINDS = {
    "none": tm.KIND_SINGLE,
    "linear": tm.KIND_LINEAR,
    "numbered_overwrite": tm.KIND_OVERWRITE,
    "tombstone": tm.KIND_TOMBSTONE,
}
_NON_ROOT_START = 32768  # PartitionIds.NON_ROOT_GEN_START_PARTITION_ID
_DAY_MS = 86_400_000


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def classify_datasource(segments: pd.DataFrame) -> pd.DataFrame:
    """Visible / standby / overshadowed status of each used segment of one datasource.

    Returns a copy of ``segments`` (same rows, same order and index) with three columns added:
    ``status`` (str: ``visible`` | ``standby`` | ``overshadowed``), ``overshadowed_by`` (list of
    segment ids whose segments make it overshadowed: the visible segments of the higher-version
    time chunks covering it and/or the visible segments of its own time chunk that overshadow
    it by minor version; empty unless overshadowed) and ``reason`` (short text).

    Raises ValueError on a missing required column, a null required value, ``end_ms <= start_ms``,
    duplicate segment ids, two segments with the same interval, version and partition number,
    overlapping different intervals with the same version, an overwrite segment without its root
    range / minor version (or minor version <= 0), or an inconsistent atomic update group.
    """
    tl = _Timeline(segments)
    out = segments.copy()
    out["status"] = tl.status
    out["overshadowed_by"] = tl.overshadowed_by
    out["reason"] = tl.reason
    return out


def explain_overshadowing(segments: pd.DataFrame, segment_id: str) -> dict:
    """Why one segment of the datasource ``segments`` has its status.

    Returns a dict: ``segment_id``, ``status``, ``reason``, ``overshadowed_by`` (as in
    :func:`classify_datasource`), ``interval`` (text), ``start_ms``, ``end_ms``, ``version``,
    ``time_chunk_complete`` (bool) and ``time_chunk_incomplete_reason``, ``atomic_update_group``
    (``root_range`` [start, end), ``minor_version``, ``size`` (-1 unknown), ``present``, ``state``
    of the group inside its time chunk), ``complete_timeline`` (the pieces of the complete timeline
    overlapping the segment's interval, clipped to it: ``start_ms``, ``end_ms``, ``interval``,
    ``version``, ``segment_ids`` of that piece's visible segments, ``relation`` = ``higher`` |
    ``own`` | ``lower``), ``uncovered`` (sub-intervals no complete time chunk covers, as
    ``[start_ms, end_ms]``) and ``minor_overshadowed_by`` (ids of visible segments of its own time
    chunk overshadowing it by minor version).  Raises KeyError for an unknown ``segment_id`` and
    the errors of :func:`classify_datasource`.
    """
    tl = _Timeline(segments)
    hits = np.flatnonzero(tl.seg_id == str(segment_id))
    if len(hits) == 0:
        raise KeyError(f"segment {segment_id!r} is not among the given segments")
    return tl.explain(int(hits[0]))


def timeline_pieces(segments: pd.DataFrame) -> pd.DataFrame:
    """The complete timeline: Druid's ``lookup(ETERNITY)`` with only complete partition sets.

    One row per maximal piece served by one time chunk, in time order: ``start_ms``, ``end_ms``
    (int64, epoch ms), ``version`` (str), ``true_start_ms``, ``true_end_ms`` (the time chunk's own
    interval) and ``segment_ids`` (visible segments of that time chunk, by partition number).
    Gaps (no complete time chunk) have no row.
    """
    tl = _Timeline(segments)
    rows = [
        (tl.p_start[i], tl.p_end[i], tl.versions[tl.e_vrank[e]], tl.e_start[e], tl.e_end[e], list(tl.visible_ids(e)))
        for i, e in enumerate(tl.p_entry)
    ]
    return pd.DataFrame(
        rows, columns=["start_ms", "end_ms", "version", "true_start_ms", "true_end_ms", "segment_ids"]
    ).astype({"start_ms": "int64", "end_ms": "int64", "true_start_ms": "int64", "true_end_ms": "int64"})


def time_chunk_states(segments: pd.DataFrame) -> pd.DataFrame:
    """Druid ``OvershadowableManager`` states for the segments of ONE time chunk.

    All rows must share interval and version.  Returns a copy with ``chunk_state`` (str: the
    state of the segment's atomic update group inside the time chunk, ``visible`` | ``standby`` |
    ``overshadowed``; a lone incomplete newest group is ``visible`` here, as in Druid) and
    ``chunk_complete`` (bool, ``PartitionHolder.isComplete``, same on every row).
    """
    cols = _Columns(segments)
    if len(set(zip(cols.start.tolist(), cols.end.tolist(), cols.version.tolist()))) > 1:
        raise ValueError("time_chunk_states takes the segments of one interval and one version")
    res = tm.classify_chunk(
        cols.kind, cols.part, cols.n_core, cols.root_start, cols.root_end, cols.minor, cols.aug_size
    )
    out = segments.copy()
    out["chunk_state"] = [tm.STATE_NAMES[s] for s in res.state]
    out["chunk_complete"] = res.complete
    return out


# --------------------------------------------------------------------------------------------
# Input normalisation
# --------------------------------------------------------------------------------------------


def _int_column(df: pd.DataFrame, name: str, default: int, required: bool) -> np.ndarray:
    if name not in df.columns:
        if required:
            raise ValueError(f"missing column {name!r}")
        return np.full(len(df), default, dtype=np.int64)
    values = pd.to_numeric(df[name], errors="raise")
    if required and values.isna().any():
        raise ValueError(f"column {name!r} has null values")
    return values.fillna(default).to_numpy(dtype=np.int64)


class _Columns:
    """Validated numpy views of the input frame (root range etc. filled in for plain segments)."""

    def __init__(self, df: pd.DataFrame):
        for name in REQUIRED_COLUMNS:
            if name not in df.columns:
                raise ValueError(f"missing column {name!r}")
        for name in ("segment_id", "version", "shard_type"):
            if df[name].isna().any():
                raise ValueError(f"column {name!r} has null values")
        self.seg_id = df["segment_id"].astype(str).to_numpy()
        self.start = _int_column(df, "start_ms", 0, True)
        self.end = _int_column(df, "end_ms", 0, True)
        self.version = df["version"].astype(str).to_numpy()
        shard = df["shard_type"].astype(str).str.strip().str.lower().to_numpy()
        self.part = _int_column(df, "partition_num", 0, True)
        self.n_core = _int_column(df, "num_core_partitions", 0, False)
        rs = _int_column(df, "start_root_partition_id", -1, False)
        re = _int_column(df, "end_root_partition_id", -1, False)
        mv = _int_column(df, "minor_version", -1, False)
        size = _int_column(df, "atomic_update_group_size", -1, False)

        self.kind = np.array([_KINDS.get(s, tm.KIND_NUMBERED) for s in shard], dtype=np.int64)
        self.is_tombstone = self.kind == tm.KIND_TOMBSTONE
        ow = self.kind == tm.KIND_OVERWRITE
        self.root_start = np.where(ow, rs, self.part)
        self.root_end = np.where(ow, re, self.part + 1)
        self.minor = np.where(ow, mv, 0)
        self.aug_size = np.where(ow, np.where(size > 0, size, -1), 1)

        bad = np.flatnonzero(self.end <= self.start)
        if len(bad):
            raise ValueError(f"segment {self.seg_id[bad[0]]!r}: end_ms must be after start_ms")
        bad = np.flatnonzero(ow & ((rs < 0) | (re <= rs) | (mv <= 0)))
        if len(bad):
            raise ValueError(
                f"overwrite segment {self.seg_id[bad[0]]!r} needs a root partition "
                "range [start, end) and a minor version > 0"
            )
        ids = pd.Series(self.seg_id)
        if ids.duplicated().any():
            raise ValueError(f"duplicate segment_id {ids[ids.duplicated()].iloc[0]!r}")
        key = pd.DataFrame({"s": self.start, "e": self.end, "v": self.version, "p": self.part})
        dup = key.duplicated()
        if dup.any():
            raise ValueError(
                f"segment {self.seg_id[np.flatnonzero(dup)[0]]!r} repeats the interval, "
                "version and partition number of another segment"
            )


def _version_ranks(versions: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Dense ranks in Java ``String.compareTo`` order (UTF-16 code units = UTF-16-BE bytes)."""
    uniq = sorted(set(versions), key=lambda v: v.encode("utf-16-be"))
    index = {v: i for i, v in enumerate(uniq)}
    return uniq, np.array([index[v] for v in versions], dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Range min / max over the elementary segments of the complete timeline
# --------------------------------------------------------------------------------------------


def _range_query(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, op, fill: int) -> np.ndarray:
    """``op``-reduction of ``values[lo[i]:hi[i]]`` for every i (vectorised bottom-up segment tree)."""
    size = 1
    while size < max(len(values), 1):
        size *= 2
    tree = np.full(2 * size, fill, dtype=np.int64)
    tree[size : size + len(values)] = values
    for level in range(size.bit_length() - 1):  # build parents level by level
        parents = np.arange(size >> (level + 1), size >> level)
        tree[parents] = op(tree[2 * parents], tree[2 * parents + 1])
    res = np.full(len(lo), fill, dtype=np.int64)
    left, right = lo + size, hi + size
    while True:
        active = left < right
        if not active.any():
            return res
        take = active & (left & 1 == 1)
        res[take] = op(res[take], tree[left[take]])
        left = np.where(take, left + 1, left)
        take = active & (right & 1 == 1)
        right = np.where(take, right - 1, right)
        res[take] = op(res[take], tree[right[take]])
        left, right = left >> 1, right >> 1


def _range_chmax(k: int, lo: np.ndarray, hi: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """For each of k cells, the max of ``vals[i]`` over the ranges ``[lo[i], hi[i])`` holding it
    (-1 where none): each range is split into O(log k) segment-tree nodes, then pushed down."""
    size = 1
    while size < max(k, 1):
        size *= 2
    tree = np.full(2 * size, -1, dtype=np.int64)
    left, right = lo + size, hi + size
    while True:
        active = left < right
        if not active.any():
            break
        take = active & (left & 1 == 1)
        np.maximum.at(tree, left[take], vals[take])
        left = np.where(take, left + 1, left)
        take = active & (right & 1 == 1)
        right = np.where(take, right - 1, right)
        np.maximum.at(tree, right[take], vals[take])
        left, right = left >> 1, right >> 1
    for level in range(size.bit_length() - 1):  # push maxima from each level to its children
        nodes = np.arange(1 << level, 2 << level)
        for child in (2 * nodes, 2 * nodes + 1):
            tree[child] = np.maximum(tree[child], tree[nodes])
    return tree[size : size + k]


# --------------------------------------------------------------------------------------------
# The timeline
# --------------------------------------------------------------------------------------------


def _fmt_ms(ms: int, date_only: bool) -> str:
    try:
        text = str(np.datetime64(int(ms), "ms"))
    except (OverflowError, ValueError):
        return str(ms)
    return text.split("T")[0] if date_only else text + "Z"


def _fmt_interval(start: int, end: int) -> str:
    date_only = start % _DAY_MS == 0 and end % _DAY_MS == 0
    return f"{_fmt_ms(start, date_only)}/{_fmt_ms(end, date_only)}"


def _fmt_intervals(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Vectorised :func:`_fmt_interval` (object array of str)."""
    if len(starts) == 0:
        return np.empty(0, dtype=object)
    try:
        s_txt = np.datetime_as_string(starts.astype("datetime64[ms]"), unit="ms").astype(object)
        e_txt = np.datetime_as_string(ends.astype("datetime64[ms]"), unit="ms").astype(object)
    except (OverflowError, ValueError):
        return np.array([_fmt_interval(a, b) for a, b in zip(starts, ends)], dtype=object)
    date_only = (starts % _DAY_MS == 0) & (ends % _DAY_MS == 0)
    out = (s_txt + "Z/" + e_txt + "Z").astype(object)
    if date_only.any():
        out[date_only] = np.array(
            [f"{a.split('T')[0]}/{b.split('T')[0]}" for a, b in zip(s_txt[date_only], e_txt[date_only])], dtype=object
        )
    return out


def _versions_text(versions: list[str]) -> str:
    if len(versions) == 1:
        return f"version {versions[0]} covers"
    return "versions " + ", ".join(versions) + " cover"


class _Timeline:
    """All per-segment results for one datasource (see the module docstring for the rules)."""

    def __init__(self, df: pd.DataFrame):
        c = _Columns(df)
        self.c = c
        self.seg_id = c.seg_id
        n = len(c.seg_id)
        self.versions, vrank = _version_ranks(c.version)

        # Time chunks (entries): rows sorted by (start, end, version, partition).
        order = np.lexsort((c.part, vrank, c.end, c.start))
        self.order = order
        s_o, e_o, v_o = c.start[order], c.end[order], vrank[order]
        new = np.ones(n, dtype=bool)
        new[1:] = (s_o[1:] != s_o[:-1]) | (e_o[1:] != e_o[:-1]) | (v_o[1:] != v_o[:-1])
        first = np.flatnonzero(new)
        self.e_first = first
        self.e_len = np.diff(np.append(first, n))
        self.e_start, self.e_end, self.e_vrank = s_o[first], e_o[first], v_o[first]
        n_e = len(first)
        self.entry_of = np.empty(n, dtype=np.int64)
        self.entry_of[order] = np.repeat(np.arange(n_e), self.e_len)
        self._check_same_version_overlap()

        # States inside each time chunk.
        self.state = np.full(n, tm.VISIBLE, dtype=np.int8)
        kind_o = c.kind[order]
        has_ow = (
            np.add.reduceat((kind_o == tm.KIND_OVERWRITE).astype(np.int64), first) > 0 if n else np.zeros(0, dtype=bool)
        )
        self.e_complete = np.zeros(n_e, dtype=bool)
        plain = np.flatnonzero(~has_ow)
        if len(plain):
            # complete_plain walks rows in (entry, partition) order; give it only plain entries.
            rows = order[np.repeat(~has_ow, self.e_len)]
            offs = np.concatenate([[0], np.cumsum(self.e_len[plain])[:-1]])
            self.e_complete[plain] = tm.complete_plain(
                c.kind[rows], c.part[rows], c.n_core[rows], offs, self.e_len[plain]
            )
        self.chunk_results: dict[int, tuple[np.ndarray, tm.ChunkResult]] = {}
        for e in np.flatnonzero(has_ow):
            rows = self.rows_of(e)
            res = tm.classify_chunk(
                c.kind[rows],
                c.part[rows],
                c.n_core[rows],
                c.root_start[rows],
                c.root_end[rows],
                c.minor[rows],
                c.aug_size[rows],
            )
            self.state[rows] = res.state
            self.e_complete[e] = res.complete
            self.chunk_results[int(e)] = (rows, res)

        self._visible_ids: dict[int, list[str]] = {}
        self._sweep_complete_timeline()
        self._classify()

    # ---- structure -------------------------------------------------------------------------

    def rows_of(self, e: int) -> np.ndarray:
        """Row positions of time chunk ``e``, by partition number."""
        return self.order[self.e_first[e] : self.e_first[e] + self.e_len[e]]

    def visible_ids(self, e: int) -> list[str]:
        """Ids of the visible segments of time chunk ``e`` (cached; one shared list per chunk)."""
        if e not in self._visible_ids:
            rows = self.rows_of(e)
            self._visible_ids[e] = [str(x) for x in self.seg_id[rows[self.state[rows] == tm.VISIBLE]]]
        return self._visible_ids[e]

    def _check_same_version_overlap(self):
        if len(self.e_start) < 2:
            return
        frame = pd.DataFrame({"v": self.e_vrank, "s": self.e_start, "e": self.e_end})
        frame = frame.sort_values(["v", "s", "e"], kind="stable")
        prev_end = frame.groupby("v")["e"].cummax().groupby(frame["v"]).shift(1)
        clash = prev_end.notna() & (frame["s"] < prev_end)
        if clash.any():
            i = frame.index[np.flatnonzero(clash.to_numpy())[0]]
            raise ValueError(
                f"overlapping intervals with the same version {self.versions[self.e_vrank[i]]} "
                f"(one is {_fmt_interval(self.e_start[i], self.e_end[i])}); Druid's timeline "
                "rejects this"
            )

    def _sweep_complete_timeline(self):
        """Highest complete version per elementary segment; merged into pieces; range queries."""
        bounds = np.unique(np.concatenate([self.e_start, self.e_end]))
        self.bounds = bounds
        a = np.searchsorted(bounds, self.e_start)
        b = np.searchsorted(bounds, self.e_end)
        k = max(len(bounds) - 1, 0)
        comp = np.flatnonzero(self.e_complete)
        n_e = max(len(self.e_start), 1)
        # Highest complete version per elementary segment: range-chmax of (rank, entry) codes.
        # Overlapping complete time chunks never share a version (checked above), so the maximum
        # code names one time chunk.
        best = _range_chmax(k, a[comp], b[comp], self.e_vrank[comp] * n_e + comp)
        top = np.where(best >= 0, best % n_e, -1)
        rank = np.where(top >= 0, self.e_vrank[np.maximum(top, 0)], -1)
        self.e_min = _range_query(rank, a, b, np.minimum, np.iinfo(np.int64).max)
        self.e_max = _range_query(rank, a, b, np.maximum, -1)
        self.covered = self.e_min > self.e_vrank  # by higher complete versions, no gap

        change = np.ones(k, dtype=bool)
        change[1:] = top[1:] != top[:-1]
        starts = np.flatnonzero(change)
        ends = np.append(starts[1:], k)
        keep = top[starts] >= 0
        self.p_start = bounds[starts[keep]]
        self.p_end = bounds[ends[keep]]
        self.p_entry = top[starts[keep]]

    def pieces_over(self, start: int, end: int) -> np.ndarray:
        """Indices of complete-timeline pieces overlapping [start, end)."""
        i0 = np.searchsorted(self.p_end, start, side="right")
        i1 = np.searchsorted(self.p_start, end, side="left")
        return np.arange(i0, i1)

    # ---- per-segment classification --------------------------------------------------------

    def _classify(self):
        """Status, reason and overshadowed_by per time chunk (vectorised), then per segment."""
        n_e = len(self.e_first)
        iv = _fmt_intervals(self.e_start, self.e_end)
        version = np.array(self.versions, dtype=object)[self.e_vrank] if n_e else iv
        status = np.where(
            self.covered, STATUS_OVERSHADOWED, np.where(self.e_complete, STATUS_VISIBLE, STATUS_STANDBY)
        ).astype(object)
        reason = np.empty(n_e, dtype=object)
        by = np.empty(n_e, dtype=object)
        by.fill([])
        partial = np.where(self.e_max > self.e_vrank, "part of ", "").astype(object)
        visible = status == STATUS_VISIBLE
        reason[visible] = "newest complete version over " + partial[visible] + iv[visible]
        for e in np.flatnonzero(status == STATUS_STANDBY):
            reason[e] = (
                f"partition set of version {version[e]} for {iv[e]} is incomplete: "
                f"{self._incomplete_detail(e)}; not overshadowed, so Druid loads it but "
                "brokers do not query it"
            )
        # Covered time chunks: one list and one text per distinct set of covering time chunks.
        i0 = np.searchsorted(self.p_end, self.e_start, side="right")
        i1 = np.searchsorted(self.p_start, self.e_end, side="left")
        shared: dict[tuple, tuple[list[str], str]] = {}
        single = np.flatnonzero(self.covered & (i1 - i0 == 1))  # the common case, vectorised
        if len(single):
            coverers, inverse = np.unique(self.p_entry[i0[single]], return_inverse=True)
            lists = np.empty(len(coverers), dtype=object)
            texts = np.empty(len(coverers), dtype=object)
            for j, h in enumerate(coverers.tolist()):
                lists[j] = self.visible_ids(h)
                texts[j] = _versions_text([self.versions[self.e_vrank[h]]]) + " "
                shared[(h,)] = (lists[j], texts[j][:-1])
            by[single] = lists[inverse]
            reason[single] = texts[inverse] + iv[single] + " completely"
        for e in np.flatnonzero(self.covered & (i1 - i0 != 1)):
            higher = tuple(dict.fromkeys(self.p_entry[i0[e] : i1[e]].tolist()))
            if higher not in shared:
                shared[higher] = (
                    [i for h in higher for i in self.visible_ids(h)],
                    _versions_text([self.versions[self.e_vrank[h]] for h in higher]),
                )
            by[e], text = shared[higher]
            reason[e] = f"{text} {iv[e]} completely"

        row_entry = self.entry_of
        self.status = status[row_entry]
        self.reason = reason[row_entry]
        self.overshadowed_by = by[row_entry]
        tomb = np.flatnonzero(self.c.is_tombstone & visible[row_entry])
        self.reason[tomb] = "tombstone (no data), " + self.reason[tomb]
        for e in self.chunk_results:
            if visible[e]:
                self._classify_minor(e)

    def _higher_entries(self, e: int) -> list[int]:
        seen: list[int] = []
        for p in self.pieces_over(self.e_start[e], self.e_end[e]):
            h = int(self.p_entry[p])
            if h != e and self.e_vrank[h] > self.e_vrank[e] and h not in seen:
                seen.append(h)
        return seen

    def _classify_minor(self, e: int):
        """Rows of a complete, not version-covered time chunk that has overwrite segments."""
        rows, res = self.chunk_results[e]
        higher = None
        for j, r in enumerate(rows):
            g = res.group[j]
            if res.state[j] == tm.STANDBY:
                size = "unknown" if res.g_size[g] < 0 else str(res.g_size[g])
                self.status[r] = STATUS_STANDBY
                self.reason[r] = (
                    f"atomic update group incomplete ({res.g_count[g]} of {size}); older generation stays visible"
                )
            elif res.state[j] == tm.OVERSHADOWED:
                over = res.overshadowing_groups(g)
                members = np.isin(res.group, over)
                ids = [str(x) for x in self.seg_id[rows[members]]]
                texts = [
                    f"minor version {res.g_minor[o]} of root range [{res.g_start[o]}, {res.g_end[o]}) is complete"
                    for o in over
                ]
                if self.e_max[e] > self.e_vrank[e]:
                    if higher is None:
                        higher = self._higher_entries(e)
                    ids += [i for h in higher for i in self.visible_ids(h)]
                    texts.append(f"{_versions_text([self.versions[self.e_vrank[h]] for h in higher])} the rest")
                self.status[r] = STATUS_OVERSHADOWED
                self.reason[r] = "; ".join(texts)
                self.overshadowed_by[r] = ids

    def _incomplete_detail(self, e: int) -> str:
        if e in self.chunk_results:
            return self.chunk_results[e][1].incomplete_detail
        rows = self.rows_of(e)
        c = self.c
        numbered = rows[(c.kind[rows] == tm.KIND_NUMBERED) & (c.n_core[rows] > 0)]
        if len(numbered):
            n_core = int(c.n_core[numbered[0]])
            present = len(np.unique(c.part[numbered][c.part[numbered] < n_core]))
            return f"core partitions incomplete ({present} of {n_core} present)"
        return "visible partitions do not form a complete chain (PartitionHolder.isComplete)"

    # ---- explain ---------------------------------------------------------------------------

    def explain(self, r: int) -> dict:
        c = self.c
        e = int(self.entry_of[r])
        start, end = int(c.start[r]), int(c.end[r])
        group = {
            "root_range": [int(c.root_start[r]), int(c.root_end[r])],
            "minor_version": int(c.minor[r]),
            "size": int(c.aug_size[r]),
            "present": 1,
            "state": tm.STATE_NAMES[self.state[r]],
        }
        minor_by: list[str] = []
        if e in self.chunk_results:
            rows, res = self.chunk_results[e]
            j = int(np.flatnonzero(rows == r)[0])
            g = res.group[j]
            group["present"] = int(res.g_count[g])
            over = res.overshadowing_groups(g)
            minor_by = [str(x) for x in self.seg_id[rows[np.isin(res.group, over)]]]
        pieces, uncovered, cursor = [], [], start
        for p in self.pieces_over(start, end):
            ps, pe, h = max(int(self.p_start[p]), start), min(int(self.p_end[p]), end), int(self.p_entry[p])
            if ps > cursor:
                uncovered.append([cursor, ps])
            cursor = pe
            cmp = self.e_vrank[h] - self.e_vrank[e]
            pieces.append(
                {
                    "start_ms": ps,
                    "end_ms": pe,
                    "interval": _fmt_interval(ps, pe),
                    "version": self.versions[self.e_vrank[h]],
                    "segment_ids": list(self.visible_ids(h)),
                    "relation": "higher" if cmp > 0 else ("own" if h == e else "lower"),
                }
            )
        if cursor < end:
            uncovered.append([cursor, end])
        return {
            "segment_id": str(self.seg_id[r]),
            "status": self.status[r],
            "reason": self.reason[r],
            "overshadowed_by": list(self.overshadowed_by[r]),
            "interval": _fmt_interval(start, end),
            "start_ms": start,
            "end_ms": end,
            "version": str(c.version[r]),
            "time_chunk_complete": bool(self.e_complete[e]),
            "time_chunk_incomplete_reason": "" if self.e_complete[e] else self._incomplete_detail(e),
            "atomic_update_group": group,
            "complete_timeline": pieces,
            "uncovered": uncovered,
            "minor_overshadowed_by": minor_by,
        }
