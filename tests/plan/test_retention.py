"""Plan retention: by age and count per cluster, never LATEST, the newest plan of a cluster or the
newest plan the next run reads its balancer state from."""

from __future__ import annotations

import os
import time

import pytest
from plan_summaries import summary, whatif_record, write_plan_dir

from segment_balancer.plan.history import plan_history
from segment_balancer.plan.retention import plans_to_remove, remove_plans

NOW = time.time()
DAY = 86_400
WHATIF = whatif_record(decommission=("h1",))


def published(root, name, cluster, snapshot_day, days_ago, whatif=None):
    """A published plan ``name`` of ``cluster`` on the snapshot of 2024-01-``snapshot_day``, published ``days_ago``."""
    plan = write_plan_dir(root / name, summary(cluster, f"2024-01-{snapshot_day:02d}T00:00:00.000Z", whatif=whatif))
    (plan / "operations.parquet").write_bytes(b"x" * 1000)
    then = NOW - days_ago * DAY
    os.utime(plan / "summary.json", (then, then))
    return plan


@pytest.fixture
def root(tmp_path):
    """prod, newest first: w6 (what-if, 1 day), a5 (2), w4 (what-if, 5), a3 (10, named by LATEST),
    a2 (35), a1 (40); test: b1 alone (50 days)."""
    root = tmp_path / "plans"
    for name, day, ago, whatif in (
        ("a1", 1, 40, None),
        ("a2", 2, 35, None),
        ("a3", 3, 10, None),
        ("w4", 4, 5, WHATIF),
        ("a5", 5, 2, None),
        ("w6", 6, 1, WHATIF),
    ):
        published(root, name, "prod", day, ago, whatif)
    published(root, "b1", "test", 1, 50)
    (root / "LATEST").write_text("a3\n")
    return root


def decide(root, max_age_days, per_cluster):
    return {e.name: why for e, why in plans_to_remove(plan_history(root), "a3", NOW, max_age_days, per_cluster)}


def test_by_age_keeps_the_protected_plans(root):
    # b1 (50 days) is the newest of test; w6 the newest of prod; a5 its newest without what-if; a3 LATEST
    assert decide(root, 30, 0) == {"a2": "age", "a1": "age"}
    assert decide(root, 4, 0) == {"w4": "age", "a2": "age", "a1": "age"}
    assert decide(root, 0.5, 0) == {"w4": "age", "a2": "age", "a1": "age"}  # a5, w6, a3 protected


def test_by_count_per_cluster(root):
    # prod's ranks: w6 1, a5 2, w4 3, a3 4, a2 5, a1 6; test's b1 1
    assert decide(root, 0, 3) == {"a2": "count", "a1": "count"}
    assert decide(root, 0, 2) == {"w4": "count", "a2": "count", "a1": "count"}
    assert decide(root, 0, 1) == {"w4": "count", "a2": "count", "a1": "count"}
    assert decide(root, 0, 6) == {} and decide(root, 0, 0) == {}  # 0: no limit


def test_age_first_then_count(root):
    assert decide(root, 36, 4) == {"a2": "count", "a1": "age"}


def test_remove_plans_on_disk_keeps_latest_and_unknown_directories(root):
    (root / "notes").mkdir()  # no summary.json: not a plan, never removed
    old = root / ".a7.tmp-0123456789ab"  # an interrupted publish of two days ago
    old.mkdir()
    (old / "operations.parquet").write_bytes(b"y" * 10)
    os.utime(old, (NOW - 2 * DAY, NOW - 2 * DAY))
    (root / ".a8.tmp-abcdef012345").mkdir()  # one under way now
    removed = remove_plans(root, 30, 3, now=NOW)
    assert sorted((os.path.basename(r.path), r.reason) for r in removed) == [
        (".a7.tmp-0123456789ab", "leftover"),
        ("a1", "age"),
        ("a2", "age"),
    ]
    assert {os.path.basename(r.path): r.bytes for r in removed}["a1"] == sum(
        p.stat().st_size for p in (root / "a3").rglob("*") if p.is_file()
    )  # same files as a3's
    assert sorted(p.name for p in root.iterdir()) == [
        ".a8.tmp-abcdef012345",
        "LATEST",
        "a3",
        "a5",
        "b1",
        "notes",
        "w4",
        "w6",
    ]
    assert (root / "LATEST").read_text() == "a3\n"
    assert remove_plans(root, 30, 3, now=NOW) == []  # nothing more to do
    assert remove_plans(root.parent / "missing", 30, 3) == []
