"""A hand-made work directory for the Spark glue's tests: the prepared servers and meta, the
segment table and a start state of a few segments per tier, written as ``prepare`` writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from segment_balancer.common.files import filesystem
from segment_balancer.planner.runstate import state_frame, tables_from_rows
from segment_balancer.spark.state_store import (
    INITIAL_STATE_DIR,
    SEGMENT_TABLE_FILE,
    tier_dir_name,
    write_segment_table,
    write_tier_start,
)

DAY = 86_400_000


def write_workdir(work: Path, tiers: dict[str, dict]) -> Path:
    """``tiers``: ``{tier: {"servers": [name, ...], "segments": [(idx, target, [serving server, ...]), ...]}}``;
    every server 1000 bytes, empty; every segment 10 bytes, one day long, datasource ``ds``."""
    servers = [
        {
            "server": s,
            "host": s,
            "tier": t,
            "max_size": 1000,
            "current_size": 0,
            "priority": 0,
            "decommissioning": False,
            "broadcast_only": False,
        }
        for t, spec in tiers.items()
        for s in spec["servers"]
    ]
    servers = sorted(servers, key=lambda s: s["server"])
    (work / "prepared").mkdir(parents=True)
    pd.DataFrame(servers).to_parquet(work / "prepared" / "servers.parquet", index=False)
    # every segment is under a load rule asking for a replica (required 1): all are wanted
    wanted = len({idx for spec in tiers.values() for idx, _, _ in spec["segments"]})
    meta = {"config": {}, "stage_limits": {}, "tiers": {t: {"priority": 0} for t in tiers}, "wanted": wanted}
    (work / "prepared" / "meta.json").write_text(json.dumps(meta))
    rows = []
    for tier, spec in tiers.items():
        for idx, target, serving in spec["segments"]:
            seg = {
                "tier": tier,
                "idx": idx,
                "segment_id": f"seg{idx}",
                "datasource": "ds",
                "start_ms": idx * DAY,
                "end_ms": (idx + 1) * DAY,
                "size_bytes": 10,
            }
            rows.append({**seg, "kind": "segment", "target": target, "tier_pos": 0, "rule_kind": "load", "required": 1})
            rows += [{**seg, "kind": "replica", "server": s, "served": True, "dropping": False} for s in serving]
    table, states = tables_from_rows(state_frame(pd.DataFrame(rows)), [s["server"] for s in servers])
    fs, base = filesystem(str(work.absolute()))
    write_segment_table(fs, f"{base}/{SEGMENT_TABLE_FILE}", table)
    for tier, state in states.items():
        write_tier_start(fs, f"{base}/{INITIAL_STATE_DIR}/{tier_dir_name(tier)}", state)
    return work
