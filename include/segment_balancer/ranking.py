"""Placement-cost ranking of candidate servers: the start-of-run Spark job and the plain-Python path.

Source: ALGORITHM.md, section "Best servers (top B)"; Druid ``CostBalancerStrategy``
(``computePlacementCost``, ``orderServersByPlacementCost``). Costs come from ``cost.py``.

``start_of_run_rankings`` (Spark, used by prepare) and ``rank_one`` (plain Python, used by ``explain``
and by the balancing stages against the live projected state) give bit-identical costs: both sum
exactly (``math.fsum``) the same element-wise joint costs, and leave the segment itself out.

How the Spark job scales (the driver collects only the per-server table of candidate servers):

1. Work is grouped by *time chunk* = distinct (tier, datasource, start_ms, end_ms) of the pairs: all
   partitions of a chunk share their costs except for the self term.
2. Projected segments are counted per (tier, datasource, start_ms, end_ms) and server; one row per
   projected interval carries the servers and their counts (the joint cost of a chunk with an
   interval does not depend on the server, so it is computed once per (chunk, interval)).
3. The 45-day-window overlap becomes an equi-join on time buckets (``bucket_days`` wide, clamped to
   years 1900-2200 so that eternity segments explode into a bounded number of rows). A matching
   (chunk, projected interval) pair shares a range of buckets; it is kept only in the first of
   them, so no deduplication shuffle is needed.
4. ``mapInPandas`` over the matches partitioned and sorted by chunk (many chunks per Arrow batch,
   vectorised): numpy joint costs, then per (chunk, server) an exactly rounded sum ``full`` of
   term x count
   and, for servers that project a segment of the chunk, ``excl`` = that sum minus one copy of the
   chunk's own term (exact, since the sum is exact). A pair uses ``excl`` on the servers that
   project the pair's own segment (its *holders*) and ``full`` elsewhere.
5. The candidates of each pair are sorted in SQL by (cost, -available_bytes, server), the order of
   ``cost.rank_key``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .cost import COST_WINDOW_MS, DAY_MS, exact_products, exact_sum, in_cost_window, joint_cost, rank_servers

BUCKET_DAYS = 90
# Bucket indexes are computed on instants clamped to [1900-01-01, 2200-01-01) (epoch ms).
BUCKET_CLAMP_LO_MS = -2_208_988_800_000
BUCKET_CLAMP_HI_MS = 7_258_118_400_000

RANKINGS_SCHEMA = "idx long, tier string, servers array<string>, costs array<double>"
_CHUNK_KEY = ["tier", "datasource", "start_ms", "end_ms"]
_CHUNK_COSTS_SCHEMA = (
    "tier string, datasource string, start_ms long, end_ms long, "
    "cost_servers array<string>, full array<double>, excl array<double>"
)


def _bucket_range(start_col, end_col, width_ms: int):
    """Spark Columns (first, last) bucket of the instants of ``[start, end)`` (last >= first).

    The index is a monotone function of the instant (clamped to 1900-2200), which is all the join
    needs: two overlapping intervals share the bucket of any common instant.
    """
    from pyspark.sql import functions as F

    def idx(col):
        clamped = F.least(F.greatest(col, F.lit(BUCKET_CLAMP_LO_MS)), F.lit(BUCKET_CLAMP_HI_MS))
        return F.floor((clamped - F.lit(BUCKET_CLAMP_LO_MS)) / F.lit(width_ms)).cast("long")

    first = idx(start_col)
    return first, F.greatest(first, idx(end_col - F.lit(1)))


def _chunk_costs(pdf: pd.DataFrame) -> pd.DataFrame:
    """Per-chunk cost table of complete chunks: one output row per chunk.

    Input: rows sorted by chunk key with columns tier, datasource, start_ms, end_ms (the chunk),
    p_datasource, p_start_ms, p_end_ms (a projected interval in the chunk's window), p_servers
    (array of servers projecting it) and p_counts (array, how many segments of it each projects).
    Output (``_CHUNK_COSTS_SCHEMA``): per chunk the servers, their exactly rounded sum ``full``, and
    ``excl`` = ``full`` without one copy of the chunk's own term (null when the server projects no
    segment of the chunk).
    """
    pdf = pdf.reset_index(drop=True)
    terms = joint_cost(  # one term per (chunk, projected interval): it does not depend on the server
        pdf["start_ms"], pdf["end_ms"], pdf["datasource"],
        pdf["p_start_ms"], pdf["p_end_ms"], pdf["p_datasource"],
    )
    own = (
        (pdf["p_datasource"] == pdf["datasource"])
        & (pdf["p_start_ms"] == pdf["start_ms"])
        & (pdf["p_end_ms"] == pdf["end_ms"])
    ).to_numpy(bool)
    new_chunk = np.zeros(len(pdf), dtype=bool)
    new_chunk[0] = True
    for col in _CHUNK_KEY:
        values = pdf[col].to_numpy()
        new_chunk[1:] |= values[1:] != values[:-1]
    chunk_of_row = np.cumsum(new_chunk) - 1

    # One entry per (row, server), sorted by (chunk, server).
    lengths = np.fromiter((len(v) for v in pdf["p_servers"]), dtype=np.int64, count=len(pdf))
    row = np.repeat(np.arange(len(pdf)), lengths)
    server_codes, server_names = pd.factorize(np.concatenate(pdf["p_servers"].to_list()), sort=True)
    counts = np.concatenate(pdf["p_counts"].to_list()).astype(np.int64)
    order = np.lexsort((server_codes, chunk_of_row[row]))
    row, server_codes, counts = row[order], server_codes[order], counts[order]
    chunk = chunk_of_row[row]
    prod, err = exact_products(terms[row], counts)  # term * n as an exact two-double sum

    new_group = np.ones(len(row), dtype=bool)
    new_group[1:] = (chunk[1:] != chunk[:-1]) | (server_codes[1:] != server_codes[:-1])
    starts = np.flatnonzero(new_group).tolist()
    ends = starts[1:] + [len(row)]
    own_entry = own[row].tolist()
    prod, err, entry_terms = prod.tolist(), err.tolist(), terms[row].tolist()
    first_rows = np.flatnonzero(new_chunk)

    out = {"cost_servers": [[] for _ in first_rows], "full": [[] for _ in first_rows],
           "excl": [[] for _ in first_rows]}
    for col in _CHUNK_KEY:
        out[col] = pdf[col].to_numpy()[first_rows].tolist()
    chunk_l, server_l = chunk.tolist(), server_codes.tolist()
    for a, b in zip(starts, ends):
        c = chunk_l[a]
        parts = prod[a:b] + err[a:b]
        own_at = [i for i in range(a, b) if own_entry[i]]  # at most one: counts are per interval
        out["cost_servers"][c].append(server_names[server_l[a]])
        out["full"][c].append(math.fsum(parts) + 0.0)
        out["excl"][c].append(math.fsum(parts + [-entry_terms[own_at[0]]]) + 0.0 if own_at else None)
    return pd.DataFrame(out)[[*_CHUNK_KEY, "cost_servers", "full", "excl"]]


def _chunk_costs_batches(batches):
    """mapInPandas body: Arrow batches of a partition sorted by chunk -> ``_chunk_costs`` frames.

    A chunk may straddle batches: the last chunk of each batch is held back until it is complete.
    """
    pending: list[pd.DataFrame] = []

    def key(frame, row):
        return tuple(frame[c].iat[row] for c in _CHUNK_KEY)

    for pdf in batches:
        if pdf.empty:
            continue
        last = key(pdf, -1)
        if pending and key(pending[-1], -1) == last and key(pdf, 0) == last:
            pending.append(pdf)  # the whole batch continues the pending chunk
            continue
        buf = pd.concat([*pending, pdf], ignore_index=True)
        tail = np.ones(len(buf), dtype=bool)
        for col, value in zip(_CHUNK_KEY, last):
            tail &= (buf[col] == value).to_numpy(bool)
        if not tail.all():
            yield _chunk_costs(buf[~tail])
        pending = [buf[tail]]
    if pending:
        yield _chunk_costs(pd.concat(pending, ignore_index=True))


def start_of_run_rankings(pairs, projected, servers, bucket_days: int = BUCKET_DAYS):
    """Rank every candidate server of the tier for each (segment, tier) pair at the start of the run.

    Args:
        pairs: DataFrame (idx long, tier string, datasource string, start_ms long, end_ms long):
            the (segment, tier) pairs to rank; (idx, tier) unique; ``end_ms >= start_ms`` (epoch ms).
        projected: DataFrame (server string, tier string, idx long (nullable), datasource string,
            start_ms long, end_ms long): each server's projected segments at the start of the run
            (served without a queued drop, plus queued loads), each (server, segment) once.
            ``idx`` identifies the segment so that a pair's own segment is never counted against it.
        servers: DataFrame (server string, tier string, available_bytes long, decommissioning
            boolean); small (one row per server), collected to the driver as a broadcast table.
        bucket_days: width of the time buckets of the overlap join (days, >= 1; performance only).

    Returns:
        DataFrame (idx long, tier string, servers array<string>, costs array<double>): one row per
        pair; every non-decommissioning server of the tier, best first (cost ascending, then more
        available bytes, then smaller name), with its placement cost (``cost.placement_cost`` of
        the server's projected segments without the pair's own segment; 0.0 when none overlaps
        the 45-day window). Empty arrays when the tier has no candidate server.

    Raises:
        ValueError: ``bucket_days < 1``.
    """
    from pyspark.sql import functions as F

    if bucket_days < 1:
        raise ValueError(f"bucket_days must be >= 1, got {bucket_days}")
    width = bucket_days * DAY_MS

    candidates = servers.where(~F.col("decommissioning")).select("server", "tier", "available_bytes")
    tier_candidates = F.broadcast(
        candidates.groupBy("tier").agg(
            F.collect_list(F.struct("server", "available_bytes")).alias("candidates")
        )
    )

    counted = (  # per projected interval: which candidate servers project it, how many times
        projected.join(F.broadcast(candidates.select("server", "tier")), ["server", "tier"])
        .groupBy("tier", "datasource", "start_ms", "end_ms", "server")
        .agg(F.count(F.lit(1)).alias("n"))
        .groupBy("tier", "datasource", "start_ms", "end_ms")
        .agg(F.collect_list("server").alias("p_servers"), F.collect_list("n").alias("p_counts"))
        .select(
            "tier",
            F.col("datasource").alias("p_datasource"),
            F.col("start_ms").alias("p_start_ms"),
            F.col("end_ms").alias("p_end_ms"),
            "p_servers",
            "p_counts",
        )
    )
    p_first, p_last = _bucket_range(F.col("p_start_ms"), F.col("p_end_ms"), width)
    projected_buckets = counted.select(
        "*", p_first.alias("p_first"), F.explode(F.sequence(p_first, p_last)).alias("bucket")
    )

    chunks = pairs.select(*_CHUNK_KEY).distinct().select(
        *_CHUNK_KEY,
        (F.col("start_ms") - F.lit(COST_WINDOW_MS)).alias("w_start"),
        (F.col("end_ms") + F.lit(COST_WINDOW_MS)).alias("w_end"),
    )
    c_first, c_last = _bucket_range(F.col("w_start"), F.col("w_end"), width)
    chunk_buckets = chunks.select(
        "*", c_first.alias("c_first"), F.explode(F.sequence(c_first, c_last)).alias("bucket")
    )

    matched = (
        chunk_buckets.join(projected_buckets, ["tier", "bucket"])
        .where(
            (F.col("p_start_ms") < F.col("w_end"))
            & (F.col("p_end_ms") > F.col("w_start"))
            & (F.col("bucket") == F.greatest("c_first", "p_first"))  # first shared bucket only
        )
        .select(*_CHUNK_KEY, "p_datasource", "p_start_ms", "p_end_ms", "p_servers", "p_counts")
    )
    chunk_costs = (
        matched.repartition(*_CHUNK_KEY)
        .sortWithinPartitions(*_CHUNK_KEY)
        .mapInPandas(_chunk_costs_batches, schema=_CHUNK_COSTS_SCHEMA)
        .select(
            *_CHUNK_KEY,
            F.map_from_arrays("cost_servers", "full").alias("full_map"),
            F.map_from_arrays("cost_servers", "excl").alias("excl_map"),
        )
    )

    holders = (
        projected.where(F.col("idx").isNotNull())
        .groupBy("idx", "tier")
        .agg(F.collect_set("server").alias("holders"))
    )

    ranked = F.expr(
        """array_sort(transform(coalesce(candidates, array()), c -> named_struct(
               'cost', coalesce(
                   if(array_contains(coalesce(holders, array()), c.server),
                      element_at(excl_map, c.server), element_at(full_map, c.server)),
                   0.0D),
               'neg_available', -c.available_bytes,
               'server', c.server)))"""
    )
    return (
        pairs.join(tier_candidates, "tier", "left")
        .join(chunk_costs, _CHUNK_KEY, "left")
        .join(holders, ["idx", "tier"], "left")
        .select("idx", "tier", ranked.alias("ranked"))
        .select(
            "idx",
            "tier",
            F.expr("transform(ranked, r -> r.server)").alias("servers"),
            F.expr("transform(ranked, r -> r.cost)").alias("costs"),
        )
    )


def server_costs(segment: Mapping, tier_projected: pd.DataFrame, candidates) -> dict[str, float]:
    """Placement cost of ``segment`` on each server of ``candidates`` (plain Python, exact sums).

    Args:
        segment: mapping with ``idx`` (int or None), ``datasource`` (str), ``start_ms``, ``end_ms``
            (int epoch ms).
        tier_projected: pandas DataFrame (server str, idx int or null, datasource str, start_ms,
            end_ms int64): what each server of the tier projects now. Rows whose ``idx`` equals the
            segment's are the segment itself and are left out.
        candidates: iterable of server names.

    Returns:
        dict server -> cost (0.0 for a server with nothing in the window). Same numbers as
        ``start_of_run_rankings`` for the same projected state.
    """
    costs = {server: 0.0 for server in candidates}
    if tier_projected.empty or not costs:
        return costs
    seg_idx = segment.get("idx")
    if seg_idx is None:  # a segment outside the used set (overshadowed, unused) has no replica to leave out
        is_self = np.zeros(len(tier_projected), dtype=bool)
    else:
        is_self = (tier_projected["idx"] == seg_idx).fillna(False).to_numpy(bool)
    keep = (
        in_cost_window(segment["start_ms"], segment["end_ms"], tier_projected["start_ms"], tier_projected["end_ms"])
        & tier_projected["server"].isin(list(costs)).to_numpy(bool)
        & ~is_self
    )
    rows = tier_projected[keep]
    if rows.empty:
        return costs
    terms = joint_cost(
        segment["start_ms"], segment["end_ms"], segment["datasource"],
        rows["start_ms"], rows["end_ms"], rows["datasource"],
    )
    for server, ix in rows.groupby("server", sort=False).indices.items():
        costs[server] = exact_sum(terms[ix])
    return costs


def rank_one(
    segment: Mapping, tier_projected: pd.DataFrame, servers: pd.DataFrame
) -> tuple[list[str], list[float]]:
    """Rank the candidate servers of one tier for one segment (plain Python; ``explain``, balancing).

    Args:
        segment: mapping with ``idx``, ``datasource``, ``start_ms``, ``end_ms`` (see ``server_costs``).
        tier_projected: pandas DataFrame (server, idx, datasource, start_ms, end_ms) of the tier.
        servers: pandas DataFrame (server str, available_bytes int64, decommissioning bool) of the
            tier; decommissioning servers are not candidates.

    Returns:
        (servers best first, their costs in the same order), the order of ``cost.rank_servers``.
    """
    cands = servers[~servers["decommissioning"].astype(bool)]
    available = dict(zip(cands["server"], (int(v) for v in cands["available_bytes"])))
    costs = server_costs(segment, tier_projected, available)
    order = rank_servers(costs, available)
    return order, [costs[s] for s in order]
