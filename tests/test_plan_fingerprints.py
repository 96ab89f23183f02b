"""Every bundled plan is the plan it was: the fingerprints (``segment_balancer.plan.fingerprint``) of the
plans of ``druid_sample`` (cost and avgShedder), the generated snapshot, the compaction snapshot
and the five hand-worked scenarios equal those of the code before the run state became integer
arrays (``tests/plan_fingerprints.json``: commit 4d006b6, whose plans the hand-worked tests and
Druid's ported tests had checked). A change that moves one operation, one group member, one
decision or one summary number changes a fingerprint."""

from __future__ import annotations

import json
import os
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


def test_a_plan_from_the_machine_cache_is_the_plan(spark, tmp_path, monkeypatch):
    """With the machine cache on, the first plan keeps stage 0's table and the second takes it: both
    are the plan of ``druid_sample``."""
    from segment_balancer.common.cache import CACHE_ENV
    from segment_balancer.spark import used_segments as U
    from segment_balancer.tools.pipeline import run_plan

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    run_plan(spark, BUNDLED / "druid_sample", tmp_path / "first")
    assert fingerprint(tmp_path / "first") == EXPECTED["druid_sample"]
    assert len(os.listdir(tmp_path / "cache" / U.CACHE_KIND)) == 1
    monkeypatch.setattr(U, "_fast_summaries", None)  # the second plan reads no segments.jsonl
    run_plan(spark, BUNDLED / "druid_sample", tmp_path / "second")
    assert fingerprint(tmp_path / "second") == EXPECTED["druid_sample"]
