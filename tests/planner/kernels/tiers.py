"""Hand-made tiers for the kernel tests: a :class:`TierRun` from a few lines of specs."""

import pandas as pd

from segment_balancer.planner.config import build_config
from segment_balancer.planner.runstate import OpSink, TierRun, state_frame

DAY = 86_400_000
NUM_BEST = build_config({}).num_best_servers


def tier_run(name, servers, segments, ranked=True, sink=None, num_best=NUM_BEST, reuse_top_b=True):
    """``servers``: (name, max_size bytes[, decommissioning[, current_size]]); ``segments``: dicts
    with ``idx`` and optionally ``target`` (1), ``topb`` (cached top B, list), ``size`` (10),
    ``day`` (the segment's day, default its idx), ``ds`` ("ds"), ``served``/``loading`` (servers;
    ``dropping``: the served ones with a queued drop),
    ``tier_pos`` (0), ``rule_kind`` ("load")."""
    rows = []
    for s in segments:
        idx = s["idx"]
        day = s.get("day", idx)
        base = {
            "tier": name,
            "idx": idx,
            "segment_id": f"seg{idx}",
            "datasource": s.get("ds", "ds"),
            "start_ms": day * DAY,
            "end_ms": (day + 1) * DAY,
            "size_bytes": s.get("size", 10),
        }
        rows.append(
            {
                **base,
                "kind": "segment",
                "target": s.get("target", 1),
                "tier_pos": s.get("tier_pos", 0),
                "rule_kind": s.get("rule_kind", "load"),
                "required": 1,
                "topb": None if s.get("topb") is None else ",".join(s["topb"]),
            }
        )
        for server in s.get("served", ()):
            rows.append(
                {
                    **base,
                    "kind": "replica",
                    "server": server,
                    "served": True,
                    "dropping": server in s.get("dropping", ()),
                }
            )
        for server in s.get("loading", ()):
            rows.append(
                {
                    **base,
                    "kind": "replica",
                    "server": server,
                    "served": False,
                    "load_type": "loading",
                    "dropping": False,
                }
            )
    specs = [(x[0], x[1], x[2] if len(x) > 2 else False, x[3] if len(x) > 3 else 0) for x in servers]
    servers_pdf = pd.DataFrame(
        [
            {"server": n, "tier": name, "max_size": m, "current_size": c, "priority": 0, "decommissioning": d}
            for n, m, d, c in specs
        ]
    )
    return TierRun.from_rows(
        name,
        state_frame(pd.DataFrame(rows)),
        servers_pdf,
        num_best,
        ranked,
        sink if sink is not None else OpSink(),
        reuse_top_b=reuse_top_b,
    )


def ops(sink):
    return [(o.action, o.segment_id, o.server, o.queue_type, o.dep_server) for o in sink.ops]
