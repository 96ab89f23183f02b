"""Placement costs of one segment on every server of a tier, in closed form, against a live state.

Source: ALGORITHM.md "Best servers (top B)"; Druid ``CostBalancerStrategy.computePlacementCost``.
:mod:`.cost` evaluates Druid's joint cost pair by pair; here the same sum is kept so that a load or
a drop changes it in O(1) and ranking one segment on S servers is a few vectorised dot products.

For intervals that do not overlap, the joint cost factorises (lambda-scaled time, lambda = ln 2 / 24 h;
``len(X) = x1 - x0``)::

    B before A (b1 <= a0):  I(A, B) = e^(b1 - a0) * (1 - e^-len(A)) * (1 - e^-len(B))
    B after A  (b0 >= a1):  I(A, B) = e^(a1 - b0) * (1 - e^-len(A)) * (1 - e^-len(B))

so the cost of A on server v over the intervals that end in A's window before it is
``(1 - e^-len(A)) * sum over end instants e of e^(e - a0) * P_v[e]``, where
``P_v[e] = sum over B on v ending at e of weight(B) * (1 - e^-len(B))`` (likewise over start instants
for the intervals after A). Every factor ``e^(e - a0)`` lies in ``[e^-31.2, 1]``: 45 days is 31.2 in
lambda-scaled time, so nothing over- or underflows and no term cancels another (unlike running
sums over all of time, or a float Fenwick tree after removals). The intervals that overlap A (few:
the same hour, the day or month containing it, the eternity of an ALL-granularity segment) are
evaluated by Druid's formula (:func:`.cost.joint_cost`) times each server's integer count.
Ranking one segment costs O(S * w), where w is the number of distinct instants in its ±45-day
window (bounded by the window, not by the number of segments); an update costs O(1).

Weights: 1 for every projected segment plus 1 more for one of A's datasource (Druid's doubling),
kept as an all-datasource table and one table per datasource.
Windows as Druid: B counts when it overlaps ``[a0 - 45 d, a1 + 45 d)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from segment_balancer.planner.cost import COST_WINDOW_MS, INV_LAMBDA_SQUARE, MILLIS_FACTOR, joint_cost_same


@dataclass(frozen=True)
class IntervalKeys:
    """The distinct ``(datasource, interval)`` keys a tier's segments can have (a fixed universe).

    Attributes (all numpy arrays of length K, key ``k`` at position ``k``):
        datasource: int32 datasource code (0 … D-1); ``datasources`` names them.
        start_ms, end_ms: int64 epoch ms (``end >= start``; Druid's eternity allowed).
    """

    datasource: np.ndarray
    start_ms: np.ndarray
    end_ms: np.ndarray
    datasources: tuple[str, ...]

    @classmethod
    def build(cls, datasource: np.ndarray, start_ms: np.ndarray, end_ms: np.ndarray) -> tuple[IntervalKeys, np.ndarray]:
        """Distinct keys of the per-segment arrays (str datasource, int64 start/end, length N).

        Returns ``(keys, key_of_segment)``: ``key_of_segment`` int64 (N,) indexes ``keys``. Keys are
        in (datasource name, start, end) order, so the same segments always give the same keys.
        """
        names, ds_code = np.unique(np.asarray(datasource, dtype=object).astype(str), return_inverse=True)
        return cls.build_coded(ds_code.reshape(-1), start_ms, end_ms, tuple(names.tolist()))

    @classmethod
    def build_coded(
        cls, datasource: np.ndarray, start_ms: np.ndarray, end_ms: np.ndarray, names: tuple[str, ...]
    ) -> tuple[IntervalKeys, np.ndarray]:
        """:meth:`build` from datasource codes (int, length N) into ``names`` (sorted: codes in name
        order give the keys :meth:`build` gives for the names)."""
        used, local = np.unique(np.asarray(datasource, np.int64), return_inverse=True)
        ds, start, end = (
            local.reshape(-1).astype(np.int64),
            np.asarray(start_ms, np.int64),
            np.asarray(end_ms, np.int64),
        )
        order = np.lexsort((end, start, ds))
        ds, start, end = ds[order], start[order], end[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (ds[1:] != ds[:-1]) | (start[1:] != start[:-1]) | (end[1:] != end[:-1])
        key_of = np.empty(len(order), dtype=np.int64)
        key_of[order] = np.cumsum(first) - 1
        keys = cls(ds[first].astype(np.int32), start[first], end[first], tuple(names[int(c)] for c in used))
        return keys, key_of

    def __len__(self) -> int:
        return len(self.start_ms)


def _scaled(ms: np.ndarray) -> np.ndarray:
    """Lambda-scaled time of epoch-ms differences (float64; Druid converts longs to double first)."""
    return np.asarray(ms, dtype=np.float64) / MILLIS_FACTOR


def _decay_factor(start_ms, end_ms) -> np.ndarray:
    """``1 - e^-len`` of intervals (float64), exact near 0 (``-expm1``); 1.0 for eternity."""
    length = np.asarray(end_ms, dtype=np.float64) - np.asarray(start_ms, dtype=np.float64)
    return -np.expm1(-length / MILLIS_FACTOR)


class _InstantSums:
    """Per server, ``sum of weight * (1 - e^-len)`` of the projected keys at each distinct instant
    (end instants for the intervals before a segment, start instants for those after).

    ``instants``: int64 (I,), sorted, distinct; ``sums``: float64 (I, S) (a window is one contiguous
    block of rows); ``slot``: int64 (K,), the
    slot of every key of ``keys`` (the end or start instant), -1 for keys not counted here;
    ``lo``/``hi``: int64 (K,), every key's window of slots (ends in ``(a0 - 45 d, a0]``, or starts in
    ``[a1, a1 + 45 d)``).
    """

    def __init__(self, n_servers: int, keys: IntervalKeys, mine: np.ndarray, ends: bool):
        own = (keys.end_ms if ends else keys.start_ms)[mine]
        self.instants = np.unique(own)
        self.sums = np.zeros((len(self.instants), n_servers), dtype=np.float64)
        self.slot = np.full(len(keys), -1, dtype=np.int64)
        self.slot[mine] = np.searchsorted(self.instants, own)
        # (eternity ± 45 days, ±2**62 ± 3.9e9 ms, stays far inside int64)
        if ends:
            lo_ms, hi_ms = keys.start_ms - COST_WINDOW_MS, keys.start_ms
        else:
            lo_ms, hi_ms = keys.end_ms, keys.end_ms + COST_WINDOW_MS
        side = "right" if ends else "left"
        self.lo = np.searchsorted(self.instants, lo_ms, side)
        self.hi = np.searchsorted(self.instants, hi_ms, side)
        self.ends = ends

    def weighted(self, key: int, a0: int, a1: int) -> np.ndarray:
        """``sum over the key's window of e^(instant - a0) * sums`` (ends) or ``e^(a1 - instant) * sums``
        (starts), (S,)."""
        lo, hi = self.lo[key], self.hi[key]
        if lo == hi:
            return np.zeros(self.sums.shape[1])
        instants = self.instants[lo:hi]
        factor = np.exp(_scaled(instants - a0) if self.ends else _scaled(a1 - instants))
        return factor @ self.sums[lo:hi]


_LENGTH_GROUPS_AT_MOST = 32
""":func:`_length_groups`: at most this many groups of lengths."""


def _length_groups(lengths: np.ndarray) -> list[np.ndarray]:
    """Bool masks over ``lengths`` (int64 ms) that split them into groups: one per distinct length
    when there are at most :data:`_LENGTH_GROUPS_AT_MOST`, else that many ranges of lengths by rank
    (a group's longest bounds the window it is searched in)."""
    if not len(lengths):
        return []
    distinct = np.unique(lengths)
    if len(distinct) > _LENGTH_GROUPS_AT_MOST:
        bounds = distinct[np.linspace(0, len(distinct) - 1, _LENGTH_GROUPS_AT_MOST + 1).astype(np.int64)[1:]]
        which = np.searchsorted(bounds, lengths, "left")
    else:
        which = np.searchsorted(distinct, lengths)
    return [which == g for g in np.unique(which)]


class TierCosts:
    """Live placement costs of a tier: integer counts of projected segments per (server, key), and
    the instant sums that give every server's cost for a segment in a few dot products.

    Args:
        keys: the universe of ``(datasource, interval)`` keys (:class:`IntervalKeys`).
        n_servers: S, the tier's servers (indexed 0 … S-1 by the caller).

    ``add(server, key, +1/-1)`` is the one mutator (a load or a drop counts at once, ALGORITHM.md
    "Projected state"); ``add_many`` counts an initial state in bulk. ``costs(key, holders)``
    returns float64 (S,): Druid's placement cost of a segment of ``key`` on every server, leaving
    the segment itself out on ``holders`` (servers that serve or are loading it: the self joint
    cost is subtracted). Everything that depends on the keys only (windows, the overlapping keys
    and their pair costs) is computed once, here.
    """

    SHORT_SPAN_MS = 31 * 86_400_000  # keys up to a month long are found by a range of start instants

    def __init__(self, keys: IntervalKeys, n_servers: int):
        self.keys = keys
        self.n_servers = n_servers
        k = len(keys)
        self.counts = np.zeros((n_servers, k), dtype=np.int32)
        self._decay = _decay_factor(keys.start_ms, keys.end_ms)
        everything = np.ones(k, dtype=bool)
        self._sides = [_InstantSums(n_servers, keys, everything, ends) for ends in (True, False)]
        # per datasource: the same sums over that datasource's keys only (the doubled weight)
        self._ds_sides = [
            [_InstantSums(n_servers, keys, keys.datasource == d, ends) for ends in (True, False)]
            for d in range(len(keys.datasources))
        ]
        self._overlap_csr()

    def _overlap_csr(self) -> None:
        """Per key, the keys whose interval overlaps it (Joda ``overlaps``: ``b0 < a1 and b1 > a0``)
        and the joint cost of the pair (:func:`.cost.joint_cost_same`), as CSR arrays."""
        k = self.keys
        n_keys = len(k)
        length = k.end_ms - k.start_ms
        long_keys = np.flatnonzero(length > self.SHORT_SPAN_MS)
        short = np.flatnonzero(length <= self.SHORT_SPAN_MS)
        short = short[np.argsort(k.start_ms[short], kind="stable")]
        # Every key's overlapping keys in one order: the short ones in start order (their rank in
        # ``short``), then the long ones in key order. Short keys are taken by groups of lengths
        # (a few: a cluster's segment granularities): a key of length at most ``most`` that ends
        # after a's start starts after a's start less ``most``, and before a's end.
        keys_of, cands, ranks = [], [], []
        for group in _length_groups(length[short]):
            members = np.flatnonzero(group)
            starts = k.start_ms[short[members]]
            most = int(length[short[members]].max())
            lo = np.searchsorted(starts, k.start_ms - most, "left")
            hi = np.searchsorted(starts, k.end_ms, "left")
            n = np.maximum(hi - lo, 0)
            key = np.repeat(np.arange(n_keys, dtype=np.int64), n)
            rank = members[np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(len(key), dtype=np.int64)]
            keys_of.append(key)
            ranks.append(rank)
            cands.append(short[rank])
        keys_of.append(np.repeat(np.arange(n_keys, dtype=np.int64), len(long_keys)))
        ranks.append(np.tile(len(short) + np.arange(len(long_keys), dtype=np.int64), n_keys))
        cands.append(np.tile(long_keys.astype(np.int64), n_keys))
        key, rank, cand = (np.concatenate(x) for x in (keys_of, ranks, cands))
        keep = (k.start_ms[cand] < k.end_ms[key]) & (k.end_ms[cand] > k.start_ms[key])
        key, rank, cand = key[keep], rank[keep], cand[keep]
        order = np.lexsort((rank, key))
        a, self._over = key[order], cand[order]
        sizes = np.bincount(a, minlength=n_keys).astype(np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)])
        self._pair = joint_cost_same(
            k.start_ms[a],
            k.end_ms[a],
            k.start_ms[self._over],
            k.end_ms[self._over],
            k.datasource[a] == k.datasource[self._over],
        )
        self._pair[k.end_ms[a] == k.start_ms[a]] = 0.0
        self._self_pos = np.full(len(k), -1, dtype=np.int64)
        mine = np.flatnonzero(self._over == a)
        self._self_pos[a[mine]] = mine - self._offsets[a[mine]]

    def add(self, server: int, key: int, delta: int) -> None:
        """Count ``delta`` (+1 a load or a served replica, -1 a drop) segments of ``key`` on ``server``.

        Raises ``ValueError`` if a count would go negative (a drop of a segment the server lacks).
        """
        if self.counts[server, key] + delta < 0:
            raise ValueError(f"server {server} has no projected segment of key {key} to drop")
        self.counts[server, key] += delta
        value = delta * self._decay[key]
        for side in self._sides + self._ds_sides[self.keys.datasource[key]]:
            side.sums[side.slot[key], server] += value

    def add_many(self, servers: np.ndarray, keys: np.ndarray) -> None:
        """Count one segment of ``keys[i]`` on ``servers[i]`` for every i (the initial state), in bulk."""
        servers, keys = np.asarray(servers, np.int64), np.asarray(keys, np.int64)
        np.add.at(self.counts, (servers, keys), 1)
        value = self._decay[keys]
        for side in self._sides:
            np.add.at(side.sums, (side.slot[keys], servers), value)
        ds = self.keys.datasource[keys]
        for d in np.unique(ds):
            mine = ds == d
            for side in self._ds_sides[d]:
                np.add.at(side.sums, (side.slot[keys[mine]], servers[mine]), value[mine])

    def costs(self, key: int, holders: np.ndarray | None = None) -> np.ndarray:
        """Placement cost (float64 (S,), Druid's units) of a segment of ``key`` on every server.

        ``holders``: bool (S,) or None, servers whose projection already contains this segment; its
        self joint cost is left out there. Zero-length segments cost 0 everywhere (Druid).
        """
        k = self.keys
        a0, a1 = int(k.start_ms[key]), int(k.end_ms[key])
        if a1 == a0:
            return np.zeros(self.n_servers)
        disjoint = np.zeros(self.n_servers)
        for side in self._sides + self._ds_sides[k.datasource[key]]:
            disjoint = disjoint + side.weighted(key, a0, a1)
        lo, hi = self._offsets[key], self._offsets[key + 1]
        counts = self.counts[:, self._over[lo:hi]].astype(np.float64)
        if holders is not None and self._self_pos[key] >= 0:
            counts[np.asarray(holders, bool), self._self_pos[key]] -= 1.0
        return (INV_LAMBDA_SQUARE * self._decay[key]) * disjoint + counts @ self._pair[lo:hi]


def total_cost(datasource: np.ndarray, start_ms: np.ndarray, end_ms: np.ndarray, server: np.ndarray) -> float:
    """Total placement cost of a cluster (Druid's units): over every server, the joint cost of
    every unordered pair of distinct segments it holds, summed (Druid's ``CostBalancerStrategy``
    joint cost, doubled for one datasource; pairs more than 45 days apart count as Druid counts
    them in a placement cost, not at all). Lower is better spread; it is what the cost strategy
    lowers one move at a time.

    Args: one entry per replica (a segment on a server), numpy arrays of length N: ``datasource``
    (str), ``start_ms`` and ``end_ms`` (int64 epoch ms), ``server`` (str). Returns 0.0 for N = 0.
    """
    if len(server) == 0:
        return 0.0
    ds_names, ds_code = np.unique(np.asarray(datasource, dtype=object).astype(str), return_inverse=True)
    names, srv = np.unique(np.asarray(server, dtype=object).astype(str), return_inverse=True)
    return total_cost_coded(
        ds_code.reshape(-1), tuple(ds_names.tolist()), start_ms, end_ms, srv.reshape(-1), len(names)
    )


def total_cost_coded(
    datasource: np.ndarray,
    datasource_names: tuple[str, ...],
    start_ms: np.ndarray,
    end_ms: np.ndarray,
    server: np.ndarray,
    n_servers: int,
) -> float:
    """:func:`total_cost` from codes: ``datasource`` (int, length N) into ``datasource_names``
    (sorted), ``server`` (int, length N) in ``range(n_servers)``, the servers numbered in the order
    of their names (the order :func:`total_cost` sums them in: the same float)."""
    if len(server) == 0:
        return 0.0
    keys, key_of = IntervalKeys.build_coded(datasource, start_ms, end_ms, datasource_names)
    costs = TierCosts(keys, n_servers)
    costs.add_many(np.asarray(server, np.int64), key_of)
    everywhere = np.ones(n_servers, dtype=bool)
    total = 0.0
    for key in np.unique(key_of):
        # each replica of the key on v pays the others on v: its cost with itself left out
        total += float(costs.counts[:, key].astype(np.float64) @ costs.costs(int(key), everywhere))
    return total / 2.0
