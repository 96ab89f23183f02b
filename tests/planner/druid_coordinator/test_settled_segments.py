"""``StrategicSegmentAssigner.replicate`` takes a segment whose replicas already are what its rule
asks (``_settled``) without going through ``updateReplicasInTier`` tier by tier: the same run, to
the operation, the metric row (and its order), the segments marked unused and what every historical
holds after it, as when every segment goes through those steps; on every bundled snapshot and
hand-worked scenario, for each reproduced release (this directory's ``druid_release``).

``druid_rules`` in a Spark task finds the settled segments on arrays and holds only the others
(``planner.druid_coordinator.settled``, ``spark.druid_plan._rules_apart``): its ``RunRules`` and
``CollectSegmentStats`` against the whole run's, on the same snapshots and releases."""

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


def _rules(work: Path, snapshot: Path, release: str, whole: bool, **overrides) -> tuple:
    """``druid_rules``' run as its task builds it (``whole``: every segment held, as on the driver;
    else the settled ones apart), then ``RunRules`` and ``CollectSegmentStats``: the run, and its
    operations, metric rows in order, segments marked unused, zero-replica segments, replicas
    started per tier and used segments counted."""
    from segment_balancer.spark.druid_plan import build_run, read_replicas

    overrides = {"coordinator": "druid", "druidVersion": release, **overrides}
    spec = {"app": "druid_rules", "work": str(work), "snapshot": str(snapshot), "overrides": overrides}
    run = build_run(spec, None, read_replicas(work), whole=whole)
    run.rules()
    result = run.finish(collect=False)
    operations = [(op.event.value, op.action.value, op.server, op.segment.id) for op in result.operations]
    metrics = [(r.metric, r.dims, r.value) for r in result.stats.rows()]
    told = (sorted(result.deleted), sorted(run.zero_replica_ids()), run.assigner.throttler.assigned, run.used_count)
    return run, (operations, metrics, *told)


@pytest.fixture(scope="module")
def generated_20k(tmp_path_factory) -> Path:
    """``generate``'s cluster of 20,000 segments (three tiers, two historicals lost, one
    decommissioning, load queues): many datasources and tiers whose metric rows the settled
    segments make first."""
    from segment_balancer.tools.sample import generate_snapshot

    out = tmp_path_factory.mktemp("generated-20000")
    generate_snapshot(str(out), n_segments=20_000)
    return out


@pytest.mark.parametrize("snapshot", [*SNAPSHOTS, "generated-20000"], ids=lambda p: getattr(p, "name", p))
def test_the_rules_on_the_acting_segments_run_as_the_whole_run(prepared, generated_20k, snapshot, druid_release):
    snapshot = generated_20k if snapshot == "generated-20000" else snapshot
    if druid_release.startswith("35") and snapshot.name == "druid38":
        pytest.skip("Druid 35.0.0 refuses druid38's partial-load rules (tests/test_druid38_plan.py)")
    work = prepared(snapshot)
    whole_run, whole = _rules(work, snapshot, druid_release, whole=True)
    apart_run, apart = _rules(work, snapshot, druid_release, whole=False)
    assert whole_run.apart is None and whole_run.state.only is None
    if snapshot.name == "druid38":
        # partial-load rules ask for each segment's shape: the whole run
        assert apart_run.apart is None and apart_run.state.only is None
    else:
        assert apart_run.apart is not None
        assert apart_run.apart.used_count == len(whole_run.state.used)
        if snapshot.name in {*SETTLED_SOME, generated_20k.name}:
            assert len(apart_run.state.used) < len(whole_run.state.used), "nothing was left apart"
    assert apart[0] == whole[0]
    assert apart[1] == whole[1]  # the metric rows, in the order first added
    assert apart[2:] == whole[2:]


def test_without_round_robin_assignment_the_rules_hold_every_segment(prepared):
    """The cost strategy places and drops by every segment a historical projects: with
    ``useRoundRobinSegmentAssignment`` off (and ``smartSegmentLoading``, which turns it on)
    ``druid_rules`` holds them all."""
    snapshot = SNAPSHOTS[0]
    work = prepared(snapshot)
    config = {"useRoundRobinSegmentAssignment": False, "smartSegmentLoading": False}
    run, apart = _rules(work, snapshot, "38.0.0", whole=False, **config)
    assert run.apart is None and run.state.only is None
    assert apart == _rules(work, snapshot, "38.0.0", whole=True, **config)[1]
