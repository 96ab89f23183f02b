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

from segment_balancer.common.files import write_json_atomic, write_text_atomic
from segment_balancer.druid.instants import format_instant_ms, parse_instant_ms
from segment_balancer.planner.avg_shedder import pair_key, remembered

__all__ = [
    "BalancerState",
    "STATE_FILE",
    "NEXT_STATE_FILE",
    "PREVIOUS_FILE",
    "FORMAT",
    "VERSION",
    "read_state",
    "counts_from_json",
    "counts_to_json",
]

STATE_FILE = "balancer_state.json"
"""The state a published plan carries, next to its operations."""
NEXT_STATE_FILE = "balancer_state.next.json"
"""The state a run leaves, in its work directory, what-if runs included (``assemble`` also puts it
in the plan as :data:`STATE_FILE`, unless the run is a what-if); a simulation's next run starts
from it."""
PREVIOUS_FILE = "balancer_state.previous.json"
"""The state a run starts from, in its work directory: a copy of the previous plan's
:data:`STATE_FILE` (the CLI's ``--balancer-state``, the DAG's previous plan of the cluster, a
simulation's previous run), read by ``prepare`` with :func:`read_state`."""
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
        return {
            "format": FORMAT,
            "version": VERSION,
            "cluster": self.cluster,
            "snapshot_time": at,
            "pairs": [
                {"tier": tier, "servers": list(pair), "hit_count": int(n), "counted_at": at}
                for tier in sorted(self.counts)
                for pair, n in sorted(self.counts[tier].items())
            ],
        }

    @classmethod
    def from_pairs(cls, cluster: str, snapshot_time_ms: int, pairs) -> BalancerState:
        """The state after a run whose pairs were ``pairs`` (dicts with ``tier``, ``high``, ``low``,
        ``hit_count``, ``sheds``: ``kernels.shedding.pair_record``): the pairs the next run
        starts from (:func:`~segment_balancer.planner.avg_shedder.remembered`)."""
        counts: Counts = {}
        for p in pairs:
            if remembered(int(p["hit_count"]), bool(p["sheds"])):
                counts.setdefault(p["tier"], {})[pair_key(p["high"], p["low"])] = int(p["hit_count"])
        return cls(cluster, snapshot_time_ms, counts)

    def write(self, directory: Path) -> Path:
        """Write ``directory/balancer_state.json`` atomically; returns its path."""
        path = Path(directory) / STATE_FILE
        write_json_atomic(self.to_dict(), path)
        return path


def read_state(
    path: Path | None, cluster: str, snapshot_time_ms: int, name: str | None = None
) -> tuple[Counts, str | None]:
    """The hit counts of the state at ``path`` for a plan of ``cluster`` at ``snapshot_time_ms``,
    and a warning naming the file (``name``, default ``path``; None when the state is used).
    ``path`` None or absent: no counts, no warning (the first run). Never raises."""
    if path is None:
        return {}, None
    path = Path(path)
    if not path.exists():
        return {}, None
    shown = name or str(path)
    start = "hit counts start at 1"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            return {}, f'{shown} is not a balancer state (no "format": "{FORMAT}"); {start}'
        if data.get("version") != VERSION:
            return (
                {},
                f"{shown} is balancer state version {data.get('version')!r}, this release reads {VERSION}; {start}",
            )
        if data.get("cluster") != cluster:
            return {}, f"{shown} is the balancer state of cluster {data.get('cluster')!r}, not {cluster!r}; {start}"
        state_ms = parse_instant_ms(data["snapshot_time"])
        if state_ms > snapshot_time_ms:
            return {}, (
                f"{shown} was counted at {data['snapshot_time']}, after the snapshot planned "
                f"({format_instant_ms(snapshot_time_ms)}); {start}"
            )
        counts: Counts = {}
        for row in data["pairs"]:
            a, b = row["servers"]
            n = row["hit_count"]
            if (
                not isinstance(n, int)
                or isinstance(n, bool)
                or n < 1
                or not isinstance(row["tier"], str)
                or not isinstance(a, str)
                or not isinstance(b, str)
            ):
                raise ValueError(f"bad pair {row!r}")
            counts.setdefault(row["tier"], {})[pair_key(a, b)] = n
        return counts, None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return {}, f"{shown} is unreadable as a balancer state ({type(exc).__name__}: {exc}); {start}"


def give_previous(source: Path | None, work: Path) -> None:
    """Hand the balancer state at ``source`` (a plan's :data:`STATE_FILE`, or None: no previous
    state) to the run working in ``work``: a copy at ``work/``:data:`PREVIOUS_FILE`, and beside it
    (``….source``, JSON) its source path and why it could not be read, if it could not, for the
    warning of :func:`read_previous`. Never raises for the source."""
    target = Path(work) / PREVIOUS_FILE
    about = target.with_name(PREVIOUS_FILE + ".source")
    Path(work).mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    about.unlink(missing_ok=True)
    if source is None:
        return
    error = None
    try:
        write_text_atomic(Path(source).read_text(encoding="utf-8"), target)
    except (OSError, UnicodeDecodeError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    write_json_atomic({"path": str(source), "error": error}, about)


def read_previous(work: Path, cluster: str, snapshot_time_ms: int) -> tuple[Counts, str | None]:
    """:func:`read_state` of the state handed to the run in ``work`` (:func:`give_previous`),
    its warnings naming the source; no state handed: no counts, no warning."""
    target = Path(work) / PREVIOUS_FILE
    about = target.with_name(PREVIOUS_FILE + ".source")
    if not about.exists():
        return read_state(target, cluster, snapshot_time_ms)
    given = json.loads(about.read_text(encoding="utf-8"))
    if given.get("error"):
        return {}, f"{given['path']} is unreadable as a balancer state ({given['error']}); hit counts start at 1"
    return read_state(target, cluster, snapshot_time_ms, given["path"])


def counts_to_json(counts: Counts) -> dict[str, list[list]]:
    """:data:`Counts` as JSON (``meta.json``): ``{tier: [[server, server, hit_count], …]}``."""
    return {tier: [[a, b, n] for (a, b), n in sorted(pairs.items())] for tier, pairs in sorted(counts.items())}


def counts_from_json(data: Mapping[str, list]) -> Counts:
    """Inverse of :func:`counts_to_json`."""
    return {tier: {pair_key(a, b): int(n) for a, b, n in rows} for tier, rows in data.items()}
