"""Replication status at the start of the run as Spark jobs over the prepared tables: replica
state, per-(segment, tier) counts and the initial groups (later stages read the run state,
:mod:`.runstate`).

``count(s, T)`` is ALGORITHM.md's: servers of ``T`` that serve ``s`` with no drop of it queued or
scheduled, plus servers of ``T`` with a queued or scheduled load of it.
Source: ALGORITHM.md "Terms"; seed 000 "Terminology".
"""

from __future__ import annotations

from pyroaring import BitMap

from . import groups as G


def current_replicas(replicas):
    """Replica state at the start of the run, from the snapshot's replicas and queues.

    ``replicas``: prepared replicas (Spark). Returns (``idx``, ``server``, ``tier``, ``served``, ``load``,
    ``drop``, ``serving`` = served and no drop, ``holds`` = counted in ``count(s, T)``,
    ``present`` = serves or loads it) for used segments.
    """
    from pyspark.sql import functions as F

    base = replicas.filter("idx is not null").select(
        "idx", "server", "tier", "served", F.col("queued_load").alias("load"), F.col("queued_drop").alias("drop"))
    cur = base.groupBy("idx", "server", "tier").agg(
        F.max("served").alias("served"), F.max("load").alias("load"), F.max("drop").alias("drop"))
    return cur.select(
        "*",
        (F.col("served") & ~F.col("drop")).alias("serving"),
        ((F.col("served") | F.col("load")) & ~F.col("drop")).alias("holds"),
        (F.col("served") | F.col("load")).alias("present"),
    )


def tier_state(cur, servers_df):
    """Per (``idx``, ``tier``): ``count`` (int), ``holders``, ``present``, ``decommissioning_holders``
    (sorted arrays of server names) and ``candidate_holders`` (int)."""
    from pyspark.sql import functions as F

    j = cur.join(F.broadcast(servers_df.select("server", "decommissioning")), "server")
    when = lambda cond: F.when(cond, F.col("server"))  # noqa: E731
    return j.groupBy("idx", "tier").agg(
        F.sum(F.col("holds").cast("int")).alias("count"),
        F.array_sort(F.collect_set(when(F.col("serving")))).alias("holders"),
        F.array_sort(F.collect_set(when(F.col("present")))).alias("present"),
        F.array_sort(F.collect_set(when(F.col("serving") & F.col("decommissioning")))).alias("decommissioning_holders"),
        F.sum((F.col("serving") & ~F.col("decommissioning")).cast("int")).alias("candidate_holders"),
    )


def replicated_status(segments, targets, state):
    """(``idx``, ``tier``, ``target``, ``count``, …) for used segments under a load rule, every tier
    where the segment has a target or a replica, plus per-segment totals ``total_target`` and
    ``total_count``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    loaded = segments.filter("idx is not null and rule_kind = 'load'").select("idx")
    st = (targets.select("idx", "tier", "target").join(state, ["idx", "tier"], "full_outer")
          .join(loaded, "idx").fillna({"target": 0, "count": 0, "candidate_holders": 0}))
    w = Window.partitionBy("idx")
    return st.withColumn("total_target", F.sum("target").over(w)).withColumn("total_count", F.sum("count").over(w))


def initial_groups(spark, segments, replicas, targets, servers_pdf) -> tuple[dict[str, BitMap], dict[str, int]]:
    """The start-of-run groups (bitmaps) and their sizes.

    ``Unreplicated``; per tier ``Underreplicated``, ``FullyReplicated``, ``Overreplicated``,
    ``ToMoveAwayFromDecommServers`` (replicated, target > 0, served by a decommissioning server),
    ``Balanceable`` (fully or underreplicated, served by a candidate server) and
    ``Underbroadcast``.
    """
    from pyspark.sql import functions as F

    servers_df = spark.createDataFrame(servers_pdf[["server", "tier", "decommissioning", "broadcast_only"]])
    state = tier_state(current_replicas(replicas), servers_df)
    st = replicated_status(segments, targets, state).cache()
    unrep = (F.col("total_target") > 0) & (F.col("total_count") == 0)
    tiered = lambda kind: F.concat(F.lit(kind + "["), F.col("tier"), F.lit("]"))  # noqa: E731
    members = [
        st.filter(unrep).select(F.lit("Unreplicated").alias("group"), "idx"),
        st.filter(~unrep & (F.col("target") > 0) & (F.col("count") < F.col("target"))).select(tiered("Underreplicated").alias("group"), "idx"),
        st.filter((F.col("target") > 0) & (F.col("count") == F.col("target"))).select(tiered("FullyReplicated").alias("group"), "idx"),
        st.filter(F.col("count") > F.col("target")).select(tiered("Overreplicated").alias("group"), "idx"),
        st.filter((F.col("target") > 0) & (F.size("decommissioning_holders") > 0)).select(tiered("ToMoveAwayFromDecommServers").alias("group"), "idx"),
        st.filter(~unrep & (F.col("target") > 0) & (F.col("count") <= F.col("target")) & (F.col("candidate_holders") > 0))
          .select(tiered("Balanceable").alias("group"), "idx"),
        underbroadcast(spark, segments, replicas, servers_pdf).select(tiered("Underbroadcast").alias("group"), "idx"),
    ]
    union = members[0]
    for m in members[1:]:
        union = union.unionByName(m)
    groups = G.bitmaps_from_members(union.distinct())
    st.unpersist()
    groups.setdefault("Unreplicated", BitMap())
    return groups, {name: len(bm) for name, bm in sorted(groups.items())}


def should_hold_broadcast(servers_pdf):
    """Servers that should hold broadcast segments: all but decommissioning servers holding only
    broadcast segments (ALGORITHM.md "Broadcast segment")."""
    return servers_pdf[~servers_pdf["broadcast_only"]][["server", "tier"]]


def underbroadcast(spark, segments, replicas, servers_pdf):
    """(``idx``, ``tier``) of broadcast segments that some server of the tier should hold and does
    not serve or load."""
    from pyspark.sql import functions as F

    should = should_hold_broadcast(servers_pdf)
    if should.empty:
        return spark.createDataFrame([], "idx long, tier string")
    n_should = should.groupby("tier").size().reset_index(name="n_should")
    should_df = spark.createDataFrame(should)
    bseg = segments.filter("idx is not null and rule_kind = 'broadcast'").select("idx")
    have = (current_replicas(replicas).filter(F.col("present") & ~F.col("drop")).join(F.broadcast(should_df), ["server", "tier"])
            .groupBy("idx", "tier").agg(F.count("*").alias("n_have")))
    pairs = bseg.crossJoin(F.broadcast(spark.createDataFrame(n_should)))
    return (pairs.join(have, ["idx", "tier"], "left").fillna({"n_have": 0})
            .filter(F.col("n_have") < F.col("n_should")).select("idx", "tier"))


def start_projection(replicas, segments):
    """What every server projects at the start of the run: served without a queued drop, plus
    queued loads. Columns ``server``, ``tier``, ``idx`` (−1 for unused segments), ``datasource``,
    ``start_ms``, ``end_ms``."""
    from pyspark.sql import functions as F

    proj = replicas.filter((F.col("served") & ~F.col("queued_drop")) | F.col("queued_load"))
    return proj.join(segments.select("segment_id", "datasource", "start_ms", "end_ms"), "segment_id").select(
        "server", "tier", F.coalesce("idx", F.lit(-1)).alias("idx"), "datasource", "start_ms", "end_ms")
