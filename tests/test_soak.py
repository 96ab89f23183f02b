"""The availability soak, seeded and small (one cluster) (``soak.py``; the full 200 × 3 is
``benchmarks/soak_availability.py``, its figures in docs/SIMULATION.md): random clusters planned for
three runs while a fifth of the loads fail, every run's plan completed in many orders, no violation.
The checker itself is tested on plans that break each rule."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from soak import _state, check_run, random_cluster, soak

pytestmark = pytest.mark.simulation


def test_a_random_cluster_over_three_runs_loses_no_availability(spark, tmp_path):
    tally = soak(spark, range(1, 2), 3, tmp_path, orders=20)
    assert (tally.clusters, tally.runs) == (1, 3)
    assert tally.operations > 100 and tally.orders == 3 * 22
    assert tally.violations == []


def _ops(rows):
    cols = [
        "op_id",
        "stage",
        "segment_id",
        "server",
        "tier",
        "action",
        "depends_on",
        "reason",
        "queue_type",
        "size_bytes",
    ]
    frame = pd.DataFrame([dict(zip(cols, r)) for r in rows], columns=cols)
    return frame.astype({"depends_on": "Int64"})


@pytest.fixture
def cluster(tmp_path):
    snap = random_cluster(tmp_path / "snap", 4)
    pairs = json.loads((snap / "server_segments.json").read_text())
    servers = {s["server"]: s for s in json.loads((snap / "servers.json").read_text())}
    return snap, pairs, servers


def _lone_replica(snap, holders) -> str:
    """A segment with a load rule and one served replica, whose tier has another historical."""
    historicals, _, _, required, _ = _state(snap)
    tiers = [t for t, _ in historicals.values()]
    return next(
        sid
        for sid, h in sorted(holders.items())
        if sid in required and len(h) == 1 and h[0] in historicals and tiers.count(historicals[h[0]][0]) > 1
    )


def _plan(tmp_path, rows):
    plan = tmp_path / "plan"
    plan.mkdir(exist_ok=True)
    _ops(rows).to_parquet(plan / "operations.parquet")
    return plan


def test_the_checker_finds_a_drop_of_the_last_replica_and_below_required(cluster, tmp_path):
    snap, pairs, servers = cluster
    holders = {}
    for p in pairs:
        holders.setdefault(p["segment_id"], []).append(p["server"])
    only = _lone_replica(snap, holders)
    plan = _plan(tmp_path, [(1, 12, only, holders[only][0], "t", "DROP", None, "overreplicated", None, 1)])
    found = check_run(snap, plan, 3, np.random.default_rng(0)).violations
    assert any(v.startswith(" zero:") for v in found) and any(v.startswith(" required:") for v in found)


def test_the_checker_finds_a_load_beyond_capacity(cluster, tmp_path):
    snap, pairs, servers = cluster
    name, server = sorted(servers.items())[0]
    held = {p["segment_id"] for p in pairs if p["server"] == name}
    rows, free = [], server["max_size"] - server["curr_size"]
    sizes = {}
    import gzip

    for seg in map(json.loads, gzip.open(snap / "segments.jsonl.gz", "rt")):
        sizes[f"{seg['dataSource']}_{seg['interval'].replace('/', '_')}_{seg['version']}"] = seg["size"]
    for i, (sid, size) in enumerate(sorted(sizes.items())):
        if sid not in held:
            rows.append((i, 1, sid, name, server["tier"], "LOAD", None, "unreplicated", "loading", size))
            free -= size
            if free < 0:
                break
    assert free < 0
    found = check_run(snap, _plan(tmp_path, rows), 0, np.random.default_rng(0)).violations
    assert any(v.startswith(" capacity:") for v in found)


def test_a_move_keeps_its_source_until_its_load_succeeded(cluster, tmp_path):
    """A move of a segment's only replica (load, then the dependent drop) is safe in every order:
    the drop waits for the load and is cancelled when the load fails."""
    snap, pairs, servers = cluster
    holders = {}
    for p in pairs:
        holders.setdefault(p["segment_id"], []).append(p["server"])
    only = _lone_replica(snap, holders)
    source = holders[only][0]
    dest = next(s for s in sorted(servers) if s != source and servers[s]["tier"] == servers[source]["tier"])
    plan = _plan(
        tmp_path,
        [
            (1, 7, only, dest, "t", "LOAD", None, "balancing", "balancing", 1),
            (2, 7, only, source, "t", "DROP", 1, "balancing", None, 1),
        ],
    )
    assert check_run(snap, plan, 30, np.random.default_rng(0)).violations == []
