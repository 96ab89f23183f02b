"""The hand-worked cluster of tests/test_explain_plan.py (its docstring works the plan out).

Four tiers, one datasource each (rules by datasource), every segment 100 bytes, a one-day interval:

- ``z`` (rule ``t1``: 1, ``t2``: 1): ``z0`` (2020-01-01) served by ``t1a`` and ``t1b`` (tier
  ``t1``, 1 000 bytes each) and in the load queue of ``t2x``, the one historical of tier ``t2``
  (150 bytes, empty).
- ``w`` (rule ``t2``: 1): ``w0`` (2020-03-01), served nowhere.
- ``q`` (rule ``t3``: 1): ``q1`` … ``q8`` (2020-02-01 … 2020-02-08), served nowhere; tier ``t3`` has one
  historical ``t3x`` of 10 000 bytes.
- ``x`` (rule ``t4``: 1): the what-if cluster of tests/whatif_cluster.py in tier ``t4``: ``a``
  (decommissioning) serves ``s0`` (2020-01-01) and ``s1`` (2020-01-02), ``b`` serves ``y0``
  (2020-01-04), ``c`` is empty; 10 000 bytes each.

Dynamic config: ``maxSegmentsInNodeLoadingQueue`` 10, ``decommissioningNodes`` [``a:8083``].
"""

from __future__ import annotations

import json
from pathlib import Path


def sid(datasource: str, day: str) -> str:
    """The segment id of ``datasource``'s segment of ``day`` (YYYY-MM-DD), version v1."""
    from datetime import date, timedelta

    end = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    return f"{datasource}_{day}T00:00:00.000Z_{end}T00:00:00.000Z_v1"


SEGMENTS = {
    "z0": ("z", "2020-01-01"),
    "w0": ("w", "2020-03-01"),
    **{f"q{i}": ("q", f"2020-02-0{i}") for i in range(1, 9)},
    "s0": ("x", "2020-01-01"),
    "s1": ("x", "2020-01-02"),
    "y0": ("x", "2020-01-04"),
}
"""Short name -> (datasource, day)."""


def seg(name: str) -> str:
    """The segment id of a short name of :data:`SEGMENTS`."""
    return sid(*SEGMENTS[name])


SERVERS = [  # (name, tier, curr_size, max_size)
    ("t1a", "t1", 100, 1_000),
    ("t1b", "t1", 100, 1_000),
    ("t2x", "t2", 0, 150),
    ("t3x", "t3", 0, 10_000),
    ("a", "t4", 200, 10_000),
    ("b", "t4", 100, 10_000),
    ("c", "t4", 0, 10_000),
]
SERVED = [("t1a", "z0"), ("t1b", "z0"), ("a", "s0"), ("a", "s1"), ("b", "y0")]


def write_cluster(path: Path) -> Path:
    """Write the snapshot directory at ``path`` (created) and return it."""
    path.mkdir(parents=True)
    with open(path / "segments.jsonl", "w") as f:
        for name, (ds, _day) in SEGMENTS.items():
            start, end = seg(name).split("_")[1:3]
            f.write(
                json.dumps(
                    {
                        "dataSource": ds,
                        "interval": f"{start}/{end}",
                        "version": "v1",
                        "loadSpec": {"type": "local"},
                        "shardSpec": {"type": "numbered", "partitionNum": 0},
                        "binaryVersion": 9,
                        "size": 100,
                        "identifier": seg(name),
                    }
                )
                + "\n"
            )
    servers = [
        {
            "server": f"{n}:8083",
            "host": n,
            "server_type": "historical",
            "tier": tier,
            "curr_size": curr,
            "max_size": size,
            "priority": 0,
        }
        for n, tier, curr, size in SERVERS
    ]
    (path / "servers.json").write_text(json.dumps(servers))
    (path / "server_segments.json").write_text(
        json.dumps([{"server": f"{s}:8083", "segment_id": seg(n)} for s, n in SERVED])
    )
    (path / "load_queues.json").write_text(
        json.dumps({"t2x:8083": {"segmentsToLoad": [seg("z0")], "segmentsToDrop": []}})
    )
    (path / "rules.json").write_text(
        json.dumps(
            {
                "_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}],
                "z": [{"type": "loadForever", "tieredReplicants": {"t1": 1, "t2": 1}}],
                "w": [{"type": "loadForever", "tieredReplicants": {"t2": 1}}],
                "q": [{"type": "loadForever", "tieredReplicants": {"t3": 1}}],
                "x": [{"type": "loadForever", "tieredReplicants": {"t4": 1}}],
            }
        )
    )
    (path / "coordinator_config.json").write_text(
        json.dumps({"maxSegmentsInNodeLoadingQueue": 10, "decommissioningNodes": ["a:8083"]})
    )
    (path / "snapshot.json").write_text(json.dumps({"snapshot_time": "2030-01-01T00:00:00.000Z", "cluster": "explain"}))
    return path
