"""``explain``: every candidate server's placement cost for one segment, its rank, whether it is in
the top ``B``, and why it is ineligible if it is (ALGORITHM.md "Best servers"); the segment's
``required`` loaded replicas and whether it waits for the segments that overshadow it
(ALGORITHM.md "Availability", stage 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .cost import COST_WINDOW_MS
from .ranking import rank_one


def explain_segment(spark, work: Path, segment_id: str, tier: str | None = None) -> dict:
    """Explain ``segment_id`` against the start-of-run state prepared in ``work``.

    Collects only the projected segments inside the segment's cost window. Raises ``KeyError``
    for an unknown segment id.
    """
    from pyspark.sql import functions as F

    from .run import num_best_function
    from .status import start_projection

    prepared = Path(work) / "prepared"
    meta = json.loads((prepared / "meta.json").read_text())
    segments = spark.read.parquet(str(prepared / "segments.parquet"))
    found = segments.filter(F.col("segment_id") == segment_id).limit(1).collect()
    if not found:
        raise KeyError(f"segment {segment_id} is not in the snapshot")
    seg = found[0].asDict()
    servers = pd.read_parquet(prepared / "servers.parquet")
    replicas = spark.read.parquet(str(prepared / "replicas.parquet"))
    targets = spark.read.parquet(str(prepared / "targets.parquet")).filter(F.col("idx") == F.lit(seg["idx"])).collect() if seg["idx"] is not None else []
    target = {r["tier"]: int(r["target"]) for r in targets}
    mine = replicas.filter(F.col("segment_id") == segment_id).collect()
    here = {r["server"]: r.asDict() for r in mine}
    tiers = sorted({t for t in target} | {r["tier"] for r in mine}) if tier is None else [tier]
    window = start_projection(replicas, segments).filter(
        (F.col("start_ms") < seg["end_ms"] + COST_WINDOW_MS) & (F.col("end_ms") > seg["start_ms"] - COST_WINDOW_MS)
        & F.col("tier").isin(tiers)).toPandas()
    num_best = num_best_function(meta["config"])
    out = {"segment_id": segment_id, "idx": seg["idx"], "used": bool(seg["used"]), "overshadowed": bool(seg["overshadowed"]),
           "rule_kind": seg["rule_kind"], "size_bytes": int(seg["size_bytes"]),
           # min(2, Σ tieredReplicants): loaded replicas stage 12 keeps (ALGORITHM.md "Availability")
           "required": seg["required"],
           # overshadowed, and kept: some overshadowing segment needs a replica and is served nowhere
           "waiting": seg["waiting"],
           # false: only server_segments.json / load_queues.json name it (unused, size unknown)
           "listed": bool(seg["listed"]),
           "timeline": _timeline(spark, Path(work), seg), "tiers": []}
    for t in tiers:
        part = servers[servers["tier"] == t].copy()
        part["available_bytes"] = part["max_size"] - part["projected_size"]
        order, costs = rank_one(seg, window[window["tier"] == t], part)
        b = num_best(len(order), target.get(t, 0)) if target.get(t, 0) > 0 else 0
        rows = []
        for rank, (name, cost) in enumerate(zip(order, costs), start=1):
            srv = part[part["server"] == name].iloc[0]
            rows.append({"server": name, "rank": rank, "cost": cost, "in_top_b": rank <= b,
                         "available_bytes": int(srv["available_bytes"]), "ineligible": _why(name, srv, seg, here)})
        for _, srv in part[part["decommissioning"]].iterrows():
            rows.append({"server": srv["server"], "rank": None, "cost": None, "in_top_b": False,
                         "available_bytes": int(srv["available_bytes"]), "ineligible": "decommissioning"})
        out["tiers"].append({"tier": t, "target": target.get(t, 0), "b": b, "servers": rows})
    return out


def _why(name: str, srv, seg: dict, here: dict) -> str | None:
    rep = here.get(name)
    if rep and rep["served"] and not rep["queued_drop"]:
        return "serves the segment"
    if rep and rep["queued_load"]:
        return "is already loading the segment"
    if int(srv["available_bytes"]) < int(seg["size_bytes"]):
        return f"not enough room ({int(srv['available_bytes'])} bytes available)"
    return None


def _timeline(spark, work: Path, seg: dict) -> dict:
    """The segment's timeline status and which segments overshadow it and why, from the used
    segments of its datasource that overlap it (the only ones that can)."""
    from pyspark.sql import functions as F

    from .timeline import explain_overshadowing
    from .used_segments import TIMELINE_COLUMNS

    table = spark.read.parquet(str(work / "timeline" / "segments.parquet"))
    near = table.filter((F.col("datasource") == seg["datasource"]) & F.col("used")
                        & (F.col("start_ms") < seg["end_ms"]) & (F.col("end_ms") > seg["start_ms"]))
    pdf = near.select(*TIMELINE_COLUMNS).toPandas()
    if seg["segment_id"] not in set(pdf["segment_id"]):
        return {"status": "unused"}
    return explain_overshadowing(pdf, seg["segment_id"])
