"""Druid's ``CostBalancerStrategy`` cost, vectorised with numpy, and the server ranking order.

Source: ALGORITHM.md, section "Best servers (top B)"; Druid
``org.apache.druid.server.coordinator.balancer.CostBalancerStrategy`` (``intervalCost``,
``computeJointSegmentsCost``, ``computePlacementCost``, ``getCostComputeInterval``).

Units: instants are epoch milliseconds (int64, UTC). Costs are Druid's unnormalised costs (float64):
the integral of ``exp(-lambda * |x - y|)`` over the two intervals with time in hours and
``lambda = ln 2 / 24 h`` (24-hour half-life), doubled for two segments of the same datasource.

Determinism: sums are exactly rounded (``math.fsum``), so a placement cost does not depend on the
order of the projected segments or on how identical intervals are grouped into counts; two servers
with the same contents always tie exactly. Every cost is computed element-wise by the same numpy
expressions, so the Spark job (``ranking.py``) and ``ranking.rank_one`` give bit-identical numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

HALF_LIFE_HOURS = 24.0
LAMBDA = math.log(2) / HALF_LIFE_HOURS  # per hour
INV_LAMBDA_SQUARE = 1.0 / (LAMBDA * LAMBDA)
MILLIS_IN_HOUR = 3_600_000.0
MILLIS_FACTOR = MILLIS_IN_HOUR / LAMBDA  # ms per unit of lambda-scaled time (intervalCost's unit)

DAY_MS = 86_400_000
COST_WINDOW_MS = 45 * DAY_MS  # only segments overlapping [start - 45 d, end + 45 d) count

# Druid's Intervals.ETERNITY = [Long.MIN_VALUE / 2, Long.MAX_VALUE / 2) (JodaUtils.MIN/MAX_INSTANT).
ETERNITY_START_MS = -(2**62)
ETERNITY_END_MS = 2**62 - 1

_SPLITTER = 134_217_729.0  # 2**27 + 1, Veltkamp split of a float64 into two 26-bit halves


def _exp(x: np.ndarray) -> np.ndarray:
    # One place for exp, always on a fresh contiguous float64 array (same code path per element).
    return np.exp(np.array(x, dtype=np.float64, order="C"))


def _disjoint_cost(x1: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """Cost of X = [0, x1) and Y = [y0, y1) when ``x1 <= y0`` (no overlap), lambda = 1.

    Druid's formula ``(e^-y1 - e^-y0) - (e^(x1-y1) - e^(x1-y0))``; 0 when ``x1 == 0`` or ``y0 == y1``
    (Druid's early return, which the recursive calls of the overlapping case rely on).
    """
    value = (_exp(-y1) - _exp(-y0)) - (_exp(x1 - y1) - _exp(x1 - y0))
    return np.where((x1 == 0) | (y1 == y0), 0.0, value)


def interval_cost(x1, y0, y1):
    """Druid's ``intervalCost(x1, y0, y1)``: joint cost of X = [0, x1) and Y = [y0, y1), lambda = 1.

    ``cost(X, Y) = integral over x in X, y in Y of exp(-|x - y|)``. Arguments are in lambda-scaled
    time (ms / ``MILLIS_FACTOR``, i.e. hours * ln2 / 24), relative to the start of X.

    Args:
        x1: end of X (>= 0), scalar or float64 array.
        y0, y1: start and end of Y (``y1 >= y0``), scalars or float64 arrays; all three broadcast.

    Returns:
        float64 ndarray of the broadcast shape (a 0-d array for scalar inputs; ``float()`` it).
        Same branches and operation order as Druid, so values agree with Druid to ~1 ulp of exp.
    """
    x1, y0, y1 = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (x1, y0, y1)))
    with np.errstate(over="ignore", invalid="ignore"):
        # cost(X, Y) = cost(Y, X): swap so that Y starts at or after X (y0 >= 0).
        swap = y0 < 0
        sx1 = np.where(swap, y1 - y0, x1)
        sy1 = np.where(swap, x1 - y0, y1)
        sy0 = np.where(swap, -y0, y0)
        # Overlap: X = [A)[B)[C) or [A)[B) with Y over B (and C); cost = c(A,Y) + c(B,C) + c(B,B).
        y1_inside = sy1 <= sx1
        beta = np.where(y1_inside, sy1 - sy0, sx1 - sy0)
        gamma = np.where(y1_inside, sx1 - sy0, sy1 - sy0)
        overlapping = _disjoint_cost(sy0, sy0, sy1) + _disjoint_cost(beta, beta, gamma) + 2 * (beta + _exp(-beta) - 1)
        result = np.where(sy0 < sx1, overlapping, _disjoint_cost(sx1, sy0, sy1))
    return np.where((x1 == 0) | (y1 == y0), 0.0, result)


def joint_cost(a_start_ms, a_end_ms, a_datasource, b_start_ms, b_end_ms, b_datasource) -> np.ndarray:
    """Druid's ``computeJointSegmentsCost(a, b)``, vectorised (all six arguments broadcast).

    Args:
        a_start_ms, a_end_ms: int or int64 arrays, interval(s) of segment A (epoch ms, end >= start).
        a_datasource: str or str array, datasource(s) of A.
        b_start_ms, b_end_ms: int64 arrays (or ints), intervals of the B segments.
        b_datasource: str array (or str), datasources of the B segments.

    Returns:
        float64 ndarray, ``INV_LAMBDA_SQUARE * intervalCost(...)``, times 2 where B's datasource
        equals A's. No 45-day window is applied here (see ``placement_cost``). Each element is
        computed by the same float64 operations as Druid (longs converted to double first).
    """
    same = np.asarray(b_datasource, dtype=object) == np.asarray(a_datasource, dtype=object)
    return joint_cost_same(a_start_ms, a_end_ms, b_start_ms, b_end_ms, same)


def joint_cost_same(a_start_ms, a_end_ms, b_start_ms, b_end_ms, same) -> np.ndarray:
    """:func:`joint_cost` with the datasource comparison given: ``same`` (bool, broadcast) is True
    where B's datasource is A's (the doubled weight). Same float64 operations, same values."""
    t0 = np.asarray(a_start_ms, dtype=np.int64).astype(np.float64)
    x1 = (np.asarray(a_end_ms, dtype=np.int64).astype(np.float64) - t0) / MILLIS_FACTOR
    y0 = (np.asarray(b_start_ms, dtype=np.int64).astype(np.float64) - t0) / MILLIS_FACTOR
    y1 = (np.asarray(b_end_ms, dtype=np.int64).astype(np.float64) - t0) / MILLIS_FACTOR
    return INV_LAMBDA_SQUARE * interval_cost(x1, y0, y1) * np.where(same, 2.0, 1.0)


def in_cost_window(seg_start_ms, seg_end_ms, proj_start_ms, proj_end_ms) -> np.ndarray:
    """Bool array: which projected intervals overlap ``[seg_start - 45 d, seg_end + 45 d)``.

    Overlap as Joda's ``Interval.overlaps``: ``proj_start < window_end and proj_end > window_start``.
    Druid uses the segment interval itself as the window for an eternity segment; since no interval
    reaches past eternity, the widened window selects the same segments.
    """
    lo = int(seg_start_ms) - COST_WINDOW_MS
    hi = int(seg_end_ms) + COST_WINDOW_MS
    return (np.asarray(proj_start_ms, dtype=np.int64) < hi) & (np.asarray(proj_end_ms, dtype=np.int64) > lo)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLITTER * a
    hi = c - (c - a)
    return hi, a - hi


def exact_products(terms: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's two-product: float64 arrays ``(p, e)`` with ``p + e == terms * counts`` exactly.

    ``counts`` are integers below 2**53. Exact unless a product under/overflows (costs here lie
    between ~1e-30 and ~1e15, far from both limits).
    """
    terms = np.ascontiguousarray(terms, dtype=np.float64)
    counts = np.ascontiguousarray(counts, dtype=np.float64)
    p = terms * counts
    th, tl = _split(terms)
    ch, cl = _split(counts)
    e = ((th * ch - p) + th * cl + tl * ch) + tl * cl
    return p, e


def exact_sum(terms, counts=None, minus: Iterable[float] = ()) -> float:
    """Exactly rounded ``sum(terms * counts) - sum(minus)`` (``math.fsum``), order independent.

    Args:
        terms: float64 array of costs. counts: optional int array (same length), multiplicities.
        minus: floats to subtract exactly (used to leave one copy of a segment out).

    Returns:
        float; ``+0.0`` (never ``-0.0``) for an exact zero.
    """
    terms = np.asarray(terms, dtype=np.float64)
    if counts is None:
        parts = terms.tolist()
    else:
        p, e = exact_products(terms, counts)
        parts = p.tolist() + e.tolist()
    parts.extend(-float(m) for m in minus)
    return math.fsum(parts) + 0.0


_BUCKET_BITS = 26
_MANTISSA_BITS = 53
_MIN_FREXP_EXP = -1021 + _MANTISSA_BITS
_MAX_FREXP_EXP = 1023 - _MANTISSA_BITS - _BUCKET_BITS
_MAX_EXACT_TERMS = 1 << (_MANTISSA_BITS - _BUCKET_BITS - 2)


def exact_sums(terms, counts, group, n: int, minus=None) -> list[float]:
    """:func:`exact_sum` of many groups at once: for each ``g`` in ``range(n)``, the exactly rounded
    ``sum(terms * counts)`` over the rows whose ``group`` is ``g``, less ``minus[g]``.

    Every product is split exactly (:func:`exact_products`), every float into an integer mantissa
    and a power of two, and the mantissas are summed per group and power of two in float64 by
    ``numpy.bincount``, which is exact here: every part is an integer below 2**27 and no bucket's
    sum reaches 2**53. Each group's buckets, each an exact float, are then added by ``math.fsum``.
    Same values as :func:`exact_sum` group by group, in any row order.

    Args:
        terms: float64 array (length m). counts: int array (length m) or None (all 1).
        group: int array (length m), each in ``[0, n)``. minus: float64 array (length n) or None.

    Returns:
        list of n floats, ``+0.0`` for an exact zero.
    """
    terms = np.asarray(terms, dtype=np.float64)
    group = np.asarray(group, dtype=np.int64)
    if counts is None:
        values, groups = terms, group
    else:
        p, e = exact_products(terms, counts)
        values, groups = np.concatenate([p, e]), np.concatenate([group, group])
    if minus is not None:
        values = np.concatenate([values, -np.asarray(minus, dtype=np.float64)])
        groups = np.concatenate([groups, np.arange(n, dtype=np.int64)])
    keep = values != 0
    values, groups = values[keep], groups[keep]
    if not len(values):
        return [0.0] * n
    mantissas, exponents = np.frexp(values)
    if exponents.min() < _MIN_FREXP_EXP or exponents.max() > _MAX_FREXP_EXP or len(values) >= _MAX_EXACT_TERMS:
        return [math.fsum(values[groups == g].tolist()) + 0.0 for g in range(n)]
    whole = (mantissas * float(1 << _MANTISSA_BITS)).astype(np.int64)
    power = exponents.astype(np.int64) - _MANTISSA_BITS
    low_power = int(power.min())
    span = int(power.max()) + _BUCKET_BITS - low_power + 1
    base = groups * span - low_power
    buckets = np.bincount(
        np.concatenate([base + power + _BUCKET_BITS, base + power]),
        weights=np.concatenate([whole >> _BUCKET_BITS, whole & ((1 << _BUCKET_BITS) - 1)]).astype(np.float64),
        minlength=n * span,
    )
    at = np.flatnonzero(buckets)
    parts = np.ldexp(buckets[at], (at % span + low_power).astype(np.int32)).tolist()
    bounds = np.searchsorted(at, np.arange(n + 1, dtype=np.int64) * span).tolist()
    return [math.fsum(parts[bounds[g] : bounds[g + 1]]) + 0.0 for g in range(n)]


_SLICE_BITS = 26
_MAX_SLICES = 16
_MAX_GROUP_WEIGHT = 1 << (_MANTISSA_BITS - _SLICE_BITS)
"""Bound of a group's rows times the largest count in :func:`exact_gathered_sums`: each slice is
below 2**26, so every sum of a group's slices times counts stays below 2**53, exact in float64."""


def exact_gathered_sums(values, index, counts, group, n: int, minus=None) -> list[float]:
    """:func:`exact_sums` of ``values[index]`` (each value shared by many rows): for each ``g`` in
    ``range(n)`` the exactly rounded ``sum(values[index] * counts)`` over the rows whose ``group``
    is ``g``, less ``minus[g]``; the same floats, computed on integer slices.

    Each distinct value is written exactly as an integer times a power of two common to all of them,
    cut into 26-bit slices (:func:`_slice_table`); the rows make a sparse matrix (group x value,
    their counts), which times the slices (value x slice) gives every group's slice sums at once
    (``scipy.sparse``; exact: every product and every sum is an integer below 2**53); each group's
    slice sums, scaled by their powers of two, and ``-minus[g]`` are added by ``math.fsum``. Falls
    back to :func:`exact_sums` when the values span more than 16 slices, lie where the powers of
    two would not stay exact, or a group's rows times the largest count reach 2**27.

    Args:
        values: float64 array (length v). index: int array (length m), each in ``[0, v)``.
        counts: non-negative int array (length m). group: int array (length m), non-decreasing,
            each in ``[0, n)``. minus: float64 array (length n) or None.

    Returns:
        list of n floats, ``+0.0`` for an exact zero.
    """
    import scipy.sparse  # 0.2-0.3 s to import: only the druid coordinator's cost strategy needs it

    values = np.asarray(values, dtype=np.float64)
    index = np.asarray(index, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)

    def fallback() -> list[float]:
        return exact_sums(values[index], counts, group, n, minus)

    if not len(index):
        return fallback()
    rows_per_group = np.bincount(group, minlength=n)
    sliced = _slice_table(values)
    if sliced is None or int(rows_per_group.max()) * max(int(counts.max()), 1) >= _MAX_GROUP_WEIGHT:
        return fallback()
    table, base = sliced
    indptr = np.concatenate([[0], np.cumsum(rows_per_group)])
    rows = scipy.sparse.csr_matrix((counts.astype(np.float64), index, indptr), shape=(n, len(values)))
    return _slice_sums(np.asarray(rows @ table.T), base, minus)


def exact_wide_sums(values, columns, matrix, rows, weights, minus=None) -> list[float] | None:
    """For each ``rows[g]`` the exactly rounded ``sum(values * matrix[rows[g], columns])``, less
    ``minus[g]``: :func:`exact_gathered_sums` with the counts as the rows of a dense matrix, as one
    dense (BLAS) product of the whole matrix with the slices (:func:`_slice_table`) scattered at
    their columns (zeros elsewhere: no copy of the rows), exact because every partial sum is an
    integer below 2**53. None where a picked row's weight (``weights``: its sum over every column,
    a bound of its sum over ``columns``) reaches 2**27, or the slices do not hold, or there is no
    row or no non-zero value: the caller sums another way.

    Args:
        values: float64 (v,). columns: int64 (v,) indices into ``matrix``'s columns.
        matrix: float64 (r, c) of non-negative integers. rows: n indices into its rows.
        weights: float64 (r,). minus: float64 (n,) or None.

    Returns:
        list of n floats, ``+0.0`` for an exact zero; or None.
    """
    values = np.asarray(values, dtype=np.float64)
    if not len(values) or not len(rows):
        return None
    if float(weights[rows].max()) >= _MAX_GROUP_WEIGHT:
        return None
    sliced = _slice_table(values)
    if sliced is None:
        return None
    table, base = sliced
    wide = np.zeros((table.shape[0], matrix.shape[1]))
    wide[:, columns] = table
    return _slice_sums((matrix @ wide.T)[rows], base, minus)


def _slice_table(values: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``values`` (float64 (v,)) written exactly as integers times ``2**base``, cut into 26-bit
    slices: ``(table, base)``, ``table`` float64 (slices, v), slice ``k`` worth ``2**(base + 26 k)``;
    None when no value is non-zero, they span more than 16 slices, or the powers of two would not
    stay exact."""
    mantissas, exponents = np.frexp(values)
    whole = (mantissas * float(1 << _MANTISSA_BITS)).astype(np.int64)
    nonzero = whole != 0
    if not nonzero.any():
        return None
    low = int(exponents[nonzero].min())
    high = int(exponents[nonzero].max())
    slices = -(-(high - low + _MANTISSA_BITS) // _SLICE_BITS)
    base = low - _MANTISSA_BITS  # the power of two of the integers' unit
    if slices > _MAX_SLICES or base < -1021 + _MANTISSA_BITS or base + slices * _SLICE_BITS > 1023 - _MANTISSA_BITS:
        return None
    magnitude = np.abs(whole)
    sign = np.where(whole < 0, -1.0, 1.0)
    shift = np.where(nonzero, exponents - low, 0).astype(np.int64)
    mask = (1 << _SLICE_BITS) - 1
    table = np.empty((slices, len(values)))
    for k in range(slices):
        down = k * _SLICE_BITS - shift  # the slice's lowest bit, counted in the mantissa's bits
        right = (magnitude >> np.clip(down, 0, 62)) & mask
        up = np.clip(-down, 0, _SLICE_BITS)
        left = (magnitude & ((1 << (_SLICE_BITS - up)) - 1)) << up
        table[k] = sign * np.where(down >= 0, np.where(down < _MANTISSA_BITS, right, 0), left)
    return table, base


def _slice_sums(sums: np.ndarray, base: int, minus) -> list[float]:
    """Each row of ``sums`` (float64 (n, slices): exact integer slice sums of :func:`_slice_table`'s
    ``base``) scaled by its slices' powers of two, less ``minus[g]``, added by ``math.fsum``."""
    powers = base + _SLICE_BITS * np.arange(sums.shape[1], dtype=np.int64)
    parts = np.ldexp(sums, powers).tolist()
    minus_list = [0.0] * len(parts) if minus is None else [-float(x) for x in np.asarray(minus, dtype=np.float64)]
    return [math.fsum([*row, m]) + 0.0 for row, m in zip(parts, minus_list)]


def placement_cost(
    seg_start_ms,
    seg_end_ms,
    seg_datasource,
    proj_start_ms,
    proj_end_ms,
    proj_datasource,
    proj_count=None,
) -> float:
    """Cost of placing a segment on one server: Druid's ``computePlacementCost``.

    Sum of ``joint_cost`` of the segment with every projected segment of the server (served +
    queued loads - queued drops) that overlaps ``[seg_start - 45 d, seg_end + 45 d)``.
    The segment itself must already be left out by the caller (ALGORITHM.md: the self joint cost
    is subtracted when the server serves or loads it, which equals leaving it out).

    Args:
        seg_start_ms, seg_end_ms: int epoch ms; seg_datasource: str.
        proj_start_ms, proj_end_ms: int64 arrays (epoch ms); proj_datasource: str array; all length n.
        proj_count: optional int64 array, length n: how many projected segments share that row's
            interval and datasource (the sum counts each row that many times).

    Returns:
        float, exactly rounded sum (0.0 when nothing overlaps).
    """
    mask = in_cost_window(seg_start_ms, seg_end_ms, proj_start_ms, proj_end_ms)
    if not mask.any():
        return 0.0
    terms = joint_cost(
        seg_start_ms,
        seg_end_ms,
        seg_datasource,
        np.asarray(proj_start_ms, dtype=np.int64)[mask],
        np.asarray(proj_end_ms, dtype=np.int64)[mask],
        np.asarray(proj_datasource, dtype=object)[mask],
    )
    counts = None if proj_count is None else np.asarray(proj_count, dtype=np.int64)[mask]
    return exact_sum(terms, counts)


def rank_key(cost: float, available_bytes: int, server: str) -> tuple[float, int, str]:
    """Sort key of the best-servers order: cost ascending, more available bytes, smaller name.

    Raises:
        ValueError: if ``cost`` is NaN (NaN has no place in a total order).
    """
    if math.isnan(cost):
        raise ValueError(f"placement cost of server {server!r} is NaN")
    return (cost + 0.0, -int(available_bytes), server)


def rank_servers(costs: Mapping[str, float], available: Mapping[str, int]) -> list[str]:
    """Servers of ``costs`` best first (ALGORITHM.md "Best servers (top B)").

    Args:
        costs: server -> placement cost. available: server -> available bytes
            (``max_size - (current_size + queued and scheduled loads)``).

    Raises:
        ValueError: a server of ``costs`` has no available bytes, or a cost is NaN.
    """
    missing = sorted(set(costs) - set(available))
    if missing:
        raise ValueError(f"no available bytes for servers {missing}")
    return sorted(costs, key=lambda s: rank_key(costs[s], available[s], s))


class Descending(str):
    """A string that sorts in reverse order ("larger name first"), for sort keys."""

    __slots__ = ()

    def __lt__(self, other):  # type: ignore[override]
        return str.__gt__(self, other)

    def __gt__(self, other):  # type: ignore[override]
        return str.__lt__(self, other)

    def __le__(self, other):  # type: ignore[override]
        return str.__ge__(self, other)

    def __ge__(self, other):  # type: ignore[override]
        return str.__le__(self, other)


def drop_key(cost: float, available_bytes: int, server: str, decommissioning: bool = False) -> tuple:
    """Sort key of the server to drop from first: the reverse of :func:`rank_key` (highest
    placement cost, then fewer available bytes, then the larger name), with decommissioning
    servers first when ``decommissioning`` is given (stage 12). Comparable across tiers
    (ALGORITHM.md "Best servers", "Moves and callbacks", stage 12).

    Raises:
        ValueError: if ``cost`` is NaN.
    """
    if math.isnan(cost):
        raise ValueError(f"placement cost of server {server!r} is NaN")
    return (not decommissioning, -float(cost), int(available_bytes), Descending(server))
