"""The hand-worked what-if cluster of tests/test_whatif.py (its docstring works the plans out):
historicals ``a`` (serves s0, s1), ``b`` (serves y0) and ``c`` (empty) of ``_default_tier``, and a broker."""

from __future__ import annotations

import json
from pathlib import Path

DAY = {"s0": "2020-01-01", "s1": "2020-01-02", "y0": "2020-01-04"}


def sid(name: str) -> str:
    start = DAY[name]
    end = f"2020-01-{int(start[-2:]) + 1:02d}"
    return f"x_{start}T00:00:00.000Z_{end}T00:00:00.000Z_v1"


def write_cluster(path: Path) -> Path:
    path.mkdir(parents=True)
    with open(path / "segments.jsonl", "w") as f:
        for name in DAY:
            start, end = sid(name).split("_")[1:3]
            f.write(
                json.dumps(
                    {
                        "dataSource": "x",
                        "interval": f"{start}/{end}",
                        "version": "v1",
                        "loadSpec": {"type": "local"},
                        "shardSpec": {"type": "numbered", "partitionNum": 0},
                        "binaryVersion": 9,
                        "size": 100,
                        "identifier": sid(name),
                    }
                )
                + "\n"
            )
    servers = [
        {
            "server": f"{n}:8083",
            "host": n,
            "server_type": "historical",
            "tier": "_default_tier",
            "curr_size": size,
            "max_size": 10_000,
            "priority": 0,
        }
        for n, size in (("a", 200), ("b", 100), ("c", 0))
    ]
    servers.append(
        {
            "server": "broker:8082",
            "host": "broker",
            "server_type": "broker",
            "tier": None,
            "curr_size": 0,
            "max_size": 0,
            "priority": 0,
        }
    )
    (path / "servers.json").write_text(json.dumps(servers))
    (path / "server_segments.json").write_text(
        json.dumps(
            [
                {"server": "a:8083", "segment_id": sid("s0")},
                {"server": "a:8083", "segment_id": sid("s1")},
                {"server": "b:8083", "segment_id": sid("y0")},
            ]
        )
    )
    (path / "load_queues.json").write_text(json.dumps({"a:8083": {"segmentsToLoad": [], "segmentsToDrop": []}}))
    (path / "rules.json").write_text(
        json.dumps({"_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}]})
    )
    (path / "coordinator_config.json").write_text(json.dumps({"decommissioningNodes": []}))
    (path / "snapshot.json").write_text(json.dumps({"snapshot_time": "2030-01-01T00:00:00.000Z", "cluster": "w"}))
    return path
