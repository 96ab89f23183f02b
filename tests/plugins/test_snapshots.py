"""pick_snapshot: the newest snapshot taken at or before a date."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timezone

import pytest

from segment_balancer_airflow.snapshots import NoSnapshotError, pick_snapshot


def _snapshot(root, name, when):
    d = root / name
    d.mkdir()
    (d / "snapshot.json").write_text(json.dumps({"snapshot_time": when, "cluster": "test"}))
    return d


@pytest.fixture
def root(tmp_path):
    _snapshot(tmp_path, "a", "2024-03-01T00:00:00Z")
    _snapshot(tmp_path, "b", "2024-03-02T12:00:00+00:00")
    _snapshot(tmp_path, "c", "2024-03-05T00:00:00.000Z")
    (tmp_path / "not_a_snapshot").mkdir()
    (tmp_path / "README.txt").write_text("ignored")
    return tmp_path


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def test_newest_at_or_before(root):
    assert pick_snapshot(root, utc(2024, 3, 3)).name == "b"
    assert pick_snapshot(root, utc(2024, 3, 2, 12)).name == "b"  # exactly at the snapshot time
    assert pick_snapshot(root, utc(2024, 3, 2, 11, 59)).name == "a"
    assert pick_snapshot(root, utc(2030, 1, 1)).name == "c"


def test_naive_dates_are_utc(root):
    assert pick_snapshot(root, datetime(2024, 3, 2, 12)).name == "b"


def test_other_timezones_compare_by_instant(root):
    from datetime import timedelta

    plus2 = timezone(timedelta(hours=2))
    assert pick_snapshot(root, datetime(2024, 3, 2, 13, tzinfo=plus2)).name == "a"  # 11:00 UTC


def test_none_before_the_date_is_a_clear_error(root):
    with pytest.raises(NoSnapshotError, match=r"at or before 2024-02-01.*oldest is a"):
        pick_snapshot(root, utc(2024, 2, 1))


def test_empty_or_missing_root(tmp_path):
    with pytest.raises(NoSnapshotError, match="there are none"):
        pick_snapshot(tmp_path, utc(2024, 1, 1))
    with pytest.raises(NoSnapshotError, match="not a directory"):
        pick_snapshot(tmp_path / "missing", utc(2024, 1, 1))


def test_malformed_snapshot_json_names_the_file(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "snapshot.json").write_text("{}")
    with pytest.raises(ValueError, match="snapshot.json"):
        pick_snapshot(tmp_path, utc(2024, 1, 1))


def test_captures_of_a_cluster_two_levels_down(tmp_path):
    """The capture DAG's layout ``<cluster>/<time>/``; a capture still being written (hidden) is skipped."""
    for cluster, stamp, when in (
        ("prod", "t1", "2024-03-01T00:00:00Z"),
        ("prod", "t2", "2024-03-03T00:00:00Z"),
        ("prod", ".t3.tmp-ab12", "2024-03-04T00:00:00Z"),
        ("qa", "t1", "2024-03-02T00:00:00Z"),
    ):
        (tmp_path / cluster).mkdir(exist_ok=True)
        d = _snapshot(tmp_path / cluster, stamp, when)
        (d / "snapshot.json").write_text(json.dumps({"snapshot_time": when, "cluster": cluster}))
    _snapshot(tmp_path, "flat", "2024-03-02T12:00:00Z")  # cluster "test"
    assert pick_snapshot(tmp_path, utc(2030, 1, 1)) == tmp_path / "prod" / "t2"
    assert pick_snapshot(tmp_path, utc(2024, 3, 2, 13)) == tmp_path / "flat"
    assert pick_snapshot(tmp_path, utc(2030, 1, 1), cluster="qa") == tmp_path / "qa" / "t1"
    with pytest.raises(NoSnapshotError, match="of cluster 'prod' .* the oldest is prod/t1"):
        pick_snapshot(tmp_path, utc(2024, 2, 1), cluster="prod")
