"""Two coordinators' plans of one snapshot, side by side (``comparison.json`` in the published plan):
per tier, what each plan does and where it leaves the tier once every operation succeeded.

Per coordinator and tier: operations by kind (``loads``, ``drops``, ``moves``: drops that wait for a
load, ``cancels``), ``bytes_loaded`` (every LOAD) and ``bytes_moved`` (the loads of moves), the
``underreplicated`` segments after, what stays on the tier's decommissioning historicals
(``left_on_decommissioning`` segments, ``bytes_left_on_decommissioning``: a plan that empties one
moves those bytes, so its spread and cost are over fewer servers than a plan that does not), over
the historicals that are not decommissioning the max −
min of their ``segments``, ``bytes`` and disk use (``disk_pct``: bytes held / ``max_size``, in
points of %) and the fullest one, the tier's ``total_cost`` (Druid's cost units, lower is better
spread: :func:`segment_balancer.planner.livecost.total_cost`) and Elasticsearch's weighted node
balance (seed 004: ``shardBalance`` 0.45, ``indexBalance`` 0.55; node weight
``w(n, d) = 0.45 (segments(n) - mean) + 0.55 (segments(n, d) - mean over nodes of d)``; the tier's
balance is the largest ``max_n w - min_n w`` over its datasources, as Elasticsearch compares it to
its rebalance threshold; lower is better); cluster-wide, the ``unavailable`` segments after.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from segment_balancer.common.files import write_json_atomic
from segment_balancer.planner.coordinators import DEFAULT_COORDINATOR
from segment_balancer.planner.livecost import total_cost_coded
from segment_balancer.planner.operations import Action
from segment_balancer.planner.summary import ServerHoldings
from segment_balancer.spark.apps import branches
from segment_balancer.spark.workdir import compared_work

COMPARISON_FILE = "comparison.json"
"""The comparison, in the published plan directory."""
COMPARED_DIR = "compared"
"""The other coordinator's plan, in ``<plan>/compared/<coordinator>/``."""
SHARD_BALANCE = 0.45
INDEX_BALANCE = 0.55
"""Elasticsearch's default weights (``cluster.routing.allocation.balance.shard`` and ``.index``)."""


def es_weighted_balance(counts: pd.DataFrame) -> float:
    """Elasticsearch's weighted node balance of one tier (module docstring) from ``counts``
    (rows: historicals, columns: datasources, values: segments held; int). 0.0 without rows."""
    if counts.empty:
        return 0.0
    per_node = counts.sum(axis=1).to_numpy(np.float64)
    theta0 = SHARD_BALANCE / (SHARD_BALANCE + INDEX_BALANCE)
    theta1 = INDEX_BALANCE / (SHARD_BALANCE + INDEX_BALANCE)
    worst = 0.0
    for column in counts.columns:
        per_index = counts[column].to_numpy(np.float64)
        weight = theta0 * (per_node - per_node.mean()) + theta1 * (per_index - per_index.mean())
        worst = max(worst, float(weight.max() - weight.min()))
    return round(worst, 6)


def plan_measures(plan: Path, work: Path) -> dict:
    """The measures of one plan (module docstring): ``{"coordinator", "unavailable", "tiers":
    {tier: {...}}}``. ``plan``: a plan directory (``summary.json``, ``operations.parquet``,
    ``assignment.parquet``); ``work``: the work directory it was made in (``prepared/``)."""
    summary = json.loads((Path(plan) / "summary.json").read_text())
    ops = pd.read_parquet(Path(plan) / "operations.parquet")
    held = _Held(Path(plan) / "assignment.parquet", Path(work) / "prepared" / "segments.parquet")
    servers = pd.DataFrame(summary["servers"], columns=list(ServerHoldings.model_fields))
    live = servers[~servers["decommissioning"]]
    dying = servers[servers["decommissioning"]]
    move_loads = set(ops["depends_on"].dropna().astype("int64"))
    tiers = sorted(set(servers["tier"]) | set(ops["tier"].dropna()))
    out: dict[str, dict] = {}
    for tier in tiers:
        t_ops = ops[ops["tier"] == tier]
        loads = t_ops[t_ops["action"] == Action.LOAD]
        t_live = live[live["tier"] == tier]
        usage = 100.0 * t_live["bytes_after"] / t_live["max_size"].where(t_live["max_size"] > 0)
        fullest = usage.idxmax() if usage.notna().any() else None
        mine = held.tier == held.tier_names.index(tier) if tier in held.tier_names else np.zeros(len(held.tier), bool)
        ds, start, end, srv = held.datasource[mine], held.start_ms[mine], held.end_ms[mine], held.server[mine]
        # the servers of the tier's replicas numbered in name order, as total_cost numbers them
        present, local = np.unique(srv, return_inverse=True)
        live_codes = [held.server_names.index(name) for name in t_live["server"] if name in held.server_names]
        on_live = np.isin(srv, live_codes)
        pairs = pd.Series(1, index=pd.MultiIndex.from_arrays([srv[on_live], ds[on_live]])).groupby(level=[0, 1]).size()
        counts = pairs.unstack(fill_value=0) if len(pairs) else pd.DataFrame()
        if len(counts):
            counts.index = [held.server_names[c] for c in counts.index]
            counts.columns = [held.datasource_names[c] for c in counts.columns]
        counts = counts.reindex(sorted(t_live["server"]), fill_value=0)
        status = summary["status_after"]["tiers"].get(tier, {})
        out[tier] = {
            "loads": len(loads),
            "drops": int((t_ops["action"] == Action.DROP).sum()),
            "moves": int(t_ops["depends_on"].notna().sum()),
            "cancels": int((t_ops["action"] == Action.CANCEL).sum()),
            "bytes_loaded": int(loads["size_bytes"].sum()),
            "bytes_moved": int(loads.loc[loads["op_id"].isin(move_loads), "size_bytes"].sum()),
            "underreplicated": int(status.get("underreplicated", 0)),
            "left_on_decommissioning": int(dying.loc[dying["tier"] == tier, "segments_after"].sum()),
            "bytes_left_on_decommissioning": int(dying.loc[dying["tier"] == tier, "bytes_after"].sum()),
            "historicals": len(t_live),
            "segments_max_minus_min": int(t_live["segments_after"].max() - t_live["segments_after"].min())
            if len(t_live)
            else 0,
            "bytes_max_minus_min": int(t_live["bytes_after"].max() - t_live["bytes_after"].min()) if len(t_live) else 0,
            "disk_pct_max_minus_min": round(float(usage.max() - usage.min()), 4) if usage.notna().any() else 0.0,
            "fullest_disk_pct": round(float(usage.max()), 4) if usage.notna().any() else 0.0,
            "fullest": None if fullest is None else str(t_live.loc[fullest, "server"]),
            "total_cost": total_cost_coded(ds, held.datasource_names, start, end, local.reshape(-1), len(present)),
            "es_weighted_balance": es_weighted_balance(counts),
        }
    return {
        "coordinator": summary.get("coordinator", DEFAULT_COORDINATOR),
        "unavailable": int(summary["undone"]["unavailable"]),
        "tiers": out,
    }


class _Held:
    """A plan's ``assignment.parquet`` joined with its prepared segments, as codes: per replica its
    ``server``, ``tier`` and ``datasource`` (int64 codes into the sorted ``*_names``, so that codes
    order as names do) and its segment's ``start_ms``, ``end_ms`` (int64 epoch ms)."""

    def __init__(self, assignment: Path, segments: Path):
        table = pq.read_table(assignment, columns=["segment_id", "server", "tier"])
        prepared = pq.read_table(segments, columns=["segment_id", "datasource", "start_ms", "end_ms"])
        # a segment's first prepared row, as a left join keeping the first duplicate would
        at = pc.index_in(table["segment_id"], prepared["segment_id"])
        found = pc.is_valid(at)
        table, at = table.filter(found), at.filter(found)
        self.server, self.server_names = _sorted_codes(table["server"])
        self.tier, self.tier_names = _sorted_codes(table["tier"])
        self.datasource, self.datasource_names = _sorted_codes(prepared["datasource"].take(at))
        self.start_ms = prepared["start_ms"].take(at).to_numpy().astype(np.int64)
        self.end_ms = prepared["end_ms"].take(at).to_numpy().astype(np.int64)


def _sorted_codes(column) -> tuple[np.ndarray, tuple[str, ...]]:
    """A string column as int64 codes into its distinct values sorted (code order = name order)."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    names = encoded.dictionary.to_pylist()
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names))
    codes = rank[encoded.indices.to_numpy(zero_copy_only=False)] if len(names) else np.zeros(0, np.int64)
    return codes, tuple(sorted(names))


def write_comparison(plan: Path, work: Path, other_plan: Path, other_work: Path) -> dict:
    """Write ``comparison.json`` into ``plan`` (the published plan's directory before publishing):
    ``{"plans": [the plan's measures, the other's]}``, and return it."""
    comparison = {"plans": [plan_measures(plan, work), plan_measures(other_plan, other_work)]}
    write_json_atomic(comparison, Path(plan) / COMPARISON_FILE)
    return comparison


def place_compared(plan_dir: str | Path, work_dir: str | Path) -> Path | None:
    """When the run in ``work_dir`` was planned by the coordinator it is compared with too (its
    branch left ``WORK/compared_work/<coordinator>/plan``): set a copy of that plan beside the run's
    plan ``plan_dir`` as ``plan_dir/compared/<coordinator>/`` (replaced) and write
    ``plan_dir/comparison.json`` (:func:`write_comparison`). Returns the copy's path, or None when
    the run compared nothing. Raises ``FileNotFoundError`` when the compared plan is missing.
    ``plan.validation.validate_run`` then checks both."""
    plan_dir, work_dir = Path(plan_dir), Path(work_dir)
    compared = branches(work_dir)[1:]
    if not compared:
        return None
    other = compared[0]
    fork = compared_work(work_dir, other)
    if not (fork / "plan" / "summary.json").is_file():
        raise FileNotFoundError(f"{fork / 'plan'}: no plan of {other} to compare with")
    dest = plan_dir / COMPARED_DIR / other
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(fork / "plan", dest, ignore=shutil.ignore_patterns(".*"))
    write_comparison(plan_dir, work_dir, fork / "plan", fork)
    return dest
