"""Every bundled plan is the plan it was: the fingerprints (``segment_balancer.plan.fingerprint``) of the
plans of ``druid_sample`` (cost and avgShedder), the generated snapshot, the compaction snapshot
and the five hand-worked scenarios equal those of the code before the run state became integer
arrays (``tests/plan_fingerprints.json``: commit 4d006b6, whose plans the hand-worked tests and
Druid's ported tests had checked). A change that moves one operation, one group member, one
decision or one summary number changes a fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segment_balancer.plan.fingerprint import fingerprint

EXPECTED = json.loads((Path(__file__).parent / "plan_fingerprints.json").read_text())["plans"]
BUNDLED = Path(__file__).resolve().parents[1] / "include" / "segment_balancer" / "snapshots"


def test_druid_sample(druid_sample_planned):
    base, _, _ = druid_sample_planned
    assert fingerprint(base / "plan") == EXPECTED["druid_sample"]


def test_compaction(compaction_planned):
    base, _, _ = compaction_planned
    assert fingerprint(base / "plan") == EXPECTED["compaction"]


@pytest.mark.parametrize("name, strategy", [("druid_sample", "avgShedder"), ("generated", None)])
def test_bundled(spark, tmp_path, name, strategy):
    from segment_balancer.tools.pipeline import run_plan

    run_plan(spark, BUNDLED / name, tmp_path / "plan", overrides={"balancerStrategy": strategy} if strategy else None)
    assert fingerprint(tmp_path / "plan") == EXPECTED[f"{name}@{strategy}" if strategy else name]
