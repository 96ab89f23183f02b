"""Pick the snapshot a run should plan on, so scheduled runs and backfills replay history."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path


class NoSnapshotError(LookupError):
    """No snapshot under the root was taken at or before the requested time."""


def snapshot_time(snapshot_dir: Path) -> datetime:
    """``snapshot_time`` of ``snapshot_dir/snapshot.json`` as an aware datetime (naive = UTC)."""
    meta_file = Path(snapshot_dir) / "snapshot.json"
    try:
        raw = json.loads(meta_file.read_text())["snapshot_time"]
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{meta_file}: cannot read snapshot_time ({exc})") from exc
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def pick_snapshot(snapshots_root: str | Path, at: datetime) -> Path:
    """The newest snapshot directory directly under ``snapshots_root`` with ``snapshot_time <= at``.

    Directories without a ``snapshot.json`` are ignored; a naive ``at`` is taken as UTC. Ties on
    ``snapshot_time`` go to the directory name that sorts last. Raises ``NoSnapshotError`` when no
    snapshot qualifies (naming the root, the time and the oldest snapshot seen).
    """
    root = Path(snapshots_root)
    if not root.is_dir():
        raise NoSnapshotError(f"snapshots root {root} is not a directory")
    at = at if at.tzinfo else at.replace(tzinfo=timezone.utc)
    candidates = [(snapshot_time(d), d.name, d) for d in root.iterdir() if (d / "snapshot.json").is_file()]
    eligible = [c for c in candidates if c[0] <= at]
    if not eligible:
        oldest = min(candidates, default=None)
        seen = f"; the oldest is {oldest[2].name} at {oldest[0].isoformat()}" if oldest else "; there are none"
        raise NoSnapshotError(f"no snapshot under {root} was taken at or before {at.isoformat()}{seen}")
    return max(eligible)[2]
