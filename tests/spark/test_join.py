"""Stage 0's join of one group of buckets (``spark.join.join_bucket``), on rows made by hand."""

from __future__ import annotations

import pyarrow as pa

from segment_balancer.druid.rules import Rule
from segment_balancer.spark.join import JoinContext, JoinSummary, _join_schema, _to_pandas, join_bucket

DAY = 86_400_000
A = "wiki_1970-01-01T00:00:00.000Z_1970-01-02T00:00:00.000Z_v1"
B = "wiki_1970-01-02T00:00:00.000Z_1970-01-03T00:00:00.000Z_v1"
UNLISTED = "wiki_1970-01-03T00:00:00.000Z_1970-01-04T00:00:00.000Z_v0"
CTX = JoinContext(
    rules={"_default": [Rule("loadForever", "load", {"hot": 2})]},
    now_ms=10 * DAY,
    datasources=["wiki"],
    tier_of={"h1": "hot", "h2": "hot"},
    stale_before_ms=5 * DAY,
    segments=2,
)


def _segment(sid, line, start):
    return dict(
        side=0, segment_id=sid, bucket=0, datasource="wiki", start_ms=start, end_ms=start + DAY, version="v1",
        partition_num=0, size_bytes=100, used=True, overshadowed=False, overshadowed_by=[], line=line,
        shard_type="numbered",
    )  # fmt: skip


def _rows(*replicas, queue=()):
    rows = [_segment(A, 0, 0), _segment(B, 1, DAY), dict(side=1, line=0, idx=1, bucket=0)]
    rows.append(dict(side=1, line=1, idx=0, bucket=0))
    rows += [dict(side=2, segment_id=s, row=i, server=srv, bad=False, bucket=0) for i, (srv, s) in enumerate(replicas)]
    rows += [dict(side=3, bucket=0, **q) for q in queue]
    schema = _join_schema()
    return _to_pandas(pa.Table.from_pylist(rows, schema=schema))


def test_a_served_replica_a_stale_queued_load_and_an_unlisted_segment():
    load = dict(
        segment_id=B, server="h2", queued_load=True, queue_type="balancing", requested_at_ms=DAY, queued_drop=False,
        place="server 'h2' segmentsToLoad[0]",
    )  # fmt: skip
    summary, frames = join_bucket(_rows(("h1", A), ("h1", UNLISTED), ("broker", A), queue=[load]), CTX)
    assert frames is not None
    segs = frames.segs.set_index("segment_id")
    assert segs.loc[A, "idx"] == 1 and segs.loc[B, "idx"] == 0
    assert not segs.loc[UNLISTED, "listed"] and segs.loc[UNLISTED, "rule_kind"] == "load"
    assert list(segs["required"]) == [2, 2, 2]
    reps = frames.reps.sort_values(["server", "segment_id"])
    assert list(zip(reps["server"], reps["segment_id"], reps["served"], reps["queued_load"])) == [
        ("h1", A, True, False),
        ("h1", UNLISTED, True, False),
        ("h2", B, False, True),
    ]  # the broker's replica is no historical's
    assert summary.per_server == {"h1": (0, 2), "h2": (100, 0)}
    assert summary.stale_n == 1 and summary.stale[0]["segment_id"] == B
    assert summary.n_used == 2 and summary.others == {0: 1}
    assert summary.unlisted == {"wiki": {"segments": 1, "replicas": 1}} and summary.unlisted_ids == [UNLISTED]
    assert list(frames.unserved["by"]) == [B]


def test_a_repeated_replica_or_an_unlisted_id_that_is_no_segment_id_writes_nothing():
    assert join_bucket(_rows(("h1", A), ("h1", A)), CTX) == (JoinSummary(bad_replicas=True), None)
    summary, frames = join_bucket(_rows(("h1", "nonsense")), CTX)
    assert frames is None and summary.unlisted_problem["segment_id"] == "nonsense"
    assert summary.unlisted_problem["row"] == 0
