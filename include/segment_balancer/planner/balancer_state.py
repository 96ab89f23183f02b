"""The balancer state: what one plan hands to the next run of the same cluster (ALGORITHM.md "The
result"), today the ``avgShedder`` pairs' hit counts (:mod:`segment_balancer.planner.avg_shedder`).

``balancer_state.json`` sits next to a plan's operations::

    {"format": "segment_balancer/balancer_state", "version": 1,
     "cluster": "prod", "snapshot_time": "2024-06-01T00:00:00.000Z",
     "pairs": [{"tier": "hot", "servers": ["hist-1:8083", "hist-4:8083"], "hit_count": 3,
                "counted_at": "2024-06-01T00:00:00.000Z"}]}

keyed by cluster, tier and server pair (the two names in order), each count with the snapshot time
it was counted at. :func:`read_state` never raises: a state it cannot use (unreadable, another
format or version, another cluster, counted at a snapshot newer than the one planned) gives a
warning for the report and no counts, so every pair starts at 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from segment_balancer.common.files import write_json_atomic
from segment_balancer.druid.instants import format_instant_ms, parse_instant_ms

__all__ = ["BalancerState", "STATE_FILE", "FORMAT", "VERSION", "read_state"]

STATE_FILE = "balancer_state.json"
FORMAT = "segment_balancer/balancer_state"
VERSION = 1

Counts = dict[str, dict[tuple[str, str], int]]
"""Hit counts by tier, then by server pair (``avg_shedder.pair_key``)."""


@dataclass(frozen=True)
class BalancerState:
    """The state a plan of ``cluster`` at ``snapshot_time_ms`` (epoch ms UTC) leaves: ``counts``
    (:data:`Counts`), all counted at that snapshot."""

    cluster: str
    snapshot_time_ms: int
    counts: Counts = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON object of ``balancer_state.json`` (module docstring); pairs by tier, then names."""
        at = format_instant_ms(self.snapshot_time_ms)
        return {"format": FORMAT, "version": VERSION, "cluster": self.cluster, "snapshot_time": at,
                "pairs": [{"tier": tier, "servers": list(pair), "hit_count": int(n), "counted_at": at}
                          for tier in sorted(self.counts) for pair, n in sorted(self.counts[tier].items())]}

    def write(self, directory: Path) -> Path:
        """Write ``directory/balancer_state.json`` atomically; returns its path."""
        path = Path(directory) / STATE_FILE
        write_json_atomic(self.to_dict(), path)
        return path


def read_state(path: Path | None, cluster: str, snapshot_time_ms: int) -> tuple[Counts, str | None]:
    """The hit counts of the state at ``path`` for a plan of ``cluster`` at ``snapshot_time_ms``,
    and a warning (None when the state is used). ``path`` None or absent: no counts, no warning
    (the first run). Never raises."""
    if path is None:
        return {}, None
    path = Path(path)
    if not path.exists():
        return {}, None
    start = "hit counts start at 1"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            return {}, f"{path} is not a balancer state (no \"format\": \"{FORMAT}\"); {start}"
        if data.get("version") != VERSION:
            return {}, f"{path} is balancer state version {data.get('version')!r}, this release reads {VERSION}; {start}"
        if data.get("cluster") != cluster:
            return {}, f"{path} is the balancer state of cluster {data.get('cluster')!r}, not {cluster!r}; {start}"
        state_ms = parse_instant_ms(data["snapshot_time"])
        if state_ms > snapshot_time_ms:
            return {}, (f"{path} was counted at {data['snapshot_time']}, after the snapshot planned "
                        f"({format_instant_ms(snapshot_time_ms)}); {start}")
        counts: Counts = {}
        for row in data["pairs"]:
            a, b = row["servers"]
            n = row["hit_count"]
            if not isinstance(n, int) or isinstance(n, bool) or n < 1 or not isinstance(row["tier"], str) \
                    or not isinstance(a, str) or not isinstance(b, str):
                raise ValueError(f"bad pair {row!r}")
            counts.setdefault(row["tier"], {})[(a, b) if a <= b else (b, a)] = n
        return counts, None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return {}, f"{path} is unreadable as a balancer state ({type(exc).__name__}: {exc}); {start}"
