"""Stage 12 in Spark: what no rule wants any more, over the whole run state (ALGORITHM.md stage 12
and "Availability"; seed 000 stage 12).

Spark jobs, none of which moves the run state as rows:

1. one task per tier (:func:`_tier_pass`) counts replicas per segment from the tier's state and
   writes the tier's everywhere-drops (every served replica of a drop-rule, unused or overshadowed
   segment that no longer waits) and the served replicas of the overshadowed segments that still
   wait, and returns the segments overreplicated in the tier (a bitmap);
2. when some segment is, one task per tier writes the replica tally (``count``, ``loaded``,
   ``droppable``, ``target``, ``required``) of those segments only, and Spark SQL over these few
   rows finds the segments whose total exceeds their total target (``over.parquet``, partitioned
   by tier);
3. when more than one tier has excess, the groups of tiers that some segment's drops couple
   (:func:`segment_balancer.planner.kernels.unload.couples_tiers`, usually none);
4. one task per tier, or per coupled group, decides the excess drops against the stage's own
   running projection (:func:`segment_balancer.planner.kernels.unload.unload_tiers`);
5. the stage's output written once (the excess drops, the everywhere-drops, the ``waiting``
   decisions) and numbered into the op log: the drops count from there on.

The stage itself is :mod:`segment_balancer.planner.stages.s12_unload`.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import unquote

import numpy as np

from segment_balancer.common.files import filesystem, write_partitioned_atomic
from segment_balancer.planner.kernels import unload
from segment_balancer.planner.runstate import FATES, NO_LOAD, RULE_CODES, OpSink
from segment_balancer.spark.state_store import conform
from segment_balancer.spark.tierpass import _clear, _write_out, kernel_pass, pass_dir
from segment_balancer.spark.workdir import OUT_FIELDS, OUT_SCHEMA, Run, out_frame, read_output

log = logging.getLogger(__name__)

STAGE = 12
OVER_SCHEMA = (
    "idx long, target int, count long, cap long, excess long, loaded long, required int, counts string, tier string"
)
"""The overreplicated (segment, tier) pairs stage 12 decides on (``passes/12_unload/over.parquet``,
partitioned by tier): ``cap`` = min(count − target, holders serving it with no drop); ``excess``,
``loaded``, ``required`` of the segment; ``counts``: JSON ``{tier: [target, count]}`` of every tier
of the segment."""
TALLY_SCHEMA = "idx long, tier string, target int, count long, loaded long, droppable long, required int"
"""A tier's replica tally of a segment (ALGORITHM.md "Terms", "Availability"): ``count`` (servers
holding it: serving with no drop, or loading), ``loaded`` (serving it with no drop or only a
dependent one, where the target is above 0), ``droppable`` (serving it with no drop)."""
WAITING_SCHEMA = "idx long, segment_id string, server string"
"""A served replica (no drop) of an overshadowed segment that waits (``FATES`` ``waiting``)."""
_TALLY_FIELDS = [
    ("idx", "long"),
    ("tier", "string"),
    ("target", "int"),
    ("count", "long"),
    ("loaded", "long"),
    ("droppable", "long"),
    ("required", "int"),
]
_WAITING_FIELDS = [("idx", "long"), ("segment_id", "string"), ("server", "string")]


def tally(state, table) -> dict[str, np.ndarray]:
    """The replica tally of every used load-rule segment of one tier's :class:`TierState`:
    ``code``, ``target``, ``count``, ``loaded``, ``droppable`` (int64 arrays, by segment row)."""
    n = len(state.seg_code)
    pos = np.searchsorted(state.seg_code, state.rep_code)
    mine = pos < n
    mine[mine] = state.seg_code[pos[mine]] == state.rep_code[mine]
    held = (state.served | (state.load != NO_LOAD)) & ~state.dropping
    serving = state.served & (~state.dropping | state.dependent)
    droppable = state.served & ~state.dropping

    def per(values):
        return np.bincount(pos[mine], weights=values[mine], minlength=n).astype(np.int64)

    code = state.seg_code
    load = (code < table.n_used) & (table.rule[code] == RULE_CODES["load"])
    target = state.target.astype(np.int64)
    loaded = np.where(target > 0, per(serving), 0)
    return {
        "code": code[load],
        "target": target[load],
        "count": per(held)[load],
        "loaded": loaded[load],
        "droppable": per(droppable)[load],
    }


def unload_pass(run: Run) -> None:
    """Stage 12 on the current run state of ``run``, committed as its step ``unload``."""
    import pyarrow as pa
    from pyroaring import BitMap
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from segment_balancer.spark.session import run_tasks
    from segment_balancer.spark.state_store import arrow_schema, read_segment_table, read_tier

    pdir = pass_dir(STAGE, "unload")
    _clear(run, pdir)
    spec, work, names = run.state_spec(), run.work_uri, run.server_names
    tiers = sorted(spec["start"])

    def first(tier):
        fs, base = filesystem(work)
        table, state = read_segment_table(work), read_tier(work, spec, tier, names)
        tal = tally(state, table)
        over = BitMap(tal["code"][tal["count"] > tal["target"]].astype(np.uint32))
        serving = state.served & ~state.dropping
        fate = table.fate[state.rep_code]
        drop = serving & np.isin(fate, [FATES.index(r) for r in ("drop_rule", "unused", "overshadowed")])
        codes, servers = state.rep_code[drop], state.rep_server[drop]
        ids = table.segment_ids(codes)
        idx = table.idx_of(codes)
        server_names = [names[s] for s in servers]
        rows = [
            {
                "kind": "op",
                "action": "DROP",
                "idx": int(i),
                "code": int(c),
                "segment_id": sid,
                "datasource": table.datasource_of(c),
                "tier": tier,
                "server": srv,
                "size_bytes": int(table.size_bytes[c]),
                "reason": FATES[int(table.fate[c])],
                "o1": int(i) if i >= 0 else 1 << 62,
                "o2": f"{sid}|{srv}",
                "o3": 0.0,
            }
            for i, c, sid, srv in zip(idx, codes, ids, server_names)
        ]
        _write_out(fs, f"{base}/{pdir}/everywhere/{_name(tier)}.parquet", out_frame(OpSink(), rows))
        wait = serving & (fate == FATES.index("waiting"))
        wait_codes = state.rep_code[wait]
        pa_rows = pa.table(
            {
                "idx": pa.array(table.idx_of(wait_codes), pa.int64()),
                "segment_id": pa.array(table.segment_ids(wait_codes), pa.string()),
                "server": pa.array([names[s] for s in state.rep_server[wait]], pa.string()),
            }
        )
        _write_table(fs, f"{base}/{pdir}/waiting/{_name(tier)}.parquet", pa_rows, arrow_schema(_WAITING_FIELDS))
        return over.serialize()

    candidates = BitMap()
    for packed in run_tasks(run.spark, tiers, first):
        candidates |= BitMap.deserialize(packed)
    over_tiers: list[str] = []
    over_rel = f"{pdir}/over.parquet"
    if candidates:
        data = candidates.serialize()

        def second(tier):
            fs, base = filesystem(work)
            table, state = read_segment_table(work), read_tier(work, spec, tier, names)
            tal = tally(state, table)
            keep = np.isin(tal["code"], np.array(BitMap.deserialize(data), dtype=np.int64))
            required = table.required[tal["code"][keep]]
            rows = pa.table(
                {
                    "idx": pa.array(tal["code"][keep], pa.int64()),
                    "tier": pa.array([tier] * int(keep.sum()), pa.string()),
                    "target": pa.array(tal["target"][keep].astype(np.int32)),
                    "count": pa.array(tal["count"][keep]),
                    "loaded": pa.array(tal["loaded"][keep]),
                    "droppable": pa.array(tal["droppable"][keep]),
                    "required": pa.array(required.astype(np.int32), mask=required < 0),
                }
            )
            _write_table(fs, f"{base}/{pdir}/tally/{_name(tier)}.parquet", rows, arrow_schema(_TALLY_FIELDS))
            return None

        run_tasks(run.spark, tiers, second)
        w = Window.partitionBy("idx")
        counts = (
            run.spark.read.schema(TALLY_SCHEMA)
            .parquet(f"{work}/{pdir}/tally")
            .withColumn("total_count", F.sum("count").over(w))
            .withColumn("total_target", F.sum("target").over(w))
            .withColumn("loaded", F.sum("loaded").over(w))
            .filter("total_count > total_target")
            .withColumn(
                "counts",
                F.to_json(
                    F.map_from_entries(
                        F.collect_list(F.struct("tier", F.array(F.col("target").cast("long"), F.col("count")))).over(w)
                    )
                ),
            )
        )
        over = counts.filter("count > target").select(
            "idx",
            "target",
            "count",
            F.least(F.col("count") - F.col("target"), F.col("droppable")).alias("cap"),
            (F.col("total_count") - F.col("total_target")).alias("excess"),
            "loaded",
            "required",
            "counts",
            "tier",
        )
        # partitioned by tier: the tiers with excess are its directories (no job to find them)
        write_partitioned_atomic(over, run.work / over_rel, "tier")
        over_tiers = sorted(unquote(p.name.split("=", 1)[1]) for p in (run.work / over_rel).glob("tier=*"))
    if tiers:
        out = conform(run.spark.read.schema(OUT_SCHEMA).parquet(f"{work}/{pdir}/everywhere"), OUT_FIELDS).unionByName(
            _waiting(run, f"{work}/{pdir}/waiting")
        )
    else:  # no tier has a start state (no replica anywhere, no target in a tier with a historical)
        out = run.spark.createDataFrame([], OUT_SCHEMA)
    if over_tiers:
        out = _excess(run, over_rel, over_tiers).unionByName(out)
    rel = run.write_output(STAGE, "unload", out)
    facts = _deferred_facts(run, rel)
    run.write_ops(STAGE, "unload", rel, facts)
    if facts["deferred_drops"]:
        log.info(
            "stage %d: %d drops of %d segments deferred by the availability rule",
            STAGE,
            facts["deferred_drops"],
            facts["deferred_segments"],
        )


def _name(tier: str) -> str:
    from segment_balancer.spark.state_store import tier_dir_name

    return tier_dir_name(tier)


def _write_table(fs, path: str, table, schema) -> None:
    import pyarrow.parquet as pq

    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table.cast(schema), path, filesystem=fs)


def _deferred_facts(run: Run, output: str) -> dict:
    """``deferred_drops``, ``deferred_segments`` and the first five ``deferred_examples`` (segment
    ids) from the ``deferred`` rows of the stage's output (one per segment whose excess drops the
    availability rule held back; ``o1``: how many), read with pyarrow."""
    rows = read_output(run.work_uri, output, ["segment_id", "o1"], "deferred")
    return {
        "deferred_drops": int(sum(x or 0 for x in rows.column("o1").to_pylist())),
        "deferred_segments": rows.num_rows,
        "deferred_examples": sorted(rows.column("segment_id").to_pylist())[:5],
    }


def _task_groups(run: Run, over_rel: str, tiers: list[str]) -> list[list[str]]:
    """The tiers of each Spark task of stage 12: one per tier, except that tiers some segment's
    drops couple (:func:`~segment_balancer.planner.kernels.unload.couples_tiers`) share a task
    (their union, closed over chains). One Spark job, only when more than one tier has excess;
    the driver collects the distinct coupled tier sets, never segments."""
    from pyspark.sql import functions as F

    root = {t: t for t in tiers}

    def find(t: str) -> str:
        while root[t] != t:
            t = root[t]
        return t

    if len(tiers) > 1:

        def coupled(batches):
            import pandas as pd

            for pdf in batches:
                yield pd.DataFrame(
                    {
                        "tiers": [
                            sorted(c["tier"] for c in r["caps"])
                            for r in pdf.to_dict("records")
                            if unload.couples_tiers(
                                int(r["excess"]),
                                int(r["loaded"]),
                                int(r["required"] or 0),
                                {c["tier"]: (int(c["target"]), int(c["cap"])) for c in r["caps"]},
                            )
                        ]
                    },
                    dtype=object,
                )

        per_seg = (
            run.spark.read.schema(OVER_SCHEMA)
            .parquet(f"{run.work_uri}/{over_rel}")
            .groupBy("idx")
            .agg(
                F.first("excess").alias("excess"),
                F.first("loaded").alias("loaded"),
                F.first("required").alias("required"),
                F.collect_list(F.struct("tier", "target", "cap")).alias("caps"),
            )
            .filter(F.size("caps") > 1)
        )
        for row in per_seg.mapInPandas(coupled, "tiers array<string>").distinct().collect():
            first, *rest = row["tiers"]
            for t in rest:
                root[find(t)] = find(first)
    groups: dict[str, list[str]] = {}
    for t in tiers:
        groups.setdefault(find(t), []).append(t)
    return sorted(groups.values())


def _excess(run: Run, over_rel: str, tiers: list[str]):
    """Excess drops (and ``deferred`` rows) of the overreplicated segments, as a Spark DataFrame
    of ``OUT_COLUMNS``: :func:`~segment_balancer.planner.kernels.unload.unload_tiers` in one task
    per tier or coupled group of tiers, each reading its tiers' rows of ``over_rel`` with pyarrow."""
    work = run.work_uri
    groups = _task_groups(run, over_rel, tiers)
    if any(len(g) > 1 for g in groups):
        log.info(
            "stage %d: tiers decided together (a segment's drops depend on the order across them): %s",
            STAGE,
            [g for g in groups if len(g) > 1],
        )

    def body(runs, sink):
        import pyarrow as pa
        import pyarrow.dataset as ds

        fs, base = filesystem(work)
        part = ds.partitioning(pa.schema([("tier", pa.string())]), flavor="hive")
        table = ds.dataset(f"{base}/{over_rel}", format="parquet", filesystem=fs, partitioning=part).to_table(
            filter=ds.field("tier").isin(list(runs)), columns=["idx", "excess", "loaded", "required", "counts"]
        )
        items = {}
        for r in table.to_pylist():
            if r["idx"] not in items:
                items[r["idx"]] = unload.Excess(
                    int(r["idx"]),
                    int(r["excess"]),
                    int(r["loaded"]),
                    int(r["required"] or 0),
                    {t: (int(a), int(b)) for t, (a, b) in json.loads(r["counts"]).items()},
                )
        unload.unload_tiers(runs, items.values(), sink)
        return []

    result = kernel_pass(run, STAGE, "unload", tiers, body, keep_state=False, groups=groups)
    return result.out.filter("kind in ('op', 'deferred', 'decision')")


def _waiting(run: Run, waiting: str):
    """``decision`` rows (outcome ``waiting``, the servers in ``detail``) of the overshadowed
    segments stage 12 keeps because a segment overshadowing them is served nowhere yet
    (ALGORITHM.md stage 12), one per segment still served (Spark DataFrame of ``OUT_COLUMNS``), from
    their served replicas (``waiting``: the files of :data:`WAITING_SCHEMA` rows the tier tasks wrote)."""
    from pyspark.sql import functions as F

    rows = (
        run.spark.read.schema(WAITING_SCHEMA)
        .parquet(waiting)
        .groupBy("segment_id")
        .agg(
            F.min("idx").alias("idx"),
            F.to_json(F.struct(F.array_sort(F.collect_list("server")).alias("servers"))).alias("detail"),
        )
    )
    return conform(
        rows.select(
            F.lit("decision").alias("kind"),
            "idx",
            "segment_id",
            F.lit(None).cast("string").alias("tier"),
            F.lit("waiting").alias("reason"),
            "detail",
        ),
        OUT_FIELDS,
    )
