"""The dispatch point of small work (``spark.session.run_tasks`` under ``driver_tasks``): a run of at
most ``DRIVER_TASKS_AT_MOST_SEGMENTS`` segments calls its task functions on the driver, and the plan
is the one the same functions make as Spark tasks, for every bundled snapshot and hand-worked
scenario, with both coordinators; and it never starts a Spark session (``LazySession``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from segment_balancer.plan.fingerprint import fingerprint
from segment_balancer.spark import session as S

REPO = Path(__file__).resolve().parents[2]
SMALL = [
    REPO / "include" / "segment_balancer" / "snapshots" / "druid_sample",
    REPO / "include" / "segment_balancer" / "snapshots" / "druid38",
    *sorted((REPO / "tests" / "scenarios").iterdir()),
]


def test_on_the_driver_each_call_sees_copies_and_results_keep_their_order(spark):
    items = [[1], [2], [3]]

    def grow(item):
        item.append(0)
        return (len(item), sum(item))

    with S.driver_tasks(True):
        assert S.run_tasks(spark, items, grow) == [(2, 1), (2, 2), (2, 3)]
    assert items == [[1], [2], [3]]  # a Spark task gets a copy; so does a call on the driver
    with S.driver_tasks(False):
        assert S.run_tasks(spark, items, grow) == [(2, 1), (2, 2), (2, 3)]
    assert S.run_tasks(spark, [], grow) == []


def test_the_run_size_decides(tmp_path, monkeypatch):
    import gzip

    from segment_balancer.spark.apps import small_run

    assert small_run(tmp_path) is False  # no segments file: used_segments refuses it in Spark
    monkeypatch.setattr(S, "DRIVER_TASKS_AT_MOST_SEGMENTS", 5_000)
    rows = "".join(f'{{"segment_id": "s{i}"}}\n' for i in range(5_000))
    (tmp_path / "segments.jsonl").write_text(rows + "\n  \n")  # blank lines are no rows
    assert small_run(tmp_path) is True  # 5,000: at the limit
    monkeypatch.setattr(S, "DRIVER_TASKS_AT_MOST_SEGMENTS", 4_999)
    assert small_run(tmp_path) is False
    monkeypatch.setenv(S.DRIVER_TASKS_ENV, "5000")  # the environment's word wins
    assert small_run(tmp_path) is True
    monkeypatch.setenv(S.DRIVER_TASKS_ENV, "-1")
    assert small_run(tmp_path) is False
    monkeypatch.setenv(S.DRIVER_TASKS_ENV, "lots")
    with pytest.raises(ValueError, match=f"{S.DRIVER_TASKS_ENV}='lots': expected an integer"):
        small_run(tmp_path)
    monkeypatch.delenv(S.DRIVER_TASKS_ENV)
    (tmp_path / "segments.jsonl").unlink()
    with gzip.open(tmp_path / "segments.jsonl.gz", "wt") as f:
        f.write(rows + '{"segment_id": "one more"}\n')
    assert small_run(tmp_path) is False  # 5,001 rows, gzip read as far as the 5,000th
    (tmp_path / "segments.jsonl.gz").write_bytes(b"not gzip")
    assert small_run(tmp_path) is False


def test_the_rows_are_counted_once_per_version_of_the_segments_file(tmp_path, monkeypatch):
    """A run's applications each ask :func:`small_run`; the file is read once until it changes."""
    from segment_balancer.druid.snapshot import lines
    from segment_balancer.spark import apps

    counted = []
    count_rows = lines.count_rows
    monkeypatch.setattr(lines, "count_rows", lambda path, at_most: counted.append(path) or count_rows(path, at_most))
    apps._at_most.cache_clear()
    segments = tmp_path / "segments.jsonl"
    segments.write_text('{"segment_id": "a"}\n')
    assert [apps.small_run(tmp_path) for _ in range(5)] == [True] * 5
    assert len(counted) == 1
    segments.write_text('{"segment_id": "a"}\n{"segment_id": "b"}\n')  # another version: counted again
    assert apps.small_run(tmp_path) is True and len(counted) == 2
    monkeypatch.setattr(S, "DRIVER_TASKS_AT_MOST_SEGMENTS", 1)  # another limit: counted again
    assert apps.small_run(tmp_path) is False and len(counted) == 3


@pytest.mark.parametrize("coordinator", ["issue7458", "druid"])
@pytest.mark.parametrize("snapshot", SMALL, ids=lambda p: p.name)
def test_a_small_run_plans_the_same_on_the_driver_and_in_spark_tasks(
    spark, tmp_path, monkeypatch, caplog, snapshot, coordinator
):
    import logging

    from segment_balancer.tools.pipeline import run_plan

    def on_the_driver() -> int:
        calls = [r for r in caplog.records if r.name == S.__name__ and "on the driver" in r.getMessage()]
        caplog.clear()
        return len(calls)

    caplog.set_level(logging.DEBUG, logger=S.__name__)
    lazy = S.LazySession(lambda: spark)
    run_plan(lazy, snapshot, tmp_path / "driver", overrides={"coordinator": coordinator})
    assert on_the_driver() > 0
    assert not lazy.started  # a small run needs no Spark session: the CLI starts no JVM for it
    monkeypatch.setenv(S.DRIVER_TASKS_ENV, "-1")
    run_plan(spark, snapshot, tmp_path / "spark", overrides={"coordinator": coordinator})
    assert on_the_driver() == 0
    assert fingerprint(tmp_path / "driver") == fingerprint(tmp_path / "spark")


@pytest.mark.parametrize("coordinator", ["issue7458", "druid"])
def test_a_small_plan_compared_with_the_other_coordinator_starts_no_session(tmp_path, coordinator):
    from segment_balancer.tools.pipeline import run_plan

    def refuse():
        raise AssertionError("a small plan started a Spark session")

    lazy = S.LazySession(refuse)
    summary = run_plan(lazy, SMALL[1], tmp_path / "plan", coordinator=coordinator, compare=True)
    assert summary["operations"] > 0 and (tmp_path / "plan" / "comparison.json").is_file()
    assert not lazy.started
    S.release(lazy)  # nothing to release, nothing started
    S.detach(lazy)
    assert not lazy.started


def test_a_lazy_session_starts_on_first_use_with_the_tags_added_before():
    started = []

    class Session:
        def __init__(self):
            self.tags = set()
            self.conf = type("Conf", (), {"get": staticmethod(lambda key: "7")})()

        def addTag(self, tag):  # noqa: N802
            self.tags.add(tag)

        def removeTag(self, tag):  # noqa: N802
            self.tags.discard(tag)

    def factory():
        started.append(Session())
        return started[-1]

    lazy = S.LazySession(factory)
    lazy.addTag("a")
    lazy.addTag("b")
    lazy.removeTag("a")
    assert not lazy.started and lazy.if_started is None
    import os

    from segment_balancer.common.spark_columns import parallelism

    assert parallelism(lazy) == max(2, os.cpu_count())  # asked before the start: starts nothing
    assert not lazy.started
    assert lazy.tags == {"b"}  # the first attribute of the session's own starts it, tags given
    assert len(started) == 1 and lazy.started and lazy.if_started is started[0]
    lazy.addTag("c")
    lazy.removeTag("b")
    assert started[0].tags == {"c"}
    assert parallelism(lazy) == 7  # the started session's spark.sql.shuffle.partitions
    assert len(started) == 1
