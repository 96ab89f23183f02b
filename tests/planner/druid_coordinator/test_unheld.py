"""A tier's ``BalanceSegments`` on a run that holds as objects only the segments queued on the tier
and those earlier duties acted on (``planner.druid_coordinator.unheld``,
``spark.druid_plan._balance_state``): Python's draws reproduced in bulk, the reservoir's picks,
and each tier's balancing against the run that holds the whole tier, on every bundled snapshot,
hand-worked scenario and a generated 20,000-segment cluster, for each reproduced release."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from segment_balancer.planner.druid_coordinator.unheld import MAX_DRAW_BOUND, randrange_stream, reservoir

REPO = Path(__file__).resolve().parents[3]
SNAPSHOTS = [
    REPO / "include" / "segment_balancer" / "snapshots" / "druid_sample",
    REPO / "include" / "segment_balancer" / "snapshots" / "druid38",
    REPO / "include" / "segment_balancer" / "snapshots" / "generated",
    *sorted((REPO / "tests" / "scenarios").iterdir()),
]


def test_randrange_stream_draws_what_randrange_draws():
    """CPython's ``randrange``, bound by bound (ones, powers of two and one less, the largest a
    32-bit word allows, random ones), and the generator left in the same state."""
    for seed in range(12):
        bounds = np.random.default_rng(seed).integers(1, MAX_DRAW_BOUND + 1, 600)
        bounds[:40] = np.arange(1, 41)
        bounds[40:72] = [1 << k for k in range(32)]
        bounds[72:103] = [(1 << k) - 1 for k in range(2, 33)]
        bounds[103:110] = MAX_DRAW_BOUND
        ours, theirs = random.Random(f"s{seed}"), random.Random(f"s{seed}")
        assert randrange_stream(ours, bounds).tolist() == [theirs.randrange(int(b)) for b in bounds]
        assert ours.getstate() == theirs.getstate()
    with pytest.raises(ValueError):
        randrange_stream(random.Random(0), np.array([MAX_DRAW_BOUND + 1]))
    with pytest.raises(ValueError):
        randrange_stream(random.Random(0), np.array([0]))


@pytest.mark.parametrize(("count", "most"), [(0, 5), (5, 10), (10, 10), (11, 10), (300, 1), (5000, 100)])
def test_reservoir_keeps_what_the_one_pass_reservoir_keeps(count, most):
    for seed in range(5):
        ours, theirs = random.Random(seed), random.Random(seed)
        kept: list[int] = []
        for i in range(count):
            if i < most:
                kept.append(i)
            elif (slot := theirs.randrange(i + 1)) < most:
                kept[slot] = i
        assert reservoir(count, most, ours).tolist() == kept
        assert ours.getstate() == theirs.getstate()


@pytest.fixture(scope="module")
def generated_20k(tmp_path_factory) -> Path:
    """``generate``'s cluster of 20,000 segments (three tiers, lost, decommissioning and new
    historicals, load queues)."""
    from segment_balancer.tools.sample import generate_snapshot

    out = tmp_path_factory.mktemp("generated-20000")
    generate_snapshot(str(out), n_segments=20_000)
    return out


@pytest.fixture(scope="module")
def before_balance(tmp_path_factory):
    """Each (snapshot, release)'s work directory after ``druid_rules`` and ``druid_unload`` (on the
    driver: no Spark session), made once."""
    from segment_balancer.spark.apps import run_app
    from segment_balancer.spark.session import LazySession

    def refuse():
        raise AssertionError("a small run started a Spark session")

    works = {}

    def work_of(snapshot: Path, release: str) -> Path:
        if (snapshot, release) not in works:
            work, xcom = tmp_path_factory.mktemp(snapshot.name), None
            overrides = {"coordinator": "druid", "druidVersion": release}
            for name in ("used_segments", "prepare", "druid_rules", "druid_unload"):
                xcom = run_app(LazySession(refuse), name, snapshot, work, xcom, overrides)
            works[(snapshot, release)] = work
        return works[(snapshot, release)]

    return work_of


def _balance(work: Path, snapshot: Path, release: str, tier: str, whole: bool) -> tuple:
    """One tier's ``druid_balance`` run as its task builds it (``whole``: every segment of the tier
    held), balanced: the run, and its operations, metric rows in order and maximum of moves."""
    from segment_balancer.spark.druid_plan import _read_part, build_run, read_replicas

    overrides = {"coordinator": "druid", "druidVersion": release}
    spec = {"app": "druid_balance", "tier": tier, "work": str(work), "snapshot": str(snapshot), "overrides": overrides}
    run = build_run(spec, {tier}, read_replicas(work), whole=whole)
    most = run.balance([tier], _read_part(work, "druid_unload")["served_and_queued"])
    result = run.finish(collect=False)
    operations = [
        (op.event.value, op.action.value, op.server, op.segment.id, op.move_source) for op in result.operations
    ]
    return run, (operations, [(r.metric, r.dims, r.value) for r in result.stats.rows()], most)


@pytest.mark.parametrize("snapshot", [*SNAPSHOTS, "generated-20000"], ids=lambda p: getattr(p, "name", p))
def test_a_tier_balances_on_its_rows_as_on_its_objects(before_balance, generated_20k, snapshot, druid_release):
    import pyarrow.parquet as pq

    snapshot = generated_20k if snapshot == "generated-20000" else snapshot
    if druid_release.startswith("35") and snapshot.name == "druid38":
        pytest.skip("Druid 35.0.0 refuses druid38's partial-load rules (tests/test_druid38_plan.py)")
    work = before_balance(snapshot, druid_release)
    tiers = sorted(set(pq.read_table(work / "prepared" / "servers.parquet")["tier"].to_pylist()))
    moved = 0
    for tier in tiers:
        whole_run, whole = _balance(work, snapshot, druid_release, tier, whole=True)
        rows_run, rows = _balance(work, snapshot, druid_release, tier, whole=False)
        assert whole_run.state.unheld is None and rows_run.state.unheld is not None
        assert rows[0] == whole[0], tier
        assert rows[1] == whole[1], tier  # the metric rows, in the order first added
        assert rows[2] == whole[2], tier
        moved += sum(op[1] == "MOVE_TO" for op in rows[0])
        held = sum(len(s.segments) for s in rows_run.state.servers)
        assert held <= sum(len(s.segments) for s in whole_run.state.servers)
    if snapshot.name in {"generated", generated_20k.name}:
        assert moved > 0, "no move: the comparison would not see the sampler"
