"""The bundled input snapshots: a tiny one from real Druid rows, a small Druid 38 one, and a seeded
realistic generator.

``build_druid_sample`` imports the five real ``druid_segments`` rows of Druid's own sample dump
(``snapshots/druid_segments-sample.sql``, Apache-2.0, from Druid's ``examples/quickstart``) and adds
a small hand-written cluster around them. ``build_druid38_sample`` writes a small Druid 38.0.0
cluster with tier aliases, partial-load rules and a rule naming a tier without historicals.
``generate_snapshot`` makes a ~20 000-segment cluster with the situations the algorithm of issue
#7458 has to handle (a lost server, a decommissioning server, an added empty server, a broadcast
datasource, stale load queues, unused and overshadowed segments still served). All write the
snapshot directory format of ``docs/ARCHITECTURE.md``.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import NamedTuple

import numpy as np

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import write_text_atomic
from segment_balancer.druid.importer import (
    import_druid_segments_sql,
    iso_to_ms,
    ms_to_iso,
    segment_id,
    write_gzip_lines,
    write_json,
)
from segment_balancer.druid.releases import parse_version
from segment_balancer.druid.snapshot.models import SYS_SERVERS_COLUMNS

SNAPSHOTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "snapshots")
SAMPLE_SQL = os.path.join(SNAPSHOTS_DIR, "druid_segments-sample.sql")
MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
MB, GIB = 1_000_000, 1 << 30


def _write_rows(path: str, rows: list[dict]) -> None:
    """A JSON array with one compact object per line (diff-friendly), written atomically."""
    body = ",\n".join(json.dumps(row, separators=(", ", ": ")) for row in rows)
    write_text_atomic("[\n" + body + "\n]\n" if rows else "[]\n", path)


def _read_segments(out_dir: str) -> list[dict]:
    with gzip.open(os.path.join(out_dir, "segments.jsonl.gz"), "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _historical(name: str, tier: str, curr_size: int, max_size: int, priority: int) -> dict:
    """A ``sys.servers`` row of a historical (Druid's column names, ``curr_size`` in bytes)."""
    return {
        "server": f"{name}:8083",
        "host": name,
        "plaintext_port": 8083,
        "tls_port": -1,
        "server_type": "historical",
        "tier": tier,
        "curr_size": curr_size,
        "max_size": max_size,
        "priority": priority,
    }


# ------------------------------------------------------------------------------- druid_sample


def build_druid_sample(out_dir: str, sql_path: str | None = None) -> dict:
    """Write the ``druid_sample`` snapshot to ``out_dir`` (created if needed); returns counts.

    Segments: the rows of ``sql_path`` (default: the bundled ``druid_segments-sample.sql``)
    imported by ``import_druid_segments_sql``: three ``twitterstream`` days (2013-01-01..03),
    one ``wikipedia_editstream`` and one ``wikipedia`` segment, each ~0.41-0.45 GB except
    wikipedia (~25 MB). Cluster at ``2013-06-01T00:00:00.000Z`` (``sys.servers`` rows with
    ``curr_size``; sizes in bytes):

    - ``_default_tier`` (priority 0, max 1.5 GB): ``hist-default-01`` (decommissioning; serves
      twitterstream 01-01 and wikipedia_editstream), ``hist-default-02`` (twitterstream 01-01 and
      01-02, wikipedia), ``hist-default-03`` (empty, one queued ``loading`` of wikipedia).
    - ``hot`` (priority 10, max 1 GB): ``hist-hot-01`` (twitterstream 01-01 and 01-02; 88 % full),
      ``hist-hot-02`` (empty). Plus one broker row (not a historical).
    - twitterstream 01-03 is served nowhere (unreplicated); twitterstream 01-01 is overreplicated
      in ``_default_tier`` (2 servers, target 1); wikipedia_editstream is underreplicated (1 of 2,
      on the decommissioning server).
    - Rules: ``twitterstream``: loadByInterval January 2013 on hot:1 + _default_tier:1, then
      loadForever _default_tier:2; ``_default``: loadForever _default_tier:2.
    - Config: ``maxSegmentsInNodeLoadingQueue`` 100, ``decommissioningNodes`` [hist-default-01].
    """
    os.makedirs(out_dir, exist_ok=True)
    n_segments = import_druid_segments_sql(sql_path or SAMPLE_SQL, out_dir)
    by_key = {}
    for seg in _read_segments(out_dir):
        by_key[(seg["dataSource"], seg["interval"][:10])] = (segment_id(seg), seg["size"])
    tw1, tw2, tw3 = (by_key[("twitterstream", f"2013-01-0{d}")] for d in (1, 2, 3))
    editstream, wiki = by_key[("wikipedia_editstream", "2012-12-29")], by_key[("wikipedia", "2013-08-01")]
    serving = {
        "hist-default-01": [tw1, editstream],
        "hist-default-02": [tw1, tw2, wiki],
        "hist-default-03": [],
        "hist-hot-01": [tw1, tw2],
        "hist-hot-02": [],
    }
    servers = []
    for name, held in serving.items():
        hot = name.startswith("hist-hot")
        servers.append(
            _historical(
                name,
                "hot" if hot else "_default_tier",
                sum(s for _, s in held),
                1_000_000_000 if hot else 1_500_000_000,
                10 if hot else 0,
            )
        )
    servers.append(
        {
            "server": "broker-01:8082",
            "host": "broker-01",
            "plaintext_port": 8082,
            "tls_port": -1,
            "server_type": "broker",
            "tier": None,
            "curr_size": 0,
            "max_size": 0,
            "priority": 0,
        }
    )
    write_json(os.path.join(out_dir, "servers.json"), servers)
    rows = [{"server": f"{name}:8083", "segment_id": sid} for name, held in serving.items() for sid, _ in sorted(held)]
    _write_rows(os.path.join(out_dir, "server_segments.json"), rows)
    queues = {f"{name}:8083": {"segmentsToLoad": [], "segmentsToDrop": []} for name in serving}
    queues["hist-default-03:8083"]["segmentsToLoad"].append(
        {"segment_id": wiki[0], "queue_type": "loading", "requested_at": "2013-05-31T23:58:00.000Z"}
    )
    write_json(os.path.join(out_dir, "load_queues.json"), queues)
    write_json(
        os.path.join(out_dir, "rules.json"),
        {
            "twitterstream": [
                {
                    "type": "loadByInterval",
                    "interval": "2013-01-01T00:00:00.000Z/2013-02-01T00:00:00.000Z",
                    "tieredReplicants": {"hot": 1, "_default_tier": 1},
                },
                {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}},
            ],
            "_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}],
        },
    )
    write_json(
        os.path.join(out_dir, "coordinator_config.json"),
        {"maxSegmentsInNodeLoadingQueue": 100, "decommissioningNodes": ["hist-default-01:8083"]},
    )
    write_json(
        os.path.join(out_dir, "snapshot.json"), {"snapshot_time": "2013-06-01T00:00:00.000Z", "cluster": "druid-sample"}
    )
    return {
        "segments": n_segments,
        "servers": len(serving),
        "server_segments": len(rows),
        "queued_loads": 1,
        "queued_drops": 0,
    }


# ------------------------------------------------------------------------------------ druid38

DRUID38_SNAPSHOT_TIME = "2026-10-01T00:00:00.000Z"
DRUID38_TIER_ALIASES = {"hot": ["hot_blue", "hot_green"]}
DRUID38_RULES = {
    "clicks": [
        {
            "type": "loadPartialByPeriod",
            "period": "P14D",
            "includeFuture": True,
            "tieredReplicants": {"hot": 1},
            "matcher": {"type": "globProjection", "patterns": ["by_*"], "excludePatterns": ["by_device"]},
        },
        {"type": "loadForever", "tieredReplicants": {"cold": 1}},
    ],
    "metrics": [
        {
            "type": "loadPartialForever",
            "tieredReplicants": {"hot": 1, "cold": 1},
            "matcher": {"type": "globClusterGroup", "patterns": [{"region": "eu-*"}]},
            "onCannotMatch": "fallThrough",
        },
        {"type": "loadForever", "tieredReplicants": {"cold": 2}},
    ],
    "logs": [{"type": "loadForever", "tieredReplicants": {"archive": 1}}],
    "_default": [{"type": "loadForever", "tieredReplicants": {"hot": 1}}],
}
"""The rules of ``druid38`` (``rules.json``); ``hot`` is an alias (:data:`DRUID38_TIER_ALIASES`),
``archive`` a tier without historicals."""
DRUID38_HISTORICALS = {
    "hist-hot-blue-01": "hot_blue",
    "hist-hot-blue-02": "hot_blue",
    "hist-hot-green-01": "hot_green",
    "hist-hot-green-02": "hot_green",
    "hist-cold-01": "cold",
    "hist-cold-02": "cold",
    "hist-cold-03": "cold",
}
"""Host name -> tier of the ``druid38`` snapshot's historicals (port 8083)."""
DRUID38_NEW = "hist-hot-green-02"
"""The historical that joined empty, half an hour before the snapshot."""
DRUID38_DECOMMISSIONING = "hist-cold-03:8083"
DRUID38_MAX_SIZE = {"hot_blue": 8 * GIB, "hot_green": 8 * GIB, "cold": 6 * GIB}
DRUID38_DAYS = 30
"""Days of ``clicks`` and ``metrics``, the last ending at the snapshot time."""
CLICKS_PROJECTIONS = "by_country,by_device"
CLICKS_PROJECTION_DAYS = 10
"""``clicks`` days with projections: the newest 10 (the projections were added to ingestion 10 days
before the snapshot)."""
METRICS_CLUSTERED_DAYS = 20
"""``metrics`` days with ``clusterGroups``: the newest 20 (clustered on ``region`` since then)."""
PROJECTION_SHARE = 5
"""A served ``clicks`` replica holding the ``by_country`` projection loaded a fifth of the segment's
bytes (``curr_size`` counts a partial replica by the bytes it loaded, Druid 38's ``loadedBytes``)."""


def _druid38_server_row(name: str, port: int, role: str, **data) -> dict:
    """A Druid 38.0.0 ``sys.servers`` row (:data:`~segment_balancer.druid.snapshot.models.SYS_SERVERS_COLUMNS`,
    in that order): a server without segments unless ``data`` gives ``tier``, ``curr_size``,
    ``max_size`` (bytes; ``storage_size`` = ``max_size``); ``is_leader`` as given (else null);
    ``started`` (``start_time``, ISO-8601) when it is not the cluster's."""
    values = {
        "server": f"{name}:{port}",
        "host": name,
        "plaintext_port": port,
        "tls_port": -1,
        "server_type": role,
        "tier": data.get("tier"),
        "curr_size": data.get("curr_size", 0),
        "max_size": data.get("max_size", 0),
        "storage_size": data.get("max_size", 0),
        "is_leader": data.get("is_leader"),
        "start_time": data.get("started", "2026-09-20T08:00:00.000Z"),
        "version": "38.0.0",
        "build_revision": "aedca2059905",
        "labels": None,
        "available_processors": 16 if role == "historical" else 8,
        "total_memory": (64 if role == "historical" else 32) * GIB,
    }
    return {column: values[column] for column in SYS_SERVERS_COLUMNS}


def _druid38_segment(ds: str, start: int, end: int, num: int, parts: int, size: int, **extra) -> dict:
    """A ``DataSegment`` payload of ``druid38`` (:func:`_payload`; version: a minute after the
    interval's start, as a streaming task locks it; ``numbered`` shards, or ``none`` when ``parts``
    is 0), with ``extra`` fields (``projections``, ``clusterGroups``)."""
    dims = {"clicks": "page,country,device", "metrics": "region,host,metric"}.get(ds, "host,message")
    shard = "numbered" if parts else "none"
    seg = _payload(ds, start, end, ms_to_iso(start + MINUTE), shard, num, parts, size, dims, "count", False)
    seg.update(extra)
    return seg


def _region_groups(regions: list[str]) -> dict:
    """``clusterGroups`` of a segment clustered on the STRING column ``region``, one group a region."""
    return {"clusteringColumns": [{"name": "region", "type": "STRING"}], "tuples": [[r] for r in regions]}


def build_druid38_sample(out_dir: str) -> dict:
    """Write the ``druid38`` snapshot to ``out_dir`` (created if needed); returns counts.

    A Druid 38.0.0 cluster (every ``sys.servers`` row of version 38.0.0, the leading coordinator's
    included) at :data:`DRUID38_SNAPSHOT_TIME`, with tier aliases and partial-load rules (ALGORITHM.md
    "Rules of Druid 38"). Deterministic (no random numbers; gzip mtime 0). Sizes in bytes (MB = 10^6).

    - Historicals (:data:`DRUID38_HISTORICALS`): ``hot_blue`` 2, ``hot_green`` 2 (hist-hot-green-02
      new and empty), ``cold`` 3 (hist-cold-03 decommissioning); max 8 GiB hot, 6 GiB cold;
      ``curr_size`` the bytes each loaded: a whole replica its ``size``, a ``by_country`` replica a
      fifth (:data:`PROJECTION_SHARE`), a ``metrics`` partition-0 replica two thirds (two groups of
      three), the empty part of partition 1 nothing. A coordinator (leader) and a broker row.
    - Config: ``historicalTierAliases`` ``{"hot": ["hot_blue", "hot_green"]}``,
      ``maxSegmentsInNodeLoadingQueue`` 100, ``decommissioningNodes`` [hist-cold-03:8083].
    - ``clicks``: daily, 30 days, 2 numbered partitions (90-119 MB); the newest 10 days with
      ``projections`` "by_country,by_device". Rules (:data:`DRUID38_RULES`): ``loadPartialByPeriod``
      P14D ``{hot: 1}`` (``globProjection`` ``by_*`` less ``by_device``: the ``by_country`` part;
      without projections, ``fullLoad``), then ``loadForever {cold: 1}``. Served: the newest day
      nowhere (partition 0 queued on hist-hot-green-01, partition 1 on hist-hot-blue-01); days 1-15
      on a hot_blue historical and hist-hot-green-01 (days 14 and 15 aged out of P14D: on no cold
      historical yet); days 16-29 on one cold historical each (round robin).
    - ``metrics``: daily, 30 days, 2 numbered partitions (40-59 MB); the newest 20 days clustered on
      ``region`` (partition 0: ap-south, eu-central, eu-west; partition 1: us-east, us-west). Rules:
      ``loadPartialForever`` ``{hot: 1, cold: 1}`` (``globClusterGroup`` ``[{"region": "eu-*"}]``,
      ``onCannotMatch`` ``fallThrough``), then ``loadForever {cold: 2}`` (the unclustered days).
      Served: the newest day nowhere; clustered days on a hot_blue historical, hist-hot-green-01 and
      a cold historical; unclustered days on two cold historicals, day 25's partition 0 on all three
      (a drop of it queued on hist-cold-02).
    - ``logs``: daily, 7 days, one partition (20-26 MB), rule ``loadForever {archive: 1}``: no
      historical is in ``archive``; served nowhere.
    - ``audit``: monthly, June to September 2026 (5 MB, shard ``none``), no rule of its own
      (``_default``: ``loadForever {hot: 1}``); served on hist-hot-blue-01 only.

    Returns ``segments``, ``historicals``, ``server_segments``, ``queued_loads``, ``queued_drops``.
    """
    now = iso_to_ms(DRUID38_SNAPSHOT_TIME)
    blue = [n for n, t in DRUID38_HISTORICALS.items() if t == "hot_blue"]
    cold = [n for n, t in DRUID38_HISTORICALS.items() if t == "cold"]
    green_old = next(n for n, t in DRUID38_HISTORICALS.items() if t == "hot_green" and n != DRUID38_NEW)
    segments: list[dict] = []
    held: list[dict[str, int]] = []  # per segment: host -> bytes its replica loaded
    for d in range(DRUID38_DAYS):
        start, end = now - (d + 1) * DAY, now - d * DAY
        for p in range(2):
            k = 2 * d + p
            size = (90 + (d * 37 + p * 11) % 30) * MB
            extra = {"projections": CLICKS_PROJECTIONS} if d < CLICKS_PROJECTION_DAYS else {}
            segments.append(_druid38_segment("clicks", start, end, p, 2, size, **extra))
            part = size // PROJECTION_SHARE if extra else size
            if d == 0:
                held.append({})
            elif d <= 15:
                held.append({blue[k % 2]: part, green_old: part})
            else:
                held.append({cold[k % 3]: size})
    for d in range(DRUID38_DAYS):
        start, end = now - (d + 1) * DAY, now - d * DAY
        for p in range(2):
            k = 2 * d + p
            size = (40 + (d * 17 + p * 7) % 20) * MB
            extra = {}
            if d < METRICS_CLUSTERED_DAYS:
                regions = [["ap-south", "eu-central", "eu-west"], ["us-east", "us-west"]][p]
                extra = {"clusterGroups": _region_groups(regions)}
            segments.append(_druid38_segment("metrics", start, end, p, 2, size, **extra))
            if d == 0:
                held.append({})
            elif d < METRICS_CLUSTERED_DAYS:
                part = size * 2 // 3 if p == 0 else 0
                held.append({blue[k % 2]: part, green_old: part, cold[k % 3]: part})
            elif (d, p) == (25, 0):
                held.append(dict.fromkeys(cold, size))
            else:
                held.append({cold[k % 3]: size, cold[(k + 1) % 3]: size})
    for d in range(7):
        segments.append(_druid38_segment("logs", now - (d + 1) * DAY, now - d * DAY, 0, 1, (20 + d) * MB))
        held.append({})
    months = [f"2026-{m:02d}-01T00:00:00.000Z" for m in range(6, 11)]
    for first, last in zip(months, months[1:]):
        segments.append(_druid38_segment("audit", iso_to_ms(first), iso_to_ms(last), 0, 0, 5 * MB))
        held.append({blue[0]: 5 * MB})
    ids = {(s["dataSource"], s["interval"][:10], s["shardSpec"].get("partitionNum", 0)): s["_id"] for s in segments}
    newest = ms_to_iso(now - DAY)[:10]
    loads = {
        f"{green_old}:8083": [(ids[("clicks", newest, 0)], "loading", now - 2 * MINUTE)],
        f"{blue[0]}:8083": [(ids[("clicks", newest, 1)], "loading", now - 2 * MINUTE)],
    }
    drops = {"hist-cold-02:8083": [(ids[("metrics", ms_to_iso(now - 26 * DAY)[:10], 0)], now - MINUTE)]}

    os.makedirs(out_dir, exist_ok=True)
    lines = [json.dumps({k: v for k, v in s.items() if not k.startswith("_")}, separators=(",", ":")) for s in segments]
    write_gzip_lines(os.path.join(out_dir, "segments.jsonl.gz"), lines)
    rows = sorted((f"{host}:8083", s["_id"]) for s, h in zip(segments, held) for host in h)
    _write_rows(os.path.join(out_dir, "server_segments.json"), [{"server": a, "segment_id": b} for a, b in rows])
    servers = [
        _druid38_server_row(
            host,
            8083,
            "historical",
            tier=tier,
            curr_size=sum(h.get(host, 0) for h in held),
            max_size=DRUID38_MAX_SIZE[tier],
            **({"started": ms_to_iso(now - 30 * MINUTE)} if host == DRUID38_NEW else {}),
        )
        for host, tier in DRUID38_HISTORICALS.items()
    ]
    servers += [
        _druid38_server_row("coordinator-01", 8081, "coordinator", is_leader=1),
        _druid38_server_row("broker-01", 8082, "broker"),
    ]
    write_json(os.path.join(out_dir, "servers.json"), servers)
    queues = {}
    for host in DRUID38_HISTORICALS:
        server = f"{host}:8083"
        queues[server] = {
            "segmentsToLoad": [
                {"segment_id": sid, "queue_type": kind, "requested_at": ms_to_iso(at)}
                for sid, kind, at in loads.get(server, [])
            ],
            "segmentsToDrop": [{"segment_id": sid, "requested_at": ms_to_iso(at)} for sid, at in drops.get(server, [])],
        }
    write_json(os.path.join(out_dir, "load_queues.json"), queues)
    write_json(os.path.join(out_dir, "rules.json"), DRUID38_RULES)
    write_json(
        os.path.join(out_dir, "coordinator_config.json"),
        {
            "maxSegmentsInNodeLoadingQueue": 100,
            "decommissioningNodes": [DRUID38_DECOMMISSIONING],
            "historicalTierAliases": DRUID38_TIER_ALIASES,
        },
    )
    write_json(os.path.join(out_dir, "snapshot.json"), {"snapshot_time": DRUID38_SNAPSHOT_TIME, "cluster": "druid38"})
    return {
        "segments": len(segments),
        "historicals": len(DRUID38_HISTORICALS),
        "server_segments": len(rows),
        "queued_loads": sum(len(v) for v in loads.values()),
        "queued_drops": sum(len(v) for v in drops.values()),
    }


# ------------------------------------------------------------------------------ the generator


def _load_rule(period: str | None, tiers: dict) -> dict:
    """A Druid ``loadForever`` (``period`` None) or ``loadByPeriod`` rule."""
    if period is None:
        return {"type": "loadForever", "tieredReplicants": tiers}
    return {"type": "loadByPeriod", "period": period, "includeFuture": True, "tieredReplicants": tiers}


RECENT = {"hot": 2, "cold": 1}
GENERATED_RULES = {
    "wikipedia": [_load_rule("P7D", RECENT), _load_rule("P90D", {"cold": 1}), {"type": "dropForever"}],
    "clickstream": [_load_rule("P30D", RECENT), _load_rule(None, {"cold": 1, "_default_tier": 1})],
    "metrics": [
        _load_rule("P30D", RECENT),
        {"type": "dropBeforeByPeriod", "period": "P365D"},
        _load_rule(None, {"_default_tier": 1}),
    ],
    "orders": [_load_rule("P30D", RECENT), _load_rule(None, {"cold": 1})],
    "lookup_dim": [{"type": "broadcastForever"}],
    "countries": [_load_rule(None, {"_default_tier": 2})],
    "_default": [_load_rule(None, {"_default_tier": 2})],
}

# name: (granularity, chunks, shardSpec type, median size MB, dimensions, metrics)
DATASOURCES = {
    "wikipedia": ("hour", 91 * 24, "numbered", 60, "channel,page,user,namespace,isRobot", "count,added,deleted,delta"),
    "clickstream": ("hour", 60 * 24, "numbered", 200, "session,page,referrer,country,device", "count,dwell_ms"),
    "metrics": ("day", 368, "hashed", 120, "host,service,metric", "count,sum,min,max"),
    "orders": ("day", 3 * 365 + 1, "none", 400, "customer,product,region,channel", "count,quantity,revenue"),
    "audit_log": ("week", 156, "none", 50, "actor,action,target", "count"),
    "lookup_dim": ("month", 6, "none", 2, "key,value", "count"),
}
DECOMMISSIONING = "hist-default-04"


class Layout(NamedTuple):
    """The historicals of a generated cluster (names ``hist-<tier>-NN``).

    ``history``: ``(name, tier, priority)`` of every historical that held segments before the
    snapshot; ``lost``: the two of them absent from the snapshot (the last hot and the last cold
    one); ``added``: the cold historical that joined empty; ``decommissioning``: hist-default-04.
    """

    history: list[tuple[str, str, int]]
    lost: tuple[str, str]
    added: str
    decommissioning: str = DECOMMISSIONING

    @property
    def present(self) -> list[tuple[str, str, int]]:
        """The historicals of the snapshot, ``(name, tier, priority)``: history less the lost, plus the added."""
        return [h for h in self.history if h[0] not in self.lost] + [(self.added, "cold", 0)]

    def names(self, tier: str, live: bool = False) -> list[str]:
        """Names of ``tier`` in history (``live``: less the lost and the decommissioning server)."""
        return [
            n for n, t, _ in self.history if t == tier and not (live and (n in self.lost or n == self.decommissioning))
        ]


def server_layout(n_servers: int) -> Layout:
    """The historicals of a snapshot with ``n_servers`` of them: about 30 % ``hot`` (priority 10),
    20 % ``_default_tier`` (at least 4), the rest ``cold`` (one of them added empty); one hot and
    one cold historical lost before the snapshot.

    Raises ``ValueError`` below 12 historicals.
    """
    if n_servers < 12:
        raise InputError(f"a generated cluster needs at least 12 historicals, not {n_servers}")
    hot, default = max(3, round(0.3 * n_servers)), max(4, round(0.2 * n_servers))
    cold = n_servers - hot - default  # present, with the added one; history: the lost one instead
    history = (
        [(f"hist-hot-{i:02d}", "hot", 10) for i in range(1, hot + 2)]
        + [(f"hist-cold-{i:02d}", "cold", 0) for i in range(1, cold + 1)]
        + [(f"hist-default-{i:02d}", "_default_tier", 0) for i in range(1, default + 1)]
    )
    return Layout(history, (f"hist-hot-{hot + 1:02d}", f"hist-cold-{cold:02d}"), f"hist-cold-{cold + 1:02d}")


# Druid's Intervals.ETERNITY, the interval of an ALL-granularity segment.
ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
# A wikipedia hour killed (deleted from the metadata store) that two cold historicals still serve:
# the metadata export lists used segments only, so segments.jsonl lacks it.
UNEXPORTED = (
    "wikipedia_2026-07-01T00:00:00.000Z_2026-07-01T01:00:00.000Z_2026-07-01T00:01:00.000Z",
    ["hist-cold-03", "hist-cold-05"],
)
MAX_SIZE_HEADROOM = {"hot": 1.3, "cold": 1.005, "_default_tier": 1.6}


def _chunks(granularity: str, count: int, now: int) -> list[tuple[int, int]]:
    """``count`` consecutive time chunks (epoch ms, ascending): hours ending at ``now``; days
    and Monday-aligned weeks ending by the day before ``now``; months ending a month before."""
    if granularity == "hour":
        end = now // HOUR * HOUR
        return [(end - (count - i) * HOUR, end - (count - i - 1) * HOUR) for i in range(count)]
    if granularity in ("day", "week"):
        step = DAY if granularity == "day" else 7 * DAY
        end = now // DAY * DAY - DAY
        if granularity == "week":
            end -= ((end // DAY + 3) % 7) * DAY  # epoch day 0 is a Thursday
        return [(end - (count - i) * step, end - (count - i - 1) * step) for i in range(count)]
    year, month = (int(x) for x in ms_to_iso(now)[:7].split("-"))
    firsts = []
    for _ in range(count + 2):
        firsts.append(iso_to_ms(f"{year:04d}-{month:02d}-01"))
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    firsts = firsts[::-1][: count + 1]
    return list(zip(firsts[:-1], firsts[1:]))


def _rule_for(rules: list[dict], start: int, end: int, now: int, skip_drops: bool = False):
    """First rule of ``rules`` applying to ``[start, end)`` at ``now`` (the rule types used by
    the generator only: ``*Forever``, ``loadByPeriod`` with ``includeFuture``,
    ``dropBeforeByPeriod``; periods ``PnD``), as Druid's ``Rule.appliesTo``."""
    for rule in rules:
        kind = rule["type"]
        if skip_drops and kind.startswith("drop"):
            continue
        if kind.endswith("Forever"):
            return rule
        period = int(rule["period"][1:-1]) * DAY
        if kind == "dropBeforeByPeriod" and end <= now - period:
            return rule
        if kind == "loadByPeriod" and end > now - period:
            return rule
    return None


def _make_segments(rng: np.random.Generator, now: int, n_segments: int) -> list[dict]:
    """The segments of every datasource: Druid ``DataSegment`` payloads plus bookkeeping keys
    (``_start``, ``_end``, ``_id``) removed before writing."""
    # wikipedia, orders (with six re-ingested days), audit_log, lookup_dim; clickstream hours and
    # metrics days share the rest (more partitions as the cluster grows), clickstream at least 3 an hour.
    fixed = 91 * 24 + (3 * 365 + 1 + 6) + 156 + 6
    hours, days = DATASOURCES["clickstream"][1], DATASOURCES["metrics"][1]
    click_mean = max(3.0, (n_segments - fixed) / 2 / hours)
    metrics_mean = max(1.0, (n_segments - fixed - click_mean * hours) / days)
    extra_mean = {"clickstream": click_mean - 1, "metrics": metrics_mean - 1}
    segments = []
    for ds, (gran, count, shard, median_mb, dims, metrics) in DATASOURCES.items():
        for start, end in _chunks(gran, count, now):
            if gran == "hour":
                versions = [start + int(rng.integers(0, 5 * MINUTE))]
            elif gran == "month":
                versions = [end + 6 * HOUR]
            else:
                versions = [end + int(rng.integers(30 * MINUTE, 90 * MINUTE))]
            if ds == "orders" and end >= now - 6 * DAY:  # re-ingested: the old version overshadowed
                versions.append(now - 12 * HOUR + int(rng.integers(0, 2 * HOUR)))
            parts = 1 + int(rng.poisson(extra_mean[ds])) if ds in extra_mean else 1
            for v_index, version in enumerate(versions):
                sizes = rng.lognormal(np.log(median_mb * MB), 0.35, size=parts).astype(np.int64)
                compacted = _minor_compaction(ds, start, end, now, parts)
                recompacted = compacted == "complete" and parts >= 3 and start < now - 17 * DAY
                for num in range(parts):
                    segments.append(
                        _payload(
                            ds,
                            start,
                            end,
                            ms_to_iso(version),
                            shard,
                            num,
                            parts,
                            max(int(sizes[num]), MB),
                            dims,
                            metrics,
                            overshadowed=v_index + 1 < len(versions)
                            or (compacted == "complete" and num < 2)
                            or (recompacted and num == 2),
                        )
                    )
                if compacted:
                    originals = segments[-parts:]
                    segments.append(_overwrite(originals[:2], compacted, overshadowed=recompacted))
                    if recompacted:  # a second generation over the first and root partition 2
                        segments.append(_overwrite([segments[-1], originals[2]], "complete", generation=2))
    return segments


def _minor_compaction(ds: str, start: int, end: int, now: int, parts: int) -> str | None:
    """Minor compaction of ``metrics`` days (seed 003): root partitions 0-1 compacted into one
    segment of minor version 1. Days 20 to 14 days old: the atomic update group is complete (the
    originals are overshadowed), and on the days 20 to 17 days old a second generation, minor
    version 2 over root partitions 0-2, overshadows the first and root partition 2; days 14 to 10
    days old: the group waits for a second member (standby; the originals stay visible)."""
    if ds != "metrics" or parts < 2:
        return None
    if now - 20 * DAY <= start < now - 14 * DAY:
        return "complete"
    if now - 14 * DAY <= start < now - 10 * DAY:
        return "incomplete"
    return None


def _overwrite(originals: list[dict], state: str, generation: int = 1, overshadowed: bool = False) -> dict:
    """The ``numbered_overwrite`` segment of minor version ``generation`` compacting ``originals``:
    generation 1 covers root partitions 0-1 (partition id 32768), generation 2 root partitions 0-2
    (32769). ``state`` "complete": a group of 1; else a group of 2 with one member present."""
    seg = {k: v for k, v in originals[0].items() if not k.startswith("_") and k != "overshadowed"}
    partition_id = 32767 + generation
    seg["shardSpec"] = {
        "type": "numbered_overwrite",
        "partitionId": partition_id,
        "startRootPartitionId": 0,
        "endRootPartitionId": 1 + generation,
        "minorVersion": generation,
        "atomicUpdateGroupSize": 1 if state == "complete" else 2,
    }
    if overshadowed:
        seg["overshadowed"] = True
    seg["size"] = int(sum(o["size"] for o in originals) * 0.8)
    key = seg["loadSpec"]["key"].rsplit("/", 2)[0] + f"/{partition_id}/index.zip"
    seg["loadSpec"] = dict(seg["loadSpec"], key=key)
    seg["_start"], seg["_end"] = originals[0]["_start"], originals[0]["_end"]
    seg["_id"] = segment_id(seg)
    return seg


def _payload(ds, start, end, version, shard, num, parts, size, dims, metrics, overshadowed):
    s, e = ms_to_iso(start), ms_to_iso(end)
    if shard == "none":
        spec = {"type": "none"}
    elif shard == "hashed":
        spec = {"type": "hashed", "partitionNum": num, "partitions": parts, "partitionDimensions": ["host"]}
    else:
        spec = {"type": "numbered", "partitionNum": num, "partitions": parts}
    seg = {
        "dataSource": ds,
        "interval": f"{s}/{e}",
        "version": version,
        "loadSpec": {
            "type": "s3_zip",
            "bucket": "druid-deep",
            "key": f"segments/{ds}/{s}_{e}/{version}/{num}/index.zip",
        },
        "dimensions": dims,
        "metrics": metrics,
        "shardSpec": spec,
        "binaryVersion": 9,
        "size": size,
        "used": True,
    }
    if overshadowed:
        seg["overshadowed"] = True
    seg["_start"], seg["_end"] = start, end
    seg["_id"] = segment_id(seg)
    return seg


class _LoadQueueFile:
    """The ``load_queues.json`` being written (Druid's file, not the run state): per server (host
    name), ordered load and drop entries, no duplicates. Loads are typed ``{segment_id,
    queue_type, requested_at}`` or, untyped as Druid lists them, a bare segment id; drops are
    ``{segment_id, requested_at}``."""

    def __init__(self, servers: list[str]):
        self.loads = {s: {} for s in servers}
        self.drops = {s: {} for s in servers}

    def add_load_entry(self, server: str, sid: str, queue_type: str | None, requested_at: int | None) -> None:
        if queue_type is None:
            self.loads[server].setdefault(sid, sid)
        else:
            self.loads[server].setdefault(
                sid, {"segment_id": sid, "queue_type": queue_type, "requested_at": ms_to_iso(requested_at)}
            )

    def add_drop_entry(self, server: str, sid: str, requested_at: int) -> None:
        self.drops[server].setdefault(sid, {"segment_id": sid, "requested_at": ms_to_iso(requested_at)})

    def as_json(self) -> dict:
        """``{"<name>:8083": {"segmentsToLoad": [...], "segmentsToDrop": [...]}}``."""
        return {
            f"{s}:8083": {
                "segmentsToLoad": list(self.loads[s].values()),
                "segmentsToDrop": list(self.drops[s].values()),
            }
            for s in sorted(self.loads)
        }


def _assign(rng, segments, now, layout: Layout) -> list[set]:
    """Where each segment was loaded before this snapshot: its rule's replicas per tier (drop
    rules skipped, as before the segment aged out) on servers drawn without replacement with
    uneven per-server weights (so tiers are not perfectly balanced); broadcast segments on every
    server, the newest one on half of them only."""
    holders = [set() for _ in segments]
    names = {t: layout.names(t) for t in MAX_SIZE_HEADROOM}
    weights = {t: rng.uniform(0.75, 1.25, len(ns)) for t, ns in names.items()}
    wanted = {t: [] for t in names}
    for i, seg in enumerate(segments):
        rules = GENERATED_RULES.get(seg["dataSource"], GENERATED_RULES["_default"])
        rule = _rule_for(rules, seg["_start"], seg["_end"], now - HOUR, skip_drops=True)
        rule = rule or [r for r in rules if r["type"].startswith("load")][-1]
        if rule["type"].startswith("broadcast"):
            holders[i].update(n for n, _, _ in layout.history)
        for tier, count in rule.get("tieredReplicants", {}).items():
            wanted[tier].append((i, count))
    for tier, items in wanted.items():
        keys = np.log(weights[tier]) + rng.gumbel(size=(len(items), len(names[tier])))
        order = np.argsort(-keys, axis=1, kind="stable")
        for (i, count), row in zip(items, order):
            holders[i].update(names[tier][j] for j in row[:count])
    broadcast = [i for i, s in enumerate(segments) if s["dataSource"] == "lookup_dim"]
    newest = max(broadcast, key=lambda i: segments[i]["_end"])
    everyone = sorted(holders[newest])
    holders[newest] = set(rng.choice(everyone, len(everyone) // 2, replace=False).tolist())
    return holders


def _pick(rng, items: list, k: int) -> list:
    """``k`` items (or all) of ``items`` drawn without replacement, in ``items`` order."""
    if len(items) <= k:
        return list(items)
    return [items[j] for j in sorted(rng.choice(len(items), k, replace=False).tolist())]


def _perturb(rng, segments, holders, now, queues: _LoadQueueFile, layout: Layout) -> None:
    """The situations of a live cluster, applied in place (see ``generate_snapshot``)."""

    def ago(lo_min: float, hi_min: float) -> int:
        return now - int(rng.integers(int(lo_min * MINUTE), int(hi_min * MINUTE)))

    hot, live_cold, default = (layout.names(t, live=True) for t in ("hot", "cold", "_default_tier"))

    def loadable(i: int) -> bool:  # used, not overshadowed, under a load rule now
        seg = segments[i]
        rules = GENERATED_RULES.get(seg["dataSource"], GENERATED_RULES["_default"])
        rule = _rule_for(rules, seg["_start"], seg["_end"], now)
        return seg["used"] and not seg.get("overshadowed") and rule["type"].startswith("load")

    current = [i for i in range(len(segments)) if loadable(i)]
    # The lost servers: their replicas are gone; the last run queued some loads, many now stale.
    only_lost = []
    for i, held in enumerate(holders):
        if held & set(layout.lost):
            held.difference_update(layout.lost)
            if not held and loadable(i):
                only_lost.append(i)
    for k, i in enumerate(_pick(rng, only_lost, 60)):
        stale = k < 40
        queues.add_load_entry(
            live_cold[int(rng.integers(len(live_cold)))],
            segments[i]["_id"],
            "loading",
            ago(20, 50) if stale else ago(1, 10),
        )
    # Just handed off: the newest hour is served nowhere; clickstream's is queued on hot servers.
    for i in current:
        seg = segments[i]
        if seg["_end"] == now // HOUR * HOUR and seg["dataSource"] in ("wikipedia", "clickstream"):
            holders[i].clear()
            if seg["dataSource"] == "clickstream":
                queues.add_load_entry(hot[int(rng.integers(len(hot)))], seg["_id"], None, None)
    fully_hot = [i for i in current if len(holders[i] & set(hot)) == 2 and segments[i]["_end"] < now]
    # A balancing move whose load finished: three hot replicas, six with the source's drop queued.
    for k, i in enumerate(_pick(rng, fully_hot, 10)):
        source = sorted(holders[i] & set(hot))[0]
        holders[i].add(sorted(set(hot) - holders[i])[int(rng.integers(len(hot) - 2))])
        if k < 6:
            queues.add_drop_entry(source, segments[i]["_id"], ago(0.5, 3))
    # Balancing moves in flight.
    for i in _pick(rng, [i for i in fully_hot if len(holders[i] & set(hot)) == 2], 8):
        dest = sorted(set(hot) - holders[i])[int(rng.integers(len(hot) - 2))]
        queues.add_load_entry(dest, segments[i]["_id"], "balancing", ago(1, 5))
    # An operator marked six hours of bad clickstream data unused; some drops already queued.
    bad_day = now // DAY * DAY - 45 * DAY
    for i in current:
        seg = segments[i]
        if seg["dataSource"] == "clickstream" and bad_day + 6 * HOUR <= seg["_start"] < bad_day + 12 * HOUR:
            seg["used"] = False
            for server in sorted(holders[i])[:1]:
                if rng.random() < 0.5:
                    queues.add_drop_entry(server, seg["_id"], ago(0.5, 2))
    current = [i for i in current if segments[i]["used"]]
    # A day of wikipedia just aged out under dropForever: a few drops queued.
    aged = [
        i
        for i, seg in enumerate(segments)
        if seg["dataSource"] == "wikipedia" and seg["_end"] <= now - 90 * DAY and holders[i]
    ]
    for i in _pick(rng, aged, 5):
        queues.add_drop_entry(sorted(holders[i])[0], segments[i]["_id"], ago(0.5, 2))
    # Decommissioning moves in flight off hist-default-04.
    on_decom = [
        i for i in current if layout.decommissioning in holders[i] and segments[i]["dataSource"] != "lookup_dim"
    ]
    for i in _pick(rng, on_decom, 12):
        dest = [n for n in default if n not in holders[i]]
        if dest:
            queues.add_load_entry(dest[int(rng.integers(len(dest)))], segments[i]["_id"], "decommissioning", ago(1, 12))
    # The newest lookup_dim month: three of the servers without it have it queued (untyped).
    broadcast = [i for i, seg in enumerate(segments) if seg["dataSource"] == "lookup_dim"]
    newest = max(broadcast, key=lambda i: segments[i]["_end"])
    missing = sorted({n for n, _, _ in layout.present if n != layout.added} - holders[newest])
    for server in _pick(rng, missing, 3):
        queues.add_load_entry(server, segments[newest]["_id"], None, None)


def _real_cluster_cases(segments: list[dict], holders: list[set], now: int) -> None:
    """Cases of real clusters that draw no random numbers (the rest of the snapshot stays as the
    seed made it): the newest re-ingested ``orders`` day is published but not loaded yet (its old
    version waits, still served); ``countries``, one ALL-granularity segment (Druid's eternity
    interval), served by hist-default-01 and the decommissioning hist-default-04. (The served
    segment that ``segments.jsonl`` lacks, ``UNEXPORTED``, is added to the served rows only.)"""
    reindexed = [
        i
        for i, s in enumerate(segments)
        if s["dataSource"] == "orders" and s["_end"] >= now - 6 * DAY and not s.get("overshadowed")
    ]
    holders[max(reindexed, key=lambda i: segments[i]["_start"])].clear()
    seg = {
        "dataSource": "countries",
        "interval": ETERNITY,
        "version": "2024-01-01T00:00:00.000Z",
        "loadSpec": {"type": "s3_zip", "bucket": "druid-deep", "key": "segments/countries/all/index.zip"},
        "dimensions": "iso_code,name,continent",
        "metrics": "count",
        "shardSpec": {"type": "none"},
        "binaryVersion": 9,
        "size": 5 * MB,
        "used": True,
    }
    start, end = (iso_to_ms(t) for t in ETERNITY.split("/"))
    seg["_start"], seg["_end"] = start, end
    seg["_id"] = segment_id(seg)
    segments.append(seg)
    holders.append({"hist-default-01", DECOMMISSIONING})


def _servers(holders, segments, queues: _LoadQueueFile, layout: Layout, druid_version: str | None) -> list[dict]:
    """``sys.servers`` rows (``current_size`` = bytes served; one ``max_size`` per tier leaving
    ``MAX_SIZE_HEADROOM`` over the fullest server's served plus queued bytes, rounded up to a GiB),
    each with ``version`` = ``druid_version`` last unless it is None."""
    size_of = {s["_id"]: s["size"] for s in segments}
    present = layout.present
    served = {f"{n}:8083": 0 for n, _, _ in present}
    for seg, held in zip(segments, holders):
        for name in held:
            served[f"{name}:8083"] += seg["size"]
    projected = {f"{n}:8083": served[f"{n}:8083"] + sum(size_of[sid] for sid in queues.loads[n]) for n, _, _ in present}
    rows = []
    for tier, headroom in MAX_SIZE_HEADROOM.items():
        top = max(projected[f"{n}:8083"] for n, t, _ in present if t == tier)
        max_size = -(-int(top * headroom) // GIB) * GIB
        for name, t, priority in present:
            if t == tier:
                rows.append(
                    {
                        "server": f"{name}:8083",
                        "host": name,
                        "plaintext_port": 8083,
                        "tls_port": -1,
                        "server_type": "historical",
                        "tier": tier,
                        "current_size": served[f"{name}:8083"],
                        "max_size": max_size,
                        "priority": priority,
                    }
                )
    for name, kind, port, tier in (
        ("broker-01", "broker", 8082, None),
        ("coordinator-01", "coordinator", 8081, None),
        ("middlemanager-01", "indexer-executor", 8100, "_default_tier"),
    ):
        rows.append(
            {
                "server": f"{name}:{port}",
                "host": name,
                "plaintext_port": port,
                "tls_port": -1,
                "server_type": kind,
                "tier": tier,
                "current_size": 0,
                "max_size": 0,
                "priority": 0,
            }
        )
    if druid_version is not None:
        rows = [{**row, "version": druid_version} for row in rows]
    return rows


MIN_SEGMENTS = 8_200
"""The fewest segments ``generate`` makes near what was asked: the fixed datasources (about 3,450
segments) and ``clickstream``'s hours at their least (three partitions each, 4,320) hold 8,134."""
SEGMENTS_ROUNDING = 0.01
"""How far above :data:`MIN_SEGMENTS` a generated cluster's count may be from what was asked: the
partitions are drawn (Poisson), so 1 % either way (measured: -0.7 % at 100,000, +0.3 % at 200,000,
+0.1 % at 20,000)."""


def default_servers(n_segments: int) -> int:
    """Historicals of a generated cluster of ``n_segments``: one per 5 000 segments, at least 30."""
    return max(30, n_segments // 5000)


def generate_snapshot(
    out_dir: str,
    *,
    seed: int = 7458,
    n_segments: int = 20_000,
    n_servers: int | None = None,
    snapshot_time: str = "2026-11-01T00:00:00.000Z",
    druid_version: str | None = None,
) -> dict:
    """Write a realistic, seeded snapshot of a Druid cluster to ``out_dir`` (created if needed).

    Deterministic: the same arguments give byte-identical files (numpy ``default_rng(seed)``,
    gzip mtime 0). ``n_segments`` is approximate, within :data:`SEGMENTS_ROUNDING` (about 3 450
    segments are fixed; the partition counts of ``clickstream`` hours and ``metrics`` days absorb the
    rest, half each), and at least :data:`MIN_SEGMENTS`;
    ``n_servers``: historicals in the snapshot (default :func:`default_servers`, at least 12; see
    :func:`server_layout`); ``snapshot_time`` is ISO-8601 and should be hour-aligned;
    ``druid_version``: the ``version`` of every ``servers.json`` row (``sys.servers.version``, Druid
    35+), none when None (as a cluster before 35.0.0): the files are otherwise the same. The cluster
    (sizes in bytes):

    - Datasources: ``wikipedia`` hourly (91 days, 1 numbered partition, median 60 MB),
      ``clickstream`` hourly (60 days, numbered partitions, at least 3 on average, 200 MB),
      ``metrics`` daily (368 days, hashed partitions, 120 MB), ``orders`` daily
      (3 years, ``{"type": "none"}``, 400 MB; the last six days re-ingested, their old versions
      still used, ``"overshadowed": true`` and served), ``audit_log`` weekly (3 years, 50 MB, no
      rules of its own: ``_default``), ``lookup_dim`` monthly (6, broadcastForever, 2 MB). Sizes
      are log-normal (sigma 0.35) around those medians. Complete partition sets only; ``metrics``
      also holds minor-compaction generations, complete, compacted twice and waiting
      (``_minor_compaction``).
    - Rules ``GENERATED_RULES``: recent data (P7D or P30D) on hot:2 + cold:1; older on cold:1,
      cold:1 + _default_tier:1 or _default_tier:1; ``wikipedia`` ends with dropForever after P90D
      (its oldest day is past it, still served), ``metrics`` has dropBeforeByPeriod P365D (its
      oldest four days are past it, still served); ``_default`` loadForever _default_tier:2.
    - Historicals (``sys.servers`` rows with ``current_size``): ``hot`` ~30 % (priority 10),
      ``_default_tier`` ~20 % (``hist-default-04`` decommissioning, still serving), ``cold`` the
      rest (the last one added and empty); the last hot and the last cold historical of before
      were lost and are absent, leaving a few hundred segments unreplicated and more
      underreplicated (:func:`server_layout`); plus broker, coordinator and peon
      (``indexer-executor``) rows. Replicas were spread by weighted random choice (weights
      0.75-1.25 per server), so tiers are unbalanced; ``current_size`` = bytes served; one
      ``max_size`` per tier, the fullest cold server ~98 % full. Broadcast segments are on every
      server but the added one; the newest only on half of them.
    - State in flight: the newest hour of wikipedia and clickstream served nowhere (clickstream's
      queued, untyped, on hot servers); ``loading`` loads of lost segments, 40 of them older than
      15 minutes; ``balancing`` and ``decommissioning`` moves in flight; ten hot segments with a
      third hot replica (six with a drop of an original replica queued); six hours of clickstream
      ``"used": false`` but served (some drops queued); drops of aged-out wikipedia segments.
    - Real-cluster cases (``_real_cluster_cases``): the newest re-ingested ``orders`` day not
      loaded yet; ``countries``, one ALL-granularity segment (eternity interval, 5 MB,
      ``_default_tier`` 2) on hist-default-01 and the decommissioning hist-default-04; a killed
      wikipedia hour (``UNEXPORTED``) that segments.jsonl lacks, still served on two cold servers.

    Returns counts: ``segments``, ``used``, ``overshadowed``, ``historicals``,
    ``server_segments``, ``queued_loads``, ``queued_drops``. Raises ``ValueError`` on a bad
    ``snapshot_time``, ``InputError`` for ``n_segments`` below :data:`MIN_SEGMENTS` or a
    ``druid_version`` that is no Druid version.
    """
    if druid_version is not None:
        try:
            parse_version(druid_version)
        except ValueError as exc:
            raise InputError(f"generate --druid-version: {exc}") from None
    if n_segments < MIN_SEGMENTS:
        raise InputError(
            f"generate --segments {n_segments:,}: at least {MIN_SEGMENTS:,} (the generated cluster's fixed "
            "datasources and clickstream's three partitions an hour hold 8,134 segments)"
        )
    now = iso_to_ms(snapshot_time)
    layout = server_layout(default_servers(n_segments) if n_servers is None else n_servers)
    rng = np.random.default_rng(seed)
    segments = _make_segments(rng, now, n_segments)
    holders = _assign(rng, segments, now, layout)
    present = [n for n, _, _ in layout.present]
    queues = _LoadQueueFile(present)
    _perturb(rng, segments, holders, now, queues, layout)
    _real_cluster_cases(segments, holders, now)
    servers = _servers(holders, segments, queues, layout, druid_version)
    os.makedirs(out_dir, exist_ok=True)
    rows = sorted(
        [(f"{n}:8083", seg["_id"]) for seg, held in zip(segments, holders) for n in held]
        + [(f"{n}:8083", UNEXPORTED[0]) for n in UNEXPORTED[1]]
    )
    _write_rows(os.path.join(out_dir, "server_segments.json"), [{"server": s, "segment_id": sid} for s, sid in rows])
    lines = [
        json.dumps({k: v for k, v in seg.items() if not k.startswith("_")}, separators=(",", ":")) for seg in segments
    ]
    write_gzip_lines(os.path.join(out_dir, "segments.jsonl.gz"), lines)
    write_json(os.path.join(out_dir, "servers.json"), servers)
    queue_json = queues.as_json()
    write_json(os.path.join(out_dir, "load_queues.json"), queue_json)
    write_json(os.path.join(out_dir, "rules.json"), GENERATED_RULES)
    write_json(
        os.path.join(out_dir, "coordinator_config.json"),
        {
            "millisToWaitBeforeDeleting": 900000,
            "maxSegmentsToMove": 100,
            "replicantLifetime": 15,
            "replicationThrottleLimit": 500,
            "balancerComputeThreads": 1,
            "killDataSourceWhitelist": [],
            "maxSegmentsInNodeLoadingQueue": 500,
            "decommissioningNodes": [f"{DECOMMISSIONING}:8083"],
            "decommissioningMaxPercentOfMaxSegmentsToMove": 70,
            "loadingMinPercent": 70,
            "segmentLoadingMaxSecondsBeforeAlerting": 900,
            "balancerRandomSeed": seed,
        },
    )
    write_json(
        os.path.join(out_dir, "snapshot.json"), {"snapshot_time": ms_to_iso(now), "cluster": f"generated-{seed}"}
    )
    return {
        "segments": len(segments),
        "used": sum(s["used"] for s in segments),
        "overshadowed": sum(bool(s.get("overshadowed")) for s in segments),
        "historicals": len(present),
        "server_segments": len(rows),
        "queued_loads": sum(len(q["segmentsToLoad"]) for q in queue_json.values()),
        "queued_drops": sum(len(q["segmentsToDrop"]) for q in queue_json.values()),
    }
