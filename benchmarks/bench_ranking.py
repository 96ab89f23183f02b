"""Wall time of ``ranking.start_of_run_rankings`` for a few cluster sizes.

Usage: ``.venv/bin/python benchmarks/bench_ranking.py [N:S ...]`` (default sizes below), where N is
the number of segments and S the number of servers of the single tier ``hot``. Segments are day
chunks of 4 datasources over ~2 years with ~8 partitions each; every segment has 2 replicas on random
servers; every segment is a pair to rank. The result is written to Spark's ``noop`` sink, so nothing
is collected to the driver.
"""

from __future__ import annotations

import sys
import time

import numpy as np

DAY = 86_400_000
T0 = 1_640_995_200_000  # 2022-01-01


def make_frames(spark, n_segments: int, n_servers: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    chunk = rng.integers(0, 730, n_segments)  # day index
    ds = rng.choice(np.array(["a", "b", "c", "d"]), n_segments)
    start = T0 + chunk * DAY
    segs = [(int(i), str(ds[i]), int(start[i]), int(start[i] + DAY)) for i in range(n_segments)]
    pairs = spark.createDataFrame(
        [(i, "hot", d, s, e) for i, d, s, e in segs],
        "idx long, tier string, datasource string, start_ms long, end_ms long",
    )
    holders = np.stack([rng.permutation(n_servers)[:2] for _ in range(n_segments)])
    projected = spark.createDataFrame(
        [(f"h{h}", "hot", i, d, s, e) for (i, d, s, e), hs in zip(segs, holders) for h in hs],
        "server string, tier string, idx long, datasource string, start_ms long, end_ms long",
    )
    servers = spark.createDataFrame(
        [(f"h{k}", "hot", int(rng.integers(1, 10**12)), False) for k in range(n_servers)],
        "server string, tier string, available_bytes long, decommissioning boolean",
    )
    return pairs, projected, servers


def main(argv: list[str]) -> None:
    from segment_balancer.planner.ranking import start_of_run_rankings
    from segment_balancer.spark.session import local_session

    sizes = [tuple(int(x) for x in a.split(":")) for a in argv] or [(1_000, 5), (10_000, 10), (50_000, 20)]
    spark = local_session("bench_ranking")
    print(f"{'segments':>10} {'servers':>8} {'wall s':>8}")
    for n, s in sizes:
        pairs, projected, servers = make_frames(spark, n, s)
        for df in (pairs, projected, servers):
            df.cache().count()
        started = time.perf_counter()
        start_of_run_rankings(pairs, projected, servers).write.format("noop").mode("overwrite").save()
        print(f"{n:>10} {s:>8} {time.perf_counter() - started:>8.1f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
