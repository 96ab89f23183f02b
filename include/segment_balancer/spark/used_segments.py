"""Stage 0 ``used_segments``: which used segments are visible, standby or overshadowed.

Two passes of :func:`segment_balancer.spark.session.run_tasks` (each one Spark job, or calls on
the driver for a small run, ``driver_tasks``; a third before them for a large gzip file), no
DataFrame job:

1. **parse** (:func:`_parse_range`): one task per byte range of ``segments.jsonl`` (about
   :data:`RANGE_BYTES`, one per core for a file of a few MiB and more, cut at line ends;
   a small gzip file is one range, decompressed whole; a larger one is first decompressed to a
   plain copy in the scratch directory by one task,
   :func:`~segment_balancer.druid.snapshot.lines.decompress_task`, and read in ranges) reads its
   range through pyarrow's filesystem, splits it into lines as Spark's text reader does
   (:func:`segment_balancer.druid.snapshot.lines.split_lines`), numbers them within the range,
   drops blank ones, parses the others with pyarrow
   (:func:`segment_balancer.druid.snapshot.segment_lines.parse_lines`) and writes one Parquet file
   per datasource bucket (:func:`bucket_of`: CRC-32 of the name, one bucket per core) to a scratch
   directory of the work directory; it returns its line count.
2. **classify** (:func:`_classify_bucket`): the driver turns the counts into each range's first
   line; one task per bucket reads the bucket's files, makes ``line`` the file's line, checks each
   datasource's segment ids for repeats and computes its timeline
   (:func:`segment_balancer.druid.timeline.classify_datasource`, numpy), writes the bucket's rows
   of ``WORK/timeline/segments.parquet`` aside and returns its counts and groups (a few bytes).
   The table is moved into place only when no line is bad.

A line the fast reader cannot take (malformed or mistyped JSON, a missing field, a bad interval, a
negative size, bytes that are not UTF-8), a gzip file that does not decompress whole or a repeated
segment id hands over to the reference reader
(:func:`segment_balancer.druid.snapshot.segments.read_segments`, Spark SQL), whose refusal names
the file, the line, the value and what was expected (a corrupt gzip file: Spark's own reader fails,
:func:`~segment_balancer.druid.snapshot.segments.gzip_refusal`); were that reader to accept the
file, its rows are classified instead, in Spark jobs.

What an accepted file gave is kept in the machine's cache by the SHA-256 of its bytes and the
code (:data:`CACHE_KIND`, :mod:`segment_balancer.common.cache`): a later run on the same file (a
what-if, a simulated run, a DAG run triggered again, ``--compare``'s snapshot in a later plan)
hashes it and takes the table as it was written, with no Spark job.

The timeline of a datasource is computed over each segment's interval clipped to 1900-2200 in
``BUCKET_MS`` steps (the union of the pieces of that range the segment overlaps; instants outside
stay in their own step), so eternity segments and far instants stay in range.

Source: seed 003 (Druid issue #7491), Druid ``VersionedIntervalTimeline`` / ``SegmentTimeline``.
"""

from __future__ import annotations

import json
import pickle
import uuid
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap
from pyspark import TaskContext
from pyspark.sql import functions as F

from segment_balancer.common import cache
from segment_balancer.common.files import filesystem, link_or_copy, remove_path, replace_path, write_json_atomic
from segment_balancer.common.spark_columns import parallelism
from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.druid.snapshot.files import segments_path
from segment_balancer.druid.snapshot.lines import (
    GZIP_SPLIT_BYTES,
    decompress_task,
    is_blank,
    line_ranges,
    read_range,
    split_lines,
)
from segment_balancer.druid.snapshot.segment_lines import PARSED_FIELDS, PAYLOAD_COLUMNS, parse_lines, projection_lists
from segment_balancer.druid.snapshot.segments import first_problems, gzip_refusal, read_segments, refuse
from segment_balancer.druid.timeline import classify_datasource
from segment_balancer.planner import groups as G
from segment_balancer.spark.session import collect_small, run_tasks

BUCKET_MS = 366 * 86_400_000
CLAMP_LO_MS = -2_208_988_800_000  # 1900-01-01
CLAMP_HI_MS = 7_258_118_400_000  # 2200-01-01
TIMELINE_COLUMNS = [
    "segment_id",
    "start_ms",
    "end_ms",
    "version",
    "shard_type",
    "partition_num",
    "num_core_partitions",
    "start_root_partition_id",
    "end_root_partition_id",
    "minor_version",
    "atomic_update_group_size",
]
STATUSES = ("visible", "standby", "overshadowed")
TABLE_FILE = "timeline/segments.parquet"
"""The table (relative to the work directory): the parsed columns (``overshadowed`` renamed
``input_overshadowed``; ``projections`` (list of names) and ``cluster_groups`` (JSON text), Druid
38's partial-load fields of the payload, null when absent, for the matchers of
``druid.partial_load``) plus ``status``
(``visible``/``standby``/``overshadowed``/``unused``), ``overshadowed_by`` (list of ids),
``reason`` and ``overshadowed`` (the computed answer)."""


def clipped(start_ms: np.ndarray, end_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each interval as the timeline sees it: the union of its ``BUCKET_MS`` pieces from
    ``CLAMP_LO_MS`` (the first piece starting no earlier than 1900, the last ending no later than
    the step after 2200), at least one millisecond long."""
    start, end = np.asarray(start_ms, np.int64), np.asarray(end_ms, np.int64)
    lo = np.maximum(start, CLAMP_LO_MS)
    hi = np.minimum(end - 1, CLAMP_HI_MS)
    first = (lo - CLAMP_LO_MS) // BUCKET_MS
    last = np.maximum(first, (hi - CLAMP_LO_MS) // BUCKET_MS)
    s = np.maximum(start, CLAMP_LO_MS + first * BUCKET_MS)
    e = np.minimum(end, CLAMP_LO_MS + (last + 1) * BUCKET_MS)
    return s, np.maximum(e, s + 1)


def _classify_partition(table) -> tuple[dict, object]:
    """The timeline of every datasource in ``table`` (pyarrow, :data:`PARSED_FIELDS`): the rows of
    the timeline table (pyarrow) and a summary dict: ``bad`` (a bad line or a repeated id),
    ``error`` ((line, message) of a datasource whose timeline cannot be built), ``counts``
    (``{(datasource, status): n}``), ``groups`` (``{Status: BitMap of line - 1}``), ``mismatches``
    and ``examples`` ((line, text) of the first input flags the timeline contradicts)."""
    summary = _no_rows()
    pdf = table.drop_columns(list(PAYLOAD_COLUMNS)).to_pandas()  # kept in the table, not needed here
    if pdf["bad"].any() or pdf["segment_id"].duplicated().any():
        summary["bad"] = True
        return summary, None
    n = len(pdf)
    status = np.full(n, "unused", dtype=object)
    overshadowed_by = np.empty(n, dtype=object)
    overshadowed_by.fill(())  # one empty tuple for every row no datasource's timeline overshadows
    reason = np.full(n, None, dtype=object)
    used = pdf["used"].to_numpy(bool)
    for ds, rows in pdf[used].groupby("datasource", sort=True).indices.items():
        index = np.flatnonzero(used)[rows]
        part = pdf.iloc[index]
        frame = part[TIMELINE_COLUMNS].reset_index(drop=True)
        frame["start_ms"], frame["end_ms"] = clipped(
            part["start_ms"].to_numpy(np.int64), part["end_ms"].to_numpy(np.int64)
        )
        try:
            out = classify_datasource(frame)
        except ValueError as exc:
            line = int(part["line"].min())
            if summary["error"] is None or line < summary["error"][0]:
                summary["error"] = (line, f"datasource {ds}: {exc}")
            continue
        status[index] = out["status"].to_numpy(object)
        overshadowed_by[index] = _sorted_once(out["overshadowed_by"])
        reason[index] = out["reason"].to_numpy(object)
    if summary["error"] is not None:
        return summary, None
    computed = status == "overshadowed"
    given = pdf["overshadowed"].to_numpy(bool)
    mismatch = used & pdf["overshadowed_given"].to_numpy(bool) & (given != computed)
    summary["mismatches"] = int(mismatch.sum())
    lines = pdf["line"].to_numpy(np.int64)
    ids = pdf["segment_id"].to_numpy(object)
    first = np.flatnonzero(mismatch)[np.argsort(lines[mismatch], kind="stable")][:5]
    summary["examples"] = [
        (int(lines[i]), f"{ids[i]}: input says {'not ' if not given[i] else ''}overshadowed, timeline says {status[i]}")
        for i in first
    ]
    counts = (
        pd.Series(1, index=pd.MultiIndex.from_arrays([pdf["datasource"].to_numpy(object), status]))
        .groupby(level=[0, 1])
        .sum()
    )
    summary["counts"] = {(d, s): int(v) for (d, s), v in counts.items()}
    for name in STATUSES:
        mine = status == name
        if mine.any():
            summary["groups"][name.capitalize()] = BitMap((lines[mine] - 1).astype(np.uint32)).serialize()
    out = table.drop_columns(["bad"]).rename_columns(
        ["input_overshadowed" if c == "overshadowed" else c for c in table.column_names if c != "bad"]
    )
    where = out.column_names.index("projections")
    out = out.set_column(where, "projections", projection_lists(out.column("projections").combine_chunks()))
    out = out.append_column("problem", pa.nulls(n, pa.string()))
    out = out.append_column("status", pa.array(status, pa.string()))
    out = out.append_column("overshadowed_by", pa.array(list(overshadowed_by), pa.list_(pa.string())))
    out = out.append_column("reason", pa.array(reason, pa.string()))
    out = out.append_column("timeline_error", pa.nulls(n, pa.string()))
    out = out.append_column("overshadowed", pa.array(computed))
    return summary, out


def _sorted_once(lists) -> list[list[str]]:
    """Each row's ``overshadowed_by`` ids, unique and sorted. A time chunk's rows share one list
    object (:mod:`segment_balancer.druid.timeline`), sorted once for all of them."""
    done: dict[int, list[str]] = {}
    out = []
    for ids in lists:
        key = id(ids)
        found = done.get(key)
        if found is None:
            found = done[key] = sorted(set(ids))
        out.append(found)
    return out


def _no_rows() -> dict:
    """The summary of a partition or bucket without rows (:func:`_classify_partition`'s keys)."""
    return {"bad": False, "error": None, "counts": {}, "groups": {}, "mismatches": 0, "examples": []}


def _timeline_job(spark, parsed, work: Path, aside: str) -> list[dict]:
    """Hash ``parsed`` (Spark DataFrame of :data:`PARSED_FIELDS`) to one partition per core by
    datasource and classify each partition in one Python task, which writes its rows under
    ``aside`` (relative to ``work``) unless the partition is bad; returns the tasks' summaries.
    The reference reader's path only (a file the fast path could not take)."""
    work_uri = str(Path(work).absolute())

    def task(batches):
        batches = list(batches)
        summary = _no_rows()
        if batches:
            summary, rows = _classify_partition(pa.Table.from_batches(batches))
            if rows is not None:
                fs, base = filesystem(work_uri)
                fs.create_dir(f"{base}/{aside}", recursive=True)
                part = TaskContext.get().partitionId()
                pq.write_table(rows, f"{base}/{aside}/part-{part:05d}.parquet", filesystem=fs)
        yield pa.RecordBatch.from_pydict({"data": [pickle.dumps(summary)]}, schema=pa.schema([("data", pa.binary())]))

    rows = parsed.repartition(parallelism(spark), "datasource").mapInArrow(task, "data binary").collect()
    return [pickle.loads(r["data"]) for r in rows]


RANGE_BYTES = 64 << 20
"""The most a parse task reads of a plain ``segments.jsonl`` (bytes; ranges are cut at line ends)."""
MIN_RANGE_BYTES = 4 << 20
"""A plain file gets one range per core once each would be at least this long (bytes)."""
PARSE_BATCH_LINES = 65_536
"""Lines parsed by one :func:`~segment_balancer.druid.snapshot.segment_lines.parse_lines` call."""


def bucket_of(datasource: str, buckets: int) -> int:
    """The bucket (0 … ``buckets`` − 1) of a datasource's rows: CRC-32 of its UTF-8 name, the same in
    every process and run (Python's ``hash`` of a str is salted per process)."""
    return zlib.crc32(datasource.encode()) % buckets


def range_bytes(size: int, cores: int) -> int:
    """The length of the byte ranges a plain file of ``size`` bytes is parsed in: one per core,
    within :data:`MIN_RANGE_BYTES` … :data:`RANGE_BYTES`."""
    return min(RANGE_BYTES, max(MIN_RANGE_BYTES, -(-size // cores)))


def byte_ranges(spark, path: Path, plain: Path, whole: bool = False) -> tuple[Path, bool, list[tuple[int, int]]] | None:
    """How tasks read the text file ``path``: ``(the file they read, whether it is gzip read whole,
    its (start, end) byte ranges)``. A plain file in ranges of :func:`range_bytes`, cut at line
    ends; a gzip file of at least ``GZIP_SPLIT_BYTES`` decompressed first to ``plain`` by one task
    (:func:`~segment_balancer.druid.snapshot.lines.decompress_task`) and read so; a smaller gzip
    file, or any file when ``whole``, as one range. None when the gzip file does not decompress
    whole (the reference reader names it)."""
    gz = path.name.endswith(".gz")
    size = path.stat().st_size
    if gz and not whole and size >= GZIP_SPLIT_BYTES:
        if not run_tasks(spark, [{"path": str(path), "dest": str(plain)}], decompress_task)[0]:
            return None
        path, gz, size = plain, False, plain.stat().st_size
    if gz or whole:
        return path, gz, [(0, size)]
    return path, gz, line_ranges(path, range_bytes(size, parallelism(spark)))


def _parse_range(item: dict) -> tuple[int, int, bool, list[int]]:
    """Parse task: read the byte range ``item`` of ``segments.jsonl[.gz]`` (the whole file for
    gzip), split its lines as Spark's text reader does, number them from 1 within the range,
    parse the non-blank ones (:func:`~segment_balancer.druid.snapshot.segment_lines.parse_lines`)
    and write one Parquet file per datasource bucket under ``item["scratch"]``.

    ``item``: ``index``, ``path`` (absolute), ``start``, ``end`` (bytes), ``gzip``, ``buckets``,
    ``scratch`` (absolute path or URI). Returns ``(index, lines of the range including blank ones,
    bad, buckets written)``; ``bad`` (nothing written): a row the reference reader must judge, a
    line that is not UTF-8, or a gzip file that does not decompress whole."""
    index = item["index"]
    try:
        data = read_range(item["path"], item["start"], item["end"], item["gzip"])
    except OSError:  # truncated or corrupt gzip: the reference reader's Spark job names the file
        return index, 0, True, []
    lines = split_lines(data, item["start"] == 0)
    del data
    kept = np.array([i for i, line in enumerate(lines) if not is_blank(line)], np.int64)
    tables = []
    for at in range(0, len(kept), PARSE_BATCH_LINES):
        rows = kept[at : at + PARSE_BATCH_LINES]
        try:
            texts = [lines[i].decode("utf-8") for i in rows]
        except UnicodeDecodeError:
            return index, len(lines), True, []
        table = parse_lines(rows + 1, texts)
        if pc.any(table.column("bad")).as_py():
            return index, len(lines), True, []
        tables.append(table)
    if not tables:
        return index, len(lines), False, []
    table = pa.concat_tables(tables)
    datasource = table.column("datasource")
    per_bucket: dict[int, list[str]] = {}
    for name in pc.unique(datasource).to_pylist():
        per_bucket.setdefault(bucket_of(name, item["buckets"]), []).append(name)
    fs, scratch = filesystem(item["scratch"])
    for bucket, names in sorted(per_bucket.items()):
        fs.create_dir(f"{scratch}/bucket-{bucket:05d}", recursive=True)
        part = table.filter(pc.is_in(datasource, value_set=pa.array(names, pa.string())))
        pq.write_table(part, f"{scratch}/bucket-{bucket:05d}/range-{index:05d}.parquet", filesystem=fs)
    return index, len(lines), False, sorted(per_bucket)


def _classify_bucket(item: dict) -> dict:
    """Classify task: the rows of one datasource bucket, read from the parse tasks' files of it,
    their ``line`` made the file's line (the range's offset added), classified by
    :func:`_classify_partition`; the timeline rows go to ``item["aside"]/part-<bucket>.parquet``
    unless the bucket is bad. ``item``: ``bucket``, ``ranges`` (``{range index: lines before
    it}``), ``scratch``, ``aside`` (absolute paths or URIs). Returns the summary."""
    bucket = item["bucket"]
    fs, scratch = filesystem(item["scratch"])
    tables = []
    for index, offset in sorted(item["ranges"].items()):
        table = pq.read_table(f"{scratch}/bucket-{bucket:05d}/range-{index:05d}.parquet", filesystem=fs)
        where = table.column_names.index("line")
        tables.append(table.set_column(where, "line", pc.add(table.column("line"), pa.scalar(offset, pa.int64()))))
    summary, rows = _classify_partition(pa.concat_tables(tables))
    if rows is not None:
        fs, aside = filesystem(item["aside"])
        fs.create_dir(aside, recursive=True)
        pq.write_table(rows, f"{aside}/part-{bucket:05d}.parquet", filesystem=fs)
    return summary


def _fast_summaries(spark, path: Path, work: Path, aside: str) -> list[dict] | None:
    """The fast path: :func:`_parse_range` over the byte ranges of ``path`` (one per
    :func:`range_bytes`, cut at line ends; a gzip file whole, or of its plain copy when it is of
    at least ``GZIP_SPLIT_BYTES``), then :func:`_classify_bucket` over
    the datasource buckets (one per core): two passes of
    :func:`~segment_balancer.spark.session.run_tasks`, Spark jobs or calls on the driver. Returns
    the buckets' summaries, or None when a range is bad (the reference reader's turn). The parsed
    rows live in a scratch directory of ``work``, removed on return."""
    work, path = Path(work).absolute(), Path(path).absolute()
    scratch = work / f"{TABLE_FILE}.parsed-{uuid.uuid4().hex[:8]}"
    cores = parallelism(spark)
    try:
        found = byte_ranges(spark, path, scratch / "segments.jsonl")
        if found is None:
            return None
        path, gz, ranges = found
        common = {"path": str(path), "gzip": gz, "buckets": cores, "scratch": str(scratch)}
        items = [{"index": i, "start": a, "end": b, **common} for i, (a, b) in enumerate(ranges)]
        parsed = run_tasks(spark, items, _parse_range)
        if any(bad for _, _, bad, _ in parsed):
            return None
        offsets, total = {}, 0
        for index, lines, _, _ in parsed:  # in the order of the ranges
            offsets[index] = total
            total += lines
        per_bucket: dict[int, dict[int, int]] = {}
        for index, _, _, buckets in parsed:
            for bucket in buckets:
                per_bucket.setdefault(bucket, {})[index] = offsets[index]
        jobs = [
            {"bucket": b, "ranges": r, "scratch": str(scratch), "aside": str(work / aside)}
            for b, r in sorted(per_bucket.items())
        ]
        return run_tasks(spark, jobs, _classify_bucket)
    finally:
        remove_path(scratch)


def _parsed_reference(spark, snapshot: Path):
    """The reference reader's rows (:func:`~segment_balancer.druid.snapshot.segments.read_segments`)
    as :data:`PARSED_FIELDS` rows (``bad``: the line has a problem)."""
    segs = read_segments(spark, snapshot)
    return segs.select(
        *[F.col(n).cast(t).alias(n) for n, t in PARSED_FIELDS if n != "bad"], F.col("problem").isNotNull().alias("bad")
    )


def _refuse_by_reference(spark, snapshot: Path, file: str) -> None:
    """Raise the reference reader's refusal of ``segments.jsonl`` (the first bad lines, by line),
    if it has one."""
    segs = read_segments(spark, snapshot)
    try:
        with gzip_refusal(file):
            found = collect_small({"problems": first_problems(segs)})
    finally:
        segs.unpersist()
    refuse(file, found["problems"])


def _write_empty_table(directory: Path) -> None:
    """One part of no row in ``directory``, with the columns every part has (what
    :func:`_classify_partition` makes of no line): a snapshot without segments (a cluster before
    its first ingestion) has a timeline table too, which ``prepare`` reads like any other."""
    _, rows = _classify_partition(parse_lines(np.array([], np.int64), []))
    pq.write_table(rows, directory / "part-00000.parquet")


def used_segments(spark, snapshot: Path, work: Path) -> dict:
    """Run stage 0: read and validate ``segments.jsonl``, compute the timeline, write
    ``WORK/timeline/segments.parquet`` (:data:`TABLE_FILE`) and ``WORK/timeline/summary.json``
    (counts per datasource and status, flag disagreements), and return the XCom dict: groups
    ``Visible``, ``Standby``, ``Overshadowed`` as bitmaps over the segment's row in
    ``segments.jsonl`` (line − 1).

    Two passes of task functions (module docstring): two Spark jobs (three for a large gzip
    file), none for a small run; a
    bad file costs the reference reader's Spark jobs more. A file this code accepted before on
    this machine (the same bytes: their SHA-256) is not read again: its table, summary and groups
    come from the cache (:data:`CACHE_KIND`), and no Spark job runs. Raises
    :class:`SnapshotError` naming the file and line of the first bad rows (or the datasource whose
    timeline cannot be built), and then no table is left behind.
    """
    snapshot, work = Path(snapshot), Path(work)
    path = segments_path(snapshot)
    file = path.name
    aside = f"{TABLE_FILE}.tmp-{uuid.uuid4().hex[:8]}"
    key = _cache_key(path)
    found = None if key is None else cache.entry(CACHE_KIND, key)
    if found is not None:
        result = _from_cache(found, work, aside)
        if result is not None:
            return result
    try:
        summaries = _fast_summaries(spark, path, work, aside)
        if summaries is None or any(s["bad"] for s in summaries):
            remove_path(work / aside)
            _refuse_by_reference(spark, snapshot, file)
            # the reference reader takes what the fast one could not: classify its rows
            with gzip_refusal(file):
                summaries = _timeline_job(spark, _parsed_reference(spark, snapshot), work, aside)
            if any(s["bad"] for s in summaries):
                raise SnapshotError(file, None, "repeats a segment id (the reference reader accepted every line)")
        errors = sorted(s["error"] for s in summaries if s["error"] is not None)
        if errors:
            raise SnapshotError("segments.jsonl", None, errors[0][1])
    except BaseException:
        remove_path(work / aside)
        raise
    (work / aside).mkdir(parents=True, exist_ok=True)
    if not any((work / aside).glob("*.parquet")):
        _write_empty_table(work / aside)
    replace_path(work / aside, work / TABLE_FILE)
    per_ds: dict = {}
    for s in summaries:
        for (ds, status), n in s["counts"].items():
            per_ds.setdefault(ds, {})[status] = per_ds.get(ds, {}).get(status, 0) + n
    examples = [text for _, text in sorted(e for s in summaries for e in s["examples"])[:5]]
    summary = {
        "per_datasource": {ds: dict(sorted(v.items())) for ds, v in sorted(per_ds.items())},
        "flag_disagreements": sum(s["mismatches"] for s in summaries),
        "flag_examples": examples,
    }
    write_json_atomic(summary, work / "timeline" / "summary.json")
    groups: dict[str, BitMap] = {}
    for s in summaries:
        for name, data in s["groups"].items():
            groups[name] = groups.get(name, BitMap()) | BitMap.deserialize(data)
    result = {"stage": 0, "index": "segments.jsonl row (line - 1)", "groups": G.encode_all(groups)}
    if key is not None:
        cache.store(CACHE_KIND, key, lambda tmp: _fill_cache(tmp, work, result))
    return result


CACHE_KIND = "used_segments"
"""The cache's entries of this stage (:mod:`segment_balancer.common.cache`): per content of
``segments.jsonl[.gz]`` and code, the table's parts (``table/``), ``summary.json`` and the XCom
dict (``result.json``) of a file that was accepted. A refused file is read again by every run."""


def _cache_key(path: Path) -> str | None:
    """The cache key of the segments file ``path`` (:func:`~segment_balancer.common.cache.content_key`),
    None when it cannot be read (the readers refuse it)."""
    try:
        return cache.content_key(path)
    except OSError:
        return None


def _fill_cache(tmp: Path, work: Path, result: dict) -> None:
    """Write the cache entry of a run whose table and summary are in ``work`` (hard links where the
    file system allows)."""
    (tmp / "table").mkdir()
    for part in sorted((work / TABLE_FILE).iterdir()):
        link_or_copy(part, tmp / "table" / part.name)
    link_or_copy(work / "timeline" / "summary.json", tmp / "summary.json")
    (tmp / "result.json").write_text(json.dumps(result))


def _from_cache(found: Path, work: Path, aside: str) -> dict | None:
    """Put the cache entry ``found`` in place in ``work`` (the table and ``summary.json``) and
    return its XCom dict; None when the entry went away meanwhile (the stage computes it)."""
    try:
        result = json.loads((found / "result.json").read_text())
        (work / aside).mkdir(parents=True)
        for part in sorted((found / "table").iterdir()):
            link_or_copy(part, work / aside / part.name)
        summary = json.loads((found / "summary.json").read_text())
    except (OSError, ValueError):
        remove_path(work / aside)
        return None
    replace_path(work / aside, work / TABLE_FILE)
    write_json_atomic(summary, work / "timeline" / "summary.json")
    return result


def read_summary(work: Path) -> dict:
    """``WORK/timeline/summary.json`` written by :func:`used_segments`."""
    return json.loads((Path(work) / "timeline" / "summary.json").read_text())


def segment_count(summary: dict) -> int:
    """The segments of the snapshot (every status, unused ones too) by :func:`read_summary`'s
    ``summary``."""
    return sum(n for counts in summary["per_datasource"].values() for n in counts.values())
