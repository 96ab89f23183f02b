"""A generated snapshot with overwritten, compacted and partially compacted data, worked by hand
(seed 003 and Druid's timeline rules), shared by the stage-0 tests (test_used_segments.py) and the
DAG end-to-end test. Segments are numbered by their line in ``segments.jsonl`` (1-based)."""

import json
from pathlib import Path

from segment_balancer.druid.importer import segment_id
from segment_balancer.druid.rules import format_instant_ms
from segment_balancer.spark.used_segments import BUCKET_MS, CLAMP_LO_MS

HOUR, DAY = 3_600_000, 86_400_000
DAY0 = 1_577_836_800_000  # 2020-01-01
# A bucket boundary after 2020: the first CLAMP_LO + k * BUCKET_MS past DAY0 + 30 days.
EDGE = CLAMP_LO_MS + ((DAY0 + 30 * DAY - CLAMP_LO_MS) // BUCKET_MS + 1) * BUCKET_MS


def seg(ds, start, end, version, shard=None, **extra):
    interval = f"{format_instant_ms(start)}/{format_instant_ms(end)}"
    return {
        "dataSource": ds,
        "interval": interval,
        "version": version,
        "size": 10,
        "shardSpec": shard or {"type": "none"},
        **extra,
    }


def numbered(partition, partitions):
    return {"type": "numbered", "partitionNum": partition, "partitions": partitions}


def overwrite(partition_id, root, minor, group_size):
    """A ``numbered_overwrite`` shard spec: partition ``32768 + partition_id`` over root partitions
    ``[root[0], root[1])``, minor version ``minor``, atomic update group of ``group_size``."""
    return {
        "type": "numbered_overwrite",
        "partitionId": 32768 + partition_id,
        "startRootPartitionId": root[0],
        "endRootPartitionId": root[1],
        "minorVersion": minor,
        "atomicUpdateGroupSize": group_size,
    }


ROWS = [
    # 1-24: HOUR v1 under a complete DAY v2 (25): all hours overshadowed.
    *[seg("a", DAY0 + h * HOUR, DAY0 + (h + 1) * HOUR, "v1") for h in range(24)],
    seg("a", DAY0, DAY0 + DAY, "v2"),
    # 26: DAY v1 on day 2, only half covered by 27 (v2): stays visible.
    seg("a", DAY0 + DAY, DAY0 + 2 * DAY, "v1"),
    seg("a", DAY0 + DAY, DAY0 + DAY + 12 * HOUR, "v2"),
    # 28: v1 across the bucket edge, covered by 29 and 30 on either side: overshadowed.
    seg("b", EDGE - DAY, EDGE + DAY, "v1"),
    seg("b", EDGE - DAY, EDGE, "v2"),
    seg("b", EDGE, EDGE + DAY, "v2"),
    # 31: v1 across the edge, covered only before it (32): visible.
    seg("c", EDGE - DAY, EDGE + DAY, "v1"),
    seg("c", EDGE - DAY, EDGE, "v2"),
    # 33-34: numbered v1 (2 core partitions); 35-36: minor version 1 over root range [0, 2),
    # complete group of 2: 33-34 overshadowed.
    seg("d", DAY0, DAY0 + DAY, "v1", numbered(0, 2)),
    seg("d", DAY0, DAY0 + DAY, "v1", numbered(1, 2)),
    *[seg("d", DAY0, DAY0 + DAY, "v1", overwrite(i, (0, 2), 1, 2)) for i in range(2)],
    # 37-38: as above on day 2 but the group needs 3 members and has 2: standby; 39-40 stay visible.
    *[seg("d", DAY0 + DAY, DAY0 + 2 * DAY, "v1", overwrite(i, (0, 2), 1, 3)) for i in range(2)],
    seg("d", DAY0 + DAY, DAY0 + 2 * DAY, "v1", numbered(0, 2)),
    seg("d", DAY0 + DAY, DAY0 + 2 * DAY, "v1", numbered(1, 2)),
    # 41: v1 under a tombstone (42): overshadowed; the tombstone is visible (never loaded).
    seg("e", DAY0, DAY0 + DAY, "v1"),
    seg("e", DAY0, DAY0 + DAY, "v2", {"type": "tombstone"}),
    # 43: v3 with only 1 of 2 core partitions: incomplete, so standby; 44 (v1 under it) stays visible.
    seg("f", DAY0, DAY0 + DAY, "v3", numbered(0, 2)),
    seg("f", DAY0, DAY0 + DAY, "v1", overshadowed=True),
    # 45: unused.
    seg("g", DAY0, DAY0 + DAY, "v1", used=False),
    # Several compaction generations of one version. Day 1: 46-47 the root generation (2 core
    # partitions), 48-49 minor version 1 over [0, 2) (group of 2, complete), 50 minor version 2
    # over [0, 2) (group of 1, complete): only 50 is visible.
    seg("h", DAY0, DAY0 + DAY, "v1", numbered(0, 2)),
    seg("h", DAY0, DAY0 + DAY, "v1", numbered(1, 2)),
    *[seg("h", DAY0, DAY0 + DAY, "v1", overwrite(i, (0, 2), 1, 2)) for i in range(2)],
    seg("h", DAY0, DAY0 + DAY, "v1", overwrite(2, (0, 2), 2, 1)),
    # Day 2, falling back: 51-52 the root generation, 53-54 minor version 1 (complete), 55 minor
    # version 2 with 1 of its group of 2: standby, so 53-54 stay visible and 51-52 overshadowed.
    seg("h", DAY0 + DAY, DAY0 + 2 * DAY, "v1", numbered(0, 2)),
    seg("h", DAY0 + DAY, DAY0 + 2 * DAY, "v1", numbered(1, 2)),
    *[seg("h", DAY0 + DAY, DAY0 + 2 * DAY, "v1", overwrite(i, (0, 2), 1, 2)) for i in range(2)],
    seg("h", DAY0 + DAY, DAY0 + 2 * DAY, "v1", overwrite(2, (0, 2), 2, 2)),
]
OVERSHADOWED = set(range(1, 25)) | {28, 33, 34, 41} | {46, 47, 48, 49, 51, 52}
STANDBY = {37, 38, 43, 55}
UNUSED = {45}
TOMBSTONES = {42}
VISIBLE = set(range(1, len(ROWS) + 1)) - OVERSHADOWED - STANDBY - UNUSED
# Overshadowed segments whose overshadowing segment no server serves yet (25, which stage 1 loads):
# they keep their replicas (ALGORITHM.md stage 12). Every other overshadowed segment is covered by
# served segments (29-30, 35-36, 50, 53-54) or by the tombstone 42, which needs no replica.
WAITING = set(range(1, 25))
SEGMENT_IDS = [segment_id(r) for r in ROWS]
# Who serves what: s1 every used segment but the tombstone, 25 and 53-54; s3 (decommissioning)
# 53-54; s2 nothing. 25 is served nowhere (stage 1 loads it), 53-54 move off s3 (stage 5).
SERVED_BY = {"s1": sorted(set(range(1, len(ROWS) + 1)) - UNUSED - TOMBSTONES - {25, 53, 54}), "s2": [], "s3": [53, 54]}
SERVED = sorted(set(SERVED_BY["s1"]) | set(SERVED_BY["s3"]))


def write_snapshot(snap: Path) -> Path:
    """Write the snapshot to ``snap``: segments ``ROWS``; historicals s1, s2 and s3 (decommissioning)
    in ``_default_tier`` serving ``SERVED_BY``; one replica of everything; 10 bytes a segment.
    Returns ``snap``."""
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (snap / "servers.json").write_text(
        json.dumps(
            [
                {
                    "server": s,
                    "host": s,
                    "server_type": "historical",
                    "tier": "_default_tier",
                    "curr_size": 10 * len(lines),
                    "max_size": 10_000,
                }
                for s, lines in SERVED_BY.items()
            ]
        )
    )
    (snap / "server_segments.json").write_text(
        json.dumps([{"server": s, "segment_id": SEGMENT_IDS[i - 1]} for s, lines in SERVED_BY.items() for i in lines])
    )
    (snap / "rules.json").write_text(
        json.dumps({"_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}]})
    )
    (snap / "coordinator_config.json").write_text(json.dumps({"decommissioningNodes": ["s3"]}))
    (snap / "snapshot.json").write_text(json.dumps({"snapshot_time": "2030-01-01T00:00:00.000Z", "cluster": "t"}))
    return snap


def line_of(segment: str) -> int:
    """The 1-based line of ``segment`` (an id) in ``segments.jsonl``."""
    return SEGMENT_IDS.index(segment) + 1
