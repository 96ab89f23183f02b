"""What-if edits (``segment_balancer.tools.whatif``): the edited copy, checked file by file, and plans of a
hand-worked cluster with one more historical decommissioned, or removed.

The cluster (tier ``_default_tier``, every historical 10 000 bytes, rule: 1 replica): ``a`` serves
``s0`` (day 2020-01-01) and ``s1`` (2020-01-02), ``b`` serves ``y0`` (2020-01-04), ``c`` is empty;
one datasource ``x``, 100 bytes a segment. Index order, newest first: y0, s1, s0.

Worked by hand (ALGORITHM.md "Best servers"; ``B`` = 1 + floor(log 3 / log 5) = 1: only the best):

- Decommission ``a`` (stage 5, in index order): ``s1`` costs 0 on the empty ``c`` and more than 0
  on ``b`` (``y0`` is two days off, inside the 45-day window): ``s1`` goes to ``c``. Then ``s0``:
  on ``c`` it meets ``s1``, the adjacent day; on ``b`` it meets ``y0``, three days off; the joint
  cost falls with distance, so ``b`` is cheaper: ``s0`` goes to ``b``. Each load (queue type
  ``decommissioning``) carries the drop from ``a`` that depends on it.
- Remove ``a`` (as if lost): ``s0`` and ``s1`` are unreplicated; stage 1 loads them in the same
  order to the same servers (queue type ``loading``), with nothing to drop.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from whatif_cluster import DAY, sid, write_cluster

from segment_balancer.tools.whatif import REMOVED_TYPE, WhatIf, WhatIfError, apply_what_if, parse_add

# ---- the edited copy (no Spark) ------------------------------------------------------------------


def test_the_copy_carries_every_edit_and_the_snapshot_is_untouched(tmp_path):
    snap = write_cluster(tmp_path / "snap")
    before = {p.name: p.read_bytes() for p in snap.iterdir()}
    edits = WhatIf.parse(
        decommission=["b:8083"],
        remove=["a:8083"],
        add=[{"tier": "cold", "count": 2, "max_size": 5000}, parse_add("_default_tier:1:7000")],
    )
    overrides, record = apply_what_if(snap, edits, tmp_path / "copy", {"maxSegmentsInNodeLoadingQueue": 5})

    assert {p.name: p.read_bytes() for p in snap.iterdir()} == before
    servers = {s["server"]: s for s in json.loads((tmp_path / "copy" / "servers.json").read_text())}
    assert servers["a:8083"]["server_type"] == REMOVED_TYPE
    assert servers["b:8083"]["server_type"] == servers["c:8083"]["server_type"] == "historical"
    assert {n: (s["tier"], s["curr_size"], s["max_size"]) for n, s in servers.items() if n.startswith("whatif-")} == {
        "whatif-cold-1:8083": ("cold", 0, 5000),
        "whatif-cold-2:8083": ("cold", 0, 5000),
        "whatif-_default_tier-1:8083": ("_default_tier", 0, 7000),
    }
    assert json.loads((tmp_path / "copy" / "load_queues.json").read_text()) == {}  # a's queue went with it
    assert (tmp_path / "copy" / "server_segments.json").read_bytes() == before["server_segments.json"]
    assert overrides == {"maxSegmentsInNodeLoadingQueue": 5, "decommissioningNodes": ["b:8083"]}
    assert record == {
        "decommission": ["b:8083"],
        "remove": ["a:8083"],
        "add": [
            {"tier": "cold", "count": 2, "max_size": 5000},
            {"tier": "_default_tier", "count": 1, "max_size": 7000},
        ],
        "added": ["whatif-cold-1:8083", "whatif-cold-2:8083", "whatif-_default_tier-1:8083"],
    }


def test_decommissioning_extends_the_overrides_list_when_they_set_one(tmp_path):
    snap = write_cluster(tmp_path / "snap")
    (snap / "coordinator_config.json").write_text(json.dumps({"decommissioningNodes": ["c:8083"]}))
    edits = WhatIf.parse(decommission=["a:8083"])
    assert apply_what_if(snap, edits, tmp_path / "c1")[0] == {"decommissioningNodes": ["c:8083", "a:8083"]}
    assert apply_what_if(snap, edits, tmp_path / "c2", {"decommissioningNodes": []})[0] == {
        "decommissioningNodes": ["a:8083"]
    }


@pytest.mark.parametrize(
    "edits, message",
    [
        (
            {"decommission": ["z:8083"]},
            r"decommission: 'z:8083' is no historical of .*servers.json \(historicals: a:8083, b:8083, c:8083\)",
        ),
        ({"remove": ["broker:8082"]}, "remove: 'broker:8082' is no historical"),
        ({"decommission": ["a:8083"], "remove": ["a:8083"]}, "both decommissioned and removed"),
        ({"add": [{"tier": "t", "count": 0, "max_size": 1}]}, "count"),
        ({"add": [{"tier": "t", "count": 1}]}, "max_size"),
    ],
)
def test_edits_that_do_not_fit_are_refused_before_anything_is_written(tmp_path, edits, message):
    snap = write_cluster(tmp_path / "snap")
    with pytest.raises(WhatIfError, match=message):
        apply_what_if(snap, WhatIf.parse(**edits), tmp_path / "copy")
    assert not (tmp_path / "copy").exists() and not (tmp_path / "copy.tmp").exists()


def test_add_spec_of_the_cli():
    assert parse_add("cold:4:1000000") == {"tier": "cold", "count": 4, "max_size": 1_000_000}
    with pytest.raises(WhatIfError, match="TIER:COUNT:MAX_SIZE_BYTES"):
        parse_add("cold:4")
    with pytest.raises(WhatIfError, match="integers"):
        parse_add("cold:four:10")


# ---- plans of the edited cluster (Spark) ---------------------------------------------------------


def ops_of(out: Path) -> list[tuple]:
    ops = pd.read_parquet(out / "operations.parquet").sort_values("op_id")
    name = {sid(n): n for n in DAY}
    return [
        (
            int(r.stage),
            r.action,
            None if pd.isna(r.queue_type) else r.queue_type,
            name[r.segment_id],
            r.server.split(":")[0],
            None if pd.isna(r.depends_on) else int(r.depends_on),
        )
        for r in ops.itertuples()
    ]


def test_decommissioning_one_more_historical_moves_its_segments_off_in_stage_5(spark, tmp_path):
    from segment_balancer.tools.pipeline import run_plan

    snap = write_cluster(tmp_path / "snap")
    baseline = run_plan(spark, snap, tmp_path / "baseline")
    assert baseline["whatif"] is None
    assert not [op for op in ops_of(tmp_path / "baseline") if op[0] == 5]

    summary = run_plan(spark, snap, tmp_path / "plan", edits=WhatIf.parse(decommission=["a:8083"]))
    ops = ops_of(tmp_path / "plan")
    op_ids = pd.read_parquet(tmp_path / "plan" / "operations.parquet").sort_values("op_id").op_id.tolist()
    load_s1, load_s0 = op_ids[0], op_ids[2]
    assert ops == [
        (5, "LOAD", "decommissioning", "s1", "c", None),
        (5, "DROP", None, "s1", "a", load_s1),
        (5, "LOAD", "decommissioning", "s0", "b", None),
        (5, "DROP", None, "s0", "a", load_s0),
    ]
    assert summary["config"]["decommissioningNodes"] == ["a:8083"]
    assert summary["whatif"] == {
        "decommission": ["a:8083"],
        "remove": [],
        "add": [],
        "added": [],
        "snapshot": str(snap),
    }
    # a plan hands its balancer state on (no pairs under cost); a what-if writes none back
    assert json.loads((tmp_path / "baseline" / "balancer_state.json").read_text())["pairs"] == []
    assert not (tmp_path / "plan" / "balancer_state.json").exists() and not summary["balancer"]["state_written"]


def test_removing_a_historical_loads_its_segments_elsewhere_in_stage_1(spark, tmp_path):
    from segment_balancer.tools.pipeline import run_plan

    snap = write_cluster(tmp_path / "snap")
    summary = run_plan(spark, snap, tmp_path / "plan", edits=WhatIf.parse(remove=["a:8083"]))
    assert ops_of(tmp_path / "plan") == [
        (1, "LOAD", "loading", "s1", "c", None),
        (1, "LOAD", "loading", "s0", "b", None),
    ]
    assert summary["status_before"]["unreplicated"] == 2
    assert summary["whatif"]["remove"] == ["a:8083"]


def test_a_what_if_under_avg_shedder_reads_the_state_and_writes_none_back(spark, tmp_path):
    """The same removal with ``avgShedder``: the pair (b, c) is 1 point apart after stage 1 (b 200
    bytes of 10 000, c 100): no hit; the what-if read the state it was given and writes none back."""
    from segment_balancer.planner.balancer_state import BalancerState
    from segment_balancer.tools.pipeline import run_plan

    snap = write_cluster(tmp_path / "snap")
    state = BalancerState("w", 0, {"_default_tier": {("b:8083", "c:8083"): 3}}).write(tmp_path / "previous")
    summary = run_plan(
        spark,
        snap,
        tmp_path / "plan",
        {"balancerStrategy": "avgShedder"},
        edits=WhatIf.parse(remove=["a:8083"]),
        balancer_state=state,
    )
    assert ops_of(tmp_path / "plan") == [
        (1, "LOAD", "loading", "s1", "c", None),
        (1, "LOAD", "loading", "s0", "b", None),
    ]
    balancer = summary["balancer"]
    assert (
        balancer["previous_counts"] == {"_default_tier": [["b:8083", "c:8083", 3]]}
        and balancer["state_warning"] is None
    )
    assert [(p["high"], p["low"], p["difference"], p["hit_count"]) for p in balancer["pairs"]] == [
        ("b:8083", "c:8083", 1.0, 0)
    ]
    assert not (tmp_path / "plan" / "balancer_state.json").exists() and not balancer["state_written"]
