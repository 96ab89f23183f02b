"""Stage 0 ``used_segments`` through Spark: the timeline per datasource in one Python task per
partition, over intervals clipped to 1900-2200. Cases worked by hand from seed 003 and Druid's
timeline rules (one segment straddles a ``BUCKET_MS`` boundary); a line only the reference reader
can type."""

import json
import os

import pandas as pd
import pytest
from compaction_snapshot import OVERSHADOWED, ROWS, SEGMENT_IDS, STANDBY, TOMBSTONES, UNUSED, VISIBLE, WAITING, line_of
from pyroaring import BitMap

from segment_balancer.planner import groups as G
from segment_balancer.spark.used_segments import used_segments


def test_timeline_groups_over_segment_rows(spark, tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    xcom = used_segments(spark, snap, tmp_path / "work")
    groups = G.decode_all(xcom["groups"])
    lines = lambda name: {i + 1 for i in groups.get(name, BitMap())}  # noqa: E731
    assert lines("Overshadowed") == OVERSHADOWED
    assert lines("Standby") == STANDBY
    assert lines("Visible") == VISIBLE
    table = pd.read_parquet(tmp_path / "work" / "timeline" / "segments.parquet").set_index("line")
    assert set(table.index[table.status == "unused"]) == UNUSED == {45}
    assert sorted(table.loc[28, "overshadowed_by"]) == sorted(table.loc[[29, 30], "segment_id"])
    summary = json.loads((tmp_path / "work" / "timeline" / "summary.json").read_text())
    # 44 is flagged overshadowed in the input but is visible: the timeline wins, reported once.
    assert summary["flag_disagreements"] == 1 and table.loc[44, "segment_id"] in summary["flag_examples"][0]
    assert summary["per_datasource"]["a"] == {"overshadowed": 24, "visible": 3}  # 25, 26, 27
    # h: 46-49 and 51-52 overshadowed; 50, 53 and 54 visible; 55 standby.
    assert summary["per_datasource"]["h"] == {"overshadowed": 6, "standby": 1, "visible": 3}
    assert sorted(table.loc[48, "overshadowed_by"]) == [SEGMENT_IDS[50 - 1]]


def test_plan_drops_overshadowed_replicas_and_never_a_visible_one(compaction_planned):
    """The rule wants one replica of everything (see compaction_snapshot.SERVED_BY). Stage 12 must
    drop exactly the overshadowed segments whose overshadowing segments are served (reason
    ``overshadowed``); 1-24 wait for 25, which is served nowhere (stage 1 loads it). A visible or
    standby segment may only lose a replica through a move (a DROP that waits for a LOAD): 53-54
    off the decommissioning s3 in stage 5."""
    base, summary, ops = compaction_planned
    drops = ops[(ops.action == "DROP") & ops.depends_on.isna()]
    assert {line_of(s) for s in drops[drops.reason == "overshadowed"].segment_id} == OVERSHADOWED - WAITING
    assert summary["overshadowed_waiting"] == {
        "segments": 24,
        "served_replicas": 24,
        "per_datasource": {"a": {"segments": 24, "served_replicas": 24}},
    }
    assert set(drops.reason) == {"overshadowed"}
    assert not {line_of(s) for s in drops.segment_id} & (VISIBLE | STANDBY)
    assert [line_of(s) for s in ops[ops.stage == 1].segment_id] == [25]
    moved = ops[(ops.stage == 5) & (ops.action == "DROP")]
    assert sorted(line_of(s) for s in moved.segment_id) == [53, 54] and set(moved.server) == {"s3"}
    assert moved.depends_on.notna().all()
    # Every visible or standby segment has one replica in the end state, none on s3; the tombstone
    # none; the waiting 1-24 keep theirs.
    end = pd.read_parquet(base / "plan" / "assignment.parquet")
    assert sorted(line_of(s) for s in end.segment_id) == sorted(((VISIBLE | STANDBY) - TOMBSTONES) | WAITING)
    assert "s3" not in set(end.server)
    assert summary["timeline"]["per_datasource"]["d"] == {"overshadowed": 2, "standby": 2, "visible": 4}


def test_explain_says_what_overshadows_a_segment_and_why(spark, compaction_planned):
    """``explain`` on the planned work directory: 28 (across the bucket edge) is overshadowed by the
    two v2 days 29 and 30; 48 (minor version 1) by 50 (minor version 2, complete); 55 is standby
    because its atomic update group has 1 of 2 members; 53 stays visible."""
    from segment_balancer.plan.explain import explain_segment

    base, _, _ = compaction_planned
    timeline = lambda n: explain_segment(base / "work", SEGMENT_IDS[n - 1])["timeline"]  # noqa: E731
    t28 = timeline(28)
    assert t28["status"] == "overshadowed"
    assert sorted(t28["overshadowed_by"]) == sorted([SEGMENT_IDS[28], SEGMENT_IDS[29]])
    assert [(p["relation"], p["version"]) for p in t28["complete_timeline"]] == [("higher", "v2"), ("higher", "v2")]
    t48 = timeline(48)
    assert (t48["status"], t48["minor_overshadowed_by"]) == ("overshadowed", [SEGMENT_IDS[50 - 1]])
    assert t48["atomic_update_group"] == {
        "root_range": [0, 2],
        "minor_version": 1,
        "size": 2,
        "present": 2,
        "state": "overshadowed",
    }
    t55 = timeline(55)
    assert t55["status"] == "standby"
    assert t55["atomic_update_group"]["present"] == 1 and t55["atomic_update_group"]["size"] == 2
    assert "atomic update group incomplete (1 of 2)" in t55["reason"]
    assert timeline(53)["status"] == "visible"


def test_generated_snapshot_has_compaction_generations_the_timeline_recognises(spark, tmp_path):
    """The bundled generated snapshot: ``orders`` re-ingested its last 6 days (6 old segments
    overshadowed); ``metrics`` minor-compacted root partitions 0-1 on 6 days with complete atomic
    update groups (12 originals overshadowed), compacted again on 3 of them (minor version 2 over
    root partitions 0-2: the first generation and root partition 2 overshadowed, 6 more), and on
    4 days has groups still waiting for a member (4 standby segments). The input's flags say the
    same, so nothing disagrees."""
    from pathlib import Path

    snap = Path(__file__).resolve().parents[2] / "include/segment_balancer/snapshots/generated"
    used_segments(spark, snap, tmp_path / "work")
    summary = json.loads((tmp_path / "work" / "timeline" / "summary.json").read_text())
    per = summary["per_datasource"]
    assert (per["orders"]["overshadowed"], per["metrics"]["overshadowed"], per["metrics"]["standby"]) == (6, 18, 4)
    assert sum(s.get("overshadowed", 0) + s.get("standby", 0) for s in per.values()) == 28
    assert summary["flag_disagreements"] == 0


def test_a_line_the_fast_reader_cannot_type_is_read_by_the_reference_reader(spark, tmp_path):
    """``"version": 2`` (a number): pyarrow's reader refuses it against the string schema, Spark's
    ``from_json`` reads it as the text ``2`` (the reference semantics): the timeline is built from
    the reference reader's rows, as if the fast reader had read them."""
    snap = tmp_path / "snap"
    snap.mkdir()
    day = "2013-01-01T00:00:00.000Z/2013-01-02T00:00:00.000Z"
    rows = [
        {"dataSource": "x", "interval": day, "version": 2, "size": 1},
        {"dataSource": "x", "interval": day, "version": "1", "size": 1},
    ]
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    xcom = used_segments(spark, snap, tmp_path / "work")
    groups = G.decode_all(xcom["groups"])
    assert list(groups["Visible"]) == [0] and list(groups["Overshadowed"]) == [1]  # version "2" > "1"
    table = pd.read_parquet(tmp_path / "work" / "timeline" / "segments.parquet").set_index("line")
    assert table.loc[1, "segment_id"] == "x_2013-01-01T00:00:00.000Z_2013-01-02T00:00:00.000Z_2"
    assert list(table.loc[2, "overshadowed_by"]) == [table.loc[1, "segment_id"]]


def test_the_timeline_table_carries_the_partial_load_fields(spark, tmp_path):
    """``projections`` (the names) and ``cluster_groups`` (the ``clusterGroups`` JSON) reach
    ``WORK/timeline/segments.parquet``, null where the payload lacks them; a shape built from the
    table's columns is what a matcher sees."""
    from segment_balancer.druid.partial_load import SegmentShape, matcher_from_json

    snap = tmp_path / "snap"
    snap.mkdir()
    day = "2013-01-01T00:00:00.000Z/2013-01-02T00:00:00.000Z"
    groups = {"clusteringColumns": [{"name": "tenant", "type": "STRING"}], "tuples": [["acme"], ["globex"]]}
    shard = {"type": "numbered", "partitionNum": 0, "partitions": 1}
    rows = [
        {"dataSource": "x", "interval": day, "version": "1", "size": 1, "shardSpec": shard, "clusterGroups": groups},
        {"dataSource": "y", "interval": day, "version": "1", "size": 1, "projections": "daily,hourly"},
        {"dataSource": "z", "interval": day, "version": "1", "size": 1},
    ]
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    used_segments(spark, snap, tmp_path / "work")
    table = pd.read_parquet(tmp_path / "work" / "timeline" / "segments.parquet").set_index("line").sort_index()
    assert table["projections"].map(lambda p: None if p is None else list(p)).tolist() == [
        None,
        ["daily", "hourly"],
        None,
    ]
    assert json.loads(table.loc[1, "cluster_groups"]) == groups
    assert table.loc[2, "cluster_groups"] is None and table.loc[3, "cluster_groups"] is None
    row = table.loc[1]
    shape = SegmentShape.from_columns(
        row["projections"], row["cluster_groups"], row["partition_num"], row["num_core_partitions"]
    )
    matcher = matcher_from_json({"type": "globClusterGroup", "patterns": [{"tenant": "g*"}]})
    assert matcher.match(shape).parts == (1,)


def test_a_file_read_before_comes_from_the_cache_and_a_changed_one_is_read_again(spark, tmp_path, monkeypatch):
    """With the cache on, the second run on the same bytes (another directory, another work
    directory) reads nothing and writes the same table, summary and groups; one byte changed and the
    file is read again; a refused file is refused again, never kept."""
    import shutil

    import pyarrow.parquet as pq

    from segment_balancer.common.cache import CACHE_ENV
    from segment_balancer.druid.snapshot.errors import SnapshotError
    from segment_balancer.spark import used_segments as U

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    reads = []
    fast = U._fast_summaries
    monkeypatch.setattr(U, "_fast_summaries", lambda *a: reads.append(a[1]) or fast(*a))

    def run(snap, work):
        xcom = used_segments(spark, snap, work)
        table = pq.read_table(work / U.TABLE_FILE).sort_by("line").to_pylist()
        return xcom, table, json.loads((work / "timeline" / "summary.json").read_text())

    first = tmp_path / "first"
    first.mkdir()
    (first / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    computed = run(first, tmp_path / "w1")
    assert len(reads) == 1 and computed[1] and G.decode_all(computed[0]["groups"])["Visible"]
    second = tmp_path / "second"
    shutil.copytree(first, second)
    assert run(second, tmp_path / "w2") == computed and len(reads) == 1  # the cache's, not read
    assert not list((tmp_path / "w2" / "timeline").glob("*.tmp-*"))

    (second / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS[:-1]))
    changed = run(second, tmp_path / "w3")
    assert len(reads) == 2 and len(changed[1]) == len(ROWS) - 1

    entries = sorted(os.listdir(tmp_path / "cache" / U.CACHE_KIND))
    (second / "segments.jsonl").write_text('{"dataSource": "x", "interval": "not an interval", "size": 1}\n')
    for work in ("w4", "w5"):
        with pytest.raises(SnapshotError, match="line 1"):
            used_segments(spark, second, tmp_path / work)
    assert sorted(os.listdir(tmp_path / "cache" / U.CACHE_KIND)) == entries and len(entries) == 2


def test_an_entry_gone_half_way_is_computed_again(spark, tmp_path, monkeypatch):
    """An entry another process is removing (its files gone): the run reads the file itself."""
    import pyarrow.parquet as pq

    from segment_balancer.common.cache import CACHE_ENV
    from segment_balancer.spark import used_segments as U

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    computed = used_segments(spark, snap, tmp_path / "w1")
    (entry,) = (tmp_path / "cache" / U.CACHE_KIND).iterdir()
    (entry / "summary.json").unlink()
    assert used_segments(spark, snap, tmp_path / "w2") == computed
    assert pq.read_table(tmp_path / "w2" / U.TABLE_FILE).num_rows == len(ROWS)
    assert json.loads((tmp_path / "w2" / "timeline" / "summary.json").read_text())["flag_disagreements"] == 1
    assert not list((tmp_path / "w2" / "timeline").glob("*.tmp-*"))
