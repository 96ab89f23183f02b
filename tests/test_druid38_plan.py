"""The bundled ``druid38`` snapshot (``sample.build_druid38_sample``: a Druid 38.0.0 cluster with a tier
alias, partial-load rules and a rule naming a tier without historicals) planned by both coordinators
through the CLI's path, ``run_plan(..., compare=True)``: the algorithm of #7458 publishes its plan and
the ``druid`` coordinator's beside it (``compared/druid/``), both validated. What the plans must do
with the segments below is worked out by hand from the rules (ALGORITHM.md "Rules of Druid 38: tier
aliases and partial loads"; Druid 38.0.0's ``PartialLoadRule``, ``StrategicSegmentAssigner``), and
three runs of each coordinator through the simulator.

The snapshot is taken at 2026-10-01T00:00Z; "day d" is the day ending d days before it (day 0:
2026-09-30). ``hot`` is an alias of ``hot_blue`` and ``hot_green``: ``{hot: n}`` asks n replicas on
each. A LOAD queued by the rules is, for #7458, a LOAD of queue type ``loading`` (stages 1-4, 6, 8),
and for Druid one of ``RunRules`` (duty 2).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import struct
from pathlib import Path

import pandas as pd
import pytest

from segment_balancer.druid.importer import segment_id
from segment_balancer.planner.undone import CAUSES, NO_HISTORICAL_HOW
from segment_balancer.tools.sample import SNAPSHOTS_DIR

SNAPSHOT = Path(SNAPSHOTS_DIR) / "druid38"
COORDINATORS = ("issue7458", "druid")
HOT_TIERS = ("hot_blue", "hot_green")
NEW, DECOMMISSIONING = "hist-hot-green-02:8083", "hist-cold-03:8083"


def _ids() -> dict[tuple[str, str, int], str]:
    """(datasource, first day of the interval, partition) -> segment id, from ``segments.jsonl.gz``."""
    with gzip.open(SNAPSHOT / "segments.jsonl.gz", "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    return {(r["dataSource"], r["interval"][:10], r["shardSpec"].get("partitionNum", 0)): segment_id(r) for r in rows}


ID = _ids()


def projection_fingerprint(names: list[str]) -> str:
    """Druid's fingerprint of projection names (``ProjectionPartialLoadMatcher.computeFingerprint``):
    SHA-256 over each name's UTF-16LE code units followed by a zero byte, 16 hex digits after ``v1:``."""
    data = b"".join(name.encode("utf-16-le") + b"\0" for name in sorted(names))
    return "v1:" + hashlib.sha256(data).hexdigest()[:16]


def group_fingerprint(indices: list[int]) -> str:
    """Druid's fingerprint of cluster-group indices (``ClusterGroupPartialLoadMatcher.computeFingerprint``):
    SHA-256 over each index as a 32-bit little-endian int (Guava's ``putInt``), ``v1:`` prefix."""
    return "v1:" + hashlib.sha256(b"".join(struct.pack("<i", i) for i in sorted(indices))).hexdigest()[:16]


@pytest.fixture(scope="module")
def planned(spark, tmp_path_factory):
    """``{coordinator: (summary, operations, assignment, plan dir)}``: the snapshot planned once by
    ``run_plan(..., compare=True)``, #7458's plan with Druid's beside it."""
    from segment_balancer.tools.pipeline import run_plan

    base = tmp_path_factory.mktemp("druid38")
    run_plan(spark, SNAPSHOT, base / "plan", work=base / "work", compare=True)
    out = {}
    for coordinator, plan in (("issue7458", base / "plan"), ("druid", base / "plan" / "compared" / "druid")):
        out[coordinator] = (
            json.loads((plan / "summary.json").read_text()),
            pd.read_parquet(plan / "operations.parquet"),
            pd.read_parquet(plan / "assignment.parquet"),
            plan,
        )
    return out


def rule_loads(coordinator: str, ops: pd.DataFrame) -> pd.DataFrame:
    """The LOADs the rules queued (module docstring)."""
    loads = ops[ops["action"] == "LOAD"]
    if coordinator == "druid":
        return loads[loads["stage"] == 2]
    return loads[loads["queue_type"] == "loading"]


def of(frame: pd.DataFrame, *keys: tuple[str, str, int]) -> pd.DataFrame:
    return frame[frame["segment_id"].isin([ID[k] for k in keys])]


def part(row) -> tuple:
    """A LOAD's ``(partial_matcher, partial_type, partial_parts, partial_fingerprint)``; Nones for a whole load."""
    return (row.partial_matcher, row.partial_type, row.partial_parts, row.partial_fingerprint)


WHOLE = (None, None, None, None)


def test_both_coordinators_publish_validated_plans_of_druid_38(planned):
    """Both plans pass the Great Expectations gate; the druid coordinator reproduces Druid 38.0.0,
    the release the snapshot's leading coordinator reports (``sys.servers.version``)."""
    for coordinator, (_, ops, _, plan) in planned.items():
        assert json.loads((plan / "validation.json").read_text())["success"] is True, coordinator
        assert (plan / "report.html").is_file() and len(ops) > 0
    summary = planned["druid"][0]
    assert summary["coordinator"] == "druid"
    assert (summary["druid_run"]["release"], summary["druid_run"]["release_from"]) == ("38.0.0", "snapshot")
    assert "druid_run" not in planned["issue7458"][0]
    comparison = json.loads((planned["issue7458"][3] / "comparison.json").read_text())
    assert [p["coordinator"] for p in comparison["plans"]] == list(COORDINATORS)


def test_an_alias_asks_every_one_of_its_tiers(planned):
    """``audit`` has no rule of its own: ``_default``'s ``loadForever {hot: 1}`` asks one replica on
    hot_blue and one on hot_green. Its four months are on hist-hot-blue-01 only: each gets one LOAD,
    on hot_green, and once the plan succeeded one replica in each hot tier and none in cold. No
    operation names ``hot`` itself (an alias is no tier)."""
    months = [("audit", f"2026-0{m}-01", 0) for m in (6, 7, 8, 9)]
    for coordinator, (_, ops, assignment, _) in planned.items():
        loads = of(rule_loads(coordinator, ops), *months)
        assert sorted(loads["segment_id"]) == sorted(ID[k] for k in months), coordinator
        assert set(loads["tier"]) == {"hot_green"} and set(map(part, loads.itertuples())) == {WHOLE}
        after = of(assignment, *months).groupby("segment_id")["tier"].apply(sorted)
        assert after.tolist() == [["hot_blue", "hot_green"]] * 4, coordinator
        assert set(ops["tier"]) <= {"hot_blue", "hot_green", "cold"}


def test_a_recent_clicks_load_carries_the_by_country_part(planned):
    """``clicks`` day 0 ends at the snapshot (within P14D) and has projections by_country, by_device:
    ``globProjection`` ``by_*`` less ``by_device`` selects ``by_country``, Druid's fingerprint of it
    computed here. Partition 0 is queued on hist-hot-green-01, partition 1 on hist-hot-blue-01: each
    gets its other hot tier's replica, that part. #7458 loads that part wherever it loads such a
    segment (balancing too); Druid's ``BalanceSegments`` loads the whole segment wherever it moves
    one, as Druid 38's ``StrategicSegmentAssigner.moveSegment`` (no profile) does."""
    by_country = (
        "globProjection",
        "partialProjection",
        json.dumps(["by_country"]),
        projection_fingerprint(["by_country"]),
    )
    recent = [("clicks", f"2026-09-{day:02d}", p) for day in range(21, 31) for p in (0, 1)]  # days 0-9
    for coordinator, (_, ops, _, _) in planned.items():
        loads = of(rule_loads(coordinator, ops), ("clicks", "2026-09-30", 0), ("clicks", "2026-09-30", 1))
        assert sorted(zip(loads["segment_id"], loads["tier"])) == [
            (ID[("clicks", "2026-09-30", 0)], "hot_blue"),
            (ID[("clicks", "2026-09-30", 1)], "hot_green"),
        ], coordinator
        assert set(map(part, loads.itertuples())) == {by_country}
    ops = planned["issue7458"][1]
    every = of(ops[ops["action"] == "LOAD"], *recent)
    assert len(every) > 2 and set(map(part, every.itertuples())) == {by_country}
    ops = planned["druid"][1]
    balancer = ops[(ops["action"] == "LOAD") & (ops["stage"] == 6)]
    assert len(of(balancer, *recent)) > 0 and set(map(part, balancer.itertuples())) == {WHOLE}


def test_clicks_without_projections_are_loaded_whole(planned):
    """Days 10-13 are within P14D but have no projections: the matcher does not apply and
    ``onCannotMatch`` is ``fullLoad`` (the default), so the partial rule loads them whole; from day
    14 the first rule no longer applies (day 14 ends exactly 14 days before the snapshot: P14D asks
    the end to be after that instant) and ``loadForever {cold: 1}`` loads them whole."""
    older = [("clicks", f"2026-09-{day:02d}", p) for day in range(1, 21) for p in (0, 1)]  # days 10-29
    for coordinator, (_, ops, _, _) in planned.items():
        loads = of(ops[ops["action"] == "LOAD"], *older)
        assert len(loads) > 0 and set(map(part, loads.itertuples())) == {WHOLE}, coordinator


def test_clicks_aged_out_of_the_hot_tiers_load_on_cold(planned):
    """Days 14 and 15 (2026-09-16 and -15, four segments) are served on a hot_blue historical and
    hist-hot-green-01 and on no cold historical; their rule is ``loadForever {cold: 1}``. Each gets
    one LOAD in cold, whole. #7458: the stage-3 callback drops the hot_blue replica (the first
    overreplicated tier by name) once that load succeeded; dropping the hot_green one too would
    leave no loaded replica while the cold load is queued, so that drop waits for the next run
    (availability). Druid: a replica surplus of 1 (2 loaded, 1 required), one drop in a hot tier at
    once (``StrategicSegmentAssigner.replicateSegment``)."""
    aged = [("clicks", day, p) for day in ("2026-09-16", "2026-09-15") for p in (0, 1)]
    for coordinator, (summary, ops, _, _) in planned.items():
        loads = of(rule_loads(coordinator, ops), *aged)
        assert sorted(loads["segment_id"]) == sorted(ID[k] for k in aged), coordinator
        assert set(loads["tier"]) == {"cold"} and set(map(part, loads.itertuples())) == {WHOLE}
        drops = of(ops[(ops["action"] == "DROP") & ops["tier"].isin(HOT_TIERS)], *aged)
        if coordinator == "issue7458":
            assert set(drops["tier"]) == {"hot_blue"} and len(drops) == 4
            load_of = dict(zip(loads["segment_id"], loads["op_id"]))
            assert all(int(d.depends_on) == load_of[d.segment_id] for d in drops.itertuples())
            assert summary["availability"]["deferred_segments"] == 4
            assert sorted(summary["availability"]["deferred_examples"]) == sorted(ID[k] for k in aged)
        else:
            drops = drops[drops["stage"] == 2]  # RunRules' (BalanceSegments may move the replica kept)
            assert sorted(drops["segment_id"]) == sorted(ID[k] for k in aged) and drops["depends_on"].isna().all()


def test_metrics_partition_0_loads_its_eu_groups_and_partition_1_the_empty_part(planned):
    """``metrics`` day 0 (served nowhere) is clustered on ``region``: partition 0 holds the groups
    ap-south, eu-central, eu-west, partition 1 us-east, us-west. ``globClusterGroup``
    ``[{"region": "eu-*"}]`` selects groups 1 and 2 of partition 0; partition 1 is a core partition
    with no match: the empty part, which Druid dispatches because its sibling matched. The rule asks
    hot_blue, hot_green and cold for one replica each: one LOAD of each partition in each."""
    eu = ("globClusterGroup", "partialClusterGroup", json.dumps([1, 2]), group_fingerprint([1, 2]))
    empty = ("globClusterGroup", "partialClusterGroup", json.dumps([]), "v1:partial-empty")
    for coordinator, (_, ops, _, _) in planned.items():
        loads = rule_loads(coordinator, ops)
        for p, expected in ((0, eu), (1, empty)):
            mine = of(loads, ("metrics", "2026-09-30", p))
            assert sorted(mine["tier"]) == ["cold", "hot_blue", "hot_green"], (coordinator, p)
            assert set(map(part, mine.itertuples())) == {expected}, (coordinator, p)


def test_unclustered_metrics_fall_through_to_two_cold_replicas(planned):
    """Days 20-29 of ``metrics`` have no ``clusterGroups``: the matcher does not apply and
    ``onCannotMatch`` is ``fallThrough``, so ``loadForever {cold: 2}`` decides: once the plan
    succeeded each has two cold replicas and none in a hot tier, and whatever loads them loads
    them whole."""
    old = [("metrics", f"2026-09-{day:02d}", p) for day in range(1, 11) for p in (0, 1)]
    for coordinator, (_, ops, assignment, _) in planned.items():
        after = of(assignment, *old).groupby("segment_id")["tier"].apply(sorted)
        assert len(after) == 20 and set(map(tuple, after)) == {("cold", "cold")}, coordinator
        loads = of(ops[ops["action"] == "LOAD"], *old)
        assert len(loads) > 0 and set(map(part, loads.itertuples())) == {WHOLE}


def test_logs_load_nothing_and_the_plan_says_why(planned):
    """``logs``' rule wants one replica in ``archive``, which has no historical: no operation for
    its seven segments, all unavailable; ``undone`` says it is archive's 7 replicas, stopped by its
    having no historical, and an alert names the tier. Every other segment has a replica once the
    plan succeeded (7 unavailable, all ``logs``)."""
    days = [("logs", f"2026-09-{day:02d}", 0) for day in range(24, 31)]
    for coordinator, (summary, ops, assignment, plan) in planned.items():
        assert of(ops, *days).empty and of(assignment, *days).empty
        assert summary["undone"]["unavailable"] == 7
        assert summary["undone"]["tiers"]["archive"] == {
            "underreplicated": 7,
            "missing_replicas": 7,
            "on_decommissioning": 0,
            "spread_segments": 0,
            "stopped_by": {CAUSES["no_historical"]: 7},
            "runs_to_finish": None,
            "runs_how": NO_HISTORICAL_HOW,
        }, coordinator
        assert summary["alerts"] == [
            {
                "kind": "unknown_tier",
                "message": "tier archive is named by a rule but has no historical server; left out of every sum",
            }
        ]
        unavailable = {
            m["at"]: m["value"] for m in summary["druid_metrics"] if m["metric"] == "segment/unavailable/count"
        }
        assert unavailable["plan"] == 7
        assert 'data-tier="archive"' in (plan / "report.html").read_text()


def test_the_demo_recap_counts_the_segments_of_a_tier_without_historicals(planned, capsys):
    """``summary --brief`` (``make demo``'s recap) says what stays unavailable: the 7 ``logs``
    segments, whose tier has no historical (the unreplicated count leaves that tier out)."""
    from segment_balancer.tools.cli import print_brief

    for summary, _, _, plan in planned.values():
        assert summary["status_after"]["unreplicated"] == 0
        print_brief(plan)
        out = capsys.readouterr().out
        assert "once they succeed: 7 unavailable, 0 under-replicated" in out
        assert "runs to finish per tier: archive ?, cold 1, hot_blue 0, hot_green 0" in out


def test_the_new_historical_fills_and_the_decommissioning_one_empties(planned):
    """hist-hot-green-02 joined empty: both coordinators load onto it. hist-cold-03 is
    decommissioning: everything it serves moves off but day 25's ``metrics`` partition 0, which
    hist-cold-01 serves and hist-cold-02 serves with a drop queued: no cold historical can take it
    while that drop is pending (and two replicas are still needed: it stays)."""
    for coordinator, (_, ops, assignment, _) in planned.items():
        assert (ops.loc[ops["action"] == "LOAD", "server"] == NEW).sum() > 0, coordinator
        assert assignment.loc[assignment["server"] == DECOMMISSIONING, "segment_id"].tolist() == [
            ID[("metrics", "2026-09-05", 0)]
        ], coordinator


@pytest.mark.simulation
@pytest.mark.parametrize("coordinator", COORDINATORS)
def test_three_simulated_runs(spark, tmp_path, coordinator):
    """``simulate --runs 3``: every load completes between runs. Run 1 starts with 2 unreplicated
    segments (``metrics`` day 0; ``clicks`` day 0 is queued; ``logs``' tier has no historical and
    counts nowhere) and 10 under-replicated ones (the four aged-out ``clicks`` days in cold, the four
    ``audit`` months in hot_green, ``clicks`` day 0 in the hot tier its queue lacks); run 1's plan
    leaves none, so runs 2 and 3 start with none. The aged-out ``clicks`` replicas still in a hot
    tier (4 segments) are dropped in run 2, once their cold replica is loaded. hist-cold-03 keeps
    day 25's ``metrics`` partition 0 after run 1 (no cold historical can take it) and nothing after
    run 2 (hist-cold-02's queued drop of it is done). ``logs`` is never loaded."""
    from segment_balancer.tools.simulate import simulate

    runs = simulate(spark, SNAPSHOT, tmp_path / "sim", 3, coordinator=coordinator)
    assert runs["run"].tolist() == [1, 2, 3]
    assert runs["unreplicated_before"].tolist() == [2, 0, 0]
    assert runs["underreplicated_before"].tolist() == [10, 0, 0]
    assert runs["overreplicated_before"].tolist()[1:] == [4, 0]
    assert runs["loads_failed"].sum() == 0
    for run in (1, 2, 3):
        plan = tmp_path / "sim" / f"run-{run:03d}" / "plan"
        assert json.loads((plan / "summary.json").read_text())["undone"]["unavailable"] == 7
        assert not pd.read_parquet(plan / "operations.parquet")["datasource"].eq("logs").any()
        held = pd.read_csv(tmp_path / "sim" / f"run-{run:03d}" / "historicals.csv").set_index("server")
        assert held.loc[DECOMMISSIONING, "segments"] == (1 if run == 1 else 0)
        assert held.loc[NEW, "segments"] > 0


def test_a_shard_group_whose_rule_loads_nothing_is_left_as_druid_leaves_it(spark, tmp_path):
    """The snapshot with ``metrics`` day 0's partition 0 holding no ``eu-*`` group (ap-south only):
    neither partition matches, so Druid 38's ``RunRules`` discards both empty parts and does nothing
    with them. The #7458 plan neither loads nor drops them, and says why in an alert of its own
    (not ``no_rule_matches``: a rule applies); the druid plan queues nothing for them either."""
    import shutil

    from segment_balancer.tools.pipeline import run_plan

    snap = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, snap)
    with gzip.open(snap / "segments.jsonl.gz", "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    day0 = [r for r in rows if r["dataSource"] == "metrics" and r["interval"].startswith("2026-09-30")]
    day0[0]["clusterGroups"]["tuples"] = [["ap-south"]]
    with gzip.open(snap / "segments.jsonl.gz", "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
    summary = run_plan(spark, snap, tmp_path / "plan", work=tmp_path / "work", compare=True)
    ids = {segment_id(r) for r in day0}
    for plan in (tmp_path / "plan", tmp_path / "plan" / "compared" / "druid"):
        ops = pd.read_parquet(plan / "operations.parquet")
        assert not ops["segment_id"].isin(ids).any()
    alerts = {a["kind"]: a for a in summary["alerts"]}
    assert alerts["partial_load_of_nothing"]["count"] == 2
    assert set(alerts["partial_load_of_nothing"]["examples"]) == ids
    assert "no_rule_matches" not in alerts
