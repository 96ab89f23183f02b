"""The availability soak: random clusters planned for several runs while loads fail, and
every run's plan checked in many orders of completing its operations.

:func:`random_cluster` writes a small seeded cluster: 1–3 tiers of 2–5 historicals, 2–4 datasources
of daily segments, random rules (``loadForever``, ``loadByPeriod`` then ``loadForever``, a
``dropForever`` datasource, tiers absent from the snapshot), replicas placed at random (some
segments unreplicated, under- or overreplicated), queued loads and drops, a decommissioning
historical, a historical lost with its replicas, and a small load queue.

:func:`check_run` reads a run's snapshot and plan from their files alone (not the planner's tables)
and completes the operations, queued and planned, in ``orders`` random orders plus two adversarial
ones (every drop first and every load failing; every load first), each load succeeding or failing
at random, a dependent drop only after its load succeeded (cancelled if it failed). After every
step it checks (ALGORITHM.md "Availability", "Capacity"):

- ``zero``: a used segment with a load rule that was served somewhere at the start has a replica;
- ``required``: right after an independent planned drop of ``s``, the servers of tiers with a target
  that serve ``s`` are at least ``required(s) = min(2, Σ tieredReplicants)``;
- ``capacity``: no historical serves more bytes than its ``max_size``.

:func:`soak` runs clusters through ``tools.simulate`` (loads failing at ``failure_rate``) and
checks every run. ``benchmarks/soak_availability.py`` runs 200 clusters × 3 runs;
``tests/test_soak.py`` a seeded few.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from segment_balancer.druid.rules import first_applying_rule, parse_instant_ms
from segment_balancer.druid.snapshot.loader import load_rules

DAY_MS = 86_400_000
NOW = "2024-06-01T00:00:00.000Z"
TIERS = ("hot", "_default_tier", "cold")
MB = 1 << 20


def random_cluster(path: Path, seed: int) -> Path:
    """Write the seeded random cluster ``seed`` to ``path`` (module docstring); returns ``path``."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    now_ms = parse_instant_ms(NOW)
    tiers = list(rng.choice(TIERS, size=int(rng.integers(1, 4)), replace=False))
    servers = [
        {
            "server": f"{t}-{i}:8083",
            "host": f"{t}-{i}",
            "server_type": "historical",
            "tier": t,
            "priority": 10 if t == "hot" else 0,
        }
        for t in tiers
        for i in range(int(rng.integers(2, 6)))
    ]

    def replicas() -> dict:
        named = [t for t in tiers if rng.random() < 0.7] or [tiers[0]]
        out = {t: int(rng.integers(1, 3)) for t in named}
        if rng.random() < 0.15:
            out["ghost"] = 1  # a tier absent from the snapshot
        return out

    datasources = [f"ds{i}" for i in range(int(rng.integers(2, 5)))]
    rules: dict = {"_default": [{"type": "loadForever", "tieredReplicants": {tiers[0]: 2}}]}
    for i, ds in enumerate(datasources):
        kind = rng.random()
        if i > 0 and kind < 0.15:
            rules[ds] = [{"type": "dropForever"}]
        elif kind < 0.55:
            rules[ds] = [
                {"type": "loadByPeriod", "period": "P30D", "tieredReplicants": replicas()},
                {"type": "loadForever", "tieredReplicants": replicas()},
            ]
        elif kind < 0.85:
            rules[ds] = [{"type": "loadForever", "tieredReplicants": replicas()}]
        # else: _default
    segments, served = [], []
    for ds in datasources:
        for d in range(int(rng.integers(10, 40))):
            start = now_ms - (d + 1) * DAY_MS
            interval = f"{_iso(start)}/{_iso(start + DAY_MS)}"
            seg = {
                "dataSource": ds,
                "interval": interval,
                "version": "2024-01-01T00:00:00.000Z",
                "size": int(rng.integers(20, 200)) * MB,
                "shardSpec": {"type": "none"},
            }
            segments.append(seg)
            sid = f"{ds}_{interval.replace('/', '_')}_{seg['version']}"
            holders = rng.choice(len(servers), size=int(rng.integers(0, min(4, len(servers)) + 1)), replace=False)
            served += [(servers[h]["server"], sid, seg["size"]) for h in holders]
    used = {s["server"]: sum(b for srv, _, b in served if srv == s["server"]) for s in servers}
    for s in servers:
        s["curr_size"] = used[s["server"]]
        s["max_size"] = int(max(used[s["server"]] * rng.uniform(1.1, 2.5), 2_000 * MB))
    queues: dict = {s["server"]: {"segmentsToLoad": [], "segmentsToDrop": []} for s in servers}
    room = {s["server"]: s["max_size"] - s["curr_size"] for s in servers}
    held = {(srv, sid) for srv, sid, _ in served}
    copies: dict[str, int] = {}
    for _, sid, _ in served:
        copies[sid] = copies.get(sid, 0) + 1
    for srv, sid, _ in served:
        if copies[sid] > 2 and rng.random() < 0.1:  # a drop the Coordinator queued: of an extra replica
            queues[srv]["segmentsToDrop"].append(sid)
            copies[sid] -= 1
    by_id = {f"{s['dataSource']}_{s['interval'].replace('/', '_')}_{s['version']}": s for s in segments}
    for sid, seg in by_id.items():
        if rng.random() < 0.05:
            srv = servers[int(rng.integers(len(servers)))]["server"]
            if (srv, sid) not in held and sid not in queues[srv]["segmentsToDrop"] and room[srv] >= seg["size"]:
                queues[srv]["segmentsToLoad"].append({"segment_id": sid, "queue_type": "loading"})
                room[srv] -= seg["size"]
    config = {"maxSegmentsInNodeLoadingQueue": int(rng.integers(3, 30))}
    historicals = list(servers)
    if len(servers) > 2 and rng.random() < 0.4:
        config["decommissioningNodes"] = [servers[int(rng.integers(len(servers)))]["server"]]
    if len(servers) > 2 and rng.random() < 0.4:  # a historical lost, with what it served and had queued
        lost = servers[int(rng.integers(len(servers)))]["server"]
        historicals = [s for s in servers if s["server"] != lost]
        served = [r for r in served if r[0] != lost]
        queues.pop(lost)
        if config.get("decommissioningNodes") == [lost]:
            del config["decommissioningNodes"]
    (path / "servers.json").write_text(json.dumps(historicals, indent=1))
    (path / "server_segments.json").write_text(json.dumps([{"server": a, "segment_id": b} for a, b, _ in served]))
    with gzip.open(path / "segments.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(s) + "\n" for s in segments))
    (path / "rules.json").write_text(json.dumps(rules, indent=1))
    (path / "load_queues.json").write_text(json.dumps(queues, indent=1))
    (path / "coordinator_config.json").write_text(json.dumps(config))
    (path / "snapshot.json").write_text(json.dumps({"snapshot_time": NOW, "cluster": f"soak-{seed}"}))
    return path


def _iso(ms: int) -> str:
    return pd.Timestamp(ms, unit="ms", tz="UTC").strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass
class Tally:
    """What the soak did and found."""

    clusters: int = 0
    runs: int = 0
    operations: int = 0
    orders: int = 0
    steps: int = 0
    violations: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.clusters += other.clusters
        self.runs += other.runs
        self.operations += other.operations
        self.orders += other.orders
        self.steps += other.steps
        self.violations += other.violations


def _read_json(path: Path, default=None):
    return json.loads(path.read_text()) if path.exists() else default


def _state(snap: Path):
    """(historicals {server: (tier, max_size)}, served pairs, segment sizes, required per id,
    tiers with a target per id; segments without a load rule left out of the last two)."""
    historicals = {
        s["server"]: (s["tier"], s["max_size"])
        for s in _read_json(snap / "servers.json")
        if s.get("server_type", "historical") == "historical"
    }
    path = snap / "server_segments.json"
    if path.exists():
        pairs = {(r["server"], r["segment_id"]) for r in json.loads(path.read_text())}
    else:
        lines = (snap / "server_segments.jsonl").read_text().splitlines()
        pairs = {(r["server"], r["segment_id"]) for r in map(json.loads, filter(None, lines))}
    now = parse_instant_ms(_read_json(snap / "snapshot.json")["snapshot_time"])
    rules = load_rules(snap)
    sizes, required, targets = {}, {}, {}
    with gzip.open(snap / "segments.jsonl.gz", "rt") as f:
        for seg in map(json.loads, f):
            sid = f"{seg['dataSource']}_{seg['interval'].replace('/', '_')}_{seg['version']}"
            sizes[sid] = seg["size"]
            start, end = (parse_instant_ms(t) for t in seg["interval"].split("/"))
            rule = first_applying_rule(rules, seg["dataSource"], start, end, now)
            if rule is not None and rule.kind == "load" and sum(rule.tiered_replicants.values()) > 0:
                required[sid] = min(2, sum(rule.tiered_replicants.values()))
                targets[sid] = {t for t, n in rule.tiered_replicants.items() if n > 0}
    return historicals, {p for p in pairs if p[0] in historicals}, sizes, required, targets


def check_run(snap: Path, plan: Path, orders: int, rng: np.random.Generator, label: str = "") -> Tally:
    """Check one run (module docstring): ``snap`` is the snapshot it planned on, ``plan`` its plan."""
    historicals, served, sizes, required, targets = _state(snap)
    queues = _read_json(snap / "load_queues.json", {})
    pending = {(p["server"], p["segment_id"]): p["after"] for p in _read_json(snap / "pending_drops.json", []) or []}
    ops = pd.read_parquet(plan / "operations.parquet").sort_values("op_id")
    # events: ("load", key, server, seg) | ("drop", key, server, seg, after-load key or None, independent planned?)
    events = []
    for srv, q in queues.items():
        if srv not in historicals:
            continue
        for e in q.get("segmentsToLoad", []):
            sid = e if isinstance(e, str) else e["segment_id"]
            events.append(("load", ("q", srv, sid), srv, sid))
        for e in q.get("segmentsToDrop", []):
            sid = e if isinstance(e, str) else e["segment_id"]
            after = pending.get((srv, sid))
            events.append(("drop", None, srv, sid, None if after is None else ("q", after, sid), False))
    load_key = {}
    for op in ops.itertuples():
        if op.action == "LOAD":
            load_key[int(op.op_id)] = ("p", int(op.op_id))
            events.append(("load", ("p", int(op.op_id)), op.server, op.segment_id))
    for op in ops.itertuples():
        if op.action == "DROP":
            after = None if pd.isna(op.depends_on) else load_key[int(op.depends_on)]
            events.append(("drop", None, op.server, op.segment_id, after, after is None))
    start_holders: dict[str, set] = {}
    for srv, sid in served:
        start_holders.setdefault(sid, set()).add(srv)
    watched = {sid for sid in start_holders if sid in required}
    planned_drops = {(op.server, op.segment_id) for op in ops.itertuples() if op.action == "DROP"}
    tally = Tally(runs=1, operations=len(ops))

    def run_order(sequence, outcome) -> None:
        holders: dict[str, set] = {sid: set(h) for sid, h in start_holders.items()}
        size = {h: 0 for h in historicals}
        for srv, sid in served:
            size[srv] += sizes.get(sid, 0)
        done: set = set()
        for ev in sequence:
            tally.steps += 1
            if ev[0] == "load":
                _, key, srv, sid = ev
                if not outcome[key]:
                    continue  # failed
                done.add(key)
                if srv not in holders.setdefault(sid, set()):
                    holders[sid].add(srv)
                    size[srv] += sizes.get(sid, 0)
                    if size[srv] > historicals[srv][1]:
                        tally.violations.append(f"{label} capacity: {srv} at {size[srv]} > {historicals[srv][1]} bytes")
                continue
            _, _, srv, sid, after, planned_independent = ev
            if after is not None and after not in done:
                continue  # its load failed (or, in a queue, has not happened): the drop is cancelled
            if srv in holders.get(sid, set()):
                holders[sid].discard(srv)
                size[srv] -= sizes.get(sid, 0)
            if ev[1] is None and (srv, sid) in planned_drops and sid in watched and not holders[sid]:
                tally.violations.append(f"{label} zero: {sid} has no replica after the drop on {srv}")
            if planned_independent and sid in required:
                loaded = sum(1 for h in holders[sid] if historicals[h][0] in targets[sid])
                if loaded < required[sid]:
                    tally.violations.append(
                        f"{label} required: {sid} at {loaded} < {required[sid]} after the drop on {srv}"
                    )
        tally.orders += 1

    loads = [e for e in events if e[0] == "load"]
    drops = [e for e in events if e[0] == "drop"]
    # adversarial: the queued drops, then the plan's, every load failing; then every load first
    run_order(drops, {e[1]: False for e in loads})
    run_order(loads + drops, {e[1]: True for e in loads})
    for _ in range(orders):
        outcome = {e[1]: bool(rng.random() >= 0.2) for e in loads}
        sequence = [events[i] for i in rng.permutation(len(events))]
        # a dependent drop waits for its load: put each one right after its load when it came first
        position = {e[1]: i for i, e in enumerate(sequence) if e[0] == "load"}
        keys = [
            position[e[4]] + 0.5 if e[0] == "drop" and e[4] in position and position[e[4]] > i else i
            for i, e in enumerate(sequence)
        ]
        run_order([e for _, e in sorted(zip(keys, sequence), key=lambda pair: pair[0])], outcome)
    return tally


def soak(spark, clusters: range, runs: int, out: Path, orders: int = 20, failure_rate: float = 0.2, log=None) -> Tally:
    """Plan ``runs`` runs of every cluster seed of ``clusters`` (loads failing at ``failure_rate``)
    and check every run (:func:`check_run`); cluster directories under ``out``."""
    import shutil

    from segment_balancer.tools.simulate import simulate

    total = Tally()
    for seed in clusters:
        base = out / f"cluster-{seed:04d}"
        shutil.rmtree(base, ignore_errors=True)
        snap = random_cluster(base / "snapshot", seed)
        simulate(spark, snap, base / "sim", runs, load_failure_rate=failure_rate, seed=seed)
        rng = np.random.default_rng([seed, 27])
        current = snap
        for run in range(1, runs + 1):
            run_dir = base / "sim" / f"run-{run:03d}"
            total.add(check_run(current, run_dir / "plan", orders, rng, f"cluster {seed} run {run}"))
            current = run_dir / "snapshot"
        total.clusters += 1
        if log:
            log(
                f"cluster {seed}: {total.runs} runs, {total.operations} operations, {total.orders} orders, "
                f"{len(total.violations)} violations so far"
            )
        shutil.rmtree(base / "sim", ignore_errors=True)
    return total
