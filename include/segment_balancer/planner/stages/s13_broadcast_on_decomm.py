"""Stage 13: decommissioning servers that hold only broadcast segments drop them all
(ALGORITHM.md stage 13; seed 000 stage 13).

Reads the run state only (no groups). Unlimited (drops take no load queue).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from segment_balancer.planner.operations import Reason
from segment_balancer.planner.stages.run import StageRun

STAGE = 13
READS = WRITES = ()


def idle(groups, work: Path) -> bool:
    """True when no server holds only broadcast segments while decommissioning
    (``prepared/servers.parquet``'s ``broadcast_only``): nothing to drop."""
    servers = pq.read_table(Path(work) / "prepared" / "servers.parquet", columns=["broadcast_only"])
    return not any(servers.column("broadcast_only").to_pylist())


def stage(run: StageRun, groups) -> None:
    """Run stage 13 (``groups`` unchanged): every used segment that a decommissioning server holding
    only broadcast segments serves is dropped from it."""
    only = run.servers_pdf[run.servers_pdf["broadcast_only"]]["server"].tolist()
    if only:
        run.drop_served(STAGE, "broadcast_on_decommissioning", only, Reason.BROADCAST_ON_DECOMMISSIONING)
