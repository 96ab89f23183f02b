"""What ``prepared/meta.json`` reports of a snapshot beside its tables: alerts and segment counts.

From the small files and what stage 0's join and numbering found (:class:`Findings`): the alerts
(no historical, a tier no historical serves, an unknown decommissioning node, loads queued too
long, used segments no rule matches, partial loads of nothing), the unused segments still served
or queued, and the overshadowed segments that wait.

Source: ALGORITHM.md "Inputs", "Terms".
"""

from __future__ import annotations

from dataclasses import dataclass

from segment_balancer.druid.rules import Rule


@dataclass(frozen=True)
class Findings:
    """What stage 0 found in the segment and replica files, summed over its tasks."""

    stale_n: int
    """Loads queued longer than the config's load limit (``segment_loading_max_ms``) at the
    snapshot time (count)."""
    stale: list[dict]
    """At most 5 of them, oldest request first (then server): ``{"segment_id": str, "server":
    str, "requested_at_ms": int epoch ms}``."""
    norule_n: int
    """Used segments no rule matches (count)."""
    norule: list[dict]
    """At most 5 of them, by index: ``{"idx": int, "segment_id": str}``."""
    nothing_n: int
    """Used segments whose partial-load rule loads nothing of them (count)."""
    nothing: list[dict]
    """At most 5 of them, by index: ``{"idx": int, "segment_id": str}``."""
    unlisted: list[dict]
    """Per datasource, the segments only replicas or queue entries name (unused):
    ``{"datasource": str, "segments": int, "replicas": int (served)}``."""
    unlisted_ids: list[str]
    """At most 5 of their ids, the least."""
    waiting: list[dict]
    """Per datasource, the overshadowed segments that wait for a segment overshadowing them to be
    served, with served replicas: ``{"datasource": str, "segments": int, "replicas": int}``."""


def alerts(
    rules: dict[str, list[Rule]],
    tiers: set[str],
    decommissioning: set[str],
    historicals: set[str],
    found: Findings,
    limit_ms: int,
) -> list[dict]:
    """``meta.json``'s ``alerts`` (``{"kind", "message"[, "count", "examples"]}``): no historical at
    all, tiers rules name without a historical, decommissioning nodes that are no historical, loads
    queued longer than ``limit_ms`` (ms), used segments no rule matches, partial loads of nothing."""
    out = []
    if not historicals:
        out.append(
            {
                "kind": "no_historical",
                "message": "servers.json lists no historical server: nothing can be loaded, and every used "
                "segment a load rule asks replicas of is unavailable",
            }
        )
    named = {t for lst in rules.values() for r in lst for t in (r.tiered_replicants or {})}
    for tier in sorted(named - tiers):
        out.append(
            {
                "kind": "unknown_tier",
                "message": f"tier {tier} is named by a rule but has no historical server; left out of every sum",
            }
        )
    for name in sorted(decommissioning - historicals):
        out.append(
            {
                "kind": "unknown_decommissioning_node",
                "message": f"decommissioningNodes names {name}, which is not a historical server",
            }
        )
    if found.stale_n:
        ex = [
            f"{r['segment_id']} on {r['server']}"
            for r in sorted(found.stale, key=lambda r: (r["requested_at_ms"], r["server"]))
        ]
        out.append(
            {
                "kind": "load_queued_too_long",
                "count": found.stale_n,
                "message": f"{found.stale_n} loads queued longer than {limit_ms // 1000} s",
                "examples": ex,
            }
        )
    if found.norule_n:
        ex = [r["segment_id"] for r in sorted(found.norule, key=lambda r: r["idx"])]
        out.append(
            {
                "kind": "no_rule_matches",
                "count": found.norule_n,
                "message": f"{found.norule_n} used segments match no rule; left where they are",
                "examples": ex,
            }
        )
    if found.nothing_n:
        out.append(
            {
                "kind": "partial_load_of_nothing",
                "count": found.nothing_n,
                "message": (
                    f"{found.nothing_n} used segments' partial-load rule loads none of their cluster groups, and "
                    "none of their shard group's; left where they are, as Druid 38 leaves them"
                ),
                "examples": [r["segment_id"] for r in found.nothing],
            }
        )
    return out


def unlisted_counts(found: Findings) -> dict:
    """``meta.json``'s ``unlisted``: unused segments still served or queued (stage 12 drops their
    replicas): ``segments``, ``served_replicas``, ``per_datasource`` (``{datasource: {"segments",
    "served_replicas"}}``), ``examples`` (ids)."""
    per = {
        r["datasource"]: {"segments": int(r["segments"]), "served_replicas": int(r.get("replicas") or 0)}
        for r in sorted(found.unlisted, key=lambda r: r["datasource"])
    }
    return {
        "segments": sum(v["segments"] for v in per.values()),
        "served_replicas": sum(v["served_replicas"] for v in per.values()),
        "per_datasource": per,
        "examples": sorted(found.unlisted_ids),
    }


def waiting_counts(found: Findings) -> dict:
    """``meta.json``'s ``overshadowed_waiting``: the overshadowed segments that stage 12 keeps,
    counted as :func:`unlisted_counts` counts (no examples)."""
    per = {
        r["datasource"]: {"segments": int(r["segments"]), "served_replicas": int(r["replicas"])}
        for r in sorted(found.waiting, key=lambda r: r["datasource"])
    }
    return {
        "segments": sum(v["segments"] for v in per.values()),
        "served_replicas": sum(v["served_replicas"] for v in per.values()),
        "per_datasource": per,
    }
