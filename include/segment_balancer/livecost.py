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

from .cost import COST_WINDOW_MS, INV_LAMBDA_SQUARE, MILLIS_FACTOR, joint_cost


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
    def build(cls, datasource: np.ndarray, start_ms: np.ndarray, end_ms: np.ndarray) -> tuple["IntervalKeys", np.ndarray]:
        """Distinct keys of the per-segment arrays (str datasource, int64 start/end, length N).

        Returns ``(keys, key_of_segment)``: ``key_of_segment`` int64 (N,) indexes ``keys``. Keys are
        in (datasource name, start, end) order, so the same segments always give the same keys.
        """
        names, ds_code = np.unique(np.asarray(datasource, dtype=object).astype(str), return_inverse=True)
        table = np.stack([ds_code.astype(np.int64), np.asarray(start_ms, np.int64), np.asarray(end_ms, np.int64)], axis=1)
        distinct, key_of = np.unique(table, axis=0, return_inverse=True)
        keys = cls(distinct[:, 0].astype(np.int32), distinct[:, 1].copy(), distinct[:, 2].copy(), tuple(names.tolist()))
        return keys, key_of.reshape(-1).astype(np.int64)

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
    (end instants for the intervals before a segment, start instants for those after)."""

    def __init__(self, n_servers: int, instants: np.ndarray):
        self.instants = instants  # int64, sorted, distinct
        self.sums = np.zeros((n_servers, len(instants)), dtype=np.float64)

    def add(self, server: int, slot: int, value: float) -> None:
        self.sums[server, slot] += value

    def window(self, lo_ms: int, hi_ms: int, lo_open: bool) -> slice:
        """Slots with instant in ``(lo, hi]`` (``lo_open``) or ``[lo, hi)``."""
        if lo_open:
            return slice(int(np.searchsorted(self.instants, lo_ms, "right")), int(np.searchsorted(self.instants, hi_ms, "right")))
        return slice(int(np.searchsorted(self.instants, lo_ms, "left")), int(np.searchsorted(self.instants, hi_ms, "left")))


class TierCosts:
    """Live placement costs of a tier: integer counts of projected segments per (server, key), and
    the instant sums that give every server's cost for a segment in a few dot products.

    Args:
        keys: the universe of ``(datasource, interval)`` keys (:class:`IntervalKeys`).
        n_servers: S, the tier's servers (indexed 0 … S-1 by the caller).

    ``add(server, key, +1/-1)`` is the one mutator (a load or a drop counts at once, ALGORITHM.md
    "Projected state"). ``costs(key, holders)`` returns float64 (S,): Druid's placement cost of a
    segment of ``key`` on every server, leaving the segment itself out on ``holders`` (servers that
    serve or are loading it: the self joint cost is subtracted).
    """

    def __init__(self, keys: IntervalKeys, n_servers: int):
        self.keys = keys
        self.n_servers = n_servers
        k = len(keys)
        self.counts = np.zeros((n_servers, k), dtype=np.int32)
        self._decay = _decay_factor(keys.start_ms, keys.end_ms)
        self._ends = _InstantSums(n_servers, np.unique(keys.end_ms))
        self._starts = _InstantSums(n_servers, np.unique(keys.start_ms))
        self._end_slot = np.searchsorted(self._ends.instants, keys.end_ms)
        self._start_slot = np.searchsorted(self._starts.instants, keys.start_ms)
        # per datasource: the same sums over that datasource's keys only (the doubled weight)
        self._ds_ends, self._ds_starts, self._ds_end_slot, self._ds_start_slot = [], [], np.empty(k, np.int64), np.empty(k, np.int64)
        for d in range(len(keys.datasources)):
            mine = keys.datasource == d
            ends, starts = _InstantSums(n_servers, np.unique(keys.end_ms[mine])), _InstantSums(n_servers, np.unique(keys.start_ms[mine]))
            self._ds_end_slot[mine] = np.searchsorted(ends.instants, keys.end_ms[mine])
            self._ds_start_slot[mine] = np.searchsorted(starts.instants, keys.start_ms[mine])
            self._ds_ends.append(ends)
            self._ds_starts.append(starts)
        # keys by start, for the overlapping ones: short keys found by a start range, long ones always checked
        self._short_span_ms = 31 * 86_400_000
        length = keys.end_ms - keys.start_ms
        self._long = np.flatnonzero(length > self._short_span_ms)
        short = np.flatnonzero(length <= self._short_span_ms)
        self._short = short[np.argsort(keys.start_ms[short], kind="stable")]
        self._short_starts = keys.start_ms[self._short]

    def add(self, server: int, key: int, delta: int) -> None:
        """Count ``delta`` (+1 a load or a served replica, -1 a drop) segments of ``key`` on ``server``.

        Raises ``ValueError`` if a count would go negative (a drop of a segment the server lacks).
        """
        if self.counts[server, key] + delta < 0:
            raise ValueError(f"server {server} has no projected segment of key {key} to drop")
        self.counts[server, key] += delta
        value = delta * self._decay[key]
        d = self.keys.datasource[key]
        self._ends.add(server, self._end_slot[key], value)
        self._starts.add(server, self._start_slot[key], value)
        self._ds_ends[d].add(server, self._ds_end_slot[key], value)
        self._ds_starts[d].add(server, self._ds_start_slot[key], value)

    def add_many(self, servers: np.ndarray, keys: np.ndarray) -> None:
        """Count one segment of ``keys[i]`` on ``servers[i]`` for every i (the initial state), in bulk."""
        servers, keys = np.asarray(servers, np.int64), np.asarray(keys, np.int64)
        np.add.at(self.counts, (servers, keys), 1)
        value = self._decay[keys]
        np.add.at(self._ends.sums, (servers, self._end_slot[keys]), value)
        np.add.at(self._starts.sums, (servers, self._start_slot[keys]), value)
        for d in np.unique(self.keys.datasource[keys]):
            mine = self.keys.datasource[keys] == d
            np.add.at(self._ds_ends[d].sums, (servers[mine], self._ds_end_slot[keys[mine]]), value[mine])
            np.add.at(self._ds_starts[d].sums, (servers[mine], self._ds_start_slot[keys[mine]]), value[mine])

    def _overlapping(self, a0: int, a1: int) -> np.ndarray:
        """Keys whose interval overlaps ``[a0, a1)`` (Joda ``overlaps``: ``b0 < a1 and b1 > a0``)."""
        lo = int(np.searchsorted(self._short_starts, a0 - self._short_span_ms, "left"))
        hi = int(np.searchsorted(self._short_starts, a1, "left"))
        cand = np.concatenate([self._short[lo:hi], self._long])
        k = self.keys
        return cand[(k.start_ms[cand] < a1) & (k.end_ms[cand] > a0)]

    def _side(self, sums: _InstantSums, a0: int, a1: int, before: bool) -> np.ndarray:
        if before:  # ends in (a0 - 45 d, a0]: e^(b1 - a0)
            window = sums.window(a0 - COST_WINDOW_MS, a0, lo_open=True)
            factor = np.exp(_scaled(sums.instants[window] - a0))
        else:  # starts in [a1, a1 + 45 d): e^(a1 - b0)
            window = sums.window(a1, a1 + COST_WINDOW_MS, lo_open=False)
            factor = np.exp(_scaled(a1 - sums.instants[window]))
        return sums.sums[:, window] @ factor

    def costs(self, key: int, holders: np.ndarray | None = None) -> np.ndarray:
        """Placement cost (float64, Druid's units) of a segment of ``key`` on every server.

        ``holders``: bool (S,) or None, servers whose projection already contains this segment; its
        self joint cost is left out there. Zero-length segments cost 0 everywhere (Druid).
        """
        k = self.keys
        a0, a1, d = int(k.start_ms[key]), int(k.end_ms[key]), int(k.datasource[key])
        if a1 == a0:
            return np.zeros(self.n_servers)
        disjoint = (self._side(self._ends, a0, a1, True) + self._side(self._ds_ends[d], a0, a1, True)
                    + self._side(self._starts, a0, a1, False) + self._side(self._ds_starts[d], a0, a1, False))
        disjoint *= self._decay[key]
        over = self._overlapping(a0, a1)
        pair = joint_cost(a0, a1, k.datasources[d], k.start_ms[over], k.end_ms[over],
                          np.asarray(k.datasources, dtype=object)[k.datasource[over]])
        counts = self.counts[:, over].astype(np.float64)
        if holders is not None:
            self_col = np.flatnonzero(over == key)
            counts[np.asarray(holders, bool), self_col] -= 1.0
        return INV_LAMBDA_SQUARE * disjoint + counts @ pair
