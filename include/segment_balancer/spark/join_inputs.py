"""``prepare``'s join inputs, split by bucket of segment id by task functions.

Three passes of :func:`segment_balancer.spark.session.run_tasks` (Spark jobs, or calls on the
driver for a small run) put the rows of one segment in one place without a Spark shuffle:

1. **split** (:func:`split_task`): one task per part of the timeline table (a datasource's rows
   are in one part, ``spark.used_segments``) writes its segments' join rows per join task, with the
   partial-load outcomes of their shard groups (:func:`partial_frame`), and the used, visible
   segments' sort keys; one task per byte range of the replica file (JSON lines, or a JSON array
   of one object per line; a small gzip file whole, a larger one's plain copy, decompressed first
   by one task: :func:`~segment_balancer.druid.snapshot.lines.decompress_task`) parses its lines
   (:func:`~segment_balancer.druid.snapshot.segment_lines.parse_replica_lines`) and writes the
   rows of historicals per join task, numbered within the range; a JSON array of any other layout
   (one line, pretty-printed) of at most :data:`DOCUMENT_BYTES_AT_MOST` is one task's whole, its
   objects parsed the same way;
2. **index** (:func:`index_task`): one task sorts the sort keys newest first (end, start, id, all
   descending) and writes each segment's index per join task;
3. the join (``spark.join``): one task per group of buckets (bucket modulo the tasks) reads
   its files (:func:`part_dir`, each row with its bucket), makes the replica rows' numbers the
   file's (each range's offset added), orders the rows by bucket as if read bucket by bucket, and
   joins.

A bucket is :func:`buckets_of` (a hash of the segment id that every process computes alike).
A larger replica file of another layout is read by Spark's multi-line JSON reader, whose rows a
Spark job writes per join task (``spark.join``).

Source: ALGORITHM.md "Inputs"; Druid ``sys.server_segments``.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from segment_balancer.common.files import filesystem
from segment_balancer.druid.partial_load import EMPTY_LOAD_FINGERPRINT, SegmentShape
from segment_balancer.druid.snapshot.lines import UTF8_BOM, is_blank, read_range, split_lines
from segment_balancer.druid.snapshot.segment_lines import parse_replica_json, parse_replica_lines

PARTIAL_COLUMNS = {
    "partial_matcher": "string",
    "partial_type": "string",
    "partial_parts": "string",
    "partial_fingerprint": "string",
}
"""A segment's partial load (Druid 38's partial-load rules; ALGORITHM.md "Rules of Druid 38"): the
rule's matcher type, the wrapped load spec's type (``partialProjection``, ``partialClusterGroup``),
the parts it resolves (a JSON list of projection names or cluster-group indices) and Druid's
fingerprint; null for a segment whose rule is no partial load."""


def rules_of(rules: dict):
    """``lookup(datasource)``: the flattened rule list of a datasource (its own rules, then
    ``_default``; ``_default`` alone for a datasource without rules)."""
    flat = {ds: rules.get(ds, []) + rules.get("_default", []) for ds in rules}
    default = rules.get("_default", [])
    return lambda ds: flat.get(ds, default)


SHAPE_COLUMNS = [
    "segment_id",
    "datasource",
    "start_ms",
    "end_ms",
    "version",
    "partition_num",
    "num_core_partitions",
    "projections",
    "cluster_groups",
]
"""The timeline table's columns :func:`partial_frame` decides from: a segment, its shard group and
its shape."""
DOCUMENT_BYTES_AT_MOST = 32 * 1024 * 1024
"""A replica file that is a JSON array neither JSON lines nor one object per line (one line, or
pretty-printed) is parsed whole by one task when it is at most this many bytes (on disk, and
decompressed as its gzip trailer records it): the layout ``document``. A larger one goes to
Spark's multi-line JSON reader."""


def document_layout(path, gzip: bool) -> bool:
    """Whether the replica file ``path`` (not JSON lines, not one object per line) is small enough
    for the layout ``document`` (:data:`DOCUMENT_BYTES_AT_MOST`)."""
    size = os.path.getsize(path)
    if size > DOCUMENT_BYTES_AT_MOST:
        return False
    if not gzip:
        return True
    if size < 4:
        return False
    with open(path, "rb") as handle:
        handle.seek(-4, os.SEEK_END)
        return int.from_bytes(handle.read(4), "little") <= DOCUMENT_BYTES_AT_MOST


SEGS_DIR = "segs"
CANDS_DIR = "cands"
INDEX_DIR = "index"
REPS_DIR = "reps"


def buckets_of(segment_ids, buckets: int) -> np.ndarray:
    """The bucket (int32, 0 … ``buckets`` − 1) of each segment id (a pyarrow string array or a
    sequence of str): pandas' ``hash_array`` (SipHash with a fixed key) of the UTF-8 id, the same
    in every process and run (Python's ``hash`` of a str is salted per process)."""
    ids = segment_ids.to_numpy(zero_copy_only=False) if hasattr(segment_ids, "to_numpy") else segment_ids
    ids = np.asarray(ids, dtype=object)
    if len(ids) == 0:
        return np.zeros(0, np.int32)
    # hash_array's own hashes without the factorizing that only pays off for repeated values; a
    # missing id hashes as its categories give it
    hashes = pd.util.hash_array(ids, categorize=False)
    missing = pd.isna(ids)
    if missing.any():
        hashes[missing] = np.iinfo(np.uint64).max
    return (hashes % np.uint64(buckets)).astype(np.int32)


def part_dir(scratch: str, side: str, part: int) -> str:
    """The directory of one side's files of one join task (``part``) under ``scratch``."""
    return f"{scratch}/{side}/part-{part:05d}"


def write_per_part(fs, scratch: str, side: str, name: str, table, buckets: np.ndarray, parts: int) -> list[int]:
    """Write the rows of ``table`` (with ``buckets``, their buckets, as the int32 column ``bucket``)
    whose join task is ``p`` (bucket modulo ``parts``) to ``part_dir(scratch, side, p)/name``, in
    their order, for each ``p`` present; returns the parts written, sorted. One file per task and
    input rather than per bucket: a small run writes and reads a few files, not hundreds."""
    written = []
    if table.num_rows == 0:
        return written
    buckets = np.asarray(buckets, np.int32)
    if "bucket" not in table.column_names:
        table = table.append_column("bucket", pa.array(buckets, pa.int32()))
    part_of = buckets % parts
    order = np.argsort(part_of, kind="stable")
    cuts = np.flatnonzero(np.diff(part_of[order])) + 1
    for rows in np.split(order, cuts):
        part = int(part_of[rows[0]])
        directory = part_dir(scratch, side, part)
        fs.create_dir(directory, recursive=True)
        pq.write_table(table.take(pa.array(rows, pa.int64())), f"{directory}/{name}", filesystem=fs)
        written.append(part)
    return sorted(written)


def partial_datasources(rules: dict) -> tuple[list[str], bool] | None:
    """``(datasources whose rules include a partial-load rule, whether the default rules do)``, or
    None when no rule is a partial-load rule (ALGORITHM.md "Rules of Druid 38")."""
    of = rules_of(rules)
    if not any(not r.is_interval_based for lst in rules.values() for r in lst):
        return None
    partial = sorted({ds for ds in set(rules) | {"_default"} for r in of(ds) if not r.is_interval_based})
    if not partial:
        return None
    return partial, any(not r.is_interval_based for r in rules.get("_default", []))


def partial_frame(pdf, rules: dict, now_ms: int):
    """The rule and partial load of the segments of ``pdf`` (pandas, :data:`SHAPE_COLUMNS`; used, not overshadowed, of
    datasources with a partial-load rule; every segment of a shard group present), decided per
    shard group: pandas (``segment_id``, ``p_rule_idx`` int32, ``PARTIAL_COLUMNS``).

    A segment's rule is the first whose interval test holds and whose matcher applies to its shape
    (``projections``, ``cluster_groups``, shard) or whose ``onCannotMatch`` is ``fullLoad``. A matched
    segment gets the part its matcher resolves; the empty part (a cluster-group matcher that matched
    none of a core partition's groups) only when a sibling of its shard group got a part, as Druid's
    ``RunRules.EmptyDeferringHandler`` dispatches it; otherwise the segment is left where it is, as
    Druid leaves it (``p_rule_idx`` -1, ``partial_fingerprint`` the empty part's)."""
    of = rules_of(rules)
    out = []
    for _, g in pdf.groupby(["datasource", "start_ms", "end_ms", "version"], sort=True):
        decided = []
        for r in g.itertuples(index=False):
            shape = SegmentShape.from_columns(
                None if r.projections is None else list(r.projections),
                None if pd.isna(r.cluster_groups) else r.cluster_groups,
                int(r.partition_num),
                None if pd.isna(r.num_core_partitions) else int(r.num_core_partitions),
            )
            lst = of(r.datasource)
            idx, match = -1, None
            for i, rule in enumerate(lst):
                if rule.applies_to_segment(r.start_ms, r.end_ms, now_ms, shape):
                    idx, match = i, rule.partial_match(shape) if rule.kind == "load" else None
                    break
            matcher = None if match is None else lst[idx].matcher.TYPE
            decided.append((r.segment_id, idx, match, matcher))
        positive = any(m is not None and not m.is_empty for _, _, m, _ in decided)
        for segment_id, idx, match, matcher in decided:
            if match is None:
                out.append((segment_id, idx, None, None, None, None))
            elif match.is_empty and not positive:
                out.append((segment_id, -1, None, None, None, EMPTY_LOAD_FINGERPRINT))
            else:
                spec = match.wrapped_load_spec
                out.append((segment_id, idx, matcher, spec["type"], json.dumps(list(match.parts)), match.fingerprint))
    return pd.DataFrame(out, columns=["segment_id", "p_rule_idx", *PARTIAL_COLUMNS]).astype({"p_rule_idx": "int32"})


def _split_timeline(item: dict) -> dict:
    """Split task of one part of the timeline table: its segments' side-0 join rows per join task
    (``segs``) and the used, visible segments' sort keys (``cands``: ``segment_id``, ``line``,
    ``start_ms``, ``end_ms``, ``bucket``)."""
    fs, path = filesystem(item["file"])
    columns = [*SHAPE_COLUMNS, "size_bytes", "used", "overshadowed", "overshadowed_by", "line", "shard_type"]
    t = pq.read_table(path, filesystem=fs, columns=columns)
    # Spark's three-valued logic: a null shard type leaves ``used`` null, which no filter keeps
    used = pc.and_kleene(t.column("used"), pc.not_equal(t.column("shard_type"), "tombstone"))
    visible = pc.fill_null(pc.and_kleene(used, pc.invert(t.column("overshadowed"))), False)
    bucket = buckets_of(t.column("segment_id"), item["buckets"])
    n = t.num_rows
    partial = [pa.nulls(n, pa.int32()), *[pa.nulls(n, pa.string()) for _ in PARTIAL_COLUMNS]]
    if item["partial"] is not None and n:
        names, default_partial = item["partial"]
        ds = t.column("datasource")
        listed = pa.array(sorted(set(item["rules"]) - {"_default"}), pa.string())
        wanted = pc.or_(
            pc.is_in(ds, value_set=pa.array(names, pa.string())),
            pc.and_(pa.scalar(default_partial), pc.invert(pc.is_in(ds, value_set=listed))),
        )
        mine = pc.and_(visible, wanted)
        if pc.any(mine).as_py():
            rows = t.filter(mine).select(SHAPE_COLUMNS).to_pandas()
            decided = partial_frame(rows, item["rules"], item["now_ms"])
            at = pc.index_in(t.column("segment_id"), value_set=pa.array(decided["segment_id"], pa.string()))
            found = pc.is_valid(at)
            take = pc.fill_null(at, 0)
            partial = [
                pc.if_else(found, pa.array(decided["p_rule_idx"].to_numpy(), pa.int32()).take(take), None),
                *[
                    pc.if_else(found, pa.array(decided[c].to_numpy(object), pa.string()).take(take), None)
                    for c in PARTIAL_COLUMNS
                ],
            ]
    empty_list = pa.array([[]], pa.list_(pa.string()))[0]
    segs = pa.table(
        {
            "side": pa.array(np.zeros(n, np.int8)),
            "segment_id": t.column("segment_id"),
            "bucket": pa.array(bucket, pa.int32()),
            "datasource": t.column("datasource"),
            "start_ms": t.column("start_ms"),
            "end_ms": t.column("end_ms"),
            "version": t.column("version"),
            "partition_num": pc.cast(t.column("partition_num"), pa.int32()),
            "size_bytes": t.column("size_bytes"),
            "used": used,
            "overshadowed": t.column("overshadowed"),
            "overshadowed_by": pc.fill_null(t.column("overshadowed_by"), empty_list),
            "line": t.column("line"),
            "shard_type": t.column("shard_type"),
            "p_rule_idx": partial[0],
            **{c: partial[1 + i] for i, c in enumerate(PARTIAL_COLUMNS)},
        }
    )
    fs, scratch = filesystem(item["scratch"])
    name = f"t-{item['index']:05d}.parquet"
    written = write_per_part(fs, scratch, SEGS_DIR, name, segs, bucket, item["parts"])
    cands = t.select(["segment_id", "line", "start_ms", "end_ms"]).append_column("bucket", pa.array(bucket, pa.int32()))
    cands = cands.filter(visible)
    if cands.num_rows:
        fs.create_dir(f"{scratch}/{CANDS_DIR}", recursive=True)
        pq.write_table(cands, f"{scratch}/{CANDS_DIR}/{name}", filesystem=fs)
    return {"kind": "timeline", "index": item["index"], "parts": written}


def _strip_array_line(line: bytes) -> bytes | None:
    """A line of a JSON array of one object per line as a row's text (spaces trimmed, one trailing
    comma taken off), or None for a bracket or a blank line."""
    text = line.strip(b" ")
    if text in (b"[", b"]", b""):
        return None
    return text[:-1] if text.endswith(b",") else text


def _simple_lines(data: bytes, layout: str, file_start: bool) -> tuple[np.ndarray, bytes, int] | None:
    """The rows of a range of the replica file (``layout`` ``line`` or ``array``) without a Python
    step per line, when every line has the simple shape Druid's exports and ``capture`` write: LF
    ends only, valid UTF-8, and each line empty, an object (``{`` … ``}``; in an array, with one
    trailing comma or none) or, in an array, a lone bracket. Returns ``(row numbers as
    :func:`_split_replicas` numbers them, the objects as JSON text one per line (the commas and
    brackets blanked), lines of the range)``, or None for any other range (the line-by-line reading
    judges it)."""
    if file_start and data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    if b"\r" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not data:
        return np.zeros(0, np.int64), data, 0
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))
    if buf[-1] != ord("\n"):
        ends = np.append(ends, len(buf))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    filled = ends > starts
    # each line's first, last and last but one byte (a byte of a neighbour for an empty line: unused)
    first = buf[np.minimum(starts, len(buf) - 1)]
    last = buf[np.maximum(ends - 1, 0)]
    brace = last == ord("}")
    if layout == "array":
        lone = filled & (ends - starts == 1) & ((first == ord("[")) | (first == ord("]")))
        objects = filled & ~lone
        comma = objects & (last == ord(","))
        before = buf[np.maximum(ends - 2, 0)]
        if not np.all(first[objects] == ord("{")) or not np.all(
            brace[objects] | (before[objects] == ord("}")) & comma[objects]
        ):
            return None
        out = buf.copy()
        out[starts[lone]] = ord(" ")
        out[ends[comma] - 1] = ord(" ")
        return np.arange(int(objects.sum()), dtype=np.int64), out.tobytes(), len(ends)
    if not np.all(first[filled] == ord("{")) or not np.all(brace[filled]):
        return None
    return np.flatnonzero(filled).astype(np.int64) + 1, data, len(ends)


def _document_rows(data: bytes) -> list[tuple[int, bytes]] | None:
    """The objects of the JSON array ``data`` (the layout ``document``), numbered from 0, each as
    one line of JSON text; None when ``data`` is not UTF-8 JSON text whose value is an array of
    objects (the reference reader judges it)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, list) or not all(isinstance(e, dict) for e in doc):
        return None
    return [(i, json.dumps(e).encode()) for i, e in enumerate(doc)]


def _split_replicas(item: dict) -> dict:
    """Split task of one byte range of the replica file (the whole file for gzip and the layout
    ``document``): its lines (JSON lines: the non-blank ones, numbered by line from 1 within the
    range; an array of one object per line: the objects, numbered from 0 within the range; a
    ``document``: the array's objects, numbered from 0) parsed, the rows of historicals written per
    bucket (``reps``: ``row``, ``server``, ``segment_id``). Returns the range's line and row counts
    and ``bad`` (a row the reference reader must judge, or a gzip file that does not decompress)."""
    out = {"kind": "replicas", "index": item["index"], "lines": 0, "rows": 0, "bad": False, "parts": []}
    try:
        data = read_range(item["path"], item["start"], item["end"], item["gzip"])
    except OSError:  # truncated or corrupt gzip: the reference reader's Spark job names the file
        return {**out, "bad": True}
    historicals, known = frozenset(item["historicals"]), frozenset(item["known"])
    simple = None if item["layout"] == "document" else _simple_lines(data, item["layout"], item["start"] == 0)
    if simple is not None:
        rows, text, lines = simple
        del data
        out.update(lines=lines, rows=len(rows))
        if not len(rows):
            return out
        table = parse_replica_json(rows, text, historicals, known)
    else:
        if item["layout"] == "document":
            lines, kept = [], _document_rows(data)
            if kept is None:
                return {**out, "bad": True}
        elif item["layout"] == "line":
            lines = split_lines(data, item["start"] == 0)
            kept = [(i + 1, line) for i, line in enumerate(lines) if not is_blank(line)]
        else:
            lines = split_lines(data, item["start"] == 0)
            texts = (_strip_array_line(line) for line in lines)
            kept = [(i, t) for i, t in enumerate(t for t in texts if t is not None)]
        out.update(lines=len(lines), rows=len(kept))
        if not kept:
            return out
        rows = np.array([r for r, _ in kept], np.int64)
        table = parse_replica_lines(rows, [t.decode("utf-8", errors="replace") for _, t in kept], historicals, known)
    if pc.any(table.column("bad")).as_py():
        return {**out, "bad": True}
    table = table.filter(pc.fill_null(table.column("historical"), False)).select(["row", "server", "segment_id"])
    fs, scratch = filesystem(item["scratch"])
    buckets = buckets_of(table.column("segment_id"), item["buckets"])
    out["parts"] = write_per_part(
        fs, scratch, REPS_DIR, f"r-{item['index']:05d}.parquet", table, buckets, item["parts"]
    )
    return out


def split_task(item: dict) -> dict:
    """The split pass's task (module docstring): ``item["kind"]`` ``timeline`` or ``replicas``."""
    return _split_timeline(item) if item["kind"] == "timeline" else _split_replicas(item)


def index_task(item: dict) -> int:
    """The index pass's task: every used, visible segment's sort keys (``cands``) sorted newest
    first (end, start, id, all descending: Spark's order of the same keys, strings by their UTF-8
    bytes), numbered from 0, written per join task (``index``: ``segment_id``, ``line``, ``idx``).
    Returns how many."""
    fs, scratch = filesystem(item["scratch"])
    directory = f"{scratch}/{CANDS_DIR}"
    if fs.get_file_info(directory).type.name != "Directory":
        return 0
    cands = pq.read_table(directory, filesystem=fs)
    cands = cands.sort_by([("end_ms", "descending"), ("start_ms", "descending"), ("segment_id", "descending")])
    n = cands.num_rows
    index = pa.table(
        {
            "side": pa.array(np.ones(n, np.int8)),
            "segment_id": cands.column("segment_id"),
            "bucket": cands.column("bucket"),
            "line": cands.column("line"),
            "idx": pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    buckets = np.asarray(cands.column("bucket").to_numpy(), np.int32)
    write_per_part(fs, scratch, INDEX_DIR, "index.parquet", index, buckets, item["parts"])
    return n
