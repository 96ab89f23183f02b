"""``segment_balancer.spark.unload``'s task functions without Spark: the overreplicated pairs and
the coupled tiers from hand-made tallies (values worked out by hand from ALGORITHM.md stage 12 and
``couples_tiers``) and the ``waiting`` decisions, written and read as the stage's files."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.dataset as ds

from segment_balancer.spark.state_store import arrow_schema
from segment_balancer.spark.unload import (
    _TALLY_FIELDS,
    _WAITING_FIELDS,
    OVER_FIELDS,
    _name,
    _over,
    _waiting,
    _write_table,
)
from segment_balancer.spark.workdir import OUT_FIELDS

# (idx, target, count, loaded, droppable, required) per tier
TALLY = {
    "A": [(1, 1, 2, 2, 2, 1), (2, 2, 2, 2, 2, None), (3, 1, 3, 3, 3, 3), (4, 1, 2, 2, 2, 1)],
    "B": [(1, 1, 2, 2, 1, 1), (2, 0, 1, 0, 1, None), (3, 1, 2, 2, 1, 3), (4, 3, 2, 2, 2, 1)],
}


def write_tally(work, pdir):
    from pyarrow.fs import LocalFileSystem

    fs = LocalFileSystem()
    for tier, rows in TALLY.items():
        cols = list(zip(*rows))
        table = pa.table(
            {
                "idx": cols[0],
                "tier": [tier] * len(rows),
                "target": cols[1],
                "count": cols[2],
                "loaded": cols[3],
                "droppable": cols[4],
                "required": pa.array(cols[5], pa.int32()),
            }
        )
        _write_table(fs, f"{work}/{pdir}/tally/{_name(tier)}.parquet", table, arrow_schema(_TALLY_FIELDS))


def test_over_keeps_the_segments_whose_total_exceeds_their_target_and_finds_the_coupled_tiers(tmp_path):
    """Segment 1: 4 replicas for 2 wanted, one over in each tier (caps 1, 1), excess 2; dropping both
    keeps 2 loaded ≥ 1 required: not coupled. Segment 2: 3 for 2, over in B only (cap 1). Segment
    3: 5 for 2 (excess 3), caps A = min(3 − 1, 3) = 2, B = min(2 − 1, 1) = 1; dropping all 3 leaves
    5 − 3 = 2 loaded < 3 required: A and B coupled. Segment 4: 4 for 4, not overreplicated although
    A holds one more than its target."""
    work, pdir = str(tmp_path), "passes/12_unload"
    write_tally(work, pdir)
    tiers, coupled = _over(work, pdir, f"{pdir}/over.parquet")
    assert (tiers, coupled) == (["A", "B"], [["A", "B"]])
    part = ds.partitioning(pa.schema([("tier", pa.string())]), flavor="hive")
    rows = ds.dataset(f"{work}/{pdir}/over.parquet", format="parquet", partitioning=part).to_table()
    got = sorted(
        (r["idx"], r["tier"], r["target"], r["count"], r["cap"], r["excess"], r["loaded"], r["required"])
        for r in rows.to_pylist()
    )
    assert got == [
        (1, "A", 1, 2, 1, 2, 4, 1),
        (1, "B", 1, 2, 1, 2, 4, 1),
        (2, "B", 0, 1, 1, 1, 2, None),
        (3, "A", 1, 3, 2, 3, 5, 3),
        (3, "B", 1, 2, 1, 3, 5, 3),
    ]
    counts = {r["idx"]: json.loads(r["counts"]) for r in rows.to_pylist()}
    assert counts[2] == {"A": [2, 2], "B": [0, 1]}
    assert list(counts[3]) == ["A", "B"]  # by tier
    assert [f.name for f in rows.schema] == [n for n, _ in OVER_FIELDS]


def test_waiting_is_one_decision_per_segment_with_its_servers_sorted():
    rows = pa.table(
        {"idx": [7, 5, 9], "segment_id": ["s2", "s2", "s1"], "server": ["h2", "h1", "h3"]},
        schema=arrow_schema(_WAITING_FIELDS),
    )
    out = _waiting(rows)
    assert out.schema == arrow_schema(OUT_FIELDS)
    assert [
        (r["kind"], r["idx"], r["segment_id"], r["tier"], r["reason"], json.loads(r["detail"])) for r in out.to_pylist()
    ] == [
        ("decision", 9, "s1", None, "waiting", {"servers": ["h3"]}),
        ("decision", 5, "s2", None, "waiting", {"servers": ["h1", "h2"]}),
    ]
