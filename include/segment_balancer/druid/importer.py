"""``druid_segments`` SQL rows → ``segments.jsonl.gz`` (one Druid ``DataSegment`` per line).

Reads the ``INSERT INTO druid_segments ...`` statements of a MySQL or Derby dump of Druid's metadata
store (Druid's table layout: ``SQLMetadataConnector.createSegmentTable``) and writes the ``payload``
of every row with ``"used"`` added, in the format of ``docs/ARCHITECTURE.md``. The SQL is read by a
small tokenizer (strings with backslash escapes and doubled quotes, numbers, quoted identifiers,
``--``/``#``/``/* */`` comments) and a recursive-descent reader of ``INSERT`` statements; every
other statement (``CREATE TABLE``, ``LOCK TABLES``, inserts into other tables, ...) is skipped.

Also here: Druid's segment id and the ISO-8601 <-> epoch-millisecond conversions it needs.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator
from typing import NamedTuple

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import atomic_file, write_text_atomic
from segment_balancer.druid.instants import format_instant_ms, parse_instant_ms

# Druid's column order of druid_segments, used when an INSERT has no column list (mysqldump's
# default). Later Druid versions append columns (used_status_last_updated, ...), which are ignored.
DRUID_SEGMENT_COLUMNS = (
    "id",
    "datasource",
    "created_date",
    "start",
    "end",
    "partitioned",
    "version",
    "used",
    "payload",
)
REQUIRED_COLUMNS = ("id", "datasource", "start", "end", "version", "used", "payload")


class SqlImportError(InputError):
    """A problem in a SQL dump: ``str(err)`` is ``"<file>:<line>: <problem>"``.

    Attributes: ``path`` (str), ``line`` (int, 1-based, 0 when unknown), ``problem`` (str).
    """

    def __init__(self, path: str, line: int, problem: str):
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


# ---------------------------------------------------------------------------------------- time

iso_to_ms = parse_instant_ms
ms_to_iso = format_instant_ms


def parse_interval(text: str) -> tuple[int, int]:
    """``(start_ms, end_ms)`` of a Druid interval ``"start/end"``; ``ValueError`` if malformed or
    if end is before start."""
    parts = text.split("/") if isinstance(text, str) else []
    if len(parts) != 2:
        raise ValueError(f"not an interval 'start/end': {text!r}")
    start, end = iso_to_ms(parts[0]), iso_to_ms(parts[1])
    if end < start:
        raise ValueError(f"interval ends before it starts: {text!r}")
    return start, end


def segment_id(payload: dict) -> str:
    """Druid's segment id of a ``DataSegment`` payload (``SegmentId.toString()``).

    ``dataSource_start_end_version[_partitionNum]``: start and end of ``payload["interval"]`` as
    ``yyyy-MM-ddTHH:mm:ss.SSSZ`` in UTC, ``partitionNum`` from ``payload["shardSpec"]`` (its
    ``partitionId`` for ``numbered_overwrite``; missing, as for ``{"type": "none"}``, means 0) and
    omitted when 0. Raises ``ValueError`` (bad interval)
    or ``KeyError`` (missing ``dataSource``/``interval``/``version``).
    """
    start, end = parse_interval(payload["interval"])
    shard = payload.get("shardSpec") or {}
    partition = int(shard.get("partitionNum", shard.get("partitionId", 0)) or 0)
    text = f"{payload['dataSource']}_{ms_to_iso(start)}_{ms_to_iso(end)}_{payload['version']}"
    return f"{text}_{partition}" if partition else text


# ----------------------------------------------------------------------------------- tokenizer


class Token(NamedTuple):
    """One SQL token: ``kind`` is ``word``, ``ident`` (quoted identifier), ``string``, ``number``,
    ``punct`` or ``eof``; ``line`` is where it starts (1-based)."""

    kind: str
    value: object
    line: int


_TOKEN = re.compile(
    r"""
    (?P<punct>[(),;.=])
  | '(?P<string>(?:[^'\\]+|\\.|'')*)'
  | (?P<space>\s+)
  | (?P<comment>(?:--|\#)[^\n]*)
  | (?P<block>/\*.*?\*/)
  | `(?P<backquoted>[^`]*)`
  | "(?P<quoted>[^"]*)"
  | 0[xX](?P<hex>[0-9A-Fa-f]*)(?![A-Za-z0-9_$])
  | [xX]'(?P<xhex>[0-9A-Fa-f]*)'
  | (?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
""",
    re.X | re.S,
)
_STRING_ESCAPE = re.compile(r"\\(.)|''", re.S)
_ESCAPES = {
    "0": "\0",
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "%": "\\%",
    "_": "\\_",
}  # MySQL keeps the backslash of \% and \_
_UNTERMINATED = (
    ("'", "unterminated string literal"),
    ("/*", "unterminated /* comment"),
    ("`", "unterminated quoted identifier `"),
    ('"', 'unterminated quoted identifier "'),
    ("x'", "unterminated hex string X'...'"),
    ("X'", "unterminated hex string X'...'"),
)


def tokenize(text: str, path: str = "<sql>") -> Iterator[Token]:
    """The tokens of ``text``, comments and whitespace left out, ending with an ``eof`` token.

    Strings: single-quoted, with MySQL backslash escapes and doubled quotes; quoted identifiers in
    backquotes or double quotes; ``0x..`` and ``X'..'`` hex literals become UTF-8 strings; a
    signed number only where a value starts (after ``(`` or ``,``). Raises ``SqlImportError``
    (naming ``path`` and the line) on an unterminated string, identifier or comment, or on a
    character that starts no token.
    """
    pos, line, size, last = 0, 1, len(text), None
    match_token = _TOKEN.match
    while pos < size:
        found = match_token(text, pos)
        if found is None:
            problem = next(
                (p for prefix, p in _UNTERMINATED if text.startswith(prefix, pos)),
                f"unexpected character {text[pos]!r}",
            )
            raise SqlImportError(path, line, problem)
        kind, raw = found.lastgroup, found.group(found.lastgroup)
        token = None
        if kind == "string":
            value = _STRING_ESCAPE.sub(_unescape, raw) if ("\\" in raw or "'" in raw) else raw
            token = Token("string", value, line)
        elif kind in ("backquoted", "quoted"):
            token = Token("ident", raw, line)
        elif kind in ("hex", "xhex"):
            token = Token("string", _hex_text(raw, path, line), line)
        elif kind == "number":
            if raw[0] in "+-" and not (last is not None and last.kind == "punct" and last.value in "(,"):
                raise SqlImportError(path, line, f"unexpected character {raw[0]!r}")
            token = Token("number", float(raw) if any(c in raw for c in ".eE") else int(raw), line)
        elif kind in ("word", "punct"):
            token = Token(kind, raw, line)
        if token is not None:
            last = token
            yield token
        if kind in ("space", "block", "string", "backquoted", "quoted"):
            line += found.group(0).count("\n")
        pos = found.end()
    yield Token("eof", None, line)


def _unescape(match: re.Match) -> str:
    escaped = match.group(1)
    return "'" if escaped is None else _ESCAPES.get(escaped, escaped)


def _hex_text(digits: str, path: str, line: int) -> str:
    try:
        return bytes.fromhex(digits).decode("utf-8")
    except ValueError as err:
        raise SqlImportError(path, line, f"bad hex literal: {err}") from None


# -------------------------------------------------------------------------------------- parser


class _Reader:
    """Cursor over the tokens with one token of lookahead."""

    def __init__(self, tokens: Iterator[Token], path: str):
        self.tokens, self.path = tokens, path
        self.peek = next(tokens)

    def take(self) -> Token:
        tok, self.peek = self.peek, (self.peek if self.peek.kind == "eof" else next(self.tokens))
        return tok

    def error(self, problem: str, tok: Token | None = None) -> SqlImportError:
        return SqlImportError(self.path, (tok or self.peek).line, problem)

    def is_word(self, *words: str) -> bool:
        return self.peek.kind == "word" and self.peek.value.upper() in words

    def expect_punct(self, ch: str, what: str) -> Token:
        if self.peek.kind != "punct" or self.peek.value != ch:
            raise self.error(f"expected {ch!r} {what}, found {_show(self.peek)}")
        return self.take()

    def name(self, what: str) -> str:
        if self.peek.kind not in ("word", "ident"):
            raise self.error(f"expected {what}, found {_show(self.peek)}")
        return self.take().value


def _show(tok: Token) -> str:
    if tok.kind == "eof":
        return "end of file"
    text = repr(tok.value)
    return f"{tok.kind} {text[:40] + '...' if len(text) > 40 else text}"


def read_segment_rows(path: str, table: str = "druid_segments") -> Iterator[tuple[int, dict]]:
    """Yield ``(line, row)`` for every row inserted into ``table`` in the SQL file ``path``.

    ``row`` maps lower-cased column names to values (``str``, ``int``, ``float``, ``bool`` or
    ``None``); ``line`` is the line of the row's ``(``. Without a column list the columns are
    Druid's (``DRUID_SEGMENT_COLUMNS``). Statements other than ``INSERT INTO <table>`` are skipped.
    Raises ``SqlImportError`` on malformed SQL.
    """
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    reader = _Reader(tokenize(text, path), path)
    while reader.peek.kind != "eof":
        if reader.is_word("INSERT", "REPLACE"):
            yield from _insert(reader, table.lower())
        else:
            _skip_statement(reader)


def _skip_statement(reader: _Reader) -> None:
    """Skip to just after the next ``;`` (or to the end of the file)."""
    while reader.peek.kind != "eof":
        tok = reader.take()
        if tok.kind == "punct" and tok.value == ";":
            return


def _insert(reader: _Reader, table: str) -> Iterator[tuple[int, dict]]:
    start = reader.take()
    while reader.is_word("IGNORE", "LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY"):
        reader.take()
    if not reader.is_word("INTO"):
        raise reader.error(f"expected INTO after {start.value}, found {_show(reader.peek)}")
    reader.take()
    name = reader.name("a table name")
    while reader.peek.kind == "punct" and reader.peek.value == ".":
        reader.take()
        name = reader.name("a table name after '.'")
    if name.lower() != table:
        _skip_statement(reader)
        return
    columns, explicit = list(DRUID_SEGMENT_COLUMNS), False
    if reader.peek.kind == "punct" and reader.peek.value == "(":
        explicit = True
        reader.take()
        columns = [reader.name("a column name").lower()]
        while reader.peek.kind == "punct" and reader.peek.value == ",":
            reader.take()
            columns.append(reader.name("a column name").lower())
        reader.expect_punct(")", "after the column list")
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            raise reader.error(f"column list lacks {', '.join(missing)}", start)
    if not reader.is_word("VALUES", "VALUE"):
        raise reader.error(f"expected VALUES, found {_show(reader.peek)}")
    reader.take()
    while True:
        open_tok = reader.expect_punct("(", "to open a row")
        values = [_value(reader)]
        while reader.peek.kind == "punct" and reader.peek.value == ",":
            reader.take()
            values.append(_value(reader))
        reader.expect_punct(")", "to close the row")
        if len(values) < len(columns) or (explicit and len(values) > len(columns)):
            raise reader.error(f"row has {len(values)} values for {len(columns)} columns", open_tok)
        yield open_tok.line, dict(zip(columns, values))
        if reader.peek.kind == "punct" and reader.peek.value == ",":
            reader.take()
            continue
        if reader.peek.kind == "eof":
            raise reader.error("INSERT statement not terminated by ';'")
        reader.expect_punct(";", "to end the INSERT statement")
        return


def _value(reader: _Reader):
    tok = reader.peek
    if tok.kind in ("string", "number"):
        return reader.take().value
    if tok.kind == "word":
        word = tok.value.upper()
        if word in ("NULL", "TRUE", "FALSE"):
            reader.take()
            return {"NULL": None, "TRUE": True, "FALSE": False}[word]
        if word.startswith("_"):  # MySQL charset introducer: _binary '...', _utf8mb4 '...'
            reader.take()
            if reader.peek.kind != "string":
                raise reader.error(f"expected a string after {tok.value}, found {_show(reader.peek)}")
            return reader.take().value
    raise reader.error(f"expected a value, found {_show(tok)}")


# ------------------------------------------------------------------------------------ importer


def _as_bool(value, path: str, line: int) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "1.0", "true", "t", "\x01"):
        return True
    if text in ("0", "0.0", "false", "f", "\x00"):
        return False
    raise SqlImportError(path, line, f"column used is not a boolean: {value!r}")


def row_to_segment(row: dict, path: str, line: int) -> dict:
    """The ``DataSegment`` of one ``druid_segments`` row: its ``payload`` plus ``"used"`` (bool).

    Checks that the payload is a JSON object whose ``dataSource``, ``interval`` (as instants),
    ``version`` and segment id agree with the row's ``dataSource``, ``start``/``end``, ``version``
    and ``id`` columns and whose ``size`` is a non-negative integer (bytes). Raises
    ``SqlImportError(path, line, problem)`` otherwise.
    """

    def fail(problem: str) -> SqlImportError:
        return SqlImportError(path, line, f"row {row.get('id')!r}: {problem}")

    if not isinstance(row.get("payload"), str):
        raise fail(f"payload is not a string: {type(row.get('payload')).__name__}")
    try:
        payload = json.loads(row["payload"])
    except json.JSONDecodeError as err:
        raise fail(f"payload is not valid JSON: {err}") from None
    if not isinstance(payload, dict):
        raise fail("payload is not a JSON object")
    for key in ("dataSource", "interval", "version"):
        if not isinstance(payload.get(key), str):
            raise fail(f"payload has no string {key!r}")
    if payload["dataSource"] != row["datasource"]:
        raise fail(f"payload dataSource {payload['dataSource']!r} != column {row['datasource']!r}")
    if payload["version"] != row["version"]:
        raise fail(f"payload version {payload['version']!r} != column {row['version']!r}")
    try:
        start, end = parse_interval(payload["interval"])
        if (start, end) != (iso_to_ms(str(row["start"])), iso_to_ms(str(row["end"]))):
            raise fail(f"payload interval {payload['interval']!r} != columns {row['start']!r}/{row['end']!r}")
        expected_id = segment_id(payload)
    except ValueError as err:
        if isinstance(err, SqlImportError):
            raise
        raise fail(str(err)) from None
    if expected_id != row["id"]:
        raise fail(f"column id != the payload's segment id {expected_id!r}")
    size = payload.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise fail(f"payload size is not a non-negative integer: {size!r}")
    payload["used"] = _as_bool(row["used"], path, line)
    return payload


def write_gzip_lines(path: str, lines) -> None:
    """Write ``lines`` (str, without newlines) gzipped to ``path``, atomically and reproducibly
    (no file name, mtime 0 in the gzip header; ``common.files.atomic_file``)."""
    with atomic_file(path, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as out:
        for text in lines:
            out.write(text.encode("utf-8"))
            out.write(b"\n")


def write_json(path: str, value) -> None:
    """Write ``value`` as JSON indented by 2 (keys in the order given) to ``path``, atomically."""
    write_text_atomic(json.dumps(value, indent=2) + "\n", path)


def import_druid_segments_sql(sql_path: str, out_dir: str, table: str = "druid_segments") -> int:
    """Import the ``druid_segments`` rows of a SQL dump into ``out_dir/segments.jsonl.gz``.

    ``sql_path``: a MySQL/Derby dump with ``INSERT INTO druid_segments [(cols)] VALUES (...)[, ...];``
    statements (columns per Druid's ``SQLMetadataConnector``). Writes one line per row, in file
    order: the ``payload`` JSON with ``"used": bool(used)`` added (see ``row_to_segment``); the
    gzip is reproducible and replaces any earlier file atomically. ``out_dir`` is created if needed.
    Returns the number of segments written. Raises ``SqlImportError`` (file, line, problem) on
    malformed SQL, a row that disagrees with its payload, a duplicate segment id, or no rows at all.
    """
    seen: dict[str, int] = {}
    lines: list[str] = []
    for line, row in read_segment_rows(sql_path, table):
        segment = row_to_segment(row, sql_path, line)
        if row["id"] in seen:
            raise SqlImportError(
                sql_path, line, f"duplicate segment id {row['id']!r} (first at line {seen[row['id']]})"
            )
        seen[row["id"]] = line
        lines.append(json.dumps(segment, separators=(",", ":")))
    if not lines:
        raise SqlImportError(sql_path, 0, f"no INSERT INTO {table} rows found")
    os.makedirs(out_dir, exist_ok=True)
    write_gzip_lines(os.path.join(out_dir, "segments.jsonl.gz"), lines)
    return len(lines)
