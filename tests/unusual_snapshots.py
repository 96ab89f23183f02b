"""The unusual-snapshot corpus: valid snapshots of the shapes a real cluster passes through (empty,
new, failing, draining, full, misconfigured), each a small generated snapshot directory that Druid
accepts and that must therefore get a plan (``tests/test_unusual_snapshots.py``), beside the
bad-input corpus (``bad_inputs.py``), which must be refused.

Every shape uses the same four segments of datasource ``wiki``, W1-W4, one day each from
2030-01-01, 100 bytes, and one unused segment id (``gone``, in no ``segments.jsonl``); the snapshot
is taken on 2030-02-01. A historical's ``curr_size`` is the bytes it serves; its ``max_size`` is
10,000 bytes unless the shape says otherwise. What each plan must say is worked out by hand in
``test_unusual_snapshots.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

SIZE = 100
"""Bytes of each segment."""
SNAPSHOT_TIME = "2030-02-01T00:00:00.000Z"


def _segment(day: int) -> dict:
    start, end = f"2030-01-{day:02d}T00:00:00.000Z", f"2030-01-{day + 1:02d}T00:00:00.000Z"
    return {
        "dataSource": "wiki",
        "interval": f"{start}/{end}",
        "version": "2030-01-31T00:00:00.000Z",
        "size": SIZE,
        "shardSpec": {"type": "numbered", "partitionNum": 0, "partitions": 1},
    }


SEGMENTS = {f"W{d}": _segment(d) for d in range(1, 5)}
ID = {name: "_".join([r["dataSource"], *r["interval"].split("/"), r["version"]]) for name, r in SEGMENTS.items()}
ID["gone"] = "gone_2029-12-01T00:00:00.000Z_2029-12-02T00:00:00.000Z_2029-12-01T00:00:00.000Z"
"""Segment ids by name; ``gone`` is an unused segment (not in ``segments.jsonl``)."""
NAME = {v: k for k, v in ID.items()}

DEFAULT_RULES = {"_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]}
"""The rules a Druid metadata store starts with."""


def load(**tiers: int) -> dict:
    """``_default`` rules of one ``loadForever`` rule with ``tiers`` as its ``tieredReplicants``."""
    return {"_default": [{"type": "loadForever", "tieredReplicants": tiers}]}


@dataclass(frozen=True)
class Historical:
    """A historical of ``servers.json``; its ``curr_size`` is the bytes of what it ``serves``."""

    name: str
    tier: str = "_default_tier"
    serves: tuple[str, ...] = ()
    max_size: int = 10_000


@dataclass(frozen=True)
class Shape:
    """One unusual snapshot: ``servers`` (historicals), ``others`` (other ``sys.servers`` rows:
    ``(server, server_type, segments it serves)``), ``segments`` (names of :data:`SEGMENTS` in
    ``segments.jsonl``), ``rules``, the dynamic ``config``."""

    name: str
    servers: tuple[Historical, ...] = ()
    segments: tuple[str, ...] = ("W1", "W2", "W3", "W4")
    rules: dict = field(default_factory=lambda: DEFAULT_RULES)
    config: dict = field(default_factory=dict)
    others: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


SHAPES = {
    shape.name: shape
    for shape in [
        # empty: a cluster before anything started
        Shape("empty", segments=()),
        # new: historicals up, nothing ingested yet; h1 still serves an unused segment
        Shape("new", (Historical("h1", serves=("gone",)), Historical("h2")), segments=()),
        # failing: no historical at all; every historical down (the broker and a peon remain)
        Shape("no_historical"),
        Shape(
            "every_historical_down",
            others=(("broker:8082", "broker", ()), ("peon:8100", "indexer-executor", ("W1",))),
        ),
        # failing: one tier down (cold's historicals gone; hot serves everything)
        Shape("tier_down", (Historical("h1", "hot", ("W1", "W2", "W3", "W4")),), rules=load(hot=1, cold=1)),
        # draining: every historical of the tier decommissioning
        Shape(
            "tier_decommissioning",
            (Historical("d1", serves=("W1", "W2", "W3", "W4")), Historical("d2", serves=("W1", "W2", "W3", "W4"))),
            config={"decommissioningNodes": ["d1", "d2"]},
        ),
        # draining: a decommissioning historical is the only holder of W1 and W2
        Shape(
            "only_holder_decommissioning",
            (Historical("d1", serves=("W1", "W2")), Historical("h2", serves=("W3", "W4"))),
            rules=load(_default_tier=1),
            config={"decommissioningNodes": ["d1"]},
        ),
        # full: h1 at its max_size, h2 over it
        Shape(
            "full",
            (
                Historical("h1", serves=("W1", "W2"), max_size=2 * SIZE),
                Historical("h2", serves=("W3", "W4"), max_size=SIZE),
            ),
        ),
        # full: a historical with max_size 0
        Shape("max_size_0", (Historical("h1", max_size=0),), segments=("W1", "W2"), rules=load(_default_tier=1)),
        # misconfigured: the only rule names a tier without historicals (a typo)
        Shape("absent_tier", (Historical("h1"), Historical("h2")), rules=load(nosuchtier=2)),
        # misconfigured: decommissioningNodes names a server the cluster does not have
        Shape(
            "unknown_decommissioning",
            (Historical("h1", serves=("W1", "W2")), Historical("h2", serves=("W1", "W2"))),
            segments=("W1", "W2"),
            config={"decommissioningNodes": ["ghost:8083"]},
        ),
        # misconfigured: no rule at all (an empty _default; Druid always has the key)
        Shape("no_rules", (Historical("h1", serves=("W1", "W2")),), rules={"_default": []}),
        # misconfigured: the datasource's own rule drops everything
        Shape(
            "drop_everything",
            (Historical("h1", serves=("W1", "W2")), Historical("h2", serves=("W1", "W2"))),
            segments=("W1", "W2"),
            rules={"wiki": [{"type": "dropForever"}], **DEFAULT_RULES},
        ),
    ]
}
"""Every shape, by name."""


def write_snapshot(directory: Path, shape: Shape) -> Path:
    """Write ``shape`` as a snapshot directory at ``directory`` and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "segments.jsonl").write_text("".join(json.dumps(SEGMENTS[n]) + "\n" for n in shape.segments))
    rows = [
        {
            "server": h.name,
            "host": h.name,
            "server_type": "historical",
            "tier": h.tier,
            "curr_size": SIZE * len(h.serves),
            "max_size": h.max_size,
            "priority": 0,
        }
        for h in shape.servers
    ]
    rows += [
        {"server": s, "host": s, "server_type": t, "tier": None, "curr_size": 0, "max_size": 0}
        for s, t, _ in shape.others
    ]
    (directory / "servers.json").write_text(json.dumps(rows))
    served = [(h.name, n) for h in shape.servers for n in h.serves] + [(s, n) for s, _, ns in shape.others for n in ns]
    (directory / "server_segments.json").write_text(json.dumps([{"server": s, "segment_id": ID[n]} for s, n in served]))
    (directory / "rules.json").write_text(json.dumps(shape.rules))
    (directory / "coordinator_config.json").write_text(json.dumps(shape.config))
    (directory / "snapshot.json").write_text(json.dumps({"snapshot_time": SNAPSHOT_TIME, "cluster": shape.name}))
    return directory
