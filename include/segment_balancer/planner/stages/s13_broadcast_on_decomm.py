"""Stage 13: decommissioning servers that hold only broadcast segments drop them all
(ALGORITHM.md stage 13; seed 000 stage 13).

Reads the run state only (no groups). Unlimited (drops take no load queue).
"""

from __future__ import annotations

from pathlib import Path

from segment_balancer.spark.workdir import OUT_FIELDS, Run
from segment_balancer.planner.runstate import conform
from segment_balancer.spark.tierpass import commit_with_drops

STAGE = 13
READS = WRITES = ()


def idle(groups, work: Path) -> bool:
    """True when no server holds only broadcast segments while decommissioning
    (``prepared/servers.parquet``'s ``broadcast_only``): nothing to drop."""
    import pyarrow.parquet as pq

    servers = pq.read_table(Path(work) / "prepared" / "servers.parquet", columns=["broadcast_only"])
    return not any(servers.column("broadcast_only").to_pylist())


def stage(run: Run, groups) -> None:
    """Run stage 13 (``groups`` unchanged)."""
    from pyspark.sql import functions as F

    only = run.servers_pdf[run.servers_pdf["broadcast_only"]]["server"].tolist()
    if not only:
        return
    rows = run.state().filter("kind = 'replica' and idx >= 0 and served and not dropping").filter(F.col("server").isin(only))
    ops = conform(rows.select(
        F.lit("op").alias("kind"), F.lit("DROP").alias("action"), "idx", "segment_id", "datasource", "tier", "server",
        "size_bytes", F.lit("broadcast_on_decommissioning").alias("reason"), F.lit(0).cast("long").alias("o1"),
        F.col("server").alias("o2"), F.col("idx").cast("double").alias("o3")), OUT_FIELDS)
    commit_with_drops(run, STAGE, "broadcast_on_decommissioning", ops, run.state_dirs())
