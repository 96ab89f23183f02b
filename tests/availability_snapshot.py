"""A hand-worked snapshot of the cases where a plan could cost availability (ALGORITHM.md
"Availability", "Inputs", stages 5 and 12), one case per datasource, each kept apart from the
others: different tiers, or more than 45 days apart (so no placement cost crosses cases).

Tiers and historicals (``maxSegmentsInNodeLoadingQueue`` 500, every size in bytes):

* ``hot`` (priority 10): hot0, hot1 (max 10,000, 1,000 used each);
* ``cold``: cold0, cold1 (max 10,000);
* ``_default_tier``: d1 (decommissioning), d2 (max 10,000, 5,000 used), d3 (max 10,000, 100 used);
* ``eternal``: e0 (max 10,000), e1 (max 0: never room for a load).

Cases, with the plan worked out from ALGORITHM.md:

``queued`` — Q (``qd``, 2020-01-01, rule hot 1) is served only on cold0 (target 0 there after a rule
change); an earlier run queued its load on hot0. count(hot) = 1 (the queued load), count(cold) = 1:
excess 1, the only candidate is cold0. loaded(Q) = 0 (hot0 is only loading; cold has target 0),
required = min(2, 1) = 1; a drop from a tier with target 0 needs loaded ≥ required already: 0 < 1,
so the drop is deferred. No operation on Q.

``absent`` — G (``gh``, 2021-01-01, rule ``ghost`` 2: no such tier) is served on cold1 and d2.
Σ target over present tiers = 0, so both replicas are excess, but loaded = 0 < required =
min(2, 2): both drops deferred; alert ``unknown_tier``. No operation on G.

``reindexed`` — day 2022-03-01 of ``rx`` (rule hot 2): V1 (version 2022-01-01) served on hot0 and
hot1; V2 (version 2022-06-01) published, used, served nowhere: V2 overshadows V1. V2 is
unreplicated: stage 1, primary tier hot; V2 costs the same on hot0 and hot1 (each holds V1, the
same interval; Q queued on hot0 is two years away), so the tie goes to more available bytes: hot1
(hot0's queue holds Q's 100 bytes) → LOAD V2 on hot1; stage 4 (target 2) → LOAD V2 on hot0. V1
waits (V2 is not served yet): no drop; the summary counts ``rx`` 1 segment, 2 replicas waiting.

``reindexed_served`` — day 2023-05-01 of ``ry`` (rule cold 2): W1 served on cold0 and cold1, W2 (newer)
served on cold0 only. W2 is underreplicated in cold: stage 3 → LOAD W2 on cold1 (the only
non-holding server). W1: W2 is served, so stage 12 drops W1 from cold0 and cold1 (reason
``overshadowed``). Stage 7 in cold: only W2 is eligible (Q and G have target 0 there); B(2, 2) = 2
covers both servers: no move.

``unlisted`` — d3 serves ``gone_2019-07-01…_2019-07-01T00:00:00.000Z`` and
``ry_old_2019-08-01…_v1_3``, and d2's drop queue holds ``gone_2019-09-01…``: none of them is in
``segments.jsonl``. They are unused segments: accepted, and stage 12 drops the two served
replicas from d3 (reason ``unused``). ``ry_old_…`` starts with the snapshot's datasource ``ry``
but ``old`` is no instant, so Druid's parsing gives datasource ``ry_old``, partition 3.

``eternity`` — E (``all``, ALL granularity: Druid's eternity interval, rule eternal 1) and D1, D2
(``daily``, 2024-01-01 and 2024-01-02, rule eternal 1) are all served on e0. e1 costs 0 for each
(empty) but has no room, so no load or move goes there. E's cost on e0 is J(E, D1) + J(E, D2), the
joint cost of a day with eternity: ∫∫ e^(−λ|x−y|) over a day × all time = 24 h × 2/λ =
2 × 24² / ln 2 ≈ 1661.99 each (different datasources, λ = ln 2 / 24 h). D1's cost on e0 is
2 × J(D1, D2) + J(D1, E): two adjacent days give (1 − e^(−ln 2))² / λ² = 0.25 × (24 / ln 2)²,
doubled for one datasource, ≈ 599.43, so ≈ 2261.42 in all.

``decommissioning`` — X (``dc``, 2025-06-01, rule _default_tier 1) is served on d1 (decommissioning)
and d2: count 2 minus 1 on decommissioning servers = target, so stage 5 does not move it
(``ToBecomeNotLoadedOnDecommServers``); stage 12 drops the excess, the decommissioning holder
first: loaded 2 → 1 ≥ required 1 → DROP X on d1. Y (``dc``, 2025-09-01) is served only on d1:
count 1 − 1 < 1, so stage 5 moves it; d2 and d3 both cost 0 (X is 92 days away, the unlisted
segments years away) and d3 has more room → LOAD Y on d3 + DROP Y on d1 (depends on the load).
"""

import json
from pathlib import Path

from segment_balancer.druid.instants import parse_instant_ms
from segment_balancer.druid.rules import format_instant_ms
from segment_balancer.planner.cost import ETERNITY_END_MS, ETERNITY_START_MS

DAY = 86_400_000


def _seg(ds: str, start: str, version: str, days: int = 1, interval: str | None = None, size: int = 100) -> dict:
    start_ms = parse_instant_ms(start)
    interval = interval or f"{format_instant_ms(start_ms)}/{format_instant_ms(start_ms + days * DAY)}"
    return {
        "dataSource": ds,
        "interval": interval,
        "version": version,
        "size": size,
        "shardSpec": {"type": "numbered", "partitionNum": 0, "partitions": 1},
    }


def _id(row: dict) -> str:
    start, end = row["interval"].split("/")
    return "_".join([row["dataSource"], start, end, row["version"]])


ETERNITY = f"{format_instant_ms(ETERNITY_START_MS)}/{format_instant_ms(ETERNITY_END_MS)}"
SEGMENTS = {
    "Q": _seg("qd", "2020-01-01", "2019-12-31T00:00:00.000Z"),
    "G": _seg("gh", "2021-01-01", "2020-12-31T00:00:00.000Z"),
    "V1": _seg("rx", "2022-03-01", "2022-01-01T00:00:00.000Z"),
    "V2": _seg("rx", "2022-03-01", "2022-06-01T00:00:00.000Z"),
    "W1": _seg("ry", "2023-05-01", "2023-01-01T00:00:00.000Z"),
    "W2": _seg("ry", "2023-05-01", "2023-06-01T00:00:00.000Z"),
    "E": _seg("all", "2019-01-01", "2019-01-01T00:00:00.000Z", interval=ETERNITY),
    "D1": _seg("daily", "2024-01-01", "2024-01-01T00:00:00.000Z"),
    "D2": _seg("daily", "2024-01-02", "2024-01-02T00:00:00.000Z"),
    "X": _seg("dc", "2025-06-01", "2025-06-01T00:00:00.000Z"),
    "Y": _seg("dc", "2025-09-01", "2025-09-01T00:00:00.000Z"),
}
ID = {name: _id(row) for name, row in SEGMENTS.items()}
UNLISTED = {
    "gone": "gone_2019-07-01T00:00:00.000Z_2019-07-02T00:00:00.000Z_2019-07-01T00:00:00.000Z",
    "ry_old": "ry_old_2019-08-01T00:00:00.000Z_2019-08-02T00:00:00.000Z_v1_3",
    "gone2": "gone_2019-09-01T00:00:00.000Z_2019-09-02T00:00:00.000Z_2019-09-01T00:00:00.000Z",
}
NAME = {**{v: k for k, v in ID.items()}, **{v: k for k, v in UNLISTED.items()}}
SERVERS = [  # (server, tier, curr_size, max_size, priority)
    ("hot0", "hot", 1_000, 10_000, 10),
    ("hot1", "hot", 1_000, 10_000, 10),
    ("cold0", "cold", 300, 10_000, 0),
    ("cold1", "cold", 200, 10_000, 0),
    ("d1", "_default_tier", 200, 10_000, 0),
    ("d2", "_default_tier", 5_000, 10_000, 0),
    ("d3", "_default_tier", 100, 10_000, 0),
    ("e0", "eternal", 300, 10_000, 0),
    ("e1", "eternal", 0, 0, 0),
]
SERVED = {
    "hot0": ["V1"],
    "hot1": ["V1"],
    "cold0": ["Q", "W1", "W2"],
    "cold1": ["G", "W1"],
    "d1": ["X", "Y"],
    "d2": ["G", "X"],
    "d3": [],
    "e0": ["E", "D1", "D2"],
    "e1": [],
}
SERVED_UNLISTED = {"d3": ["gone", "ry_old"]}
RULES = {
    "qd": [{"type": "loadForever", "tieredReplicants": {"hot": 1}}],
    "gh": [{"type": "loadForever", "tieredReplicants": {"ghost": 2}}],
    "rx": [{"type": "loadForever", "tieredReplicants": {"hot": 2}}],
    "ry": [{"type": "loadForever", "tieredReplicants": {"cold": 2}}],
    "all": [{"type": "loadForever", "tieredReplicants": {"eternal": 1}}],
    "daily": [{"type": "loadForever", "tieredReplicants": {"eternal": 1}}],
    "dc": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}],
    "_default": [{"type": "dropForever"}],
}


def write_snapshot(snap: Path) -> Path:
    """Write the snapshot to ``snap`` and return it."""
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "segments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SEGMENTS.values()))
    (snap / "servers.json").write_text(
        json.dumps(
            [
                {
                    "server": s,
                    "host": s,
                    "server_type": "historical",
                    "tier": t,
                    "curr_size": c,
                    "max_size": m,
                    "priority": p,
                }
                for s, t, c, m, p in SERVERS
            ]
            + [{"server": "broker", "server_type": "broker", "tier": None}]
        )
    )
    rows = [{"server": s, "segment_id": ID[n]} for s, names in SERVED.items() for n in names]
    rows += [{"server": s, "segment_id": UNLISTED[n]} for s, names in SERVED_UNLISTED.items() for n in names]
    (snap / "server_segments.json").write_text(json.dumps(rows))
    (snap / "load_queues.json").write_text(
        json.dumps(
            {
                "hot0": {
                    "segmentsToLoad": [
                        {"segment_id": ID["Q"], "queue_type": "loading", "requested_at": "2029-12-31T23:59:00.000Z"}
                    ],
                    "segmentsToDrop": [],
                },
                "d2": {"segmentsToLoad": [], "segmentsToDrop": [UNLISTED["gone2"]]},
            }
        )
    )
    (snap / "rules.json").write_text(json.dumps(RULES))
    (snap / "coordinator_config.json").write_text(json.dumps({"decommissioningNodes": ["d1"]}))
    (snap / "snapshot.json").write_text(json.dumps({"snapshot_time": "2030-01-01T00:00:00.000Z", "cluster": "avail"}))
    return snap
