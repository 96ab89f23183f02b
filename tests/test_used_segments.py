"""Stage 0 ``used_segments`` through Spark: the timeline per (datasource, bucket) with segments
clipped to buckets, recombined per segment. Cases worked by hand from seed 003 and Druid's
timeline rules; one segment straddles a bucket boundary, so its two pieces are judged in different
Spark groups."""

import json

import pandas as pd
from pyroaring import BitMap

from segment_balancer import groups as G
from segment_balancer.rules import format_instant_ms
from segment_balancer.used_segments import BUCKET_MS, CLAMP_LO_MS, used_segments

HOUR, DAY = 3_600_000, 86_400_000
DAY0 = 1_577_836_800_000  # 2020-01-01
# A bucket boundary after 2020: the first CLAMP_LO + k * BUCKET_MS past DAY0 + 30 days.
EDGE = CLAMP_LO_MS + ((DAY0 + 30 * DAY - CLAMP_LO_MS) // BUCKET_MS + 1) * BUCKET_MS


def seg(ds, start, end, version, shard=None, **extra):
    interval = f"{format_instant_ms(start)}/{format_instant_ms(end)}"
    return {"dataSource": ds, "interval": interval, "version": version, "size": 10,
            "shardSpec": shard or {"type": "none"}, **extra}


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
    seg("d", DAY0, DAY0 + DAY, "v1", {"type": "numbered", "partitionNum": 0, "partitions": 2}),
    seg("d", DAY0, DAY0 + DAY, "v1", {"type": "numbered", "partitionNum": 1, "partitions": 2}),
    *[seg("d", DAY0, DAY0 + DAY, "v1", {"type": "numbered_overwrite", "partitionId": 32768 + i,
                                         "startRootPartitionId": 0, "endRootPartitionId": 2,
                                         "minorVersion": 1, "atomicUpdateGroupSize": 2}) for i in range(2)],
    # 37-38: as above on day 2 but the group needs 3 members and has 2: standby; 39-40 stay visible.
    *[seg("d", DAY0 + DAY, DAY0 + 2 * DAY, "v1", {"type": "numbered_overwrite", "partitionId": 32768 + i,
                                                   "startRootPartitionId": 0, "endRootPartitionId": 2,
                                                   "minorVersion": 1, "atomicUpdateGroupSize": 3}) for i in range(2)],
    seg("d", DAY0 + DAY, DAY0 + 2 * DAY, "v1", {"type": "numbered", "partitionNum": 0, "partitions": 2}),
    seg("d", DAY0 + DAY, DAY0 + 2 * DAY, "v1", {"type": "numbered", "partitionNum": 1, "partitions": 2}),
    # 41: v1 under a tombstone (42): overshadowed; the tombstone is visible (never loaded).
    seg("e", DAY0, DAY0 + DAY, "v1"),
    seg("e", DAY0, DAY0 + DAY, "v2", {"type": "tombstone"}),
    # 43: v3 with only 1 of 2 core partitions: incomplete, so standby; 44 (v1 under it) stays visible.
    seg("f", DAY0, DAY0 + DAY, "v3", {"type": "numbered", "partitionNum": 0, "partitions": 2}),
    seg("f", DAY0, DAY0 + DAY, "v1", overshadowed=True),
    # 45: unused.
    seg("g", DAY0, DAY0 + DAY, "v1", used=False),
]
OVERSHADOWED = set(range(1, 25)) | {28, 33, 34, 41}
STANDBY = {37, 38, 43}


def test_timeline_groups_over_segment_rows(spark, tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    xcom = used_segments(spark, snap, tmp_path / "work")
    groups = G.decode_all(xcom["groups"])
    lines = lambda name: {i + 1 for i in groups.get(name, BitMap())}  # noqa: E731
    assert lines("Overshadowed") == OVERSHADOWED
    assert lines("Standby") == STANDBY
    assert lines("Visible") == set(range(1, 45)) - OVERSHADOWED - STANDBY
    table = pd.read_parquet(tmp_path / "work" / "timeline" / "segments.parquet").set_index("line")
    assert table.loc[45, "status"] == "unused"
    assert sorted(table.loc[28, "overshadowed_by"]) == sorted(table.loc[[29, 30], "segment_id"])
    summary = json.loads((tmp_path / "work" / "timeline" / "summary.json").read_text())
    # 44 is flagged overshadowed in the input but is visible: the timeline wins, reported once.
    assert summary["flag_disagreements"] == 1 and table.loc[44, "segment_id"] in summary["flag_examples"][0]
    assert summary["per_datasource"]["a"] == {"overshadowed": 24, "visible": 3}  # 25, 26, 27


def test_plan_drops_overshadowed_replicas_and_never_a_visible_one(spark, tmp_path):
    """s1 serves every used segment but the tombstone; the rule wants one replica of everything.
    Stage 12 must drop exactly the overshadowed segments (reason ``overshadowed``); a visible or
    standby segment may only lose a replica through a move (a DROP that waits for a LOAD)."""
    from segment_balancer.cli import run_plan

    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    from segment_balancer.importer import segment_id

    seg_ids = [segment_id(r) for r in ROWS]
    served = [i for i in range(1, 45) if i != 42]  # not the tombstone
    (snap / "servers.json").write_text(json.dumps([
        {"server": s, "host": s, "server_type": "historical", "tier": "_default_tier",
         "curr_size": 10 * len(served) if s == "s1" else 0, "max_size": 10_000} for s in ("s1", "s2")]))
    (snap / "server_segments.json").write_text(json.dumps([{"server": "s1", "segment_id": seg_ids[i - 1]} for i in served]))
    (snap / "rules.json").write_text(json.dumps({"_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}]}))
    (snap / "snapshot.json").write_text(json.dumps({"snapshot_time": "2030-01-01T00:00:00.000Z", "cluster": "t"}))
    run_plan(spark, snap, tmp_path / "plan")
    ops = pd.read_parquet(tmp_path / "plan" / "operations.parquet")
    line_of = {sid: i + 1 for i, sid in enumerate(seg_ids)}
    drops = ops[(ops.action == "DROP") & ops.depends_on.isna()]
    assert {line_of[s] for s in drops[drops.reason == "overshadowed"].segment_id} == OVERSHADOWED
    assert set(drops.reason) == {"overshadowed"}
    kept = set(served) - OVERSHADOWED
    assert not {line_of[s] for s in drops.segment_id} & kept
    # Every visible or standby segment keeps one replica in the end state.
    end = pd.read_parquet(tmp_path / "plan" / "assignment.parquet")
    assert {line_of[s] for s in end.segment_id} == kept


def test_generated_snapshot_has_compaction_generations_the_timeline_recognises(spark, tmp_path):
    """The bundled generated snapshot: ``orders`` re-ingested its last 6 days (6 old segments
    overshadowed); ``metrics`` minor-compacted root partitions 0-1 on 6 days with complete atomic
    update groups (12 originals overshadowed) and on 4 days with groups still waiting for a member
    (4 standby segments). The input's flags say the same, so nothing disagrees."""
    from pathlib import Path

    snap = Path(__file__).resolve().parents[1] / "include/segment_balancer/snapshots/generated"
    used_segments(spark, snap, tmp_path / "work")
    summary = json.loads((tmp_path / "work" / "timeline" / "summary.json").read_text())
    per = summary["per_datasource"]
    assert (per["orders"]["overshadowed"], per["metrics"]["overshadowed"], per["metrics"]["standby"]) == (6, 12, 4)
    assert sum(s.get("overshadowed", 0) + s.get("standby", 0) for s in per.values()) == 22
    assert summary["flag_disagreements"] == 0
