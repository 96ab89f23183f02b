"""Plan invariants checked from the snapshot files and the published plan alone (not from the
engine's tables), for hand-worked and generated snapshots."""

import gzip
import json
from pathlib import Path

import pandas as pd

from segment_balancer.druid.rules import first_applying_rule, parse_instant_ms
from segment_balancer.druid.snapshot.loader import load_rules


def _segments(snap: Path) -> dict[str, dict]:
    path = snap / "segments.jsonl"
    opener = open if path.exists() else gzip.open
    path = path if path.exists() else snap / "segments.jsonl.gz"
    out = {}
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                seg = json.loads(line)
                start, end = (parse_instant_ms(t) for t in seg["interval"].split("/"))
                out[(seg["dataSource"], start, end, seg["version"], _partition(seg))] = seg
    return out


def _partition(seg: dict) -> int:
    shard = seg.get("shardSpec") or {}
    return int(shard.get("partitionNum", shard.get("partitionId", 0)) or 0)


def assert_no_drop_costs_availability(snap: Path, ops: pd.DataFrame) -> int:
    """ALGORITHM.md "Availability": after every drop of the plan, each segment that an independent
    DROP (no ``depends_on``) touched still has ``loaded ≥ required``, where ``loaded`` counts the
    historicals of tiers with a target > 0 that serve it in the snapshot with no drop queued and no
    independent drop in the plan (a dependent drop, a move's or a callback's, goes only after its
    replacement has loaded, so the replica counts until then: ALGORITHM.md "Terms"), and
    ``required = min(2, Σ of its rule's tieredReplicants)``. Returns how many independent drops of
    load-rule segments it checked."""
    snap = Path(snap)
    now = parse_instant_ms(json.loads((snap / "snapshot.json").read_text())["snapshot_time"])
    rules = load_rules(snap)
    servers = {
        s["server"]: s["tier"]
        for s in json.loads((snap / "servers.json").read_text())
        if str(s.get("server_type", "")).lower() == "historical"
    }
    queues = json.loads((snap / "load_queues.json").read_text()) if (snap / "load_queues.json").exists() else {}
    dropping = {
        (srv, e if isinstance(e, str) else e["segment_id"])
        for srv, q in queues.items()
        for e in q.get("segmentsToDrop", [])
    }
    serving: dict[str, set[str]] = {}
    for row in json.loads((snap / "server_segments.json").read_text()):
        if row["server"] in servers and (row["server"], row["segment_id"]) not in dropping:
            serving.setdefault(row["segment_id"], set()).add(row["server"])
    planned_drops = {(r.segment_id, r.server) for r in ops[(ops.action == "DROP") & ops.depends_on.isna()].itertuples()}
    by_id = {}
    for (ds, start, end, _version, _partition), seg in _segments(snap).items():
        by_id.setdefault(ds, []).append((start, end, seg))
    checked = 0
    independent = ops[(ops.action == "DROP") & ops.depends_on.isna() & (ops.reason == "overreplicated")]
    for sid in sorted(set(independent.segment_id)):
        ds = next(d for d in sorted(by_id, key=len, reverse=True) if sid.startswith(d + "_"))
        start, end = (parse_instant_ms(t) for t in sid[len(ds) + 1 :].split("_")[:2])
        rule = first_applying_rule(rules, ds, start, end, now)
        assert rule is not None and rule.kind == "load", f"{sid}: an excess drop of a segment without a load rule"
        targets = rule.tiered_replicants
        required = min(2, sum(targets.values()))
        loaded = {s for s in serving.get(sid, ()) if targets.get(servers[s], 0) > 0 and (sid, s) not in planned_drops}
        assert len(loaded) >= required, (
            f"{sid}: {len(loaded)} loaded replicas left ({sorted(loaded)}), {required} required"
        )
        checked += int((independent.segment_id == sid).sum())
    return checked
