"""Ranking one segment on a tier: the closed-form live costs (``livecost.TierCosts``) against the
straightforward pair-by-pair evaluation (``cost.placement_cost`` per server), on the tiers of a
generated snapshot.

For each size it reads the generated snapshot of ``bench_plan.py`` (generating it once, cached),
builds every tier's state from the served replicas, and ranks a sample of segments on each tier
both ways. It prints per size and tier: servers, projected replicas, milliseconds per ranking both
ways, the speed ratio, the largest relative cost difference, and in how many rankings the server
order differs beyond ties within 1e-9 relative.

Usage: ``.venv/bin/python benchmarks/bench_livecost.py [--sizes 20000 100000] [--sample 200]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def read_tiers(snapshot: Path):
    """Per tier: server names and (segment index, server index) of served replicas; per segment:
    datasource, start, end (epoch ms)."""
    from segment_balancer.druid.importer import segment_id
    from segment_balancer.druid.instants import parse_instant_ms

    ids, ds, start, end = {}, [], [], []
    with gzip.open(snapshot / "segments.jsonl.gz", "rt") as lines:
        for line in lines:
            seg = json.loads(line)
            s, e = seg["interval"].split("/")
            ids[segment_id(seg)] = len(ds)
            ds.append(seg["dataSource"])
            start.append(parse_instant_ms(s))
            end.append(parse_instant_ms(e))
    servers = {
        s["server"]: s for s in json.loads((snapshot / "servers.json").read_text()) if s["server_type"] == "historical"
    }
    tiers = {}
    for row in json.loads((snapshot / "server_segments.json").read_text()):
        if row["segment_id"] in ids:
            tier = tiers.setdefault(servers[row["server"]]["tier"], {"names": {}, "rows": []})
            idx = tier["names"].setdefault(row["server"], len(tier["names"]))
            tier["rows"].append((ids[row["segment_id"]], idx))
    for name, server in servers.items():  # empty servers too
        tiers[server["tier"]]["names"].setdefault(name, len(tiers[server["tier"]]["names"]))
    avail = {n: s["max_size"] - s["current_size"] for n, s in servers.items()}
    return np.array(ds, dtype=object), np.array(start, np.int64), np.array(end, np.int64), tiers, avail


def bench(snapshot: Path, sample: int, rng) -> list[tuple]:
    from segment_balancer.planner.cost import placement_cost, rank_servers
    from segment_balancer.planner.livecost import IntervalKeys, TierCosts

    ds, start, end, tiers, avail = read_tiers(snapshot)
    keys, key_of = IntervalKeys.build(ds, start, end)
    out = []
    for tier_name, tier in sorted(tiers.items()):
        names = sorted(tier["names"], key=tier["names"].get)
        rows = np.array(tier["rows"], dtype=np.int64)
        live = TierCosts(keys, len(names))
        live.add_many(rows[:, 1], key_of[rows[:, 0]])
        per_server = [rows[rows[:, 1] == s, 0] for s in range(len(names))]
        segs = rng.choice(np.unique(rows[:, 0]), min(sample, len(np.unique(rows[:, 0]))), replace=False)
        holders = [np.array([bool(np.any(p == seg)) for p in per_server]) for seg in segs]
        # each way in its own loop, as a stage ranks one segment after another
        t = time.perf_counter()
        got = [live.costs(int(key_of[seg]), h) for seg, h in zip(segs, holders)]
        t_live = time.perf_counter() - t
        t = time.perf_counter()
        want = [
            np.array(
                [
                    placement_cost(start[seg], end[seg], ds[seg], start[p[p != seg]], end[p[p != seg]], ds[p[p != seg]])
                    for p in per_server
                ]
            )
            for seg in segs
        ]
        t_pair = time.perf_counter() - t
        worst, reordered = 0.0, 0
        a = {n: avail[n] for n in names}
        for g, w in zip(got, want):
            worst = max(worst, float(np.max(np.abs(g - w) / np.maximum(np.abs(w), 1e-12))))
            order_live = rank_servers({n: round_rel(c) for n, c in zip(names, g)}, a)
            order_pair = rank_servers({n: round_rel(c) for n, c in zip(names, w)}, a)
            reordered += order_live != order_pair
        out.append(
            (
                tier_name,
                len(names),
                len(rows),
                len(segs),
                1000 * t_live / len(segs),
                1000 * t_pair / len(segs),
                t_pair / t_live,
                worst,
                reordered,
            )
        )
    return out


def round_rel(cost: float) -> float:
    """``cost`` rounded to 9 significant digits: orders compared with ties within 1e-9 relative aside."""
    return float(f"{cost:.9g}")


def main() -> None:
    from bench_plan import snapshot_for

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7458)
    print(
        f"{'segments':>9} {'tier':<14} {'servers':>7} {'replicas':>9} {'ranked':>6} {'live ms':>8} {'per-pair ms':>11} "
        f"{'speed-up':>8} {'max rel diff':>12} {'order differs':>13}"
    )
    for n in args.sizes:
        for row in bench(snapshot_for(n, args.cache), args.sample, rng):
            tier, servers, replicas, ranked, live_ms, pair_ms, ratio, worst, reordered = row
            print(
                f"{n:>9} {tier:<14} {servers:>7} {replicas:>9} {ranked:>6} {live_ms:>8.3f} {pair_ms:>11.2f} "
                f"{ratio:>7.0f}x {worst:>12.1e} {reordered:>13}",
                flush=True,
            )


if __name__ == "__main__":
    main()
