"""The run state on disk and in Spark: one parquet directory per tier, read and written whole.

``WORK/state/<step>/tier=T/`` (``tier=`` + the percent-escaped tier name, as Spark names a
partition directory) holds one tier's rows of :data:`segment_balancer.planner.runstate.STATE_COLUMNS`
but ``tier``. Spark tasks read and write a tier's directory with pyarrow (:func:`read_tier_state`,
:func:`write_tier_state`) straight from the work directory; the driver reads the whole state as a
Spark DataFrame (:meth:`segment_balancer.spark.workdir.Run.state`). ``prepare`` builds the first
state with :func:`initial_state`; stage 12 counts replicas with :func:`replica_tally`.
"""

from __future__ import annotations

import pandas as pd

from segment_balancer.planner.runstate import STATE_COLUMNS, STATE_FIELDS, state_frame

INITIAL_STATE_DIR = "state/00_prepare"
"""Where ``prepare`` writes the state at the start of the run, relative to the work directory."""
STATE_SCHEMA = ", ".join(f"`{n}` {t}" for n, t in STATE_FIELDS)
"""Spark schema of the whole state (every tier, with ``tier``)."""
TIER_FILE_SCHEMA = ", ".join(f"`{n}` {t}" for n, t in STATE_FIELDS if n != "tier")
"""Spark schema of one tier's state directory (``tier=T/``): the state's columns but ``tier``,
which the directory names."""

_ARROW_TYPES = {"string": "string", "long": "int64", "int": "int32", "boolean": "bool_", "double": "float64"}


def arrow_schema(fields):
    """The pyarrow schema of ``fields`` ((name, Spark type) pairs)."""
    import pyarrow as pa

    return pa.schema([(n, getattr(pa, _ARROW_TYPES[t])()) for n, t in fields])


def tier_dir_name(tier: str) -> str:
    """``tier=<T>`` with ``T`` percent-escaped, as Spark names a partition directory."""
    from urllib.parse import quote

    return "tier=" + quote(tier, safe="")


def tier_of_dir(name: str) -> str:
    """Inverse of :func:`tier_dir_name` (also reads Spark's escaping)."""
    from urllib.parse import unquote

    return unquote(name[len("tier="):])


def initial_state_dirs(work) -> dict[str, str]:
    """``{tier: directory}`` (relative to the work directory ``work``, a local path) of the state
    ``prepare`` wrote (:data:`INITIAL_STATE_DIR`)."""
    from pathlib import Path

    root = Path(work) / INITIAL_STATE_DIR
    return {tier_of_dir(p.name): f"{INITIAL_STATE_DIR}/{p.name}"
            for p in sorted(root.iterdir()) if p.is_dir() and p.name.startswith("tier=")}


def read_tier_state(fs, path: str) -> pd.DataFrame:
    """One tier's state rows (pandas, ``STATE_COLUMNS`` but ``tier``) from the directory ``path``
    of filesystem ``fs`` (pyarrow), whoever wrote it (Spark's parts or :func:`write_tier_state`)."""
    import pyarrow.dataset as ds

    schema = arrow_schema([f for f in STATE_FIELDS if f[0] != "tier"])
    return ds.dataset(path, format="parquet", filesystem=fs, schema=schema).to_table().to_pandas()


def write_tier_state(fs, path: str, rows: pd.DataFrame) -> None:
    """Write one tier's state rows as the directory ``path`` (one parquet file), replacing it:
    written aside, then moved into place."""
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyarrow.fs import FileType

    fields = [f for f in STATE_FIELDS if f[0] != "tier"]
    frame = state_frame(rows)[[n for n, _ in fields]]
    table = pa.Table.from_pandas(frame, schema=arrow_schema(fields), preserve_index=False)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    fs.create_dir(tmp, recursive=True)
    pq.write_table(table, f"{tmp}/part-00000.parquet", filesystem=fs)
    if fs.get_file_info(path).type != FileType.NotFound:
        fs.delete_dir(path)
    fs.move(tmp, path)


# ---- Spark side -------------------------------------------------------------------------------
def initial_state(segments, replicas, targets, servers_pdf):
    """The state at the start of the run (Spark DataFrame of ``STATE_COLUMNS``) from the prepared
    tables: replica rows for every served or queued replica, segment rows for every used segment
    in every tier where it has a target or a replica, and for broadcast segments in every tier."""
    from pyspark.sql import functions as F

    attrs = segments.select("segment_id", "idx", "datasource", "start_ms", "end_ms", "size_bytes", "rule_kind", "required")
    rep = replicas.select(
        "tier", F.lit("replica").alias("kind"), F.coalesce("idx", F.lit(-1).cast("long")).alias("idx"), "segment_id",
        "server", "served", F.when(F.col("queued_load"), F.col("queue_type")).alias("load_type"),
        F.col("queued_drop").alias("dropping")).join(attrs.drop("idx", "rule_kind", "required"), "segment_id")
    used = attrs.filter("idx is not null")
    tiers = F.array(*[F.lit(t) for t in sorted(set(servers_pdf["tier"]))]) if len(servers_pdf) else F.array().cast("array<string>")
    pairs = (targets.select("idx", "tier").unionByName(replicas.filter("idx is not null").select("idx", "tier"))
             .unionByName(used.filter("rule_kind = 'broadcast'").select("idx", F.explode(tiers).alias("tier")))
             .distinct())
    seg = (pairs.join(targets.select("idx", "tier", "target", "tier_pos"), ["idx", "tier"], "left")
           .join(used, "idx")
           .select("tier", F.lit("segment").alias("kind"), "idx", "segment_id", "datasource", "start_ms", "end_ms",
                   "size_bytes", F.coalesce("target", F.lit(0)).alias("target"), F.coalesce("tier_pos", F.lit(0)).alias("tier_pos"),
                   "rule_kind", "required"))
    return conform(rep).unionByName(conform(seg))


def conform(df, fields=STATE_FIELDS):
    """``df`` with exactly the columns of ``fields`` ((name, Spark type) pairs, default the state's;
    missing ones null), cast to their types."""
    from pyspark.sql import functions as F

    cols = []
    for name, dtype in fields:
        col = F.col(name) if name in df.columns else F.lit(None)
        cols.append(col.cast(dtype).alias(name))
    return df.select(*cols)


def replica_tally(state):
    """Per (``idx``, ``tier``) of used load-rule segments in ``state`` (Spark DataFrame of
    ``STATE_COLUMNS``): ``target``, ``count`` (servers holding it: serving with no drop, or
    loading), ``loaded`` (servers serving it with no drop, or only a dependent one, counted where the
    target is above 0), ``droppable`` (servers serving it with no drop: stage 12's candidates) and
    ``required`` (ALGORITHM.md "Terms", "Availability"); a Spark DataFrame."""
    from pyspark.sql import functions as F

    rep = state.filter("kind = 'replica' and idx >= 0")
    holds = ((F.col("served") | F.col("load_type").isNotNull()) & ~F.col("dropping")).cast("int")
    # loaded: serving with no drop, or only a dependent one (it goes after its replacement loaded)
    serving = (F.col("served") & (~F.col("dropping") | F.coalesce(F.col("drop_dependent"), F.lit(False)))).cast("int")
    droppable = (F.col("served") & ~F.col("dropping")).cast("int")
    per = rep.groupBy("idx", "tier").agg(F.sum(holds).alias("count"), F.sum(serving).alias("serving"),
                                         F.sum(droppable).alias("droppable"))
    seg = state.filter("kind = 'segment' and rule_kind = 'load'").select("idx", "tier", "target", "required")
    return (seg.join(per, ["idx", "tier"], "left").fillna({"count": 0, "serving": 0, "droppable": 0})
            .withColumn("loaded", F.when(F.col("target") > 0, F.col("serving")).otherwise(0)).drop("serving"))
