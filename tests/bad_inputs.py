"""The bad-input corpus: kinds of broken snapshot and override, each made by a fixture
from the bundled ``druid_sample`` snapshot, with what its refusal must say.

A :class:`Kind` edits a copy of the snapshot (:func:`bad_snapshot`) and lists the pieces its one-line
refusal must hold: the file, where in it (``row N``, ``line N`` or the key), the offending value and
what was expected. ``tests/test_bad_input.py`` runs every kind through the CLI and through the DAG's
task that reads the file. ``spark`` kinds are in the segment and replica files, which Spark reads
(``used_segments``, ``prepare``); the others are refused before any Spark job.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parents[1] / "include/segment_balancer/snapshots/druid_sample"
WIKI = "wikipedia_2013-08-01T00:00:00.000Z_2013-08-02T00:00:00.000Z_2013-08-08T21:22:48.989Z"


@dataclass(frozen=True)
class Kind:
    """One kind of bad input.

    ``edit(snapshot_dir)`` breaks a copy of ``druid_sample``; ``overrides`` are the user's own
    config overrides (``--config FILE`` for the CLI, the ``config_overrides`` param for the DAG).
    ``file`` is the file the refusal names (``None`` for an override: the CLI names ``--config
    FILE``, the DAG ``param config_overrides``); ``needles`` are what else it must hold, in that
    order where it matters: where, the value, what was expected.
    """

    name: str
    file: str | None
    needles: tuple[str, ...]
    edit: Callable[[Path], None] = lambda snap: None
    overrides: dict[str, Any] | None = None
    spark: bool = False


def bad_snapshot(directory: Path, kind: Kind) -> Path:
    """A copy of ``druid_sample`` at ``directory`` broken by ``kind``."""
    shutil.copytree(SAMPLE, directory)
    kind.edit(directory)
    return directory


# ---- edits ---------------------------------------------------------------------------------------


def json_file(name: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    """Edit JSON file ``name``: ``change(value)`` returns the new value (or edits in place)."""

    def edit(snap: Path) -> None:
        value = json.loads((snap / name).read_text())
        out = change(value)
        (snap / name).write_text(json.dumps(value if out is None else out, indent=1))

    return edit


def text_file(name: str, change: Callable[[str], str]) -> Callable[[Path], None]:
    """Edit file ``name`` as text."""

    def edit(snap: Path) -> None:
        (snap / name).write_text(change((snap / name).read_text()))

    return edit


def segments(change: Callable[[list], list]) -> Callable[[Path], None]:
    """Rewrite the segments as plain ``segments.jsonl``: ``change(rows)`` returns the lines (dicts,
    or str for raw text)."""

    def edit(snap: Path) -> None:
        rows = [json.loads(x) for x in gzip.open(snap / "segments.jsonl.gz", "rt").read().splitlines()]
        (snap / "segments.jsonl.gz").unlink()
        lines = change(rows)
        (snap / "segments.jsonl").write_text(
            "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
        )

    return edit


def segment_field(row: int, **fields: Any) -> Callable[[Path], None]:
    """Set ``fields`` of segment ``row`` (0-based; its line is ``row + 1``)."""

    def change(rows: list) -> list:
        rows[row].update(fields)
        return rows

    return segments(change)


def truncated(name: str) -> Callable[[Path], None]:
    """Cut gzip file ``name`` in half (made from the plain file first if needed)."""

    def edit(snap: Path) -> None:
        path = snap / name
        if not path.exists():  # server_segments.jsonl.gz from server_segments.json
            plain = snap / name.replace(".jsonl.gz", ".json")
            rows = json.loads(plain.read_text())
            plain.unlink()
            path.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in rows).encode()))
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])

    return edit


def server(row: int, **fields: Any) -> Callable[[Path], None]:
    def change(rows: list) -> None:
        rows[row].update(fields)

    return json_file("servers.json", change)


def rule(datasource: str, index: int, value: Any) -> Callable[[Path], None]:
    def change(rules: dict) -> None:
        rules[datasource][index] = value

    return json_file("rules.json", change)


def config(**values: Any) -> Callable[[Path], None]:
    def change(cfg: dict) -> None:
        cfg.update(values)

    return json_file("coordinator_config.json", change)


def queue(server_name: str, **lists: Any) -> Callable[[Path], None]:
    def change(queues: dict) -> None:
        queues[server_name].update(lists)

    return json_file("load_queues.json", change)


def meta(**values: Any) -> Callable[[Path], None]:
    def change(m: dict) -> None:
        m.update(values)

    return json_file("snapshot.json", change)


def raw_constant(name: str, key: str, constant: str) -> Callable[[Path], None]:
    """Put the non-JSON constant ``constant`` (NaN, Infinity) as the first ``"key": …`` value of ``name``."""

    def change(text: str) -> str:
        start = text.index(f'"{key}"')
        end = text.index(",", start)
        return text[:start] + f'"{key}": {constant}' + text[end:]

    return text_file(name, change)


def cut_text(name: str, fraction: float = 0.5) -> Callable[[Path], None]:
    return text_file(name, lambda t: t[: int(len(t) * fraction)])


H0, H1 = "hist-default-01:8083", "hist-default-02:8083"
LOAD = {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}


def _duplicate_server(rows: list) -> None:
    rows.append({**rows[1], "max_size": 2_000_000_000})


def _duplicate_segment(rows: list) -> list:
    return rows + [{**rows[1], "size": rows[1]["size"] + 1}]


def _unknown_replica_server(rows: list) -> None:
    rows.append({"server": "hist-ghost:8083", "segment_id": rows[0]["segment_id"]})


def _unknown_replica_segment(rows: list) -> None:
    rows.append({"server": H0, "segment_id": "garbage-id"})


def _no_default_rules(rules: dict) -> None:
    del rules["_default"]


#: Every kind; ``spark`` ones last.
KINDS: list[Kind] = [
    # ---- servers.json
    Kind(
        "servers: truncated",
        "servers.json",
        ("line ", "malformed JSON", "column", "in the line '"),
        cut_text("servers.json"),
    ),
    Kind(
        "servers: negative max_size",
        "servers.json",
        ("row 1", "max_size", "-5", "must be >= 0"),
        server(1, max_size=-5),
    ),
    Kind(
        "servers: max_size a string",
        "servers.json",
        ("row 2", "max_size", '"10GB"', "must be an integer"),
        server(2, max_size="10GB"),
    ),
    Kind(
        "servers: max_size NaN",
        "servers.json",
        ("line ", "NaN", "not valid JSON"),
        raw_constant("servers.json", "max_size", "NaN"),
    ),
    Kind(
        "servers: max_size huge",
        "servers.json",
        ("row 0", "max_size", "99999999999999999999999", "must be <="),
        server(0, max_size=99999999999999999999999),
    ),
    Kind(
        "servers: fractional curr_size",
        "servers.json",
        ("row 3", "curr_size", "1.5", "must be an integer"),
        server(3, curr_size=1.5),
    ),
    Kind(
        "servers: same server twice, different content",
        "servers.json",
        ("row 6", "hist-default-02:8083", "repeats row 1"),
        json_file("servers.json", _duplicate_server),
    ),
    Kind("servers: tier null", "servers.json", ("row 4", "tier", "null"), server(4, tier=None)),
    Kind(
        "servers: priority a word",
        "servers.json",
        ("row 0", "priority", '"high"', "must be an integer"),
        server(0, priority="high"),
    ),
    Kind(
        "servers: version not a release number",
        "servers.json",
        ("row 1", "version", '"35"', "must be a Druid version MAJOR.MINOR.PATCH"),
        server(1, version="35"),
    ),
    Kind(
        "servers: not an array",
        "servers.json",
        ("JSON array", "got an object"),
        json_file("servers.json", lambda rows: {"servers": rows}),
    ),
    # ---- load_queues.json
    Kind(
        "queues: unknown server",
        "load_queues.json",
        ("hist-ghost:8083", "not a historical server"),
        json_file("load_queues.json", lambda q: {**q, "hist-ghost:8083": {"segmentsToLoad": [WIKI]}}),
    ),
    Kind(
        "queues: load and drop of one segment",
        "load_queues.json",
        (H0, WIKI, "both in segmentsToLoad and segmentsToDrop"),
        queue(H0, segmentsToLoad=[WIKI], segmentsToDrop=[WIKI]),
    ),
    Kind(
        "queues: unknown queue_type",
        "load_queues.json",
        (H0, "segmentsToLoad[0]", '"moving"', "must be one of"),
        queue(H0, segmentsToLoad=[{"segment_id": WIKI, "queue_type": "moving"}]),
    ),
    Kind(
        "queues: unparseable requested_at",
        "load_queues.json",
        (H0, "requested_at", "noon"),
        queue(H0, segmentsToLoad=[{"segment_id": WIKI, "requested_at": "noon"}]),
    ),
    Kind(
        "queues: list is a string",
        "load_queues.json",
        (H0, "segmentsToLoad", "must be a list"),
        queue(H0, segmentsToLoad=WIKI),
    ),
    Kind(
        "queues: unknown reference",
        "load_queues.json",
        (H0, "segmentsToLoad[0]", "garbage-id", "not in segments.jsonl and is not a Druid segment id"),
        queue(H0, segmentsToLoad=["garbage-id"]),
        spark=True,
    ),
    Kind(
        "queues: truncated",
        "load_queues.json",
        ("line ", "malformed JSON", "column", "in the line '"),
        cut_text("load_queues.json"),
    ),
    Kind(
        "queues: one segment queued twice",
        "load_queues.json",
        (H1, "segmentsToLoad[1]", WIKI, "listed twice"),
        queue(H1, segmentsToLoad=[WIKI, {"segment_id": WIKI, "queue_type": "loading"}]),
    ),
    # ---- rules.json
    Kind(
        "rules: a datasource twice, different rules",
        "rules.json",
        ("duplicate key 'twitterstream'", "expected each key once"),
        text_file(
            "rules.json", lambda t: t.replace('"_default":', '"twitterstream": [{"type": "dropForever"}], "_default":')
        ),
    ),
    Kind("rules: no _default", "rules.json", ("'_default'", "missing"), json_file("rules.json", _no_default_rules)),
    Kind(
        "rules: unknown type",
        "rules.json",
        ("'twitterstream' rule [1]", "'loadSometimes'", "unknown rule type"),
        rule("twitterstream", 1, {"type": "loadSometimes"}),
    ),
    Kind(
        "rules: bad period",
        "rules.json",
        ("rule [0]", "'1 month'", "ISO-8601 period"),
        rule("_default", 0, {"type": "loadByPeriod", "period": "1 month", "tieredReplicants": {"_default_tier": 2}}),
    ),
    Kind(
        "rules: reversed interval",
        "rules.json",
        ("rule [0]", "2013-02-01", "end is before its start"),
        rule(
            "twitterstream",
            0,
            {"type": "loadByInterval", "interval": "2013-02-01/2013-01-01", "tieredReplicants": {"hot": 1}},
        ),
    ),
    Kind(
        "rules: unparseable interval",
        "rules.json",
        ("rule [0]", "soon/later", "interval"),
        rule("twitterstream", 0, {"type": "loadByInterval", "interval": "soon/later", "tieredReplicants": {"hot": 1}}),
    ),
    Kind(
        "rules: negative replicants",
        "rules.json",
        ("rule [0]", "-1", "must be >= 0"),
        rule("_default", 0, {"type": "loadForever", "tieredReplicants": {"_default_tier": -1}}),
    ),
    Kind(
        "rules: huge replicants",
        "rules.json",
        ("rule [0]", "1000000000000", "must be <="),
        rule("_default", 0, {"type": "loadForever", "tieredReplicants": {"_default_tier": 10**12}}),
    ),
    Kind(
        "rules: replicants a string",
        "rules.json",
        ("rule [0]", '"2"', "must be an integer"),
        rule("_default", 0, {"type": "loadForever", "tieredReplicants": {"_default_tier": "2"}}),
    ),
    Kind(
        "rules: misspelt field",
        "rules.json",
        ("rule [0]", "includeFutur", "not a known field"),
        rule("_default", 0, {**LOAD, "includeFutur": True}),
    ),
    Kind(
        "rules: truncated",
        "rules.json",
        ("line ", "malformed JSON", "column", "in the line '"),
        cut_text("rules.json", 0.6),
    ),
    # ---- coordinator_config.json (captured, as Druid returned it)
    Kind(
        "config: negative queue size",
        "coordinator_config.json",
        ("maxSegmentsInNodeLoadingQueue", "-3", "must be >= 0"),
        config(maxSegmentsInNodeLoadingQueue=-3),
    ),
    Kind(
        "config: queue size a word",
        "coordinator_config.json",
        ("maxSegmentsInNodeLoadingQueue", "'lots'", "must be an integer"),
        config(maxSegmentsInNodeLoadingQueue="lots"),
    ),
    Kind(
        "config: Infinity",
        "coordinator_config.json",
        ("line ", "Infinity", "not valid JSON"),
        raw_constant("coordinator_config.json", "maxSegmentsInNodeLoadingQueue", "Infinity"),
    ),
    Kind(
        "config: huge queue size",
        "coordinator_config.json",
        ("maxSegmentsInNodeLoadingQueue", "100000000000000000000", "must be <= 2147483647"),
        config(maxSegmentsInNodeLoadingQueue=10**20),
    ),
    Kind(
        "config: zero iteration window",
        "coordinator_config.json",
        ("balancingIterationWindow", "0", "must be >= 1"),
        config(balancingIterationWindow=0),
    ),
    Kind(
        "config: threshold above the window",
        "coordinator_config.json",
        ("balancingFailedIterationThreshold", "150", "must be <= 100"),
        config(balancingFailedIterationThreshold=150),
    ),
    Kind(
        "config: negative margin",
        "coordinator_config.json",
        ("balancingMinCostReductionPercent", "-1"),
        config(balancingMinCostReductionPercent=-1),
    ),
    Kind(
        "config: percent above 100",
        "coordinator_config.json",
        ("balancingMinPercent", "250", "between 0 and 100"),
        config(balancingMinPercent=250),
    ),
    Kind(
        "config: min percents over 100",
        "coordinator_config.json",
        ("loadingMinPercent", "more than 100"),
        config(loadingMinPercent=60, balancingMinPercent=50),
    ),
    Kind(
        "config: decommissioningNodes a number",
        "coordinator_config.json",
        ("decommissioningNodes", "5", "list of server names"),
        config(decommissioningNodes=5),
    ),
    Kind(
        "config: bad period",
        "coordinator_config.json",
        ("druid.coordinator.period", "'sometimes'", "ISO-8601 period"),
        config(**{"druid.coordinator.period": "sometimes"}),
    ),
    Kind(
        "config: unknown balancingMoveTrigger",
        "coordinator_config.json",
        ("balancingMoveTrigger", "'often'", "must be one of"),
        config(balancingMoveTrigger="often"),
    ),
    Kind(
        "config: not an object",
        "coordinator_config.json",
        ("must be a JSON object", "got an array"),
        json_file("coordinator_config.json", lambda c: [c]),
    ),
    Kind(
        "config: function that never returns",
        "coordinator_config.json",
        ("numBestServersChoosingFunction", "while (true)", "is not accepted", "f(1, 1) did not return within 1000 ms"),
        config(numBestServersChoosingFunction="function (a, b) { while (true) {} }"),
    ),
    Kind(
        "config: function reaching for the host",
        "coordinator_config.json",
        ("numBestServersChoosingFunction", "require", "is not accepted", "ReferenceError: require is not defined"),
        config(numBestServersChoosingFunction="function (a, b) { return require('fs').readFileSync('/etc/passwd'); }"),
    ),
    Kind(
        "config: function that is no function",
        "coordinator_config.json",
        ("numBestServersChoosingFunction", "rm -rf /", "is not accepted", "SyntaxError"),
        config(numBestServersChoosingFunction="rm -rf /"),
    ),
    Kind(
        "config: function returning no number",
        "coordinator_config.json",
        ("numBestServersChoosingFunction", "is not accepted", "f(1, 1) returned undefined, not a number"),
        config(numBestServersChoosingFunction="function (a, b) { if (a > 100) return a / 10; }"),
    ),
    Kind(
        "config: function of a megabyte",
        "coordinator_config.json",
        ("numBestServersChoosingFunction", "is not accepted", "longer than 10000 characters"),
        config(numBestServersChoosingFunction="function (a, b) { return " + "1 + " * 250_000 + "1; }"),
    ),
    Kind(
        "config: function not a string",
        "coordinator_config.json",
        ("numBestServersChoosingFunction", "42", "must be a string"),
        config(numBestServersChoosingFunction=42),
    ),
    Kind(
        "config: log base of 1",
        "coordinator_config.json",
        ("numBestServersChoosingFunctionDefaultLogBase", "1", "must be > 1"),
        config(numBestServersChoosingFunctionDefaultLogBase=1),
    ),
    Kind(
        "config: decommissioningMinPercent a word",
        "coordinator_config.json",
        ("decommissioningMinPercent", "'ten'", "must be a finite number"),
        config(decommissioningMinPercent="ten"),
    ),
    Kind(
        "config: decommissioningMaxPercent negative",
        "coordinator_config.json",
        ("decommissioningMaxPercent", "-5", "between 0 and 100"),
        config(decommissioningMaxPercent=-5),
    ),
    Kind(
        "config: negative alerting seconds",
        "coordinator_config.json",
        ("segmentLoadingMaxSecondsBeforeAlerting", "-60", "must be >= 0"),
        config(segmentLoadingMaxSecondsBeforeAlerting=-60),
    ),
    Kind(
        "config: seed a fraction",
        "coordinator_config.json",
        ("balancerRandomSeed", "0.5", "must be an integer"),
        config(balancerRandomSeed=0.5),
    ),
    Kind(
        "config: topBReuse a word",
        "coordinator_config.json",
        ("topBReuse", "'yes'", "must be true or false"),
        config(topBReuse="yes"),
    ),
    Kind(
        "config: periods that disagree",
        "coordinator_config.json",
        ("coordinatorPeriodMillis", "30000", "disagrees with druid.coordinator.period (60000 ms)"),
        config(**{"druid.coordinator.period": "PT60S", "coordinatorPeriodMillis": 30000}),
    ),
    Kind(
        "config: truncated",
        "coordinator_config.json",
        ("line ", "malformed JSON", "column", "in the line '"),
        cut_text("coordinator_config.json", 0.5),
    ),
    # ---- the user's own overrides (--config FILE, param config_overrides)
    Kind(
        "overrides: misspelt key",
        None,
        ("unknown key 'maxSegmentsToMov'", "did you mean 'maxSegmentsToMove'"),
        overrides={"maxSegmentsToMov": 5},
    ),
    Kind(
        "overrides: wrong type",
        None,
        ("maxSegmentsInNodeLoadingQueue", "'many'", "must be an integer"),
        overrides={"maxSegmentsInNodeLoadingQueue": "many"},
    ),
    # ---- snapshot.json
    Kind(
        "meta: no snapshot_time",
        "snapshot.json",
        ("snapshot_time", "ISO-8601"),
        json_file("snapshot.json", lambda m: {"cluster": m["cluster"]}),
    ),
    Kind(
        "meta: impossible date",
        "snapshot.json",
        ("snapshot_time", "2024-02-30", "out of range"),
        meta(snapshot_time="2024-02-30T00:00:00Z"),
    ),
    Kind("meta: empty cluster", "snapshot.json", ("cluster", "got ''", "non-empty string"), meta(cluster="")),
    Kind("meta: unknown key", "snapshot.json", ("unknown key(s) captured_by",), meta(captured_by="me")),
    Kind(
        "meta: druid_version not a release number",
        "snapshot.json",
        ("druid_version", '"latest"', "must be a Druid version MAJOR.MINOR.PATCH"),
        meta(druid_version="latest"),
    ),
    Kind(
        "meta: truncated",
        "snapshot.json",
        ("line ", "malformed JSON", "column", "in the line '"),
        cut_text("snapshot.json"),
    ),
    # ---- segments.jsonl (Spark)
    Kind(
        "segments: a line that is no JSON",
        "segments.jsonl",
        ("line 2", "{not json", "JSON object"),
        segments(lambda rows: [rows[0], "{not json", *rows[2:]]),
        spark=True,
    ),
    Kind(
        "segments: interval of one part",
        "segments.jsonl",
        ("line 1", "yesterday", "expected e.g. 2013-01-01T"),
        segment_field(0, interval="yesterday"),
        spark=True,
    ),
    Kind(
        "segments: reversed interval",
        "segments.jsonl",
        ("line 2", "2013-01-03T00:00:00.000Z/2013-01-02T00:00:00.000Z", "expected start <= end"),
        segment_field(1, interval="2013-01-03T00:00:00.000Z/2013-01-02T00:00:00.000Z"),
        spark=True,
    ),
    Kind(
        "segments: size NaN",
        "segments.jsonl",
        ("line 3", "NaN", "whole number of bytes"),
        segment_field(2, size=float("nan")),
        spark=True,
    ),
    Kind(
        "segments: size a word",
        "segments.jsonl",
        ("line 4", '"big"', "whole number of bytes"),
        segment_field(3, size="big"),
        spark=True,
    ),
    Kind("segments: negative size", "segments.jsonl", ("line 5", "-1", "size"), segment_field(4, size=-1), spark=True),
    Kind(
        "segments: huge size",
        "segments.jsonl",
        ("line 1", "99999999999999999999", "whole number of bytes"),
        segment_field(0, size=99999999999999999999),
        spark=True,
    ),
    Kind(
        "segments: no dataSource",
        "segments.jsonl",
        ("line 2", "dataSource"),
        segment_field(1, dataSource=None),
        spark=True,
    ),
    Kind(
        "segments: same id twice, different content",
        "segments.jsonl",
        ("line 6", "line 2", "twitterstream_2013-01-02"),
        segments(_duplicate_segment),
        spark=True,
    ),
    Kind(
        "segments: truncated gzip",
        "segments.jsonl.gz",
        ("not a whole gzip file", "Unexpected end of input stream"),
        truncated("segments.jsonl.gz"),
        spark=True,
    ),
    # ---- server_segments.json (Spark)
    Kind(
        "replicas: unknown server",
        "server_segments.json",
        ("row 7", "hist-ghost:8083", "not in servers.json"),
        json_file("server_segments.json", _unknown_replica_server),
        spark=True,
    ),
    Kind(
        "replicas: unknown segment",
        "server_segments.json",
        ("row 7", "garbage-id", "not in segments.jsonl and is not a Druid segment id"),
        json_file("server_segments.json", _unknown_replica_segment),
        spark=True,
    ),
    Kind(
        "replicas: truncated gzip",
        "server_segments.jsonl.gz",
        ("not a whole gzip file",),
        truncated("server_segments.jsonl.gz"),
        spark=True,
    ),
    Kind(
        "replicas: truncated JSON",
        "server_segments.json",
        ("row 3", "not valid JSON, got {", "expected an object"),
        cut_text("server_segments.json", 0.5),
        spark=True,
    ),
]

KINDS_BY_NAME = {k.name: k for k in KINDS}
assert len(KINDS_BY_NAME) == len(KINDS)
