"""The clusters of Druid's Coordinator simulation tests
(``server/src/test/java/org/apache/druid/server/coordinator/simulate/``) as snapshots.

``CoordinatorSimulationBaseTest``: historicals are named ``<tier>__hist__<i>`` and sized in MB
(``serverSizeMb << 20`` bytes); ``Segments.WIKI_10X100D`` is datasource ``wiki``, 100 days from
2022-01-01, 10 numbered partitions a day, 500 MB each. The snapshot time is 2022-06-01 (after every
segment: rules are ``loadForever``)."""

from __future__ import annotations

import json
from pathlib import Path

from segment_balancer.druid.importer import segment_id
from segment_balancer.druid.rules import format_instant_ms

DAY = 86_400_000
JAN_1_2022 = 1_640_995_200_000
T1, T2 = "tier_t1", "tier_t2"
MB = 1 << 20
SIZE_1TB_MB = 1_000_000  # BalancingStrategiesTest.SIZE_1TB, in MB


def historical(i: int, tier: str = T1) -> str:
    """``createHistorical(i, tier, ...)``'s name."""
    return f"{tier}__hist__{i}"


def wiki_segments(days: int = 100, partitions: int = 10, size_mb: int = 500, datasource: str = "wiki") -> list[dict]:
    """``CreateDataSegments.ofDatasource(datasource).forIntervals(days, DAY).startingAt("2022-01-01")
    .withNumPartitions(partitions).eachOfSizeInMb(size_mb)`` as segment payloads, day by day
    (``Segments.WIKI_10X100D``; ``WIKI_10X1D`` with ``days=1``; ``KOALA_100X100D`` with
    ``partitions=100, datasource="koala"``)."""
    out = []
    for d in range(days):
        start, end = JAN_1_2022 + d * DAY, JAN_1_2022 + (d + 1) * DAY
        for p in range(partitions):
            out.append(
                {
                    "dataSource": datasource,
                    "interval": f"{format_instant_ms(start)}/{format_instant_ms(end)}",
                    "version": "2022-06-01T00:00:00.000Z",
                    "size": size_mb * MB,
                    "shardSpec": {"type": "numbered", "partitionNum": p, "partitions": partitions},
                }
            )
    return out


def write_cluster(
    snap: Path,
    segments: list[dict],
    served: dict[str, list[int]],
    *,
    tier: str = T1,
    size_mb: int = SIZE_1TB_MB,
    rules: dict | None = None,
    config: dict | None = None,
    tiers: dict[str, str] | None = None,
) -> Path:
    """Write a snapshot: ``segments`` (payloads), historicals ``served`` ({name: positions in
    ``segments`` it serves}) of ``size_mb`` each in ``tier`` (or ``tiers[name]``), ``rules``
    (default: everything loaded forever, one replica in ``tier``) and the dynamic ``config``
    (default: unlimited queue, as ``createDynamicConfig(_, 0, _)``). Returns ``snap``."""
    tiers = tiers or {}
    snap.mkdir(parents=True, exist_ok=True)
    ids = [segment_id(s) for s in segments]
    (snap / "segments.jsonl").write_text("".join(json.dumps(s) + "\n" for s in segments))
    (snap / "servers.json").write_text(
        json.dumps(
            [
                {
                    "server": name,
                    "host": name,
                    "server_type": "historical",
                    "tier": tiers.get(name, tier),
                    "curr_size": sum(segments[i]["size"] for i in held),
                    "max_size": size_mb * MB,
                    "priority": 0,
                }
                for name, held in served.items()
            ],
            indent=1,
        )
    )
    (snap / "server_segments.json").write_text(
        json.dumps([{"server": name, "segment_id": ids[i]} for name, held in served.items() for i in held], indent=0)
    )
    (snap / "rules.json").write_text(
        json.dumps(rules or {"_default": [{"type": "loadForever", "tieredReplicants": {tier: 1}}]})
    )
    (snap / "coordinator_config.json").write_text(json.dumps(config or {"maxSegmentsInNodeLoadingQueue": 0}))
    (snap / "snapshot.json").write_text(
        json.dumps({"snapshot_time": "2022-06-01T00:00:00.000Z", "cluster": "druid-sim"})
    )
    return snap


def per_historical(sim: Path, run: int) -> dict[str, int]:
    """Segments per historical after simulated run ``run`` of the simulation in ``sim``
    (``run-NNN/historicals.csv``)."""
    import pandas as pd

    frame = pd.read_csv(sim / f"run-{run:03d}" / "historicals.csv")
    return dict(zip(frame["server"], frame["segments"]))
