"""The state of one run between stages: prepared tables, the op log and its bookkeeping.

A stage sees the snapshot plus every operation scheduled by the stages before it. The op log is
``WORK/ops/*.parquet`` (one file per step) with a manifest that keeps the order and the count, so
``op_id`` stays global and increasing in scheduling order.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from .engine.state import QUEUE_TYPES, ServerHolder, StageLimit
from .io import write_json_atomic, write_parquet_atomic

log = logging.getLogger(__name__)

KERNEL_SCHEMA = (
    "kind string, action string, queue_type string, idx long, segment_id string, datasource string, "
    "tier string, server string, size_bytes long, reason string, dep_server string, "
    "o1 long, o2 string, o3 double, `group` string"
)
OPS_COLUMNS = ["op_id", "stage", "action", "queue_type", "idx", "segment_id", "datasource", "tier",
               "server", "size_bytes", "depends_on", "reason"]


def num_best_function(cfg: dict):
    """``B(numServersInTier, targetReplicants)`` from the effective config dict of ``meta.json``:
    clamp(floor(f(n, t)), t, n) (ALGORITHM.md "Best servers"). Picklable inputs, so executors
    rebuild it from the dict."""
    from .config import LOG_BASE_KEY, build_config

    keys = ("numBestServersChoosingFunction", LOG_BASE_KEY)
    return build_config({k: cfg[k] for k in keys if k in cfg}).num_best_servers


def stage_limit_entry(limit) -> dict:
    """``meta.json`` form of a :class:`segment_balancer.config.StageLimit`."""
    counted = limit.counted
    return {"queue_type": None if counted in (None, "all") else counted, "limit": limit.cap, "total": limit.total_cap}


def sink_frame(sink) -> pd.DataFrame:
    """The ops and memberships of an :class:`OpSink` as one pandas frame of ``KERNEL_SCHEMA``."""
    rows = [{"kind": "op", "action": o.action, "queue_type": o.queue_type, "idx": o.idx,
             "segment_id": o.segment_id, "datasource": o.datasource, "tier": o.tier, "server": o.server,
             "size_bytes": o.size_bytes, "reason": o.reason, "dep_server": o.dep_server,
             "o1": int(o.order[0]), "o2": str(o.order[1]), "o3": float(o.order[2]), "group": None}
            for o in sink.ops]
    rows += [{"kind": "member", "idx": idx, "group": g, "size_bytes": 0, "o1": 0, "o2": "", "o3": 0.0}
             for idx, g in sink.members]
    rows += [{"kind": "deferred", "idx": idx, "segment_id": sid, "group": None, "size_bytes": 0, "o1": n, "o2": "", "o3": 0.0}
             for idx, sid, n in sink.deferred]
    cols = ["kind", "action", "queue_type", "idx", "segment_id", "datasource", "tier", "server", "size_bytes",
            "reason", "dep_server", "o1", "o2", "o3", "group"]
    frame = pd.DataFrame(rows, columns=cols)
    frame = frame.astype({"idx": "int64", "o1": "int64", "o3": "float64", "size_bytes": "int64"})
    strings = [c for c in cols if c not in ("idx", "o1", "o3", "size_bytes")]
    frame[strings] = frame[strings].astype(object).where(frame[strings].notna(), None)
    return frame


class Run:
    """One run's work directory, as the stages see it.

    ``spark``: the session; ``work``: the run's work directory (prepared tables under
    ``work/prepared``); ``meta``: ``prepared/meta.json``.
    """

    def __init__(self, spark, work: Path):
        self.spark = spark
        self.work = Path(work)
        self.prepared = self.work / "prepared"
        self.meta = json.loads((self.prepared / "meta.json").read_text())
        self.servers_pdf = pd.read_parquet(self.prepared / "servers.parquet")
        self._tables: dict = {}

    # ---- tables -------------------------------------------------------------------------------
    def table(self, name: str):
        """A prepared table as a Spark DataFrame (``segments``, ``replicas``, ``targets``, ``rankings``)."""
        if name not in self._tables:
            self._tables[name] = self.spark.read.parquet(str(self.prepared / f"{name}.parquet"))
        return self._tables[name]

    def servers_df(self):
        return self.spark.createDataFrame(self.servers_pdf)

    @property
    def config(self) -> dict:
        return self.meta["config"]

    def limit(self, stage: int) -> StageLimit:
        return StageLimit.from_meta(self.meta["stage_limits"].get(str(stage)))

    def num_best(self):
        """``B(numServersInTier, targetReplicants)``: clamp(floor(f), target, servers)."""
        

        return num_best_function(self.config)

    # ---- op log -------------------------------------------------------------------------------
    @property
    def _manifest_path(self) -> Path:
        return self.work / "ops" / "manifest.json"

    def manifest(self) -> dict:
        if self._manifest_path.exists():
            return json.loads(self._manifest_path.read_text())
        return {"files": [], "count": 0, "steps": []}

    def reset_from(self, stage: int) -> None:
        """Forget the ops of ``stage`` and later (a retried application starts clean)."""
        manifest = self.manifest()
        keep = [s for s in manifest["steps"] if int(s["stage"]) < stage]
        if len(keep) == len(manifest["steps"]):
            return
        files = [f"stage_{s['stage']:02d}_{s['step']}.parquet" for s in keep]
        write_json_atomic({"files": files, "count": sum(int(s["ops"]) for s in keep), "steps": keep}, self._manifest_path)

    def step_facts(self) -> list[dict]:
        """``{"stage", "step", **facts}`` of every step so far that reported facts."""
        return [{"stage": s["stage"], "step": s["step"], **s["facts"]} for s in self.manifest()["steps"] if s.get("facts")]

    def ops(self):
        """Every op scheduled so far (Spark DataFrame of ``OPS_COLUMNS``), or None."""
        files = self.manifest()["files"]
        if not files:
            return None
        return self.spark.read.parquet(*[str(self.work / "ops" / f) for f in files])

    def server_holders(self) -> dict[str, ServerHolder]:
        """Every historical server with its projected size and loads per type, after all ops so far.

        Per-server aggregates only: the driver never sees per-segment rows.
        """
        from pyspark.sql import functions as F

        replicas = self.table("replicas")
        queued = replicas.filter("queued_load").select("server", "queue_type", "segment_id")
        sized = queued.join(self.table("segments").select("segment_id", "size_bytes"), "segment_id").select(
            "server", "queue_type", "size_bytes")
        ops = self.ops()
        sized = sized.withColumn("scheduled", F.lit(False))
        if ops is not None:
            sized = sized.unionByName(ops.filter("action = 'LOAD'").select(
                "server", "queue_type", "size_bytes", F.lit(True).alias("scheduled")))
        agg = sized.groupBy("server", "queue_type", "scheduled").agg(
            F.count("size_bytes").alias("n"), F.sum("size_bytes").alias("bytes")).collect()
        loads: dict = {}
        ops_bytes: dict = {}
        for r in agg:
            loads.setdefault(r["server"], {}).setdefault(r["queue_type"], 0)
            loads[r["server"]][r["queue_type"]] += int(r["n"])
            if r["scheduled"]:
                ops_bytes[r["server"]] = ops_bytes.get(r["server"], 0) + int(r["bytes"] or 0)
        out = {}
        for row in self.servers_pdf.to_dict("records"):
            counts = loads.get(row["server"], {})
            out[row["server"]] = ServerHolder(
                server=row["server"], tier=row["tier"], max_size=int(row["max_size"]),
                projected_size=int(row["projected_size"]) + int(ops_bytes.get(row["server"], 0) or 0),
                decommissioning=bool(row["decommissioning"]), priority=int(row["priority"]),
                loads={t: int(counts.get(t, 0) or 0) for t in QUEUE_TYPES})
        return out

    def write_ops(self, stage: int, step: str, kernel_out, facts: dict | None = None) -> int:
        """Give the ops of one step their global ``op_id`` (in ``o1, o2, o3`` order), resolve
        ``depends_on`` and append them to the op log. ``facts``: counts the step reports (e.g.
        deferred drops), kept with the step in the manifest for the summary. Returns the number of
        ops written."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        manifest = self.manifest()
        offset = manifest["count"]
        ops = kernel_out.filter("kind = 'op'").drop("kind", "group")
        # The op log of one step is bounded by M x servers, so one ordered window is fine here.
        order = Window.orderBy("o1", "o2", "o3", "action", "server")
        with_id = ops.withColumn("op_id", (F.row_number().over(order) - 1 + F.lit(offset)).cast("long"))
        loads = with_id.filter("action = 'LOAD'").select("idx", F.col("server").alias("dep_server"), F.col("op_id").alias("depends_on"))
        final = (with_id.join(loads, ["idx", "dep_server"], "left")
                 .withColumn("stage", F.lit(stage).cast("int")).select(*OPS_COLUMNS).orderBy("op_id"))
        name = f"stage_{stage:02d}_{step}.parquet"
        write_parquet_atomic(final.coalesce(1), self.work / "ops" / name)
        n = self.spark.read.parquet(str(self.work / "ops" / name)).count()
        manifest["files"].append(name)
        manifest["count"] = offset + n
        manifest["steps"].append({"stage": stage, "step": step, "ops": n, **({"facts": facts} if facts else {})})
        write_json_atomic(manifest, self._manifest_path)
        log.info("stage %d step %s: %d operations", stage, step, n)
        return n
