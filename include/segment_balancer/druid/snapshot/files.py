"""Where a snapshot's big files are: the segments file and the replica file, found by name without
reading them (the Spark readers of :mod:`.segments` read and check them)."""

from __future__ import annotations

from pathlib import Path

from segment_balancer.druid.snapshot.errors import SnapshotError


def segments_path(snapshot: Path) -> Path:
    """``segments.jsonl`` or ``segments.jsonl.gz`` in ``snapshot``; raises SnapshotError if neither."""
    for name in ("segments.jsonl", "segments.jsonl.gz"):
        if (snapshot / name).exists():
            return snapshot / name
    raise SnapshotError(
        "segments.jsonl",
        None,
        f"file is missing from the snapshot directory {str(snapshot)!r} (expected segments.jsonl or segments.jsonl.gz)",
    )


SERVER_SEGMENTS_FILES = ("server_segments.jsonl.gz", "server_segments.jsonl", "server_segments.json")


def server_segments_path(snapshot: Path) -> Path:
    """The snapshot's replica file, the first of :data:`SERVER_SEGMENTS_FILES` present; raises
    :class:`SnapshotError` if none is."""
    for name in SERVER_SEGMENTS_FILES:
        if (snapshot / name).exists():
            return snapshot / name
    raise SnapshotError(
        "server_segments.json",
        None,
        f"file is missing from the snapshot directory {str(snapshot)!r} "
        "(expected server_segments.json, or .jsonl[.gz])",
    )
