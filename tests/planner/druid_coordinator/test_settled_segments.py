"""``StrategicSegmentAssigner.replicate`` takes a segment whose replicas already are what its rule
asks (``_settled``) without going through ``updateReplicasInTier`` tier by tier: the same run, to
the operation, the metric row (and its order), the segments marked unused and what every historical
holds after it, as when every segment goes through those steps; on every bundled snapshot and
hand-worked scenario, for each reproduced release (this directory's ``druid_release``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segment_balancer.planner.druid_coordinator.assigner import StrategicSegmentAssigner

REPO = Path(__file__).resolve().parents[3]
SNAPSHOTS = [
    REPO / "include" / "segment_balancer" / "snapshots" / "druid_sample",
    REPO / "include" / "segment_balancer" / "snapshots" / "druid38",
    REPO / "include" / "segment_balancer" / "snapshots" / "generated",
    *sorted((REPO / "tests" / "scenarios").iterdir()),
]
SETTLED_SOME = {"druid_sample", "generated"}
"""Snapshots where some segments are settled (asserted, so that the comparison sees the path)."""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Each snapshot's work directory after ``used_segments`` and ``prepare`` (on the driver: no
    Spark session), made once."""
    from segment_balancer.spark.apps import run_app
    from segment_balancer.spark.session import LazySession

    def refuse():
        raise AssertionError("a small run started a Spark session")

    works = {}

    def work_of(snapshot: Path) -> Path:
        if snapshot not in works:
            work, xcom = tmp_path_factory.mktemp(snapshot.name), None
            for name in ("used_segments", "prepare"):
                xcom = run_app(LazySession(refuse), name, snapshot, work, xcom, {"coordinator": "druid"})
            works[snapshot] = work
        return works[snapshot]

    return work_of


def _run(work: Path, snapshot: Path, release: str) -> tuple:
    """One ``run_coordinator`` on the prepared cluster: its operations, metric rows in order,
    segments marked unused and what every historical projects after it."""
    from segment_balancer.planner.druid_coordinator.run import run_coordinator
    from segment_balancer.spark.druid_plan import cluster_state, run_config

    meta = json.loads((work / "prepared" / "meta.json").read_text())
    config = run_config(snapshot, {"coordinator": "druid", "druidVersion": release})
    result = run_coordinator(cluster_state(work, snapshot), config, now_ms=int(meta["now_ms"]))
    operations = [(op.duty, op.event.value, op.action.value, op.server, op.segment.id) for op in result.operations]
    metrics = [(r.metric, r.dims, r.value) for r in result.stats.rows()]
    held = sorted((s.id, h.name) for h in result.holders for s in h.projected_segments())
    return operations, metrics, sorted(result.deleted), held


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=lambda p: p.name)
def test_a_settled_segment_is_run_as_its_rules_steps_would_run_it(prepared, monkeypatch, snapshot, druid_release):
    if druid_release.startswith("35") and snapshot.name == "druid38":
        pytest.skip("Druid 35.0.0 refuses druid38's partial-load rules (tests/test_druid38_plan.py)")
    work = prepared(snapshot)
    settled = StrategicSegmentAssigner._settled
    taken = []

    def counting(self, segment, tier_replicants):
        taken.append(result := settled(self, segment, tier_replicants))
        return result

    monkeypatch.setattr(StrategicSegmentAssigner, "_settled", counting)
    fast = _run(work, snapshot, druid_release)
    if snapshot.name in SETTLED_SOME:
        assert any(taken), "no segment was settled: the comparison would not see the path it is about"
    monkeypatch.setattr(StrategicSegmentAssigner, "_settled", lambda self, segment, tier_replicants: False)
    slow = _run(work, snapshot, druid_release)
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]  # the metric rows, in the order first added
    assert fast[2:] == slow[2:]
