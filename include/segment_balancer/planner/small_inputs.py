"""The snapshot's small files as stage 0 reads them, and what is derived from them alone, without Spark.

The small files (``servers.json``, ``load_queues.json``, ``rules.json``, the dynamic config and
``snapshot.json``) are read and checked whole (:func:`read_small_inputs`); from them come the
stages' queue limits, each load rule's targets in the snapshot's tiers and the tiers it names that
have no historical, the queue entries as join rows, the servers frame of
``prepared/servers.parquet`` and the previous plan's balancer state. The segment and replica files
are Spark's (``spark.used_segments``, ``spark.prepare``).

Source: ALGORITHM.md "Inputs", "Terms", "Availability".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from segment_balancer.druid import tier_aliases
from segment_balancer.druid.rules import Rule
from segment_balancer.druid.snapshot import loader
from segment_balancer.druid.snapshot.files import segments_path, server_segments_path
from segment_balancer.druid.snapshot.models import QueueEntry, Server, SnapshotMeta
from segment_balancer.planner.balancer_state import counts_to_json, read_previous
from segment_balancer.planner.config import OVERRIDES, EffectiveConfig, load_config

log = logging.getLogger(__name__)
STAGE_NUMBERS = range(1, 14)


class SmallInputs(NamedTuple):
    """The small files, read and checked (a tuple: it unpacks in this order)."""

    servers: list[Server]
    """The historical servers of ``servers.json``."""
    all_names: set[str]
    """Every server name ``servers.json`` lists, historicals or not."""
    queues: list[QueueEntry]
    """The entries of ``load_queues.json`` (of historicals only)."""
    rules: dict[str, list[Rule]]
    """``{datasource or "_default": [rule, …]}``, the config's tier aliases expanded
    (``druid.tier_aliases.expand_rules``)."""
    config: EffectiveConfig
    """The effective dynamic config (the snapshot's, then the overrides)."""
    meta: SnapshotMeta
    """``snapshot.json``: id, cluster, snapshot time."""


def read_small_inputs(snapshot: Path, overrides: dict | None, overrides_source: str = OVERRIDES) -> SmallInputs:
    """Servers, queue entries, rules, effective config and snapshot meta (the small files), read and
    checked whole without Spark; the segment and replica files are only found, first (Spark reads
    and checks them: ``used_segments``, ``prepare``). The CLI and the DAG's ``resolve_snapshot`` call
    it to refuse a bad snapshot before any Spark job.

    ``overrides_source`` names where ``overrides`` came from in errors (``--config FILE``). Returns
    :class:`SmallInputs` (a tuple: ``(servers, all server names, queue entries, rules,
    EffectiveConfig, SnapshotMeta)``). Raises ``SnapshotError`` naming the file, the row or key, the
    offending value and what was expected.
    """
    segments_path(snapshot), server_segments_path(snapshot)  # both present (SnapshotError if not)
    servers, all_names = loader.load_all_servers(snapshot)
    queues = loader.load_load_queues(snapshot, {s.server for s in servers})
    config = load_config(snapshot, overrides, overrides_source)
    rules = tier_aliases.expand_rules(loader.load_rules(snapshot), config.historical_tier_aliases)
    meta = loader.load_snapshot_meta(snapshot)
    return SmallInputs(servers, all_names, queues, rules, config, meta)


def stage_limits(config: EffectiveConfig) -> dict[str, dict]:
    """``{"1": {"queue_type", "limit", "total"}, …}`` for stages 1–13 (ALGORITHM.md "Load-queue limits")."""
    return {str(stage): config.limit(stage).to_meta() for stage in STAGE_NUMBERS}


# ---- rules -----------------------------------------------------------------------------------------
def replicants_total(rule: Rule) -> int:
    """Σ of a load rule's ``tieredReplicants``, absent tiers included (what ``required(s)``
    counts, ALGORITHM.md "Availability"), capped at 2^31 − 1; 0 for any other rule."""
    total = sum(int(n) for n in (rule.tiered_replicants or {}).values()) if rule.kind == "load" else 0
    return min(total, 2**31 - 1)  # an int column: each count is a Java int, their sum need not be


def rule_key(datasource: str, rule_idx: int) -> str:
    """The key of a (datasource, rule index of its flattened rule list) in :func:`rule_targets`'s
    and :func:`rule_absent_tiers`'s dicts: ``"<datasource>\\x00<rule_idx>"``."""
    return f"{datasource}\x00{rule_idx}"


def _load_rule_tiers(rules: dict[str, list[Rule]], datasources: list[str]) -> Iterator[tuple[str, str, int, int]]:
    """``(key, tier, replicants, tier_pos)`` of every tier a load rule asks replicas of
    (``tieredReplicants`` above 0), per (datasource, rule index) of the flattened rule list (its
    own rules, then ``_default``), keyed by :func:`rule_key`, in the rule's tier order."""
    for ds in datasources:
        for i, rule in enumerate(rules.get(ds, []) + rules.get("_default", [])):
            if rule.kind != "load":
                continue
            for pos, (tier, n) in enumerate((rule.tiered_replicants or {}).items()):
                if int(n) > 0:
                    yield rule_key(ds, i), tier, int(n), pos


def rule_targets(rules: dict[str, list[Rule]], datasources: list[str], tiers: set[str]) -> dict[str, list[tuple]]:
    """Per (datasource, rule index), keyed by :func:`rule_key`: the load rule's ``(tier, target,
    tier_pos)`` (str, int, int) for every tier of the snapshot it asks replicas of, in the rule's
    tier order."""
    out: dict[str, list[tuple]] = {}
    for key, tier, n, pos in _load_rule_tiers(rules, datasources):
        if tier in tiers:
            out.setdefault(key, []).append((tier, n, pos))
    return out


def rule_absent_tiers(rules: dict[str, list[Rule]], datasources: list[str], tiers: set[str]) -> dict[str, list[tuple]]:
    """Per (datasource, rule index), keyed by :func:`rule_key`: the load rule's ``(tier,
    replicants)`` (str, int) for every tier it asks replicas of that has no historical in the
    snapshot."""
    out: dict[str, list[tuple]] = {}
    for key, tier, n, _ in _load_rule_tiers(rules, datasources):
        if tier not in tiers:
            out.setdefault(key, []).append((tier, n))
    return out


# ---- queues ----------------------------------------------------------------------------------------
def queue_rows(queues: list[QueueEntry]) -> list[tuple]:
    """The queue entries of ``load_queues.json`` as rows: ``server`` (str), ``segment_id`` (str),
    ``queued_load`` (bool), ``queue_type`` (str, None for a drop), ``requested_at_ms`` (int epoch
    ms or None), ``queued_drop`` (bool), ``place`` (str: where in the file, for error messages,
    ``server 'S' segmentsToLoad[j]``)."""
    rows, position = [], {}
    for q in queues:
        key = "segmentsToLoad" if q.action == "LOAD" else "segmentsToDrop"
        j = position[(q.server, key)] = position.get((q.server, key), -1) + 1
        rows.append(
            (
                q.server,
                q.segment_id,
                q.action == "LOAD",
                q.queue_type if q.action == "LOAD" else None,
                q.requested_at_ms,
                q.action == "DROP",
                f"server {q.server!r} {key}[{j}]",
            )
        )
    return rows


# ---- servers ---------------------------------------------------------------------------------------
SERVER_DTYPES = {
    "server": "object",
    "host": "object",
    "tier": "object",
    "max_size": "int64",
    "current_size": "int64",
    "priority": "int32",
    "storage_size": "int64",
    "decommissioning": "bool",
}
"""The columns of ``prepared/servers.parquet`` that the snapshot gives (:func:`mark_broadcast_only`
adds the others) and their dtypes, whether or not the snapshot has a historical."""


def servers_frame(servers: list[Server], decommissioning: set[str]) -> pd.DataFrame:
    """The historicals as :data:`SERVER_DTYPES` (sizes in bytes), one row each, by server name;
    ``decommissioning``: the config's ``decommissioningNodes``."""
    rows = [
        (
            s.server,
            s.host,
            s.tier,
            int(s.max_size),
            int(s.current_size),
            int(s.priority),
            int(s.storage_size or 0),
            s.server in decommissioning,
        )
        for s in sorted(servers, key=lambda s: s.server)
    ]
    return pd.DataFrame(rows, columns=list(SERVER_DTYPES)).astype(SERVER_DTYPES)


def mark_broadcast_only(servers_pdf: pd.DataFrame, per_server: list[dict]) -> pd.DataFrame:
    """:func:`servers_frame`'s rows plus ``projected_size`` (int64 bytes: current + queued loads)
    and ``broadcast_only`` (bool: decommissioning and serving only broadcast segments).
    ``per_server``: ``{"server", "queued_bytes", "non_broadcast"}`` per server with replicas (the
    join's sums; a server without is 0, 0)."""
    per = pd.DataFrame(per_server, columns=["server", "queued_bytes", "non_broadcast"]).astype(
        {"queued_bytes": "int64", "non_broadcast": "int64"}
    )  # typed even when empty: no object-dtype fillna
    out = servers_pdf.merge(per, on="server", how="left").fillna({"queued_bytes": 0, "non_broadcast": 0})
    out["projected_size"] = (out["current_size"] + out["queued_bytes"]).astype("int64")
    out["broadcast_only"] = out["decommissioning"] & (out["non_broadcast"] == 0)
    return out.drop(columns=["queued_bytes", "non_broadcast"])


def tiers_meta(servers_pdf: pd.DataFrame) -> dict[str, dict[str, int]]:
    """``meta.json``'s ``tiers``: per tier its ``priority`` (the highest of its servers'),
    ``servers`` and ``candidates`` (servers not decommissioning)."""
    out = {}
    for tier, part in servers_pdf.groupby("tier"):
        out[tier] = {
            "priority": int(part.priority.max()),
            "servers": int(len(part)),
            "candidates": int((~part.decommissioning).sum()),
        }
    return out


# ---- the balancer state ----------------------------------------------------------------------------
def previous_balancer_state(work: Path, config: EffectiveConfig, smeta: SnapshotMeta) -> dict:
    """What the run starts from of the previous plan's balancer state (``WORK/`` +
    :data:`~segment_balancer.planner.balancer_state.PREVIOUS_FILE`, when the run was given one),
    for ``meta.json``: ``counts`` (``{tier: [[server, server, hit_count], …]}``) and ``warning`` (why
    a state given was not used, for the report; None). Read
    only for the ``avgShedder`` strategy, the one that uses it; never raises."""
    if config.balancer_strategy != "avgShedder":
        return {"counts": {}, "warning": None}
    counts, warning = read_previous(work, smeta.cluster, smeta.snapshot_time_ms)
    if warning:
        log.warning("balancer state: %s", warning)
    return {"counts": counts_to_json(counts), "warning": warning}
