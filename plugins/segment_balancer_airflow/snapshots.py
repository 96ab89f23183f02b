"""Pick the snapshot a run should plan on, so scheduled runs and backfills replay history."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from segment_balancer.common.errors import InputError


class NoSnapshotError(InputError, LookupError):
    """No snapshot under the root was taken at or before the requested time."""


def snapshot_time(snapshot_dir: Path) -> datetime:
    """``snapshot_time`` of ``snapshot_dir/snapshot.json`` as an aware datetime (naive = UTC)."""
    meta_file = Path(snapshot_dir) / "snapshot.json"
    try:
        raw = json.loads(meta_file.read_text())["snapshot_time"]
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{meta_file}: cannot read snapshot_time ({exc})") from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def snapshot_dirs(root: Path) -> list[Path]:
    """Directories one level under ``root`` holding a ``snapshot.json``, and for the others, their
    sub-directories holding one (``<cluster>/<time>/`` of the capture DAG). Hidden names (a capture
    being written) are skipped."""
    found = []
    for d in root.iterdir():
        if not d.is_dir() or d.name.startswith("."):
            continue
        if (d / "snapshot.json").is_file():
            found.append(d)
        else:
            found += [
                c for c in d.iterdir() if c.is_dir() and not c.name.startswith(".") and (c / "snapshot.json").is_file()
            ]
    return found


def snapshot_cluster(snapshot_dir: Path) -> str | None:
    """``cluster`` of ``snapshot_dir/snapshot.json`` (None when absent or unreadable)."""
    try:
        return json.loads((Path(snapshot_dir) / "snapshot.json").read_text()).get("cluster")
    except (OSError, ValueError, AttributeError):
        return None


def pick_snapshot(snapshots_root: str | Path, at: datetime, cluster: str | None = None) -> Path:
    """The newest snapshot under ``snapshots_root`` (one level down, or two: ``<cluster>/<time>/``)
    with ``snapshot_time <= at``, of ``cluster`` (``snapshot.json``'s) when given.

    Directories without a ``snapshot.json`` are ignored; a naive ``at`` is taken as UTC. Ties on
    ``snapshot_time`` go to the path that sorts last. Raises ``NoSnapshotError`` when no
    snapshot qualifies (naming the root, the time, the cluster and the oldest snapshot seen).
    """
    root = Path(snapshots_root)
    if not root.is_dir():
        raise NoSnapshotError(f"snapshots root {root} is not a directory")
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    dirs = [d for d in snapshot_dirs(root) if cluster is None or snapshot_cluster(d) == cluster]
    candidates = [(snapshot_time(d), str(d.relative_to(root)), d) for d in dirs]
    eligible = [c for c in candidates if c[0] <= at]
    if not eligible:
        oldest = min(candidates, default=None)
        seen = f"; the oldest is {oldest[1]} at {oldest[0].isoformat()}" if oldest else "; there are none"
        of = f" of cluster {cluster!r}" if cluster is not None else ""
        raise NoSnapshotError(f"no snapshot{of} under {root} was taken at or before {at.isoformat()}{seen}")
    return max(eligible)[2]
