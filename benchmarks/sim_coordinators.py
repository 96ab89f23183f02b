"""Druid's Coordinator against #7458: simulated Coordinator runs of each cluster with five
configurations, every queued load completing between runs (as ``sim_strategies.py``):

- ``druid cost``: the ``druid`` coordinator as Druid 38.0.0's (``druidVersion`` ``38.0.0``, the
  default), ``druid.coordinator.balancer.strategy`` ``cost`` (Druid's default; the same strategy
  in 35.0.0);
- ``druid diskNormalized 35``: ``druidVersion`` ``35.0.0`` with ``diskNormalized``: the cost
  divided by the historical's segment count, times its usage (``DiskNormalizedStrategy``);
- ``druid diskNormalized 38``: ``druidVersion`` ``38.0.0`` with ``diskNormalized`` (#19303,
  #19422, #19663): the plain cost on a historical whose projected usage is within the threshold
  (``druid.coordinator.balancer.diskNormalized.utilizationThreshold``, default 0.05) of the least
  used candidate, else the cost times ``exp((gap - threshold) / threshold)``
  (``DiskNormalized38Strategy``);
- ``issue7458 cost``: the ``issue7458`` coordinator, ``balancerStrategy`` ``cost`` (its default);
- ``issue7458 avgShedder``: the same with ``avgShedder`` (default thresholds; each run fed the
  previous run's balancer state).

The ``druid`` configurations name their release in the config (``druidVersion``), so a snapshot's
own version does not choose it; the report checks that every run's ``summary.json`` says that
release (``druid_run.release``).

Every configuration keeps its coordinator's defaults otherwise (``druid``: ``smartSegmentLoading``
on; both read the snapshot's ``maxSegmentsInNodeLoadingQueue``).

Clusters (the builders of ``sim_churn.py`` and ``sim_strategies.py``, imported):

- ``druid_sample``: the bundled snapshot;
- ``generated-20k``: ``python -m segment_balancer generate --segments 20000`` (three tiers, two
  historicals lost, one decommissioning, one added empty; queue 500), as the churn table's;
- Druid's ``BalancingStrategiesTest`` clusters as Druid has them (``sim_churn.py``: 1000 segments
  of 500 MB, one replica, historicals of 1 TB, unlimited queue): ``fresh`` (five empty
  historicals), ``added`` (four holding 250 each, round robin, a fifth empty), ``removed`` (four
  of five holding 200 each: the fifth's 200 are unavailable);
- ``heterogeneous`` (``sim_strategies.py``): one tier of historicals of 100, 100, 200, 200, 400 and
  400 GB holding 150 segments of 500 MB each (round robin): 75 %, 37.5 % and 18.75 % full;
- ``near-full``: one tier ``tier_t1`` of six historicals, four of 100 GB and two of 400 GB (Druid's
  test units: 100,000 and 400,000 MB of ``1 << 20`` bytes), 1200 GB in all; datasource ``wiki``,
  186 days from 2022-01-01 of 6 partitions of 500 MB (1116 segments, 558 GB: 46.5 % of the tier),
  ``loadForever`` one replica, unlimited queue. The first 150 days (900 segments) are served
  round robin, segment ``j`` (day ``j // 6``, partition ``j % 6``) on historical ``j % 6``: 150
  each, the 100 GB ones 75 % full and the 400 GB ones 18.75 %; the last 36 days (216 segments,
  108 GB) are on no historical (unavailable, to load). A count-balancing strategy gives each
  historical 36 of them: 186 each, the 100 GB ones 93 % full (7 GB free each) and the 400 GB ones
  23.25 %, while the tier has 642 GB free (53.5 %); even by usage every historical would be 46.5 %;
- ``bimodal``: the shape of apache/druid#19288 (a tier of about 70 servers, half near 70 % full and
  half at 99 % and more, which ``cost`` leaves so: every segment looks optimally placed where it
  is), small: one tier ``tier_t1`` of eight historicals of 100 GB (Druid's test units); datasource
  ``wiki``, 129 days from 2022-01-01 of 24 partitions (3096 segments), ``loadForever`` one
  replica, unlimited queue. Partition ``p`` is 187 MB when ``p mod 8 < 4``, else 265 MB. The
  first 125 days (3000 segments) are served with segment ``j`` (partition ``j mod 24``) on
  historical ``j mod 8``: each historical holds three partitions of every day, 375 segments, so
  their intervals are alike and counts equal; historicals 0–3 are 70.1 % full (70,125 MB) and 4–7
  99.4 % (99,375 MB, 625 MB free: two more segments of 265 MB). The last 4 days (96 segments,
  21.7 GB) are on no historical, the new data round robin would put on full historicals too.
  Even by usage every historical would be 87.5 %.

Measured per cluster and configuration, from ``runs.csv`` and each run's directory:

- ``loaded after run``: the smallest ``k`` (0 = the snapshot already was) such that the status
  every later run's plan started from has nothing unavailable or under-replicated: every row
  ``run > k`` of ``runs.csv`` has ``unreplicated_before`` and ``underreplicated_before`` 0. Run
  ``k + 1``'s status before is the cluster run ``k`` left (``run-k/snapshot``; every queued load
  completes between runs, so no replica counted there is still loading). ``-``: not within
  ``runs − 1`` runs (the last run's own end state has no row to read it from);
- ``balancing moves`` and ``balancing GiB``: over all runs, the plans' ``LOAD`` operations of
  queue type ``balancing`` (moves among active historicals; moves off decommissioning
  historicals, queue type ``decommissioning``, are left out: ``runs.csv``'s ``balancing_moves``
  counts them for ``druid``, whose one balancing duty makes both) and their bytes; ``moves in the
  last run``: those of the last run alone (0: settled, as far as balancing goes);
- ``GiB loaded``: over all runs, the bytes of the replicas that appear: each run's snapshot
  (``run-NNN/snapshot/``) against the one before it (loads the snapshot had queued included);
- ``max-min usage %``: after the last run, max − min of usage (bytes served / ``max_size``) over a
  tier's historicals, decommissioning ones left out, in the widest tier (its name after);
- ``max-min segments``: likewise of segments, in the tier widest by segments (``runs.csv``'s
  ``segments_max_minus_min``);
- ``fullest disk %``: the largest usage of any historical after the last run;
- ``left on decommissioning``: the segments (and GiB) decommissioning historicals still serve
  after the last run (as ``comparison.json``'s ``left_on_decommissioning`` and
  ``bytes_left_on_decommissioning``): the spreads leave those historicals out, so a configuration
  that has not emptied them is compared over the same live historicals but with that data not yet
  moved.

``--report-only`` prints the table from an earlier ``--out``. Resumable: a simulation with its
``runs.csv`` is not run again. ``--runs`` defaults to 15, chosen for the slowest configuration
that settles: ``issue7458 cost`` on ``generated-20k`` moves until run 9 (the churn table), and
avgShedder's moderate gaps need 8 runs in a row (``bimodal``: its shed in run 8). Measured at 15,
both ``druid diskNormalized`` configurations still move 4–15 segments a run on the unequal
clusters (``heterogeneous``, ``near-full``, ``bimodal``), and the three ``druid`` configurations
still move 200–240 a run on ``generated-20k``. They fall slowly, so more runs only lengthen that
tail.
Usage::

    .venv/bin/python benchmarks/sim_coordinators.py [--runs 15] [--out DIR] [--only NAME,...]
        [--configs NAME,...] [--report-only]

The output for this machine is kept in ``docs/SIMULATION.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from segment_balancer.planner.druid_coordinator.dynamic_config import VERSION_KEY

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the Druid simulation clusters
sys.path.insert(0, str(ROOT / "benchmarks"))  # sim_churn's and sim_strategies' clusters

GIB = 1 << 30
STRATEGY_KEY = "druid.coordinator.balancer.strategy"
CONFIGS = {
    "druid cost": ("druid", {VERSION_KEY: "38.0.0", STRATEGY_KEY: "cost"}),
    "druid diskNormalized 35": ("druid", {VERSION_KEY: "35.0.0", STRATEGY_KEY: "diskNormalized"}),
    "druid diskNormalized 38": ("druid", {VERSION_KEY: "38.0.0", STRATEGY_KEY: "diskNormalized"}),
    "issue7458 cost": ("issue7458", {"balancerStrategy": "cost"}),
    "issue7458 avgShedder": ("issue7458", {"balancerStrategy": "avgShedder"}),
}
CLUSTERS = [
    "druid_sample",
    "generated-20k",
    "fresh",
    "added",
    "removed",
    "heterogeneous",
    "near-full",
    "bimodal",
]
NEAR_FULL_GB = [100, 100, 100, 100, 400, 400]
NEAR_FULL_DAYS, NEAR_FULL_SERVED_DAYS, NEAR_FULL_PARTITIONS = 186, 150, 6
BIMODAL_HISTORICALS, BIMODAL_GB = 8, 100
BIMODAL_DAYS, BIMODAL_SERVED_DAYS, BIMODAL_PARTITIONS = 129, 125, 24
BIMODAL_MB = (187, 265)
"""``bimodal``: the size of a segment whose partition number mod 8 is below 4 (it is served by the
first half of the historicals), and of the others."""
GB_MB = 1000  # Druid's tests size historicals in MB (1 << 20 bytes): 100 GB is 100,000 of them


def build_clusters(cache: Path, only: set[str]) -> dict[str, Path]:
    """The snapshots of ``only``, made once under ``cache``."""
    import sim_churn
    import sim_strategies
    from druid_simulation import MB, historical, wiki_segments, write_cluster

    out: dict[str, Path] = {}
    # Druid's own BalancingStrategiesTest clusters (1 TB historicals) and the two big ones from the
    # churn table; heterogeneous from the strategies table. Neither builder is given an empty set:
    # that would mean every cluster.
    churn = only & {"druid_sample", "generated-20k", "fresh", "added", "removed"}
    if churn:
        out.update(sim_churn.build_clusters(cache, churn))
    if "heterogeneous" in only:
        out.update(sim_strategies.build_clusters(cache, {"heterogeneous"}))
    if "near-full" in only:
        segments = wiki_segments(days=NEAR_FULL_DAYS, partitions=NEAR_FULL_PARTITIONS)
        n, served = len(NEAR_FULL_GB), NEAR_FULL_SERVED_DAYS * NEAR_FULL_PARTITIONS
        snap = write_cluster(
            cache / "coordinators-near-full",
            segments,
            {historical(i): [j for j in range(served) if j % n == i] for i in range(n)},
        )
        servers = json.loads((snap / "servers.json").read_text())
        for row, gb in zip(servers, NEAR_FULL_GB):
            row["max_size"] = gb * GB_MB << 20
        (snap / "servers.json").write_text(json.dumps(servers, indent=1))
        out["near-full"] = snap
    if "bimodal" in only:
        segments = wiki_segments(days=BIMODAL_DAYS, partitions=BIMODAL_PARTITIONS)
        n, half = BIMODAL_HISTORICALS, BIMODAL_HISTORICALS // 2
        for j, segment in enumerate(segments):
            segment["size"] = BIMODAL_MB[j % n >= half] * MB
        served = BIMODAL_SERVED_DAYS * BIMODAL_PARTITIONS
        out["bimodal"] = write_cluster(
            cache / "coordinators-bimodal",
            segments,
            {historical(i): [j for j in range(served) if j % n == i] for i in range(n)},
            size_mb=BIMODAL_GB * GB_MB,
        )
    return {name: out[name] for name in CLUSTERS if name in out}


def sim_dir(out: Path, cluster: str, config: str) -> Path:
    return out / cluster / config.replace(" ", "-")


def loaded_after(runs: pd.DataFrame) -> int | None:
    """The smallest ``k`` such that every run after ``k`` started with nothing unavailable or
    under-replicated (module docstring); None when even the last run did not."""
    short = (runs["unreplicated_before"] > 0) | (runs["underreplicated_before"] > 0)
    if short.iloc[-1]:
        return None
    return int(runs.loc[short, "run"].max()) if short.any() else 0


def moves(sim: Path, runs: int, first: int = 1) -> tuple[int, int]:
    """Over runs ``first``..``runs`` of ``sim``: the balancing moves (``LOAD`` of queue type
    ``balancing``) the plans queued, and their bytes."""
    count = size = 0
    for run in range(first, runs + 1):
        ops = pd.read_parquet(
            sim / f"run-{run:03d}" / "plan" / "operations.parquet", columns=["action", "queue_type", "size_bytes"]
        )
        mine = ops[(ops["action"] == "LOAD") & (ops["queue_type"] == "balancing")]
        count, size = count + len(mine), size + int(mine["size_bytes"].sum())
    return count, size


def bytes_loaded(sim: Path, snapshot: Path, runs: int) -> int:
    """The bytes of the replicas that appear over runs 1..``runs`` of ``sim``: each run's snapshot
    against the one before it (``snapshot`` for run 1), so a replica loaded, dropped and loaded
    again counts twice."""
    import gzip

    from segment_balancer.druid.importer import segment_id
    from segment_balancer.druid.snapshot.files import segments_path
    from segment_balancer.tools.simulate import _read_replicas

    path = segments_path(snapshot)
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as lines:
        size = {segment_id(p): int(p["size"]) for p in map(json.loads, filter(str.strip, lines))}
    before, total = set(_read_replicas(snapshot).itertuples(index=False, name=None)), 0
    for run in range(1, runs + 1):
        after = set(_read_replicas(sim / f"run-{run:03d}" / "snapshot").itertuples(index=False, name=None))
        total += sum(size[s] for _, s in after - before)
        before = after
    return total


def end_state(sim: Path, run: int) -> dict:
    """After ``run``: the widest tier by usage spread and by segment spread (live historicals) and
    their spreads, and the fullest historical's usage (every historical)."""
    from sim_churn import live_historicals

    every = pd.read_csv(sim / f"run-{run:03d}" / "historicals.csv")
    every = every[every["max_size"] > 0]
    held = live_historicals(sim, run)
    held = held[held["max_size"] > 0]
    usage = 100.0 * held["bytes"] / held["max_size"]
    spread = {tier: float(part.max() - part.min()) for tier, part in usage.groupby(held["tier"])}
    widest = max(spread, key=spread.get)
    segments = {tier: int(part["segments"].max() - part["segments"].min()) for tier, part in held.groupby("tier")}
    most = max(segments, key=segments.get)
    fullest = (100.0 * every["bytes"] / every["max_size"]).idxmax()
    dying = every[~every["server"].isin(set(held["server"]))]
    return {
        "usage_tier": widest,
        "usage_spread": spread[widest],
        "segments_tier": most,
        "segments_spread": segments[most],
        "fullest": 100.0 * every.loc[fullest, "bytes"] / every.loc[fullest, "max_size"],
        "fullest_server": every.loc[fullest, "server"],
        "left_on_decommissioning": int(dying["segments"].sum()),
        "bytes_left_on_decommissioning": int(dying["bytes"].sum()),
    }


def check_release(sim: Path, runs: int, overrides: dict) -> None:
    """Raise ValueError unless every run of a ``druid`` simulation reproduced the release its
    configuration names (``summary.json``'s ``druid_run.release``): an ``--out`` of another
    configuration's runs is not reported under this one's name."""
    want = overrides[VERSION_KEY]
    for run in range(1, runs + 1):
        summary = json.loads((sim / f"run-{run:03d}" / "plan" / "summary.json").read_text())
        got = (summary.get("druid_run") or {}).get("release")
        if got != want:
            raise ValueError(f"{sim}: run {run} was planned by Druid {got}'s Coordinator, not {want}'s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-coordinators")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    parser.add_argument("--only", help="comma-separated cluster names")
    parser.add_argument("--configs", help=f"comma-separated configurations (default: all of {', '.join(CONFIGS)})")
    parser.add_argument("--report-only", action="store_true", help="read the simulations already in --out")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    names = args.only.split(",") if args.only else CLUSTERS
    configs = args.configs.split(",") if args.configs else list(CONFIGS)
    unknown = [n for n in names if n not in CLUSTERS] + [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown cluster or configuration: {', '.join(unknown)}")

    clusters = build_clusters(args.cache, set(names))  # made once; the report reads their replicas
    if not args.report_only:
        from segment_balancer.spark.session import get_session
        from segment_balancer.tools.simulate import simulate

        spark = get_session("sim_coordinators")
        for name, snap in clusters.items():
            for config in configs:
                out = sim_dir(args.out, name, config)
                if (out / "runs.csv").is_file():
                    continue
                coordinator, overrides = CONFIGS[config]
                started = time.monotonic()
                shutil.rmtree(out, ignore_errors=True)
                simulate(spark, snap, out, args.runs, overrides, coordinator=coordinator)
                print(
                    f"{name} {config}: {time.monotonic() - started:.0f} s for {args.runs} runs",
                    file=sys.stderr,
                    flush=True,
                )
        spark.stop()

    rows = []
    for name in names:
        for config in configs:
            sim = sim_dir(args.out, name, config)
            if not (sim / "runs.csv").is_file():
                continue
            runs = pd.read_csv(sim / "runs.csv")
            last = len(runs)
            coordinator, overrides = CONFIGS[config]
            if coordinator == "druid":
                check_release(sim, last, overrides)
            (count, moved), end = moves(sim, last), end_state(sim, last)
            last_moves = moves(sim, last, first=last)[0]
            loaded = loaded_after(runs)
            rows.append(
                {
                    "cluster": name,
                    "coordinator": config,
                    "loaded after run": "-" if loaded is None else loaded,
                    "balancing moves": count,
                    "balancing GiB": f"{moved / GIB:.1f}",
                    "moves in the last run": last_moves,
                    "GiB loaded": f"{bytes_loaded(sim, clusters[name], last) / GIB:.1f}",
                    "max-min usage %": f"{end['usage_spread']:.1f} ({end['usage_tier']})",
                    "max-min segments": f"{end['segments_spread']} ({end['segments_tier']})",
                    "fullest disk %": f"{end['fullest']:.1f}",
                    "left on decommissioning": f"{end['left_on_decommissioning']} "
                    f"({end['bytes_left_on_decommissioning'] / GIB:.1f} GiB)",
                }
            )
    print(
        f"{args.runs} runs, every queued load completing; moves among active historicals; "
        "spreads, fullest disk and what decommissioning historicals still serve after the last run"
    )
    print(pd.DataFrame(rows).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
