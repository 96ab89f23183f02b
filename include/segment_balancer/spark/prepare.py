"""Stage 0 ``prepare``: the snapshot as tables, the used-segment index, targets, replication status,
the initial segment groups and the run state (``WORK/state/00_prepare``).

Everything over segments and replicas runs as Spark jobs; the driver holds only per-server,
per-tier and per-rule data, and the group bitmaps.

Source: ALGORITHM.md "Inputs", "Terms", "Best servers"; seed 000 "Terminology".
"""

from __future__ import annotations

import logging
from pathlib import Path

from segment_balancer.common.files import staged_parquet, write_json_atomic, write_parquet_atomic
from segment_balancer.druid.rules import rule_index_for
from segment_balancer.druid.snapshot import loader
from segment_balancer.druid.snapshot.lines import with_row_numbers
from segment_balancer.druid.snapshot.segments import (gzip_refusal, read_server_segments, segments_path,
                                                       server_segments_path, unlisted_segments)
from segment_balancer.planner import groups as G
from segment_balancer.planner.config import CONFIG_FILE, OVERRIDES, load_config, unknown_keys
from segment_balancer.spark.used_segments import read_summary

log = logging.getLogger(__name__)
STAGE_NUMBERS = range(1, 14)


def load_small_inputs(snapshot: Path, overrides: dict | None, overrides_source: str = OVERRIDES):
    """Servers, queue entries, rules, effective config and snapshot meta (the small files), read and
    checked whole without Spark; the segment and replica files are only found here (Spark reads and
    checks them: ``used_segments``, :func:`prepare`).

    The CLI and the DAG's ``resolve_snapshot`` call it to refuse a bad snapshot before any Spark
    job; ``overrides_source`` names where ``overrides`` came from in errors (``--config FILE``).
    Returns ``(servers, all server names, queue entries, rules, EffectiveConfig, SnapshotMeta)``.
    Raises ``SnapshotError`` naming the file, the row or key, the offending value and what was expected.
    """
    segments_path(snapshot), server_segments_path(snapshot)  # both present (SnapshotError if not)
    servers, all_names = loader.load_all_servers(snapshot)
    queues = loader.load_load_queues(snapshot, {s.server for s in servers})
    rules = loader.load_rules(snapshot)
    config = load_config(snapshot, overrides, overrides_source)
    meta = loader.load_snapshot_meta(snapshot)
    return servers, all_names, queues, rules, config, meta


def stage_limits(config) -> dict[str, dict]:
    """``{"1": {"queue_type", "limit", "total"}, …}`` for stages 1–13 (ALGORITHM.md table)."""
    return {str(stage): config.limit(stage).to_meta() for stage in STAGE_NUMBERS}


def _replicants_total(rule) -> int:
    """Σ of a load rule's ``tieredReplicants``, absent tiers included (what ``required(s)``
    counts, ALGORITHM.md "Availability"); 0 for any other rule."""
    total = sum(int(n) for n in (rule.tiered_replicants or {}).values()) if rule.kind == "load" else 0
    return min(total, 2**31 - 1)  # an int column: each count is a Java int, their sum need not be


def _rule_targets(rules: dict, datasources: list[str], tiers: set[str]) -> dict[str, list[tuple]]:
    """Per (datasource, rule index) of the flattened rule list (its own rules, then ``_default``),
    keyed ``"<datasource>\x00<rule_idx>"``: the load rule's ``(tier, target, tier_pos)`` for every
    tier of the snapshot it asks replicas of, in the rule's tier order."""
    out: dict[str, list[tuple]] = {}
    for ds in datasources:
        for i, rule in enumerate(rules.get(ds, []) + rules.get("_default", [])):
            if rule.kind != "load":
                continue
            for pos, (tier, n) in enumerate((rule.tiered_replicants or {}).items()):
                if tier in tiers and int(n) > 0:
                    out.setdefault(f"{ds}\x00{i}", []).append((tier, int(n), pos))
    return out


def _assign_rules(segments, rules: dict, now_ms: int):
    """Adds ``rule_idx`` (int, −1 when no rule applies: the first applying rule of the
    datasource's own rules then ``_default``), its ``rule_kind`` (str, null when none applies) and
    ``replicants_total`` (int, :func:`_replicants_total`) with a vectorised pass per batch."""
    flat = {ds: rules.get(ds, []) + rules.get("_default", []) for ds in rules}
    default = rules.get("_default", [])

    def assign(batches):
        import numpy as np

        for pdf in batches:
            pdf = pdf.reset_index(drop=True)
            out = np.full(len(pdf), -1, dtype=np.int32)
            kind = np.full(len(pdf), None, dtype=object)
            total = np.zeros(len(pdf), dtype=np.int32)
            for ds, part in pdf.groupby("datasource", sort=False):
                lst = flat.get(ds, default)
                rows = part.index.to_numpy()
                out[rows] = rule_index_for(lst, part["start_ms"].to_numpy(), part["end_ms"].to_numpy(), now_ms)
                for i, rule in enumerate(lst):
                    hit = rows[out[rows] == i]
                    kind[hit], total[hit] = rule.kind, _replicants_total(rule)
            yield pdf.assign(rule_idx=out, rule_kind=kind, replicants_total=total)

    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    schema = StructType(segments.schema.fields + [StructField("rule_idx", IntegerType()), StructField("rule_kind", StringType()),
                                                  StructField("replicants_total", IntegerType())])
    return segments.mapInPandas(assign, schema)


def prepare(spark, snapshot: Path, work: Path, overrides: dict | None = None) -> dict:
    """Run stage 0: write ``WORK/prepared/*`` (see docs/ARCHITECTURE.md) and return the initial
    groups as the XCom dict ``{"stage": 0, "groups": {name: base64 roaring}}``.

    About a dozen Spark jobs whatever the size: one writes the parsed replica file aside and one
    checks it (with the ids of unlisted segments); one writes each prepared table (after two that
    sort and number the used-segment index); one reads every count the servers, alerts and
    summaries need; one writes the run state and measures its groups, one task per tier. Raises
    :class:`SnapshotError` for any invalid input, before any prepared table is written.
    """
    from pyspark.sql import functions as F

    from segment_balancer.common.spark_columns import lookup
    from segment_balancer.druid.snapshot.segments import first_problems, first_unlisted_problem, refuse, refuse_unlisted
    from segment_balancer.spark.session import collect_small, read_parquet

    snapshot, work = Path(snapshot), Path(work)
    servers, all_names, queues, rules, config, smeta = load_small_inputs(snapshot, overrides)
    now_ms = smeta.snapshot_time_ms
    cfg = config.as_dict()
    decommissioning = set(config.decommissioning_nodes)
    historicals = {s.server for s in servers}
    tiers = sorted({s.tier for s in servers})
    log.info("snapshot %s: %d historical servers in %d tiers", smeta.snapshot_id, len(servers), len(tiers))

    timeline = work / "timeline" / "segments.parquet"
    if not timeline.exists():
        raise FileNotFoundError(f"{timeline} is missing: run the used_segments application first")
    timeline_summary = read_summary(work)
    datasources = sorted(timeline_summary["per_datasource"])
    # Every segment with the timeline's answer: ``overshadowed`` is computed (stage 0), the
    # input's flag is kept as ``input_overshadowed``. Tombstones are never loaded.
    segs = read_parquet(spark, timeline)
    segs = segs.withColumn("used", F.col("used") & (F.col("shard_type") != "tombstone")).withColumn("listed", F.lit(True))
    prepared = work / "prepared"
    qdf = _queue_frame(spark, queues)
    rows, replica_file, word = read_server_segments(spark, snapshot, historicals, all_names)
    good = "historical and problem is null"
    # The replica file is parsed once, into prepared/server_segments.parquet, and checked there
    # together with the ids of unlisted segments (replicas and queue entries of segments
    # segments.jsonl lacks: unused segments, ALGORITHM.md "Inputs").
    with gzip_refusal(replica_file), staged_parquet(rows, prepared / "server_segments.parquet") as written:
        checked = read_parquet(spark, written)
        unlisted = unlisted_segments(checked.filter(good), qdf, segs, datasources)
        found = collect_small({"replicas": first_problems(checked, key="row"), "unlisted": first_unlisted_problem(unlisted)})
        refuse(replica_file, found["replicas"], word, key="row")
        refuse_unlisted(found["unlisted"])
    served = read_parquet(spark, prepared / "server_segments.parquet").filter(good).select("row", "server", "segment_id")
    unlisted = unlisted_segments(served, qdf, segs, datasources).select(
        "segment_id", "datasource", "start_ms", "end_ms", "version", "partition_num",
        F.lit(0).cast("long").alias("size_bytes"), F.lit(False).alias("used"), F.lit(False).alias("overshadowed"),
        F.lit("unused").alias("status"), F.lit("unknown").alias("shard_type"), F.lit(False).alias("listed"))
    segs = segs.unionByName(unlisted, allowMissingColumns=True)
    segs = _assign_rules(segs, rules, now_ms)
    segs = segs.withColumn("required", F.when(F.col("rule_kind") == "load", F.least(F.lit(2), F.col("replicants_total"))))
    segs = _with_waiting(segs, served, qdf)

    # The used-segment index: newest first (end desc, start desc, id desc), numbered in the JVM
    # over the sorted partitions (the sort is cached: numbering counts its partitions first).
    # Unlisted segments are unused: the timeline table alone names every used segment.
    used = read_parquet(spark, timeline).filter(
        F.col("used") & (F.col("shard_type") != "tombstone") & ~F.col("overshadowed")).select("segment_id", "start_ms", "end_ms")
    ordered = used.orderBy(F.desc("end_ms"), F.desc("start_ms"), F.desc("segment_id")).select("segment_id").cache()
    index = with_row_numbers(ordered, "idx", first=0)
    segments = segs.join(index, "segment_id", "left").select(
        "idx", "segment_id", "datasource", "start_ms", "end_ms", "version",
        F.col("partition_num").cast("int").alias("partition_num"), "size_bytes", "used", "overshadowed",
        "rule_kind", "rule_idx", F.col("required").cast("int").alias("required"), "waiting", "listed", "shard_type", "line")
    write_parquet_atomic(segments, prepared / "segments.parquet")
    ordered.unpersist()
    segments = read_parquet(spark, prepared / "segments.parquet")
    # Every segment's code (its row of the run's segment table): the used segments by idx, the
    # others after them by segment id; the table itself, one file the tasks memory-map.
    coded = _write_segment_table(spark, segments, work)

    servers_pdf = _servers_frame(servers, decommissioning)
    write_parquet_atomic(_replicas(served, qdf, coded, dict(zip(servers_pdf["server"], servers_pdf["tier"]))),
                         prepared / "replicas.parquet")
    replicas = read_parquet(spark, prepared / "replicas.parquet")

    per_rule = {key: F.array(*[F.struct(F.lit(t).alias("tier"), F.lit(n).alias("target"), F.lit(pos).alias("tier_pos"))
                               for t, n, pos in tiers_of])
                for key, tiers_of in _rule_targets(rules, datasources, set(tiers)).items()}
    rule_key = F.concat_ws("\x00", "datasource", F.col("rule_idx").cast("string"))
    targets = (segments.filter("idx is not null and rule_kind = 'load'")
               .select("idx", F.explode(lookup(rule_key, per_rule, "array<struct<tier:string,target:int,tier_pos:int>>")).alias("t"))
               .select("idx", "t.tier", F.col("t.target").cast("int").alias("target"), "t.tier_pos"))
    write_parquet_atomic(targets, prepared / "targets.parquet")
    targets = read_parquet(spark, prepared / "targets.parquet")

    # Everything meta.json and servers.parquet need from the tables, in one job.
    limit_ms = config.segment_loading_max_ms
    found = collect_small({**_per_server_queries(replicas, segments), **_alert_queries(replicas, segments, now_ms - limit_ms),
                           **_unlisted_queries(segments, replicas), **_waiting_queries(segments, replicas)})
    servers_pdf = _mark_broadcast_only(servers_pdf, found["per_server"])
    write_parquet_atomic(servers_pdf, prepared / "servers.parquet")

    from segment_balancer.spark.state_store import INITIAL_STATE_DIR
    from segment_balancer.spark.status import write_state_with_status

    # The run state every stage starts from (no start-of-run ranking: a segment is ranked in a
    # tier when a stage first considers it there, ALGORITHM.md "Best servers"), and its groups.
    status = write_state_with_status(_start_state(segments, replicas, targets, servers_pdf), work,
                                     INITIAL_STATE_DIR, servers_pdf)
    groups, counts = status.groups, status.counts

    meta = {
        "snapshot_id": smeta.snapshot_id,
        "cluster": smeta.cluster,
        "now_ms": now_ms,
        "config": cfg,
        "ignored_config": list(getattr(config, "ignored", [])),
        "stage_limits": stage_limits(config),
        "tiers": _tiers_meta(servers_pdf),
        "alerts": _alerts(rules, set(tiers), decommissioning, historicals, found, limit_ms),
        "status_counts": counts,
        "held": {server: list(n) for server, n in sorted(status.held.items())},
        "missing_replicas": dict(sorted(status.missing.items())),
        "timeline": timeline_summary,
        "unlisted": _unlisted_counts(found),
        "overshadowed_waiting": _waiting_counts(found),
    }
    meta["balancer_state"] = previous_balancer_state(work, config, smeta)
    if meta["balancer_state"]["warning"]:
        meta["alerts"].append({"kind": "balancer_state", "message": meta["balancer_state"]["warning"]})
    for entry in unknown_keys(config):
        meta["alerts"].append({"kind": "unknown_config_key", "key": entry["key"],
                               "message": f"{CONFIG_FILE} has key {entry['key']!r}: {entry['note']}"})
    if meta["timeline"]["flag_disagreements"]:
        n = meta["timeline"]["flag_disagreements"]
        meta["alerts"].append({"kind": "overshadowed_flag_disagrees", "count": n, "examples": meta["timeline"]["flag_examples"],
                               "message": f"the input's overshadowed flag disagrees with the computed timeline for {n} segments; the timeline wins"})
    write_json_atomic(meta, prepared / "meta.json")
    return {"stage": 0, "groups": G.encode_all(groups)}


def _write_segment_table(spark, segments, work: Path):
    """Number every segment of the prepared ``segments`` table (its code: the used ones are
    ``idx``, the others follow in segment-id order) and write the run's segment table
    (:data:`~segment_balancer.spark.state_store.SEGMENT_TABLE_FILE`) in code order, one Arrow IPC
    file written by one task. Three Spark jobs (the count of used segments and the datasources,
    the numbering, the file). Returns ``segments`` with ``code`` (a lazy DataFrame)."""
    import json

    import pyarrow as pa
    from pyspark.sql import functions as F

    from segment_balancer.common.files import filesystem
    from segment_balancer.common.spark_columns import lookup
    from segment_balancer.druid.snapshot.lines import with_row_numbers
    from segment_balancer.planner.runstate import FATES, NO_RULE, RULE_CODES
    from segment_balancer.spark.session import collect_small
    from segment_balancer.spark.state_store import SEGMENT_TABLE_FIELDS, SEGMENT_TABLE_FILE, arrow_schema, write_ipc

    found = collect_small({"n_used": segments.agg(F.count("idx").alias("n")),
                           "datasources": segments.select("datasource").distinct()})
    n_used = int(found["n_used"][0]["n"])
    names = sorted(r["datasource"] for r in found["datasources"])
    others = with_row_numbers(segments.filter("idx is null").select("segment_id").orderBy("segment_id"), "other",
                              first=n_used)
    coded = (segments.join(others, "segment_id", "left")
             .withColumn("code", F.coalesce(F.col("idx"), F.col("other"))).drop("other"))
    rule = F.coalesce(lookup("rule_kind", RULE_CODES, "byte"), F.lit(NO_RULE).cast("byte"))
    unused = F.col("idx").isNull()
    fate = (F.when(~unused, F.when(F.col("rule_kind") == "drop", F.lit(FATES.index("drop_rule"))).otherwise(F.lit(0)))
            .when(~F.col("overshadowed"), F.lit(FATES.index("unused")))
            .when(F.col("waiting"), F.lit(FATES.index("waiting")))
            .when(~F.col("waiting"), F.lit(FATES.index("overshadowed"))).otherwise(F.lit(0)))
    table = coded.select("code", "segment_id", lookup("datasource", {n: i for i, n in enumerate(names)}, "int")
                         .alias("datasource"), "start_ms", "end_ms", "size_bytes", rule.alias("rule"),
                         F.coalesce("required", F.lit(-1)).cast("int").alias("required"), fate.cast("byte").alias("fate"))
    schema = arrow_schema(SEGMENT_TABLE_FIELDS).with_metadata({"n_used": str(n_used), "datasources": json.dumps(names)})
    work_uri = str(Path(work).absolute())

    def write(batches):
        fs, base = filesystem(work_uri)
        path = f"{base}/{SEGMENT_TABLE_FILE}"
        batches = list(batches)
        rows = pa.Table.from_batches(batches).sort_by("code") if batches else None
        write_ipc(fs, path, schema.empty_table() if rows is None else pa.Table.from_arrays(
            [rows.column(n).cast(schema.field(n).type) for n in schema.names], schema=schema))
        yield pa.RecordBatch.from_pydict({"n": [0 if rows is None else rows.num_rows]})

    written = table.repartition(1).mapInArrow(write, "n long").collect()
    log.info("segment table: %d segments, %d used", written[0]["n"], n_used)
    return coded


def _start_state(segments, replicas, targets, servers_pdf):
    """The state at the start of the run as rows of
    :data:`~segment_balancer.spark.status.START_STATE_SCHEMA` (a Spark DataFrame): a replica row
    for every served or queued replica, a segment row for every used segment in every tier where
    it has a target or a replica, and for broadcast segments in every tier."""
    from pyspark.sql import functions as F

    from segment_balancer.common.spark_columns import lookup
    from segment_balancer.planner.runstate import NO_LOAD, QUEUE_CODES

    server_code = {name: i for i, name in enumerate(servers_pdf["server"])}
    load = F.when(F.col("queued_load"), lookup("queue_type", QUEUE_CODES, "byte")).otherwise(F.lit(NO_LOAD).cast("byte"))
    rep = replicas.select("tier", F.lit("replica").alias("kind"), "code", F.lit(None).cast("int").alias("target"),
                          F.lit(None).cast("int").alias("tier_pos"), lookup("server", server_code, "int").alias("server"),
                          "served", load.alias("load"), F.col("queued_drop").alias("dropping"))
    used = segments.filter("idx is not null").select("idx", "rule_kind")
    tiers = F.array(*[F.lit(t) for t in sorted(set(servers_pdf["tier"]))]) if len(servers_pdf) else F.array().cast("array<string>")
    pairs = (targets.select("idx", "tier").unionByName(replicas.filter("idx is not null").select("idx", "tier"))
             .unionByName(used.filter("rule_kind = 'broadcast'").select("idx", F.explode(tiers).alias("tier")))
             .distinct())
    seg = (pairs.join(targets.select("idx", "tier", "target", "tier_pos"), ["idx", "tier"], "left")
           .select("tier", F.lit("segment").alias("kind"), F.col("idx").alias("code"),
                   F.coalesce("target", F.lit(0)).cast("int").alias("target"),
                   F.coalesce("tier_pos", F.lit(0)).cast("int").alias("tier_pos"), F.lit(None).cast("int").alias("server"),
                   F.lit(None).cast("boolean").alias("served"), F.lit(None).cast("byte").alias("load"),
                   F.lit(None).cast("boolean").alias("dropping")))
    return rep.unionByName(seg)


def previous_balancer_state(work: Path, config, smeta) -> dict:
    """What the run starts from of the previous plan's balancer state (``WORK/`` +
    :data:`~segment_balancer.planner.balancer_state.PREVIOUS_FILE`, when the run was given one),
    for ``meta.json``: ``counts`` (``{tier: [[server, server, hit_count], …]}``) and ``warning`` (why
    a state given was not used, for the report; None). Read
    only for the ``avgShedder`` strategy, the one that uses it; never raises."""
    from segment_balancer.planner.balancer_state import counts_to_json, read_previous

    if config.balancer_strategy != "avgShedder":
        return {"counts": {}, "warning": None}
    counts, warning = read_previous(work, smeta.cluster, smeta.snapshot_time_ms)
    if warning:
        log.warning("balancer state: %s", warning)
    return {"counts": counts_to_json(counts), "warning": warning}


def _servers_frame(servers, decommissioning: set[str]):
    import pandas as pd

    return pd.DataFrame([{
        "server": s.server, "host": s.host, "tier": s.tier, "max_size": int(s.max_size),
        "current_size": int(s.current_size), "priority": int(s.priority),
        "decommissioning": s.server in decommissioning,
    } for s in sorted(servers, key=lambda s: s.server)]).astype({"max_size": "int64", "current_size": "int64", "priority": "int32"})


def _queue_frame(spark, queues):
    """The queue entries of ``load_queues.json`` as a DataFrame (``server``, ``segment_id``,
    ``queued_load``, ``queue_type``, ``requested_at_ms``, ``queued_drop``, ``place``: where in the
    file, for error messages)."""
    rows, position = [], {}
    for q in queues:
        key = "segmentsToLoad" if q.action == "LOAD" else "segmentsToDrop"
        j = position[(q.server, key)] = position.get((q.server, key), -1) + 1
        rows.append((q.server, q.segment_id, q.action == "LOAD", q.queue_type if q.action == "LOAD" else None,
                     q.requested_at_ms, q.action == "DROP", f"server {q.server!r} {key}[{j}]"))
    return spark.createDataFrame(rows, "server string, segment_id string, queued_load boolean, queue_type string, "
                                       "requested_at_ms long, queued_drop boolean, place string")


def _with_waiting(segs, served, qdf):
    """``segs`` plus ``waiting`` (bool, null unless overshadowed): true when some segment that
    overshadows it needs a replica (used, not overshadowed, and its rule asks for one) and no
    historical serves it (with no drop of it queued). Such a segment keeps its replicas
    (ALGORITHM.md stage 12, Druid's ``MarkOvershadowedSegmentsAsUnused``)."""
    from pyspark.sql import functions as F

    serving = served.select("server", "segment_id").join(qdf.filter("queued_drop").select("server", "segment_id"),
                                                        ["server", "segment_id"], "left_anti")
    served_ids = serving.select(F.col("segment_id").alias("by")).distinct().withColumn("is_served", F.lit(True))
    needs = segs.select(F.col("segment_id").alias("by"), (
        F.col("used") & ~F.col("overshadowed")
        & ((F.col("rule_kind") == "broadcast") | ((F.col("rule_kind") == "load") & (F.col("replicants_total") > 0)))
    ).alias("needs_replica"))
    pending = (segs.filter("overshadowed").select("segment_id", F.explode("overshadowed_by").alias("by"))
               .join(needs, "by").join(served_ids, "by", "left")
               .filter(F.col("needs_replica") & F.col("is_served").isNull())
               .select("segment_id").distinct().withColumn("pending", F.lit(True)))
    return (segs.join(pending, "segment_id", "left")
            .withColumn("waiting", F.when(F.col("overshadowed"), F.coalesce("pending", F.lit(False))))
            .drop("pending"))


def _replicas(served, qdf, segments, tier_of: dict[str, str]):
    """One row per (segment, server) that is served or queued (docs/ARCHITECTURE.md); ``tier_of``:
    the tier of every historical."""
    from pyspark.sql import functions as F

    from segment_balancer.common.spark_columns import lookup

    qdf = qdf.drop("place")
    s = served.select("server", "segment_id").withColumn("served", F.lit(True))
    rep = s.join(qdf, ["server", "segment_id"], "full_outer")
    rep = rep.select(
        "segment_id", "server", F.coalesce("served", F.lit(False)).alias("served"),
        F.coalesce("queued_load", F.lit(False)).alias("queued_load"),
        F.when(F.col("queued_load"), F.coalesce("queue_type", F.lit("loading"))).alias("queue_type"),
        "requested_at_ms", F.coalesce("queued_drop", F.lit(False)).alias("queued_drop"))
    rep = (rep.withColumn("tier", lookup("server", tier_of, "string")).filter("tier is not null")
           .join(segments.select("segment_id", "idx", "code"), "segment_id"))
    return rep.select("segment_id", "idx", "code", "server", "tier", "served", "queued_load", "queue_type",
                      "requested_at_ms", "queued_drop")


def _per_server_queries(replicas, segments) -> dict:
    """``per_server``: per server the bytes of its queued loads and its served replicas that are
    not of used broadcast segments (a query for ``collect_small``)."""
    from pyspark.sql import functions as F

    j = replicas.drop("idx").join(segments.select("segment_id", "size_bytes", "rule_kind", "idx"), "segment_id")
    return {"per_server": j.groupBy("server").agg(
        F.sum(F.when(F.col("queued_load"), F.col("size_bytes")).otherwise(0)).alias("queued_bytes"),
        F.sum(F.when(F.col("served") & ~(F.col("idx").isNotNull() & (F.col("rule_kind") == "broadcast")), 1).otherwise(0)).alias("non_broadcast"),
    )}


def _mark_broadcast_only(servers_pdf, per_server: list[dict]):
    """Adds ``projected_size`` (current + queued loads, bytes) and ``broadcast_only``."""
    import pandas as pd

    per = pd.DataFrame(per_server, columns=["server", "queued_bytes", "non_broadcast"]).astype(
        {"queued_bytes": "int64", "non_broadcast": "int64"})  # typed even when empty: no object-dtype fillna
    out = servers_pdf.merge(per, on="server", how="left").fillna({"queued_bytes": 0, "non_broadcast": 0})
    out["projected_size"] = (out["current_size"] + out["queued_bytes"]).astype("int64")
    out["broadcast_only"] = out["decommissioning"] & (out["non_broadcast"] == 0)
    return out.drop(columns=["queued_bytes", "non_broadcast"])


def _tiers_meta(servers_pdf) -> dict:
    out = {}
    for tier, part in servers_pdf.groupby("tier"):
        out[tier] = {"priority": int(part.priority.max()), "servers": int(len(part)),
                     "candidates": int((~part.decommissioning).sum())}
    return out


def _alert_queries(replicas, segments, stale_before_ms: int) -> dict:
    """Loads queued since before ``stale_before_ms`` and used segments no rule matches: how many
    and the first few (queries for ``collect_small``)."""
    from pyspark.sql import functions as F

    stale = replicas.filter(F.col("queued_load") & (F.col("requested_at_ms") < stale_before_ms))
    norule = segments.filter("idx is not null and rule_kind is null")
    return {"stale_n": stale.agg(F.count("*").alias("n")),
            "stale": stale.select("segment_id", "server", "requested_at_ms").orderBy("requested_at_ms", "server").limit(5),
            "norule_n": norule.agg(F.count("*").alias("n")),
            "norule": norule.select("idx", "segment_id").orderBy("idx").limit(5)}


def _alerts(rules, tiers, decommissioning, historicals, found: dict, limit_ms: int) -> list[dict]:
    """Unknown tiers, unknown decommissioning nodes, loads queued too long, segments no rule
    matches (``found``: the answers of :func:`_alert_queries`)."""
    alerts = []
    named = {t for lst in rules.values() for r in lst for t in (r.tiered_replicants or {})}
    for tier in sorted(named - tiers):
        alerts.append({"kind": "unknown_tier", "message": f"tier {tier} is named by a rule but has no historical server; left out of every sum"})
    for name in sorted(decommissioning - historicals):
        alerts.append({"kind": "unknown_decommissioning_node", "message": f"decommissioningNodes names {name}, which is not a historical server"})
    n_stale = found["stale_n"][0]["n"]
    if n_stale:
        ex = [f"{r['segment_id']} on {r['server']}" for r in sorted(found["stale"], key=lambda r: (r["requested_at_ms"], r["server"]))]
        alerts.append({"kind": "load_queued_too_long", "count": n_stale,
                       "message": f"{n_stale} loads queued longer than {limit_ms // 1000} s", "examples": ex})
    n_norule = found["norule_n"][0]["n"]
    if n_norule:
        ex = [r["segment_id"] for r in sorted(found["norule"], key=lambda r: r["idx"])]
        alerts.append({"kind": "no_rule_matches", "count": n_norule,
                       "message": f"{n_norule} used segments match no rule; left where they are", "examples": ex})
    return alerts


def _unlisted_queries(segments, replicas) -> dict:
    """Segments that replicas or queue entries name but ``segments.jsonl`` lacks: per datasource
    how many and their served replicas, and a few ids (queries for ``collect_small``)."""
    from pyspark.sql import functions as F

    unlisted = segments.filter(~F.col("listed"))
    return {"unlisted": (unlisted.join(replicas.select("segment_id", "served"), "segment_id", "left")
                         .groupBy("datasource").agg(F.countDistinct("segment_id").alias("segments"),
                                                    F.sum(F.col("served").cast("int")).alias("replicas"))),
            "unlisted_ids": unlisted.select("segment_id").orderBy("segment_id").limit(5)}


def _unlisted_counts(found: dict) -> dict:
    """Unused segments still served or queued (stage 12 drops their replicas): how many, how many
    replicas, per datasource, a few examples (from :func:`_unlisted_queries`)."""
    per = {r["datasource"]: {"segments": int(r["segments"]), "served_replicas": int(r.get("replicas") or 0)}
           for r in sorted(found["unlisted"], key=lambda r: r["datasource"])}
    return {"segments": sum(v["segments"] for v in per.values()),
            "served_replicas": sum(v["served_replicas"] for v in per.values()),
            "per_datasource": per, "examples": sorted(r["segment_id"] for r in found["unlisted_ids"])}


def _waiting_queries(segments, replicas) -> dict:
    """Overshadowed segments that still serve somewhere and wait for what overshadows them to be
    served: per datasource, segments and served replicas (a query for ``collect_small``)."""
    from pyspark.sql import functions as F

    return {"waiting": (segments.filter("waiting").join(replicas.filter("served").select("segment_id"), "segment_id")
                        .groupBy("datasource").agg(F.countDistinct("segment_id").alias("segments"), F.count("*").alias("replicas")))}


def _waiting_counts(found: dict) -> dict:
    """Overshadowed segments that stage 12 keeps (from :func:`_waiting_queries`)."""
    per = {r["datasource"]: {"segments": int(r["segments"]), "served_replicas": int(r["replicas"])}
           for r in sorted(found["waiting"], key=lambda r: r["datasource"])}
    return {"segments": sum(v["segments"] for v in per.values()),
            "served_replicas": sum(v["served_replicas"] for v in per.values()), "per_datasource": per}
