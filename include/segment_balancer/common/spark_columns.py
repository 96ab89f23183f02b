"""Small Spark helpers that need no session of their own: a literal-map lookup column and the
application's shuffle parallelism. Used by the snapshot readers (:mod:`segment_balancer.druid`)
and the Spark applications alike."""

from __future__ import annotations

import os

from pyspark.sql import Column
from pyspark.sql import functions as F


def parallelism(spark) -> int:
    """The cores the application's shuffles are spread over: ``spark.sql.shuffle.partitions``
    (:func:`get_session` sets it to the default parallelism; a Connect server is started with it),
    at least 2. A session not started yet (``spark.session.LazySession``) is not started for it:
    this machine's cores, as ``local[*]`` would have."""
    if getattr(spark, "started", True) is False:
        return max(2, os.cpu_count() or 2)
    return max(2, int(spark.conf.get("spark.sql.shuffle.partitions") or 2))


def lookup(key, mapping: dict, dtype: str | None = None):
    """A Spark column: ``mapping[key]`` (null for a key ``mapping`` lacks), the mapping inlined in
    the plan as a literal map. For the small per-server, per-tier or per-rule tables a stage joins
    with: a join with a local table is broadcast, and a broadcast costs a Spark job of its own.
    ``key``: a column or column name; values are literals (``F.lit``-able, or Spark columns for
    arrays and structs); ``dtype``: the Spark type of the result when ``mapping`` may be empty."""
    key = F.col(key) if isinstance(key, str) else key
    if not mapping:
        return F.lit(None).cast(dtype) if dtype else F.lit(None)

    def value(v):
        if isinstance(v, Column):
            return v
        return F.lit(v).cast(dtype) if dtype else F.lit(v)

    pairs = [x for k, v in sorted(mapping.items()) for x in (F.lit(k), value(v))]
    return F.create_map(*pairs)[key]
