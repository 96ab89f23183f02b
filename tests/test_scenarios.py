"""End-to-end scenarios with hand-worked expected plans (independent check of the engine).

Every expectation below is derived by hand from the decisions ``docs/ALGORITHM.md`` states (their
source: ``../shared/ALGORITHM.md``, the shared folder next to the repository) and the seed (Druid
issue #7458), not from the implementation. Each
scenario's snapshot lives in ``tests/scenarios/<name>/`` and runs through ``run_plan`` once
(module-scoped fixture).

Cost facts used (ALGORITHM.md "Best servers"): a server whose projected segments all lie outside
``[s.start - 45 d, s.end + 45 d)`` costs 0 for ``s``; the segment itself is left out on a server
that serves or loads it; every joint cost is > 0, so a server whose projected in-window set is a
strict superset of another's costs strictly more. Ties: more available bytes, then smaller name.
Default ``f(n, t) = t + floor(log n / log 5)``: for ``n <= 4`` servers ``B = t``.

Notation: ``ID[x]`` is the segment id of the scenario's segment ``x``; an op is
``(stage, action, queue_type, segment, server)``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from segment_balancer.planner.groups import decode
from segment_balancer.tools.pipeline import run_plan

SCENARIOS = Path(__file__).parent / "scenarios"
LOADING, DECOMM, BALANCING = "loading", "decommissioning", "balancing"
STAGE_GROUPS = {
    "ToBecomeFullyReplicated",
    "ToBecomeUnderreplicated",
    "StillUnreplicated",
    "ToBecomeFullyBroadcast",
    "StillUnderbroadcast",
    "StillUnderreplicated",
    "ToBecomeNotLoadedOnDecommServers",
    "StillLoadedOnDecommServers",
    "ToBeBalanced",
}


# ----------------------------------------------------------------------------------------------
# helpers


def _segments(name: str) -> list[dict]:
    with open(SCENARIOS / name / "segments.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def _index_order(name: str) -> list[str]:
    """Used segment ids, newest first: interval end desc, then start desc, then id desc (ALGORITHM.md
    "Terms"). ISO strings of one format sort like the instants they denote."""
    rows = []
    for s in _segments(name):
        if s.get("used", True) and not s.get("overshadowed", False):
            start, end = s["interval"].split("/")
            rows.append((end, start, s["identifier"]))
    rows.sort(reverse=True)
    return [r[2] for r in rows]


class Plan:
    def __init__(self, name: str, out: Path, summary: dict):
        self.name = name
        self.out = out
        self.summary = summary
        self.ops = pd.read_parquet(out / "operations.parquet").sort_values("op_id").reset_index(drop=True)
        self.assignment = pd.read_parquet(out / "assignment.parquet")
        self.groups_raw = json.loads((out / "groups.json").read_text())
        self.order = _index_order(name)
        self.ids = {}

    def op_tuples(self, stage: int | None = None) -> list[tuple]:
        df = self.ops if stage is None else self.ops[self.ops["stage"] == stage]
        return [
            (int(r.stage), r.action, (None if pd.isna(r.queue_type) else r.queue_type), r.segment_id, r.server)
            for r in df.itertuples()
        ]

    def groups(self, stage_groups_only: bool = True) -> dict[str, set[str]]:
        """Non-empty groups as ``{"Name[tier]" or "Name": {segment ids}}``; by default only the seed's
        stage groups (groups.json also carries the start-of-run status groups, e.g. ``Unreplicated``)."""
        out: dict[str, set[str]] = {}
        for g in self.groups_raw:
            name = g["name"]
            if "[" not in name and g.get("tier"):
                name = f"{name}[{g['tier']}]"
            if stage_groups_only and name.split("[")[0] not in STAGE_GROUPS:
                continue
            members = {self.order[i] for i in decode(g["bitset"])}
            assert len(members) == g["count"], g
            if members:
                out[name] = members
        return out

    def assignment_pairs(self) -> set[tuple[str, str]]:
        return {(r.segment_id, r.server) for r in self.assignment.itertuples()}


def _run(spark, tmp_path_factory, name: str) -> Plan:
    out = tmp_path_factory.mktemp(name) / "plan"
    summary = run_plan(spark, SCENARIOS / name, out, overrides=None)
    return Plan(name, out, summary)


def _ids(name: str, keys: dict[str, tuple[str, str, str]]) -> dict[str, str]:
    ids = {}
    for k, (ds, start, end) in keys.items():
        ids[k] = f"{ds}_{start}T00:00:00.000Z_{end}T00:00:00.000Z_v1"
    known = {s["identifier"] for s in _segments(name)}
    assert set(ids.values()) <= known
    return ids


def _check_stage_ops(plan: Plan, expected: dict[int, tuple[bool, list[tuple]]]):
    """``expected[stage] = (ordered, ops)``; stages not listed must have no operations."""
    stages_present = set(int(s) for s in plan.ops["stage"].unique())
    assert stages_present == {s for s, (_, ops) in expected.items() if ops}, plan.op_tuples()
    for stage, (ordered, ops) in expected.items():
        got = plan.op_tuples(stage)
        if ordered:
            assert got == ops, f"stage {stage}: {got}"
        else:
            assert Counter(got) == Counter(ops), f"stage {stage}: {got}"


def _op_row(plan: Plan, stage: int, action: str, seg: str, server: str):
    df = plan.ops
    rows = df[(df.stage == stage) & (df.action == action) & (df.segment_id == seg) & (df.server == server)]
    assert len(rows) == 1, (stage, action, seg, server, plan.op_tuples())
    return rows.iloc[0]


def _check_dependencies(plan: Plan, deps: list[tuple[tuple, tuple]]):
    """``deps = [((stage, seg, drop_server), (stage, seg, load_server)), ...]``: exactly these DROPs
    depend on exactly these LOADs; every other op has no dependency."""
    expected_dep_ops = set()
    for (ds, dseg, dsrv), (ls, lseg, lsrv) in deps:
        drop = _op_row(plan, ds, "DROP", dseg, dsrv)
        load = _op_row(plan, ls, "LOAD", lseg, lsrv)
        assert not pd.isna(drop.depends_on), (dseg, dsrv)
        assert int(drop.depends_on) == int(load.op_id), (dseg, dsrv)
        assert int(load.op_id) < int(drop.op_id)
        expected_dep_ops.add(int(drop.op_id))
    got = set(int(r.op_id) for r in plan.ops.itertuples() if not pd.isna(r.depends_on))
    assert got == expected_dep_ops


# ----------------------------------------------------------------------------------------------
# Scenario A: unreplicated segments, primary tier, capacity fallback to a non-primary tier,
# broadcast, drop rule, unused segment, unknown tier alert. Default B function, M = 500.
#
# Servers (curr = sizes held): hot (priority 10): h1 {b1, j1} max 10000; h2 {b1} 50/140 (avail 90);
# h3 {} 0/160 (avail 160). _default_tier (priority 0): d1 {b1, j1, u1} max 10000; d2 {b1} 50/10000
# (avail 9950); d3 {} 0/10000.
# Segments: a1 ds 03-10/11 (100), a2 ds 03-09/10 (100) served nowhere, rule ds = {hot:1,
# _default_tier:2, cold:1} (cold has no server: alert, left out). j1 junk 03-09/10 (dropForever) on
# h1, d1. b1 bc 2015 (broadcastForever, 50) on h1, h2, d1, d2. u1 ds 2018 unused, on d1.
#
# Index: a1 (end 03-11) = 0, j1 = 1 (end 03-10, id "junk..." > "ds..."), a2 = 2, b1 = 3.
# Segments are ranked when stage 1 first visits them, in every tier with a target, against the
# state with every load before them (ALGORITHM.md "When a segment is ranked").
# a1, hot: h1 costs > 0 (j1 within 45 d); h2, h3 cost 0 (b1 is 5 years away); h3 (avail 160)
#   before h2 (avail 90). B = 1 + floor(log 3 / log 5) = 1 -> top B = {h3}.
# a1, _default_tier: d1 > 0 (j1); d3 (avail 10000) before d2 (9950); B = 2 -> {d3, d2}.
# Stage 1: primary tier = hot (priority 10). a1 -> h3 (100 <= 160).
# a2, hot, ranked after a1's load: h3 now projects a1 (the next day, same datasource: cost > 0),
#   h1 holds j1: only h2 costs 0 -> top B = {h2}; h2 has 90 bytes free < 100 (capacity) -> next
#   tier. a2, _default_tier: a1 is not there yet -> {d3, d2} as for a1 -> d3.
#   (Ranked once at the start of the run, a2's top B in hot would have been {h3}, as for a1.)
#   Groups: a1 ToBecomeFullyReplicated[hot], ToBecomeUnderreplicated[_default_tier];
#   a2 ToBecomeUnderreplicated[_default_tier] (target 2 > 1) and ToBecomeUnderreplicated[hot].
# Stage 2: b1 missing on h3 (100 + 50 = 150 <= 160) and d3 -> loads.
# Stage 4 reuses stage 1's top B: a1 _default_tier: d3 then d2 (best first). a2 hot: {h2}, no room
#   -> none; a2 _default_tier: count 1 (d3) -> d2.
# Stages 6, 8 retry a2 in hot with the same top B {h2}: capacity still fails. Stages 7/11: no segment
#   fully/under-replicated at the start of the run -> nothing to balance.
# Stage 12: j1 (drop rule) dropped from h1 and d1; u1 (unused) dropped from d1.


A = "a_unreplicated_tiers"


@pytest.fixture(scope="module")
def plan_a(spark, tmp_path_factory):
    return _run(spark, tmp_path_factory, A)


@pytest.fixture(scope="module")
def ids_a():
    return _ids(
        A,
        {
            "a1": ("ds", "2020-03-10", "2020-03-11"),
            "a2": ("ds", "2020-03-09", "2020-03-10"),
            "j1": ("junk", "2020-03-09", "2020-03-10"),
            "b1": ("bc", "2015-01-01", "2015-01-02"),
            "u1": ("ds", "2018-01-01", "2018-01-02"),
        },
    )


def test_a_index_order(ids_a):
    assert _index_order(A) == [ids_a["a1"], ids_a["j1"], ids_a["a2"], ids_a["b1"]]


def test_a_operations(plan_a, ids_a):
    ids = ids_a
    _check_stage_ops(
        plan_a,
        {
            1: (True, [(1, "LOAD", LOADING, ids["a1"], "h3:8083"), (1, "LOAD", LOADING, ids["a2"], "d3:8083")]),
            2: (False, [(2, "LOAD", LOADING, ids["b1"], "h3:8083"), (2, "LOAD", LOADING, ids["b1"], "d3:8083")]),
            4: (
                True,
                [
                    (4, "LOAD", LOADING, ids["a1"], "d3:8083"),
                    (4, "LOAD", LOADING, ids["a1"], "d2:8083"),
                    (4, "LOAD", LOADING, ids["a2"], "d2:8083"),
                ],
            ),
            12: (
                False,
                [
                    (12, "DROP", None, ids["j1"], "h1:8083"),
                    (12, "DROP", None, ids["j1"], "d1:8083"),
                    (12, "DROP", None, ids["u1"], "d1:8083"),
                ],
            ),
        },
    )
    _check_dependencies(plan_a, [])
    tiers = {(r.segment_id, r.server): r.tier for r in plan_a.ops.itertuples()}
    assert tiers[(ids["a1"], "h3:8083")] == "hot"
    assert tiers[(ids["a2"], "d3:8083")] == "_default_tier"


def test_a_drop_reasons(plan_a, ids_a):
    j1 = plan_a.ops[plan_a.ops.segment_id == ids_a["j1"]]
    assert all("drop" in r.lower() for r in j1.reason), list(j1.reason)
    u1 = plan_a.ops[plan_a.ops.segment_id == ids_a["u1"]]
    assert all(("unused" in r.lower()) or ("not used" in r.lower()) for r in u1.reason), list(u1.reason)


def test_a_groups(plan_a, ids_a):
    ids = ids_a
    assert plan_a.groups() == {
        "ToBecomeFullyReplicated[hot]": {ids["a1"]},
        "ToBecomeFullyReplicated[_default_tier]": {ids["a1"], ids["a2"]},
        "ToBecomeUnderreplicated[hot]": {ids["a2"]},
        "ToBecomeFullyBroadcast[hot]": {ids["b1"]},
        "ToBecomeFullyBroadcast[_default_tier]": {ids["b1"]},
    }


def test_a_start_status_groups(plan_a, ids_a):
    ids = ids_a
    g = plan_a.groups(stage_groups_only=False)
    assert g["Unreplicated"] == {ids["a1"], ids["a2"]}
    assert g["Underbroadcast[hot]"] == {ids["b1"]}
    assert g["Underbroadcast[_default_tier]"] == {ids["b1"]}


def test_a_assignment(plan_a, ids_a):
    ids = ids_a
    assert plan_a.assignment_pairs() == {
        (ids["a1"], "h3:8083"),
        (ids["a1"], "d3:8083"),
        (ids["a1"], "d2:8083"),
        (ids["a2"], "d3:8083"),
        (ids["a2"], "d2:8083"),
        *((ids["b1"], s) for s in ("h1:8083", "h2:8083", "h3:8083", "d1:8083", "d2:8083", "d3:8083")),
    }


def test_a_unknown_tier_alert(plan_a):
    alerts = plan_a.summary["alerts"]
    assert len(alerts) == 1, alerts
    assert "cold" in json.dumps(alerts[0])


# ----------------------------------------------------------------------------------------------
# Scenario B: load-queue limits with derived percents, decommissioning min/max, queue alerts.
#
# Config: M = 10, only loadingMinPercent = 60 given -> decommissioningMin = 40*10/30 = 13.33,
# balancingMin = 40*20/30 = 26.67, decommissioningMax = 70 (default). Limits: stages 1-4 loading
# <= floor(6.0) = 6; stage 5 decommissioning <= floor(1.33) = 1; stage 6 all <= floor(7.33) = 7;
# stage 7 balancing <= 2; stages 8/10/11 all <= 10; stage 9 decommissioning <= 7.
# Servers: _default_tier: s1 alone (queued from earlier runs: p1 untyped -> loading, requested 1 h
# before the snapshot -> alert; p0 balancing, 60 s -> no alert). cold: c1 decommissioning serving
# r0, r1, r2; c2 empty. Rules: q, p -> {_default_tier: 1}; r -> {cold: 1}.
# Index: q0..q8 (2020-01-21 .. 2020-01-13) = 0..8, p1 = 9, p0 = 10, r0 = 11, r1 = 12, r2 = 13.
# s1 at start: loading 1, total 2.
# Stage 1: q0..q4 -> s1 (loading reaches 6, total 7); q5..q8 StillUnreplicated.
# Stage 5: r0 -> c2 (decommissioning 1 <= 1) + DROP r0 from c1 depending on it; r1, r2 would make
#   it 2 > 1 -> StillLoadedOnDecommServers[cold].
# Stage 6: s1 total 7 -> 8 > 7: nothing. Stage 7: s1 alone in its tier; in cold the only candidate
#   is c2 and no r segment is served by a candidate: nothing.
# Stage 8: total <= 10 -> q5, q6, q7; q8 stays StillUnreplicated.
# Stage 9: decommissioning <= 7 -> r1, r2 moved to c2.


B_ = "b_queue_limits"


@pytest.fixture(scope="module")
def plan_b(spark, tmp_path_factory):
    return _run(spark, tmp_path_factory, B_)


@pytest.fixture(scope="module")
def ids_b():
    keys = {f"q{i}": ("q", f"2020-01-{21 - i:02d}", f"2020-01-{22 - i:02d}") for i in range(9)}
    keys.update(
        {
            "p0": ("p", "2019-06-01", "2019-06-02"),
            "p1": ("p", "2019-06-02", "2019-06-03"),
            "r0": ("r", "2019-03-03", "2019-03-04"),
            "r1": ("r", "2019-03-02", "2019-03-03"),
            "r2": ("r", "2019-03-01", "2019-03-02"),
        }
    )
    return _ids(B_, keys)


def test_b_index_order(ids_b):
    ids = ids_b
    assert _index_order(B_) == [ids[f"q{i}"] for i in range(9)] + [
        ids["p1"],
        ids["p0"],
        ids["r0"],
        ids["r1"],
        ids["r2"],
    ]


def test_b_operations(plan_b, ids_b):
    ids = ids_b
    _check_stage_ops(
        plan_b,
        {
            1: (True, [(1, "LOAD", LOADING, ids[f"q{i}"], "s1:8083") for i in range(5)]),
            5: (False, [(5, "LOAD", DECOMM, ids["r0"], "c2:8083"), (5, "DROP", None, ids["r0"], "c1:8083")]),
            8: (True, [(8, "LOAD", LOADING, ids[f"q{i}"], "s1:8083") for i in (5, 6, 7)]),
            9: (
                False,
                [
                    (9, "LOAD", DECOMM, ids["r1"], "c2:8083"),
                    (9, "DROP", None, ids["r1"], "c1:8083"),
                    (9, "LOAD", DECOMM, ids["r2"], "c2:8083"),
                    (9, "DROP", None, ids["r2"], "c1:8083"),
                ],
            ),
        },
    )
    _check_dependencies(
        plan_b,
        [
            ((5, ids["r0"], "c1:8083"), (5, ids["r0"], "c2:8083")),
            ((9, ids["r1"], "c1:8083"), (9, ids["r1"], "c2:8083")),
            ((9, ids["r2"], "c1:8083"), (9, ids["r2"], "c2:8083")),
        ],
    )
    # stage 9 visits r1 before r2 (index order)
    assert (
        _op_row(plan_b, 9, "LOAD", ids["r1"], "c2:8083").op_id < _op_row(plan_b, 9, "LOAD", ids["r2"], "c2:8083").op_id
    )


def test_b_groups(plan_b, ids_b):
    ids = ids_b
    assert plan_b.groups() == {
        "ToBecomeFullyReplicated[_default_tier]": {ids[f"q{i}"] for i in range(8)},
        "StillUnreplicated": {ids["q8"]},
        "ToBecomeNotLoadedOnDecommServers[cold]": {ids["r0"], ids["r1"], ids["r2"]},
    }


def test_b_assignment(plan_b, ids_b):
    ids = ids_b
    assert plan_b.assignment_pairs() == {
        *((ids[f"q{i}"], "s1:8083") for i in range(8)),
        (ids["p0"], "s1:8083"),
        (ids["p1"], "s1:8083"),  # loads queued by earlier runs succeed too
        (ids["r0"], "c2:8083"),
        (ids["r1"], "c2:8083"),
        (ids["r2"], "c2:8083"),
    }


def test_b_queue_alert(plan_b, ids_b):
    alerts = [json.dumps(a) for a in plan_b.summary["alerts"]]
    assert len(alerts) == 1, alerts
    assert ids_b["p1"] in alerts[0]
    assert ids_b["p0"] not in alerts[0]


# ----------------------------------------------------------------------------------------------
# Scenario C: decommissioning moves with a capacity-blocked cheapest destination, broadcast
# segments and broadcast-only decommissioning servers, primary-tier tie broken by target.
# numBestServersChoosingFunction = "return numServersInTier" -> B = number of candidate servers,
# with balancingMoveTrigger "outsideTopB" (the seed's first design: every holder is always in top B,
# so balancing can never move anything; the default trigger would move a holder that an empty
# non-holder ranks ahead of, which is not what this scenario is about). M = 500.
#
# _default_tier (all priority 0): d1 decommissioning {m0, m1, bc}; x1 decommissioning {bc} (only
# broadcast); x2 decommissioning, empty (counts as broadcast-only); d2 {m0, bc} 150/10000;
# d3 {m1, bc} 150/10000; d4 {} 0/200. hot (priority 0): h1 {} 0/10000.
# Segments: m0 m 05-02/03, m1 m 05-01/02 (100 each) rule {_default_tier: 2}; n0 n 2019-01-01/02 (100)
# rule {hot: 1, _default_tier: 2}, served nowhere; bc 2015 (50) broadcastForever.
# Index: m0 = 0, m1 = 1, n0 = 2, bc = 3.
# Start-of-run rankings in _default_tier (candidates d2, d3, d4):
#   m0: d2 0 (self left out; bc far), d4 0, d3 > 0 (m1 adjacent) -> d2, d4, d3.
#   m1: d3 0, d4 0, d2 > 0 (m0 adjacent) -> d3, d4, d2.
#   n0: all 0; available d2 = d3 = 9850 > d4 = 200; d2 < d3 by name -> d2, d3, d4.
# Stage 1: n0 primary tier: hot and _default_tier both priority 0 -> larger target -> _default_tier
#   (hot is listed first in tieredReplicants, so the order tie-break would say hot). n0 -> d2.
#   Groups: ToBecomeUnderreplicated[_default_tier] (target 2), ToBecomeUnderreplicated[hot].
# Stage 2: bc belongs on every server but x1, x2 -> loads on d4 (50/200) and h1.
# Stage 4: n0 _default_tier -> d3 (best non-holder); hot -> h1.
# Stage 5: sources d1. m0 -> best non-holder of {d2, d4, d3}: d4 (50 + 100 = 150 <= 200).
#   m1 -> d4 is cheapest non-holder but 150 + 100 = 250 > 200 -> next: d2 (cost > 0 but room).
#   Each with a DROP on d1 depending on the load.
# Stage 7/11: B = all candidates, trigger outsideTopB -> every iteration fails. Stage 12: nothing in excess.
# Stage 13: x1 holds only bc -> DROP bc from x1. x2 is empty; d1 is not broadcast-only.


C = "c_decommissioning"


@pytest.fixture(scope="module")
def plan_c(spark, tmp_path_factory):
    return _run(spark, tmp_path_factory, C)


@pytest.fixture(scope="module")
def ids_c():
    return _ids(
        C,
        {
            "m0": ("m", "2020-05-02", "2020-05-03"),
            "m1": ("m", "2020-05-01", "2020-05-02"),
            "n0": ("n", "2019-01-01", "2019-01-02"),
            "bc": ("bc", "2015-01-01", "2015-01-02"),
        },
    )


def test_c_index_order(ids_c):
    ids = ids_c
    assert _index_order(C) == [ids["m0"], ids["m1"], ids["n0"], ids["bc"]]


def test_c_operations(plan_c, ids_c):
    ids = ids_c
    _check_stage_ops(
        plan_c,
        {
            1: (True, [(1, "LOAD", LOADING, ids["n0"], "d2:8083")]),
            2: (False, [(2, "LOAD", LOADING, ids["bc"], "d4:8083"), (2, "LOAD", LOADING, ids["bc"], "h1:8083")]),
            4: (False, [(4, "LOAD", LOADING, ids["n0"], "d3:8083"), (4, "LOAD", LOADING, ids["n0"], "h1:8083")]),
            5: (
                False,
                [
                    (5, "LOAD", DECOMM, ids["m0"], "d4:8083"),
                    (5, "DROP", None, ids["m0"], "d1:8083"),
                    (5, "LOAD", DECOMM, ids["m1"], "d2:8083"),
                    (5, "DROP", None, ids["m1"], "d1:8083"),
                ],
            ),
            13: (True, [(13, "DROP", None, ids["bc"], "x1:8083")]),
        },
    )
    _check_dependencies(
        plan_c,
        [
            ((5, ids["m0"], "d1:8083"), (5, ids["m0"], "d4:8083")),
            ((5, ids["m1"], "d1:8083"), (5, ids["m1"], "d2:8083")),
        ],
    )
    assert (
        _op_row(plan_c, 5, "LOAD", ids["m0"], "d4:8083").op_id < _op_row(plan_c, 5, "LOAD", ids["m1"], "d2:8083").op_id
    )


def test_c_no_operation_on_empty_decommissioning_server(plan_c):
    assert "x2:8083" not in set(plan_c.ops.server)


def test_c_groups(plan_c, ids_c):
    ids = ids_c
    assert plan_c.groups() == {
        "ToBecomeFullyReplicated[_default_tier]": {ids["n0"]},
        "ToBecomeFullyReplicated[hot]": {ids["n0"]},
        "ToBecomeFullyBroadcast[_default_tier]": {ids["bc"]},
        "ToBecomeFullyBroadcast[hot]": {ids["bc"]},
        "ToBecomeNotLoadedOnDecommServers[_default_tier]": {ids["m0"], ids["m1"]},
    }


def test_c_assignment(plan_c, ids_c):
    ids = ids_c
    assert plan_c.assignment_pairs() == {
        (ids["m0"], "d2:8083"),
        (ids["m0"], "d4:8083"),
        (ids["m1"], "d3:8083"),
        (ids["m1"], "d2:8083"),
        (ids["n0"], "d2:8083"),
        (ids["n0"], "d3:8083"),
        (ids["n0"], "h1:8083"),
        *((ids["bc"], s) for s in ("d1:8083", "d2:8083", "d3:8083", "d4:8083", "h1:8083")),
    }


def test_c_no_alerts(plan_c):
    assert plan_c.summary["alerts"] == []


# ----------------------------------------------------------------------------------------------
# Scenario D: overreplication (stage-3 callback + stage-12 excess), balancing blocked by the
# balancing limit -> ToBeBalanced -> stage 10, drop rule and unused segment. Default B, M = 10
# (loading 7, decommissioning min 1, balancing 2, stage 6: 8, decommissioning max 7).
#
# hot (priority 10): h1 {o0}; h2 {o0, y1, u1}; h3 {o0, y1, y2}; max 10000 each.
# _default_tier: e1 {g0, z1} 200/10000 (avail 9800); e2 {} max 20000 with two balancing loads
#   queued by an earlier run (k0, k1, 30 s old: no alert) -> avail 19800, balancing 2, total 2.
# Rules: o {hot: 1, _default_tier: 1}; g, k {_default_tier: 1}; junk dropForever.
# o0 o 2020-06-10/11; y1 junk 06-10/11; y2 junk 06-11/12; u1 o 2017 unused; g0 g 09-01/02;
# z1 junk 09-01/02; k0, k1 k 2022-01-01..03 (not served anywhere, only queued). All 100 bytes.
# Index: k1, k0, z1, g0 (equal interval: "junk..." > "g..."), y2, o0, y1 ("o..." > "junk...").
#
# o0: count hot 3 > 1 (overreplicated), _default_tier 0 < 1 -> underreplicated there.
#   hot costs (start): h1 0, h2 = J(o0,y1) > 0, h3 = J(o0,y1) + J(o0,y2) > h2 -> drop order h3, h2, h1.
#   _default_tier: e1 0, e2 0 (g0, z1, k* outside o0's 45-day window); e2 more available -> e2 first;
#   B = 1 + floor(log 2 / log 5) = 1 -> top B {e2}.
# Stage 3: LOAD o0 on e2 (loading 0 -> 1 <= 7, total 3 <= 10); callback: hot still overreplicated ->
#   DROP o0 from h3 (highest cost) depending on that load.
# Stage 7: _default_tier candidates: only g0 is fully/under-replicated at start AND served by a
#   candidate (o0 is not served in the tier, k0/k1 are only queued) -> every draw is g0.
#   Projected: e1 costs J(g0, z1) > 0, e2 costs 0 (o0, k* far) -> top B {e2}; holder e1 outside ->
#   destination e2 needs balancing 3 > 2 -> fails -> ToBeBalanced[_default_tier] = {g0}; later draws
#   are revisits. hot: o0 is overreplicated -> no candidate segment.
# Stage 10: g0 moved e1 -> e2 (total 4 <= 10): LOAD balancing on e2 + DROP on e1 depending on it.
# Stage 11: g0 was visited in stage 7 -> nothing.
# Stage 12: o0 end count hot 2 (h1, h2), _default_tier 1 -> total 3 > 2 -> the candidate is the
#   highest-cost hot holder without a drop, h2. Availability: required = min(2, 1 + 1) = 2; loaded =
#   {h1, h2, h3} = 3: h3's drop is the callback's, dependent on e2's load, so h3 serves until e2
#   has loaded (e2 itself is only loading). A drop from hot (target 1) leaves 2 >= 2 ->
#   DROP o0 from h2. (Were h3 not counted: loaded 2, the drop deferred.) Drop rule:
#   y1 from h2, h3; y2 from h3; z1 from e1. Unused u1 from h2.


D = "d_overreplication_balancing"


@pytest.fixture(scope="module")
def plan_d(spark, tmp_path_factory):
    return _run(spark, tmp_path_factory, D)


@pytest.fixture(scope="module")
def ids_d():
    return _ids(
        D,
        {
            "o0": ("o", "2020-06-10", "2020-06-11"),
            "y1": ("junk", "2020-06-10", "2020-06-11"),
            "y2": ("junk", "2020-06-11", "2020-06-12"),
            "u1": ("o", "2017-01-01", "2017-01-02"),
            "g0": ("g", "2020-09-01", "2020-09-02"),
            "z1": ("junk", "2020-09-01", "2020-09-02"),
            "k0": ("k", "2022-01-01", "2022-01-02"),
            "k1": ("k", "2022-01-02", "2022-01-03"),
        },
    )


def test_d_index_order(ids_d):
    ids = ids_d
    assert _index_order(D) == [ids["k1"], ids["k0"], ids["z1"], ids["g0"], ids["y2"], ids["o0"], ids["y1"]]


def test_d_operations(plan_d, ids_d):
    ids = ids_d
    _check_stage_ops(
        plan_d,
        {
            3: (False, [(3, "LOAD", LOADING, ids["o0"], "e2:8083"), (3, "DROP", None, ids["o0"], "h3:8083")]),
            10: (False, [(10, "LOAD", BALANCING, ids["g0"], "e2:8083"), (10, "DROP", None, ids["g0"], "e1:8083")]),
            12: (
                False,
                [
                    (12, "DROP", None, ids["o0"], "h2:8083"),
                    (12, "DROP", None, ids["y1"], "h2:8083"),
                    (12, "DROP", None, ids["y1"], "h3:8083"),
                    (12, "DROP", None, ids["y2"], "h3:8083"),
                    (12, "DROP", None, ids["z1"], "e1:8083"),
                    (12, "DROP", None, ids["u1"], "h2:8083"),
                ],
            ),
        },
    )
    _check_dependencies(
        plan_d,
        [
            ((3, ids["o0"], "h3:8083"), (3, ids["o0"], "e2:8083")),
            ((10, ids["g0"], "e1:8083"), (10, ids["g0"], "e2:8083")),
        ],
    )
    assert _op_row(plan_d, 3, "DROP", ids["o0"], "h3:8083").tier == "hot"
    assert plan_d.summary["availability"]["deferred_drops"] == 0
    assert plan_d.summary["availability"]["deferred_examples"] == []


def test_d_groups(plan_d, ids_d):
    ids = ids_d
    groups = plan_d.groups()
    # ToBeBalanced: stage 10 moved g0's only holder outside top B, so g0 leaves the group.
    assert "ToBeBalanced[_default_tier]" not in groups
    assert groups == {"ToBecomeFullyReplicated[_default_tier]": {ids["o0"]}}


def test_d_assignment(plan_d, ids_d):
    ids = ids_d
    assert plan_d.assignment_pairs() == {
        (ids["o0"], "h1:8083"),
        (ids["o0"], "e2:8083"),
        (ids["g0"], "e2:8083"),
        (ids["k0"], "e2:8083"),
        (ids["k1"], "e2:8083"),
    }


def test_d_no_alerts(plan_d):
    assert plan_d.summary["alerts"] == []


# ----------------------------------------------------------------------------------------------
# Scenario E: stage-3 callbacks across two overreplicated tiers, a stage-3 load blocked by the
# loading limit and picked up by stage 6 (with its own callback), a queued drop making a segment
# unreplicated, an overshadowed segment, a segment that no rule matches. Default B function.
#
# Config: M = 10, loadingMinPercent = 20, decommissioningMinPercent = 10 (balancing = 70 by
# complement). Limits: stages 1-4 loading <= floor(2.0) = 2; stage 6 all <= floor(3.0) = 3.
# alpha: a1 {w0, jw}, a2 {w0, nr0}. beta: b1 {w0, t0, jt} with a queued drop of t0; b2 {w0, jw};
# b3 {}. gamma: g1 {}; g2 {} with two untyped (= loading) queued loads v0, v1; g3 {w_old, jw}.
# All max 10000, every segment 100 bytes.
# Rules: w {gamma: 2, alpha: 1, beta: 1}; t {beta: 1}; v {gamma: 1}; junk dropForever; _default: []
# (so norule matches nothing). w0 w 2020-02-10/11 v1; w_old same interval v0, overshadowed;
# jw junk 2020-02-10/11; t0 t 2021-01-01/02; jt junk 2021-01-01/02; v0, v1 v 2022; nr0 2016.
# Index: v1, v0, t0, jt, w0, jw, nr0 (w_old is not used).
#
# Start: w0 alpha 2 > 1, beta 2 > 1 (overreplicated), gamma 0 < 2 (underreplicated; not
# unreplicated since it has replicas). t0: b1's replica has a queued drop -> count 0 -> unreplicated.
# t0 in beta (B = 1): b1 > 0 (jt), b2 0 (jw far), b3 0 with more bytes -> top B {b3}.
# w0 in gamma (B = 2): g1 0 (10000 avail), g2 0 (v* far; 9800 avail), g3 > 0 (jw) -> {g1, g2}.
# Stage 1: t0 -> b3 (loading 1 <= 2).
# Stage 3: w0 gamma: g1 (loading 1) -> callback: first overreplicated tier by name = alpha -> DROP
#   w0 from a1 (cost > 0 from jw; a2 costs 0) depending on the g1 load. g2 would reach loading 3 > 2:
#   fails; g3 is outside top B -> StillUnderreplicated[gamma].
# Stage 6 (all loads <= 3): g2 2 + 1 = 3 -> LOAD w0 on g2; callback: alpha is no longer
#   overreplicated (a1 drop counted) -> beta -> DROP w0 from b2 (jw; b1 costs 0) depending on it.
# Stage 7/11: no segment fully/under-replicated at start and served by a candidate of its tier.
# Stage 12: w0 end total 1 + 1 + 2 = 4 = sum of targets -> nothing. jw from a1, b2, g3; jt from b1;
#   w_old (overshadowed) from g3. nr0 (no rule) left on a2 with an alert.


E = "e_callbacks_limits"


@pytest.fixture(scope="module")
def plan_e(spark, tmp_path_factory):
    return _run(spark, tmp_path_factory, E)


@pytest.fixture(scope="module")
def ids_e():
    ids = _ids(
        E,
        {
            "w0": ("w", "2020-02-10", "2020-02-11"),
            "jw": ("junk", "2020-02-10", "2020-02-11"),
            "t0": ("t", "2021-01-01", "2021-01-02"),
            "jt": ("junk", "2021-01-01", "2021-01-02"),
            "v0": ("v", "2022-01-01", "2022-01-02"),
            "v1": ("v", "2022-01-02", "2022-01-03"),
            "nr0": ("norule", "2016-01-01", "2016-01-02"),
        },
    )
    ids["w_old"] = "w_2020-02-10T00:00:00.000Z_2020-02-11T00:00:00.000Z_v0"
    return ids


def test_e_index_order(ids_e):
    ids = ids_e
    assert _index_order(E) == [ids["v1"], ids["v0"], ids["t0"], ids["jt"], ids["w0"], ids["jw"], ids["nr0"]]


def test_e_operations(plan_e, ids_e):
    ids = ids_e
    _check_stage_ops(
        plan_e,
        {
            1: (True, [(1, "LOAD", LOADING, ids["t0"], "b3:8083")]),
            3: (False, [(3, "LOAD", LOADING, ids["w0"], "g1:8083"), (3, "DROP", None, ids["w0"], "a1:8083")]),
            6: (False, [(6, "LOAD", LOADING, ids["w0"], "g2:8083"), (6, "DROP", None, ids["w0"], "b2:8083")]),
            12: (
                False,
                [(12, "DROP", None, ids["jw"], s) for s in ("a1:8083", "b2:8083", "g3:8083")]
                + [(12, "DROP", None, ids["jt"], "b1:8083"), (12, "DROP", None, ids["w_old"], "g3:8083")],
            ),
        },
    )
    _check_dependencies(
        plan_e,
        [
            ((3, ids["w0"], "a1:8083"), (3, ids["w0"], "g1:8083")),
            ((6, ids["w0"], "b2:8083"), (6, ids["w0"], "g2:8083")),
        ],
    )
    assert "nr0" not in plan_e.ops.segment_id.str.cat()


def test_e_groups(plan_e, ids_e):
    ids = ids_e
    assert plan_e.groups() == {
        "ToBecomeFullyReplicated[beta]": {ids["t0"]},
        "ToBecomeFullyReplicated[gamma]": {ids["w0"]},
    }
    assert plan_e.groups(stage_groups_only=False)["Unreplicated"] == {ids["t0"]}


def test_e_assignment(plan_e, ids_e):
    ids = ids_e
    assert plan_e.assignment_pairs() == {
        (ids["w0"], "a2:8083"),
        (ids["w0"], "b1:8083"),
        (ids["w0"], "g1:8083"),
        (ids["w0"], "g2:8083"),
        (ids["t0"], "b3:8083"),
        (ids["v0"], "g2:8083"),
        (ids["v1"], "g2:8083"),
        (ids["nr0"], "a2:8083"),
    }


def test_e_no_rule_alert(plan_e, ids_e):
    alerts = [json.dumps(a) for a in plan_e.summary["alerts"]]
    assert len(alerts) == 1, alerts
    assert "norule" in alerts[0]


@pytest.mark.parametrize("fixture", ["plan_a", "plan_b", "plan_c", "plan_d", "plan_e"])
def test_the_plan_is_the_one_it_was(fixture, request):
    """Each scenario's plan has the fingerprint of the plan before the run state became integer
    arrays (``tests/test_plan_fingerprints.py``)."""
    from segment_balancer.plan.fingerprint import fingerprint

    plan = request.getfixturevalue(fixture)
    expected = json.loads((Path(__file__).parent / "plan_fingerprints.json").read_text())["plans"]
    assert fingerprint(plan.out) == expected[plan.name]
