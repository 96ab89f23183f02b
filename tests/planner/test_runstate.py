"""The run state of a tier (segment_balancer.planner.runstate.TierRun): live ranking, the mutators, the
state a step leaves.

Costs are checked against the pair-by-pair ranking (``ranking.rank_one``) on the hand example of
``test_ranking`` (values worked by hand there) and on random clusters; the mutators against counts
worked by hand; and Druid's ``BalancingStrategiesTest`` fresh cluster (1000 segments of
10 partitions x 100 days onto 5 empty historicals, one replica, unlimited queue) ends with 200
segments on each historical, as in Druid.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_ranking import C_SAME_DAY, EXPECTED, PROJECTED, SEGMENTS, SERVERS, plain_rank, random_cluster

from segment_balancer.planner.config import build_config
from segment_balancer.planner.kernels.loading import load_unreplicated
from segment_balancer.planner.operations import OpOrder
from segment_balancer.planner.runstate import (
    NO_LOAD,
    QUEUE_CODES,
    STATE_COLUMNS,
    OpSink,
    StageLimit,
    TierRun,
    state_frame,
)

NUM_BEST = build_config({}).num_best_servers


def tier_from(segments, projected, servers, tier):
    """A TierRun of ``tier`` holding ``projected`` (server, tier, idx) as served replicas, with a
    segment row (target 1) for every segment; server sizes give the available bytes."""
    rows = []
    for i, (ds, start, end) in segments.items():
        base = {
            "tier": tier,
            "idx": i,
            "segment_id": f"s{i}",
            "datasource": ds,
            "start_ms": start,
            "end_ms": end,
            "size_bytes": 0,
        }
        rows.append({**base, "kind": "segment", "target": 1, "tier_pos": 0, "rule_kind": "load", "required": 1})
        rows += [
            {**base, "kind": "replica", "server": s, "served": True, "dropping": False}
            for s, t, j in projected
            if t == tier and j == i
        ]
    srv = pd.DataFrame(
        [
            {"server": s, "tier": t, "max_size": a, "current_size": 0, "priority": 0, "decommissioning": d}
            for s, t, a, d in servers
            if t == tier
        ]
    )
    return TierRun.from_rows(tier, state_frame(pd.DataFrame(rows)), srv, NUM_BEST)


def test_live_ranking_of_the_hand_example():
    for (idx, tier), (servers, costs) in EXPECTED.items():
        run = tier_from(SEGMENTS, PROJECTED, SERVERS, tier)
        seg = run.segment(idx)
        assert run.rank(seg) == servers, (idx, tier)
        live = run.placement_costs(seg)
        assert [live[run.pos[s]] for s in servers] == pytest.approx(costs, rel=1e-9), (idx, tier)
    run = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    # s1 holds X itself and Y: the self term is left out there only.
    assert run.placement_costs(run.segment(1))[run.pos["s1"]] == pytest.approx(C_SAME_DAY, rel=1e-9)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_live_ranking_agrees_with_the_pair_by_pair_sum_on_random_clusters(seed):
    segments, projected, servers = random_cluster(seed)
    run = tier_from(segments, projected, servers, "hot")
    for idx in segments:
        order, costs = plain_rank(segments, projected, servers, idx, "hot")
        live = run.placement_costs(run.segment(idx))
        assert [live[run.pos[s]] for s in order] == pytest.approx(costs, rel=1e-9, abs=1e-9), idx
        assert "h4" not in run.rank(run.segment(idx))  # decommissioning: never a candidate


def test_mutators_change_replicas_queues_sizes_and_costs_at_once():
    run = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    x = run.segment(1)
    assert x.count() == 2 and x.serving() == ["s1", "s6"]
    # Load X on s5 (empty): a loading replica counts, s5's queue and size grow, and for Y (same
    # chunk, same datasource) s5 now costs C_SAME_DAY where it cost 0.
    assert run.placement_costs(run.segment(2))[run.pos["s5"]] == 0.0
    run.load(x, "s5", "loading", "test", OpOrder(1, "", 1))
    assert x.count() == 3 and x.present() == {"s1", "s5", "s6"} and x.serving() == ["s1", "s6"]
    assert run.servers["s5"].loads["loading"] == 1 and run.servers["s5"].projected_size == 0  # size 0 bytes
    assert run.placement_costs(run.segment(2))[run.pos["s5"]] == pytest.approx(C_SAME_DAY, rel=1e-9)
    # Drop X from s1: it leaves s1's projection at once (Y on s1 no longer pays for X).
    run.drop(x, "s1", "test", OpOrder(1, "", 2))
    assert x.count() == 2 and x.serving() == ["s6"]
    assert run.placement_costs(run.segment(2))[run.pos["s1"]] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError):
        run.load(x, "s5", "loading", "again", OpOrder(1, "", 3))
    with pytest.raises(ValueError):
        run.drop(x, "s1", "again", OpOrder(1, "", 4))
    assert [(o.action, o.server) for o in run.sink.ops] == [("LOAD", "s5"), ("DROP", "s1")]


def test_a_move_is_a_load_and_a_drop_that_waits_for_it():
    run = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    x = run.segment(1)  # served by s1 and s6
    load, drop = run.move(x, "s1", "s5", "balancing", "balancing", OpOrder(0, "hot", 7))
    assert (load.action, load.server, load.queue_type, load.order) == ("LOAD", "s5", "balancing", OpOrder(0, "hot", 7))
    assert (drop.action, drop.server, drop.dep_server, drop.order) == (
        "DROP",
        "s1",
        "s5",
        OpOrder(0, "hot", 7, after=1),
    )
    # the projection has X on s5 (loading) and not on s1; the count is unchanged, s5's balancing queue grew
    assert x.count() == 2 and x.present() == {"s1", "s5", "s6"} and x.serving() == ["s6"]
    assert run.servers["s5"].loads == {"loading": 0, "decommissioning": 0, "balancing": 1}
    with pytest.raises(ValueError):  # s6 already holds it
        run.move(x, "s5", "s6", "balancing", "balancing", OpOrder(0, "hot", 8))


def test_the_state_after_a_step_is_the_start_state_with_its_ops_and_top_b():
    run = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    start = run.state()
    x = run.segment(1)
    run.top_b(x)
    run.load(x, "s5", "loading", "test", OpOrder(1, "", 1))
    run.drop(x, "s1", "test", OpOrder(1, "", 2))
    live = run.state()
    after = live.rows(run.table)
    assert list(after.columns) == STATE_COLUMNS and len(after) == len(start.rows(run.table)) + 1
    mine = after[(after["idx"] == 1) & (after["kind"] == "replica")].set_index("server")
    assert mine.loc["s5", "load_type"] == "loading" and not mine.loc["s5", "served"]
    assert mine.loc["s1", "dropping"] and mine.loc["s1", "served"]
    assert after[(after["idx"] == 1) & (after["kind"] == "segment")]["topb"].iloc[0].split(",") == x.topb
    # What a step writes (its ops and top B), replayed onto the start state, is the live state.
    code = {name: i for i, name in enumerate(start.servers)}
    ops = run.sink.ops
    replayed = start.apply(
        [o.code for o in ops],
        [code[o.server] for o in ops],
        [o.action == "LOAD" for o in ops],
        [QUEUE_CODES.get(o.queue_type, NO_LOAD) for o in ops],
        [o.dep_server is not None for o in ops],
    ).with_topb(run.new_topb())
    assert run.new_topb() == {1: x.topb}
    key = lambda f: f.sort_values(["kind", "idx", "server"]).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(key(replayed.rows(run.table)), key(after))
    # A TierRun built from it sees the same state.
    again = TierRun(replayed, run.table, run_servers(), NUM_BEST)
    assert again.segment(1).count() == 2 and again.segment(1).topb == x.topb
    assert again.servers["s5"].loads["loading"] == 1
    untouched = lambda f: key(f[f["idx"] != 1])  # noqa: E731
    pd.testing.assert_frame_equal(untouched(after), untouched(start.rows(run.table)))


def test_a_cancel_undoes_a_queued_load_or_drop_in_op_order():
    """The ``druid`` coordinator's CANCEL: of a load (its queue type given), the replica is no longer
    loading; of a drop, no longer dropping; a load after a cancel of the same replica loads again."""
    run = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    start = run.state()
    code = {name: i for i, name in enumerate(start.servers)}
    loading, none = QUEUE_CODES["loading"], NO_LOAD

    def replica(state, server):
        rows = state.rows(run.table)
        mine = rows[(rows["idx"] == 1) & (rows["kind"] == "replica")].set_index("server")
        return mine.loc[server] if server in mine.index else None

    ops = [  # (server, action, queue)
        ("s5", "LOAD", loading),
        ("s1", "DROP", none),
        ("s5", "CANCEL", loading),
        ("s1", "CANCEL", none),
    ]

    def apply(ops):
        return start.apply(
            [1] * len(ops),
            [code[s] for s, _, _ in ops],
            [a == "LOAD" for _, a, _ in ops],
            [q for _, _, q in ops],
            [False] * len(ops),
            [a == "CANCEL" for _, a, _ in ops],
        )

    after = apply(ops)
    assert replica(after, "s5")["load_type"] is None and not replica(after, "s5")["served"]
    assert not replica(after, "s1")["dropping"] and replica(after, "s1")["served"]
    again = apply([*ops, ("s5", "LOAD", loading)])
    assert replica(again, "s5")["load_type"] == "loading"
    with pytest.raises(ValueError, match="CANCEL"):
        apply([("s5", "CANCEL", loading)])


def test_cancels_among_many_ops_apply_as_one_op_after_another():
    """200 random sequences of LOADs, DROPs and CANCELs on segment 1's replicas as Druid's
    Coordinator queues them (one action at a time per replica: a load where it is not served, a drop
    where it is, a cancel of either; a ``druid`` plan alternates them thousands of times): what
    ``apply`` makes of each in one pass is what applying the ops one after another makes, written
    out here by hand."""
    import random

    run = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    start = run.state()
    code = {name: i for i, name in enumerate(start.servers)}
    queues = [QUEUE_CODES["loading"], QUEUE_CODES["balancing"]]
    rows0 = start.rows(run.table)
    served0 = set(rows0[(rows0["idx"] == 1) & (rows0["kind"] == "replica") & rows0["served"]]["server"])
    rng = random.Random(7)
    for _ in range(200):
        state = {s: {"load": NO_LOAD, "dropping": False, "dependent": False} for s in start.servers}
        ops = []
        for _ in range(rng.randrange(1, 12)):
            server = rng.choice(list(start.servers))
            mine = state[server]
            if mine["load"] != NO_LOAD:
                ops.append((server, "CANCEL", mine["load"], False))
                mine["load"] = NO_LOAD
            elif mine["dropping"]:
                ops.append((server, "CANCEL", NO_LOAD, False))
                mine["dropping"], mine["dependent"] = False, False
            elif server in served0:
                d = rng.random() < 0.5
                mine["dropping"], mine["dependent"] = True, d
                ops.append((server, "DROP", NO_LOAD, d))
            else:
                q = rng.choice(queues)
                mine["load"] = q
                ops.append((server, "LOAD", q, False))
        after = start.apply(
            [1] * len(ops),
            [code[s] for s, _, _, _ in ops],
            [a == "LOAD" for _, a, _, _ in ops],
            [q for _, _, q, _ in ops],
            [d for _, _, _, d in ops],
            [a == "CANCEL" for _, a, _, _ in ops],
        )
        by_server = {int(sv): i for i, sv in enumerate(after.rep_server) if after.rep_code[i] == 1}
        for server, want in state.items():
            row = by_server.get(code[server])
            if row is None:
                assert server not in served0 and want["load"] == NO_LOAD and not want["dropping"], (ops, server)
                continue
            got = (int(after.load[row]), bool(after.dropping[row]), bool(after.dependent[row]))
            assert got == (want["load"], want["dropping"], want["dependent"]), (ops, server)


def test_reading_segments_changes_nothing_a_cached_top_b_or_an_op_does():
    run = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    x = run.segment(1)
    x.count(), run.placement_costs(x), run.rank(x)
    assert not run.changed  # nothing to write back
    run.top_b(x)
    assert run.changed  # the cached top B is state
    other = tier_from(SEGMENTS, PROJECTED, SERVERS, "hot")
    other.drop(other.segment(1), "s1", "test", OpOrder(1, "", 1))
    assert other.changed


def run_servers():
    return pd.DataFrame(
        [
            {"server": s, "tier": t, "max_size": a, "current_size": 0, "priority": 0, "decommissioning": d}
            for s, t, a, d in SERVERS
            if t == "hot"
        ]
    )


def test_druid_balancing_strategies_fresh_cluster_gets_200_segments_on_each_historical():
    # Druid's BalancingStrategiesTest.testFreshClusterGetsBalanced: WIKI_10X100D (10 partitions of
    # each of 100 days, 500 MB each), five empty historicals of 1 TB, load 1 replica, queue
    # unlimited. Ranked at first visit, every load raises its server's cost for the next segment.
    day = 86_400_000
    start = 1_325_376_000_000  # 2012-01-01
    rows = []
    idx = 0
    for d in reversed(range(100)):  # used-segment index: newest first
        for p in range(10):
            rows.append(
                {
                    "tier": "T1",
                    "kind": "segment",
                    "idx": idx,
                    "segment_id": f"wiki_{d}_{p}",
                    "datasource": "wiki",
                    "start_ms": start + d * day,
                    "end_ms": start + (d + 1) * day,
                    "size_bytes": 500 << 20,
                    "target": 1,
                    "tier_pos": 0,
                    "rule_kind": "load",
                    "required": 1,
                }
            )
            idx += 1
    servers = pd.DataFrame(
        [
            {
                "server": f"historical-{i}",
                "tier": "T1",
                "max_size": 1 << 40,
                "current_size": 0,
                "priority": 0,
                "decommissioning": False,
            }
            for i in range(5)
        ]
    )
    sink = OpSink()
    run = TierRun.from_rows("T1", state_frame(pd.DataFrame(rows)), servers, NUM_BEST, sink=sink)
    load_unreplicated({"T1": run}, range(1000), {"T1": 0}, StageLimit(queue_type="loading"), sink)
    per = pd.Series([o.server for o in sink.ops]).value_counts()
    assert len(sink.ops) == 1000
    assert per.to_dict() == {f"historical-{i}": 200 for i in range(5)}
