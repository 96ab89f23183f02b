"""Stage 12 in Spark: what no rule wants any more, over the whole run state (ALGORITHM.md stage 12
and "Availability"; seed 000 stage 12).

Task functions through :func:`~segment_balancer.spark.session.run_tasks` (each call one Spark job,
or none on the driver of a small run), reading and writing with pyarrow; the driver passes paths and
gets bitmaps and tier names back, never rows:

1. one task per tier (``first``) counts replicas per segment from the tier's state and
   writes the tier's everywhere-drops (every served replica of a drop-rule, unused or overshadowed
   segment that no longer waits) and the served replicas of the overshadowed segments that still
   wait, and returns the segments overreplicated in the tier (a bitmap);
2. when some segment is, one task per tier writes the replica tally (``count``, ``loaded``,
   ``droppable``, ``target``, ``required``) of those segments only, and one task (:func:`_over`)
   reads every tier's tally, keeps the segments whose total exceeds their total target
   (``over.parquet``, partitioned by tier) and returns the tiers with excess and the groups of
   tiers that some segment's drops couple
   (:func:`segment_balancer.planner.kernels.unload.couples_tiers`, usually none);
3. one task per tier, or per coupled group, decides the excess drops against the stage's own
   running projection (:func:`segment_balancer.planner.kernels.unload.unload_tiers`);
4. one task (:func:`_output`) writes the stage's output once (``out.parquet``: the excess drops,
   the everywhere-drops, the ``waiting`` decisions), which the driver numbers into the op log: the
   drops count from there on.

Each file a task writes whole is written aside and moved into place by the driver.

The stage itself is :mod:`segment_balancer.planner.stages.s12_unload`.
"""

from __future__ import annotations

import json
import logging

import numpy as np

from segment_balancer.common.files import filesystem, replace_path, sibling_tmp
from segment_balancer.planner.kernels import unload
from segment_balancer.planner.runstate import FATES, NO_LOAD, RULE_CODES, OpSink
from segment_balancer.spark.tierpass import _clear, kernel_pass, pass_dir, write_out
from segment_balancer.spark.workdir import OUT_FIELDS, Run, out_frame, output_rel, read_output

log = logging.getLogger(__name__)

STAGE = 12
OVER_FIELDS = [
    ("idx", "long"),
    ("target", "int"),
    ("count", "long"),
    ("cap", "long"),
    ("excess", "long"),
    ("loaded", "long"),
    ("required", "int"),
    ("counts", "string"),
    ("tier", "string"),
]
"""The overreplicated (segment, tier) pairs stage 12 decides on (``passes/12_unload/over.parquet``,
partitioned by tier): ``idx`` (the segment's code), ``cap`` = min(count − target, holders serving
it with no drop); ``excess``, ``loaded``, ``required`` of the segment; ``counts``: JSON
``{tier: [target, count]}`` of every tier of the segment, by tier."""
_TALLY_FIELDS = [
    ("idx", "long"),
    ("tier", "string"),
    ("target", "int"),
    ("count", "long"),
    ("loaded", "long"),
    ("droppable", "long"),
    ("required", "int"),
]
"""A tier's replica tally of a segment (ALGORITHM.md "Terms", "Availability"): ``count`` (servers
holding it: serving with no drop, or loading), ``loaded`` (serving it with no drop or only a
dependent one, where the target is above 0), ``droppable`` (serving it with no drop)."""
_WAITING_FIELDS = [("idx", "long"), ("segment_id", "string"), ("server", "string")]
"""A served replica (no drop) of an overshadowed segment that waits (``FATES`` ``waiting``)."""


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
        write_out(fs, f"{base}/{pdir}/everywhere/{_name(tier)}.parquet", out_frame(OpSink(), rows))
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
        over_path = run.work / over_rel
        aside = str(sibling_tmp(over_path).relative_to(run.work))
        ((over_tiers, coupled),) = run_tasks(run.spark, [aside], lambda rel: _over(work, pdir, rel))
        replace_path(run.work / aside, over_path)
        if over_tiers:
            _excess(run, over_rel, over_tiers, coupled)
    rel = output_rel(STAGE, "unload")
    aside = str(sibling_tmp(run.work / rel).relative_to(run.work))
    run_tasks(run.spark, [aside], lambda out: _output(work, pdir, out, bool(tiers), bool(over_tiers)))
    replace_path(run.work / aside, run.work / rel)
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


def _over(work: str, pdir: str, out_rel: str) -> tuple[list[str], list[list[str]]]:
    """Stage 12's overreplicated (segment, tier) pairs from the replica tallies the tier tasks
    wrote (``pdir/tally``): the segments whose count summed over their tiers exceeds their target
    summed over them, one :data:`OVER_FIELDS` row per tier where the count exceeds the target,
    written with pyarrow under ``out_rel`` (relative to the work directory ``work``), partitioned
    by tier (``tier=<T>`` directories, as :func:`~segment_balancer.spark.state_store.tier_dir_name`
    names them). A task function (one task sees every tier's rows of a segment). Returns the tiers
    with such rows (sorted) and the distinct sorted tier lists some segment's drops couple
    (:func:`~segment_balancer.planner.kernels.unload.couples_tiers`)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from segment_balancer.spark.state_store import arrow_schema

    fs, base = filesystem(work)
    tally = ds.dataset(
        f"{base}/{pdir}/tally", format="parquet", filesystem=fs, schema=arrow_schema(_TALLY_FIELDS)
    ).to_table()
    totals = tally.group_by("idx").aggregate([("count", "sum"), ("target", "sum"), ("loaded", "sum")])
    totals = totals.filter(pc.greater(totals["count_sum"], totals["target_sum"]))
    rows = (
        tally.join(totals, "idx", join_type="inner").sort_by([("idx", "ascending"), ("tier", "ascending")]).to_pydict()
    )
    counts: dict[int, dict[str, list[int]]] = {}
    for idx, tier, target, count in zip(rows["idx"], rows["tier"], rows["target"], rows["count"]):
        counts.setdefault(idx, {})[tier] = [target, count]
    text = {idx: json.dumps(c, separators=(",", ":"), ensure_ascii=False) for idx, c in counts.items()}
    over: dict[str, list] = {name: [] for name, _ in OVER_FIELDS}
    for k in (k for k, (t, c) in enumerate(zip(rows["target"], rows["count"])) if c > t):
        idx, count, target = rows["idx"][k], rows["count"][k], rows["target"][k]
        over["idx"].append(idx)
        over["target"].append(target)
        over["count"].append(count)
        over["cap"].append(min(count - target, rows["droppable"][k]))
        over["excess"].append(rows["count_sum"][k] - rows["target_sum"][k])
        over["loaded"].append(rows["loaded_sum"][k])
        over["required"].append(rows["required"][k])
        over["counts"].append(text[idx])
        over["tier"].append(rows["tier"][k])
    table = pa.table(over, schema=arrow_schema(OVER_FIELDS))
    fs.create_dir(f"{base}/{out_rel}", recursive=True)
    for tier in sorted(set(over["tier"])):
        _write_table(
            fs,
            f"{base}/{out_rel}/{_name(tier)}/part-00000.parquet",
            table.filter(pc.equal(table["tier"], tier)).drop_columns(["tier"]),
            arrow_schema(OVER_FIELDS[:-1]),
        )
    caps: dict[int, dict[str, tuple[int, int]]] = {}
    first: dict[int, tuple[int, int, int]] = {}
    for idx, tier, target, cap, excess, loaded, required in zip(
        over["idx"], over["tier"], over["target"], over["cap"], over["excess"], over["loaded"], over["required"]
    ):
        caps.setdefault(idx, {})[tier] = (target, cap)
        first.setdefault(idx, (excess, loaded, required or 0))
    coupled = {tuple(sorted(c)) for idx, c in caps.items() if len(c) > 1 and unload.couples_tiers(*first[idx], c)}
    return sorted(set(over["tier"])), [list(t) for t in sorted(coupled)]


def _task_groups(tiers: list[str], coupled: list[list[str]]) -> list[list[str]]:
    """The tiers of each task of stage 12's excess pass: one per tier, except that tiers some
    segment's drops couple (``coupled``, from :func:`_over`) share a task (their union, closed
    over chains)."""
    root = {t: t for t in tiers}

    def find(t: str) -> str:
        while root[t] != t:
            t = root[t]
        return t

    for first, *rest in coupled:
        for t in rest:
            root[find(t)] = find(first)
    groups: dict[str, list[str]] = {}
    for t in tiers:
        groups.setdefault(find(t), []).append(t)
    return sorted(groups.values())


def _excess(run: Run, over_rel: str, tiers: list[str], coupled: list[list[str]]) -> None:
    """Excess drops (and ``deferred`` and ``decision`` rows) of the overreplicated segments, written
    to the kernel pass's task files (``passes/12_unload/tasks``):
    :func:`~segment_balancer.planner.kernels.unload.unload_tiers` in one task per tier or coupled
    group of tiers (:func:`_task_groups`), each reading its tiers' rows of ``over_rel`` with pyarrow."""
    work = run.work_uri
    groups = _task_groups(tiers, coupled)
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

    kernel_pass(run, STAGE, "unload", tiers, body, keep_state=False, groups=groups)


def _output(work: str, pdir: str, out_rel: str, tiers: bool, excess: bool) -> None:
    """Stage 12's output (:data:`~segment_balancer.spark.workdir.OUT_FIELDS` rows), one parquet
    file written with pyarrow at ``out_rel`` (relative to the work directory ``work``): the
    excess pass's ``op``, ``deferred`` and ``decision`` rows (``excess``), then the tier tasks'
    everywhere-drops, then :func:`_waiting`'s decisions (both when there were ``tiers``). A task
    function: the driver holds none of these rows."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from segment_balancer.spark.state_store import arrow_schema

    fs, base = filesystem(work)
    schema = arrow_schema(OUT_FIELDS)

    def read(rel, fields_schema, **kwargs):
        return ds.dataset(f"{base}/{pdir}/{rel}", format="parquet", filesystem=fs, schema=fields_schema).to_table(
            **kwargs
        )

    parts = []
    if excess:
        parts.append(read("tasks", schema, filter=ds.field("kind").isin(["op", "deferred", "decision"])))
    if tiers:
        parts.append(read("everywhere", schema))
        parts.append(_waiting(read("waiting", arrow_schema(_WAITING_FIELDS))))
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    fs.create_dir(f"{base}/{out_rel}".rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, f"{base}/{out_rel}", filesystem=fs)


def _waiting(rows):
    """``decision`` rows (outcome ``waiting``, the servers in ``detail``) of the overshadowed
    segments stage 12 keeps because a segment overshadowing them is served nowhere yet
    (ALGORITHM.md stage 12), one per segment still served, by segment id (a pyarrow Table of
    :data:`~segment_balancer.spark.workdir.OUT_FIELDS`), from their served replicas (``rows``:
    the :data:`_WAITING_FIELDS` rows the tier tasks wrote)."""
    import pyarrow as pa

    from segment_balancer.spark.state_store import conform_arrow

    per: dict[str, tuple[int, list[str]]] = {}
    for idx, sid, server in zip(*(rows.column(c).to_pylist() for c in ("idx", "segment_id", "server"))):
        low, servers = per.get(sid, (idx, []))
        servers.append(server)
        per[sid] = (min(low, idx), servers)
    ids = sorted(per)
    table = pa.table(
        {
            "kind": ["decision"] * len(ids),
            "idx": pa.array([per[s][0] for s in ids], pa.int64()),
            "segment_id": pa.array(ids, pa.string()),
            "reason": ["waiting"] * len(ids),
            "detail": [
                json.dumps({"servers": sorted(per[s][1])}, separators=(",", ":"), ensure_ascii=False) for s in ids
            ],
        }
    )
    return conform_arrow(table, OUT_FIELDS)
