"""sample: the bundled druid_sample snapshot and the seeded generator."""

from __future__ import annotations

import collections
import gzip
import json
import os

import pytest

from segment_balancer.druid.importer import iso_to_ms, parse_interval, segment_id
from segment_balancer.tools.sample import (
    ETERNITY,
    SNAPSHOTS_DIR,
    UNEXPORTED,
    build_druid38_sample,
    build_druid_sample,
    default_servers,
    generate_snapshot,
    server_layout,
)

FILES = {
    "segments.jsonl.gz",
    "servers.json",
    "server_segments.json",
    "load_queues.json",
    "rules.json",
    "coordinator_config.json",
    "snapshot.json",
}
DAY = 86_400_000


def _load(path) -> dict:
    """Every file of a snapshot directory, read as ARCHITECTURE.md describes it."""

    def read(name):
        with open(os.path.join(path, name), encoding="utf-8") as handle:
            return json.load(handle)

    with gzip.open(os.path.join(path, "segments.jsonl.gz"), "rt", encoding="utf-8") as lines:
        segments = [json.loads(line) for line in lines]
    snap = {name[:-5]: read(name) for name in FILES if name.endswith(".json")}
    snap["segments"] = {segment_id(s): s for s in segments}
    snap["n_segment_lines"] = len(segments)
    snap["historicals"] = {s["server"]: s for s in snap["servers"] if s["server_type"].lower() == "historical"}
    snap["served"] = collections.defaultdict(set)
    for row in snap["server_segments"]:
        snap["served"][row["segment_id"]].add(row["server"])
    return snap


def _same_files(a, b) -> None:
    assert set(os.listdir(a)) == set(os.listdir(b)) == FILES
    for name in FILES:
        with open(os.path.join(a, name), "rb") as x, open(os.path.join(b, name), "rb") as y:
            assert x.read() == y.read(), name


def _current_size(server: dict) -> int:
    return server.get("current_size", server.get("curr_size"))


def _entry_id(entry) -> str:
    return entry if isinstance(entry, str) else entry["segment_id"]


def _first_rule(snap, seg, now):
    """The first applying rule, for the rule types these snapshots use (Druid's appliesTo)."""
    start, end = parse_interval(seg["interval"])
    for rule in snap["rules"].get(seg["dataSource"], snap["rules"]["_default"]):
        kind = rule["type"]
        if kind.endswith("Forever"):
            return rule
        if kind.endswith("ByInterval"):
            r_start, r_end = parse_interval(rule["interval"])
            if r_start <= start and end <= r_end:
                return rule
        elif kind.endswith("ByPeriod"):
            assert rule["period"].startswith("P") and rule["period"].endswith("D")
            cut = now - int(rule["period"][1:-1]) * DAY
            if kind == "dropBeforeByPeriod" and end <= cut:
                return rule
            if kind == "loadByPeriod" and end > cut:
                return rule
    return None


def _check_consistency(snap, loaded_bytes=lambda server, segment: segment["size"]) -> None:
    """Facts every snapshot must satisfy: known names, sizes add up (a replica counts
    ``loaded_bytes(server row, segment payload)``: its ``size``, unless the snapshot holds partial
    replicas), capacity holds."""
    assert len(snap["segments"]) == snap["n_segment_lines"]  # ids unique
    for row in snap["server_segments"]:
        assert row["server"] in snap["historicals"]
        # A replica of a segment segments.jsonl lacks is of an unused (killed) segment: only the
        # generator's one such case.
        assert row["segment_id"] in snap["segments"] or row["segment_id"] == UNEXPORTED[0]
    assert len({(r["server"], r["segment_id"]) for r in snap["server_segments"]}) == len(snap["server_segments"])
    served_bytes = collections.Counter()
    for sid, servers in snap["served"].items():
        if sid not in snap["segments"]:
            continue  # its size is unknown (ALGORITHM.md "Inputs": taken as 0)
        for server in servers:
            served_bytes[server] += loaded_bytes(snap["historicals"][server], snap["segments"][sid])
    for name, server in snap["historicals"].items():
        assert _current_size(server) == served_bytes[name]
        assert 0 <= _current_size(server) <= server["max_size"]
    for server, queue in snap["load_queues"].items():
        assert server in snap["historicals"]
        for entry in queue["segmentsToLoad"]:
            assert _entry_id(entry) in snap["segments"]
            assert server not in snap["served"][_entry_id(entry)]  # a load is of a missing replica
        for entry in queue["segmentsToDrop"]:
            assert server in snap["served"][_entry_id(entry)]  # a drop is of a served replica
    for name in snap["coordinator_config"]["decommissioningNodes"]:
        assert name in snap["historicals"]
    iso_to_ms(snap["snapshot"]["snapshot_time"])


# --------------------------------------------------------------------------- druid_sample

DRUID_SAMPLE = os.path.join(SNAPSHOTS_DIR, "druid_sample")


def test_druid_sample_is_reproducible_from_the_sql(tmp_path):
    counts = build_druid_sample(tmp_path)
    assert counts["segments"] == 5
    _same_files(tmp_path, DRUID_SAMPLE)


def test_druid_sample_has_the_described_cluster():
    snap = _load(DRUID_SAMPLE)
    _check_consistency(snap)
    now = iso_to_ms(snap["snapshot"]["snapshot_time"])
    assert snap["snapshot"] == {"snapshot_time": "2013-06-01T00:00:00.000Z", "cluster": "druid-sample"}
    tiers = collections.Counter(s["tier"] for s in snap["historicals"].values())
    assert tiers == {"_default_tier": 3, "hot": 2}
    assert any(s["server_type"] == "broker" for s in snap["servers"])
    assert len(snap["segments"]) == 5
    by_day = {(s["dataSource"], s["interval"][:10]): sid for sid, s in snap["segments"].items()}
    tw1, tw3 = by_day[("twitterstream", "2013-01-01")], by_day[("twitterstream", "2013-01-03")]
    assert snap["served"][tw3] == set()  # unreplicated (target hot:1 + _default_tier:1)
    assert _first_rule(snap, snap["segments"][tw3], now)["tieredReplicants"] == {"hot": 1, "_default_tier": 1}
    default_holders = [s for s in snap["served"][tw1] if snap["historicals"][s]["tier"] == "_default_tier"]
    assert len(default_holders) == 2  # overreplicated in _default_tier (target 1)
    assert sum(len(v) >= 2 for v in snap["served"].values()) >= 2  # some served twice
    (decommissioning,) = snap["coordinator_config"]["decommissioningNodes"]
    assert any(decommissioning in servers for servers in snap["served"].values())
    loads = [e for q in snap["load_queues"].values() for e in q["segmentsToLoad"]]
    assert len(loads) == 1
    assert snap["coordinator_config"]["maxSegmentsInNodeLoadingQueue"] > 0


# -------------------------------------------------------------------------------- druid38

DRUID38 = os.path.join(SNAPSHOTS_DIR, "druid38")


def test_shipped_druid38_equals_a_fresh_build(tmp_path):
    """131 segments (clicks and metrics 30 days x 2 partitions, logs 7, audit 4); 247 replicas
    (clicks: days 1-15 on two historicals, 16-29 on one: 60 + 28; metrics: days 1-19 on three,
    20-29 on two, day 25's partition 0 on three: 114 + 41; audit 4)."""
    counts = build_druid38_sample(tmp_path)
    assert counts == {"segments": 131, "historicals": 7, "server_segments": 247, "queued_loads": 2, "queued_drops": 1}
    _same_files(tmp_path, DRUID38)


def test_druid38_is_a_druid_38_cluster_with_aliases_and_partial_loads():
    """``sys.servers`` rows as Druid 38.0.0 lists them (its columns in its order, version 38.0.0);
    ``curr_size`` counts a partial replica by the bytes it loaded (a fifth of a ``by_country``
    clicks replica, two thirds of a metrics partition 0, nothing of partition 1's empty part)."""
    from segment_balancer.druid.snapshot.loader import load_cluster_version
    from segment_balancer.druid.snapshot.models import SYS_SERVERS_COLUMNS

    snap = _load(DRUID38)

    def loaded_bytes(server, seg):
        hot = server["tier"] != "cold"
        if seg["dataSource"] == "clicks" and hot and seg.get("projections"):
            return seg["size"] // 5
        if seg["dataSource"] == "metrics" and "clusterGroups" in seg:
            return seg["size"] * 2 // 3 if seg["shardSpec"]["partitionNum"] == 0 else 0
        return seg["size"]

    _check_consistency(snap, loaded_bytes)
    assert all(list(row) == list(SYS_SERVERS_COLUMNS) and row["version"] == "38.0.0" for row in snap["servers"])
    assert load_cluster_version(DRUID38) == "38.0.0"
    tiers = collections.Counter(s["tier"] for s in snap["historicals"].values())
    assert tiers == {"hot_blue": 2, "hot_green": 2, "cold": 3}
    assert snap["historicals"]["hist-hot-green-02:8083"]["curr_size"] == 0
    assert not any("hist-hot-green-02:8083" in servers for servers in snap["served"].values())
    config = snap["coordinator_config"]
    assert config["historicalTierAliases"] == {"hot": ["hot_blue", "hot_green"]}
    assert config["decommissioningNodes"] == ["hist-cold-03:8083"]
    assert any("hist-cold-03:8083" in servers for servers in snap["served"].values())
    kinds = collections.Counter(
        (s["dataSource"], "projections" in s, "clusterGroups" in s) for s in snap["segments"].values()
    )
    assert kinds == {
        ("clicks", True, False): 20,
        ("clicks", False, False): 40,
        ("metrics", False, True): 40,
        ("metrics", False, False): 20,
        ("logs", False, False): 7,
        ("audit", False, False): 4,
    }
    assert "archive" not in tiers and snap["rules"]["logs"][0]["tieredReplicants"] == {"archive": 1}


# ------------------------------------------------------------------------------ generated

GENERATED = os.path.join(SNAPSHOTS_DIR, "generated")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    out = tmp_path_factory.mktemp("generated")
    counts = generate_snapshot(out)
    return out, counts


def test_generator_is_deterministic(fresh, tmp_path):
    out, counts = fresh
    assert generate_snapshot(tmp_path) == counts
    _same_files(out, tmp_path)


def test_shipped_generated_snapshot_equals_a_fresh_generation(fresh):
    _same_files(fresh[0], GENERATED)


def test_a_druid_version_adds_the_version_column_and_nothing_else(fresh, tmp_path):
    """``generate --druid-version 35.0.1``: every ``servers.json`` row gains ``version`` (as Druid
    35's sys.servers has it), every other byte is the same; the cluster then runs 35.0.1."""
    from segment_balancer.druid.releases import reproduced_release
    from segment_balancer.druid.snapshot.loader import load_cluster_version

    assert generate_snapshot(tmp_path, druid_version="35.0.1") == fresh[1]
    for name in FILES - {"servers.json"}:
        with open(os.path.join(tmp_path, name), "rb") as x, open(os.path.join(fresh[0], name), "rb") as y:
            assert x.read() == y.read(), name
    with open(os.path.join(fresh[0], "servers.json"), encoding="utf-8") as without:
        rows = json.load(without)
    with open(os.path.join(tmp_path, "servers.json"), encoding="utf-8") as with_version:
        assert json.load(with_version) == [{**row, "version": "35.0.1"} for row in rows]
    assert load_cluster_version(fresh[0]) is None
    assert load_cluster_version(tmp_path) == "35.0.1" and reproduced_release("35.0.1") == "35.0.0"


def test_generate_druid_version_on_the_command_line(tmp_path, capsys):
    """``--druid-version`` alone is the newest reproduced release; a value that is no Druid version
    is refused in one line (exit code 2) before anything is written."""
    from segment_balancer.druid.snapshot.loader import load_cluster_version
    from segment_balancer.tools import cli

    assert cli.main(["generate", str(tmp_path / "newest"), "--segments", "8200", "--druid-version"]) == 0
    assert load_cluster_version(tmp_path / "newest") == "38.0.0"
    assert cli.main(["generate", str(tmp_path / "bad"), "--segments", "8200", "--druid-version", "38"]) == 2
    err = capsys.readouterr().err
    assert "input refused: generate --druid-version: Druid version '38' is not a release number" in err
    assert not (tmp_path / "bad").exists()


def test_another_seed_gives_another_snapshot(fresh, tmp_path):
    generate_snapshot(tmp_path, seed=1)
    with (
        open(os.path.join(tmp_path, "server_segments.json"), "rb") as a,
        open(os.path.join(fresh[0], "server_segments.json"), "rb") as b,
    ):
        assert a.read() != b.read()


@pytest.fixture(scope="module")
def snap():
    return _load(GENERATED)


def test_generated_snapshot_is_consistent(snap, fresh):
    _check_consistency(snap)
    counts = fresh[1]
    assert counts["segments"] == len(snap["segments"])
    assert counts["server_segments"] == len(snap["server_segments"])
    assert 18_000 <= len(snap["segments"]) <= 22_000  # n_segments ~ 20000


def test_generated_segments_look_like_druids(snap):
    datasources = collections.Counter(s["dataSource"] for s in snap["segments"].values())
    assert {"wikipedia", "clickstream", "metrics", "orders", "lookup_dim"} <= set(datasources)
    sizes = sorted(s["size"] for s in snap["segments"].values() if s["dataSource"] != "lookup_dim")
    median = sizes[len(sizes) // 2]
    assert 50_000_000 <= median <= 500_000_000
    partitions = {
        s["shardSpec"].get("partitionNum", 0) for s in snap["segments"].values() if s["dataSource"] == "clickstream"
    }
    assert len(partitions) > 1
    # every numbered/hashed time chunk has all its partitions (a complete core set)
    chunks = collections.defaultdict(set)
    for s in snap["segments"].values():
        if "partitions" in s["shardSpec"]:
            chunks[(s["dataSource"], s["interval"], s["version"], s["shardSpec"]["partitions"])].add(
                s["shardSpec"]["partitionNum"]
            )
    assert all(nums == set(range(key[3])) for key, nums in chunks.items())


def test_generated_tiers_and_servers(snap):
    tiers = collections.defaultdict(list)
    for s in snap["historicals"].values():
        tiers[s["tier"]].append(s)
    assert set(tiers) == {"hot", "cold", "_default_tier"}
    assert all(s["priority"] == 10 for s in tiers["hot"])
    assert all(s.get("priority", 0) == 0 for s in tiers["cold"] + tiers["_default_tier"])
    assert any(s["server_type"] != "historical" for s in snap["servers"])
    empty = [n for n, s in snap["historicals"].items() if _current_size(s) == 0]
    assert len(empty) == 1
    assert not any(empty[0] in held for held in snap["served"].values())
    assert any(_current_size(s) >= 0.95 * s["max_size"] for s in snap["historicals"].values())
    assert any(_current_size(s) <= 0.8 * s["max_size"] for s in snap["historicals"].values() if _current_size(s) > 0)


def test_generated_historicals_scale_with_the_cluster(snap):
    """30 historicals by default (one per 5,000 segments, at least 30): 9 hot, 6 _default_tier,
    15 cold with the added one; the 10th hot and the 15th cold of before are lost."""
    assert (default_servers(20_000), default_servers(1_000_000)) == (30, 200)
    layout = server_layout(30)
    tiers = collections.Counter(t for _, t, _ in layout.present)
    assert tiers == {"hot": 9, "cold": 15, "_default_tier": 6}
    assert layout.lost == ("hist-hot-10", "hist-cold-15") and layout.added == "hist-cold-16"
    assert {n[:-5] for n in snap["historicals"]} == {n for n, _, _ in layout.present}
    assert not set(layout.lost) & {n[:-5] for n in snap["historicals"]}
    assert snap["coordinator_config"]["maxSegmentsInNodeLoadingQueue"] == 500
    with pytest.raises(ValueError, match="at least 12"):
        server_layout(11)


def test_generated_decommissioning_server_still_serves(snap):
    (decommissioning,) = snap["coordinator_config"]["decommissioningNodes"]
    held = [sid for sid, servers in snap["served"].items() if decommissioning in servers]
    assert len(held) > 100
    assert any(snap["segments"][sid]["dataSource"] != "lookup_dim" for sid in held)


def test_generated_replication_situations(snap):
    now = iso_to_ms(snap["snapshot"]["snapshot_time"])
    tier_of = {n: s["tier"] for n, s in snap["historicals"].items()}
    queued = collections.defaultdict(list)
    for server, queue in snap["load_queues"].items():
        for entry in queue["segmentsToLoad"]:
            queued[_entry_id(entry)].append(server)
    unreplicated = underreplicated = overreplicated = drop_rule_served = 0
    for sid, seg in snap["segments"].items():
        if not seg.get("used", True) or seg.get("overshadowed", False):
            continue
        rule = _first_rule(snap, seg, now)
        assert rule is not None
        if rule["type"].startswith("drop"):
            drop_rule_served += bool(snap["served"][sid])
        if not rule["type"].startswith("load"):
            continue
        count = collections.Counter(tier_of[s] for s in list(snap["served"][sid]) + queued[sid])
        if not count:
            unreplicated += 1
            continue
        wanted = rule["tieredReplicants"]
        underreplicated += any(count[t] < n for t, n in wanted.items())
        overreplicated += any(count[t] > n for t, n in wanted.items())
    assert 100 <= unreplicated <= 1000  # a few hundred, after the lost server
    assert underreplicated > unreplicated
    assert overreplicated > 0
    assert drop_rule_served > 0


def test_generated_broadcast_unused_and_overshadowed(snap):
    broadcast = [ds for ds, rules in snap["rules"].items() if rules[0]["type"].startswith("broadcast")]
    assert broadcast
    assert any(s["dataSource"] in broadcast for s in snap["segments"].values())
    assert snap["rules"]["_default"][0]["type"] == "loadForever"
    unused_served = [sid for sid, s in snap["segments"].items() if s["used"] is False and snap["served"][sid]]
    assert unused_served
    overshadowed = [sid for sid, s in snap["segments"].items() if s.get("overshadowed")]
    assert overshadowed and all(snap["served"][sid] for sid in overshadowed)


def test_generated_real_cluster_cases(snap):
    """An ALL-granularity segment, a killed segment still served, a re-ingested day not loaded."""
    eternal = [s for s in snap["segments"].values() if s["interval"] == ETERNITY]
    assert [s["dataSource"] for s in eternal] == ["countries"]
    assert snap["served"][segment_id(eternal[0])] == {"hist-default-01:8083", "hist-default-04:8083"}
    assert UNEXPORTED[0] not in snap["segments"]
    assert snap["served"][UNEXPORTED[0]] == {f"{n}:8083" for n in UNEXPORTED[1]}
    now = iso_to_ms(snap["snapshot"]["snapshot_time"])
    new_orders = [
        sid
        for sid, s in snap["segments"].items()
        if s["dataSource"] == "orders"
        and iso_to_ms(s["interval"].split("/")[1]) >= now - 6 * 86_400_000
        and not s.get("overshadowed")
    ]
    assert len(new_orders) == 6 and sum(not snap["served"][sid] for sid in new_orders) == 1


def test_generated_load_queues(snap):
    now = iso_to_ms(snap["snapshot"]["snapshot_time"])
    loads = [e for q in snap["load_queues"].values() for e in q["segmentsToLoad"]]
    drops = [e for q in snap["load_queues"].values() for e in q["segmentsToDrop"]]
    assert loads and drops
    typed = [e for e in loads if isinstance(e, dict)]
    assert {e["queue_type"] for e in typed} == {"loading", "balancing", "decommissioning"}
    assert any(isinstance(e, str) for e in loads)  # untyped Druid entries count as loading
    ages = [now - iso_to_ms(e["requested_at"]) for e in typed]
    assert all(age >= 0 for age in ages)
    assert any(age > 15 * 60_000 for age in ages) and any(age < 15 * 60_000 for age in ages)


def test_generate_writes_about_the_segments_asked_and_refuses_too_few(tmp_path):
    """Within ``SEGMENTS_ROUNDING`` of what was asked above the minimum (measured by hand: 9,000
    gives 8,991 before the snapshot's real-cluster cases); below it, one line naming the minimum."""
    import pytest

    from segment_balancer.common.errors import InputError
    from segment_balancer.tools.sample import MIN_SEGMENTS, SEGMENTS_ROUNDING

    counts = generate_snapshot(tmp_path / "nine", n_segments=9000)
    assert abs(counts["segments"] - 9000) <= 9000 * SEGMENTS_ROUNDING
    with pytest.raises(InputError, match=f"at least {MIN_SEGMENTS:,}"):
        generate_snapshot(tmp_path / "five", n_segments=5000)
    assert not (tmp_path / "five").exists()
