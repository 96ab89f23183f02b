"""``segment_balancer.spark.status``: the status of a run state, one Spark task per tier, is the
planner's per-tier status combined, and counts what the state holds."""

from __future__ import annotations

from workdirs import write_workdir

from segment_balancer.spark.status import status_pass
from segment_balancer.spark.workdir import Run

TIERS = {
    "hot": {"servers": ["h1", "h2"], "segments": [(0, 2, ["h1"]), (2, 1, [])]},
    "cold": {"servers": ["c1"], "segments": [(1, 1, ["c1"])]},
}


def test_status_of_a_hand_made_state(spark, tmp_path):
    run = Run(spark, write_workdir(tmp_path / "work", TIERS))
    status = status_pass(run)
    groups = {name: sorted(bm) for name, bm in status.groups.items()}
    # seg0: target 2 in hot, one replica; seg2: target 1, none anywhere; seg1: as many as its target
    assert groups["Unreplicated"] == [2]
    assert groups["Underreplicated[hot]"] == [0]
    assert groups["FullyReplicated[cold]"] == [1]
    assert status.missing == {"cold": 0, "hot": 2}
    assert status.held == {"c1": (1, 10), "h1": (1, 10)}
    assert status.unavailable == 1  # seg2
