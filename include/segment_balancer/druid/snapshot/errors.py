"""The one error type of snapshot input: ``SnapshotError(file, row, problem)``.

A snapshot with any error is refused before any stage runs (ALGORITHM.md "Inputs"). The message
names the file, where in it, and the problem, e.g. ``servers.json row 3: max_size must be >= 0,
got -5``. ``row`` is a 0-based array index for JSON arrays (``row N``) or a 1-based line number for
JSONL files and malformed JSON (``line N``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ValidationError

from segment_balancer.common.errors import InputError

RowKind = Literal["index", "line"]


class SnapshotError(InputError):
    """An invalid snapshot input.

    Attributes:
        file: file name inside the snapshot directory (``servers.json``), or ``config overrides``.
        row: ``None`` when the problem is not in one row; else a 0-based array index
            (``row_kind="index"``, printed ``row N``) or a 1-based line (``row_kind="line"``,
            printed ``line N``).
        problem: what is wrong, including the offending value.
        row_kind: ``"index"`` or ``"line"``.
    """

    def __init__(self, file: str, row: int | None, problem: str, row_kind: RowKind = "index"):
        self.file = file
        self.row = row
        self.problem = problem
        self.row_kind = row_kind
        super().__init__(self._render())

    def _render(self) -> str:
        if self.row is None:
            return f"{self.file}: {self.problem}"
        word = "row" if self.row_kind == "index" else "line"
        return f"{self.file} {word} {self.row}: {self.problem}"

    def __str__(self) -> str:
        return self._render()


def _loc_text(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def describe_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """Render a pydantic ``ValidationError`` as ``field must be ..., got X`` (first errors only).

    ``prefix`` is prepended to every field path (e.g. ``rule 2 (loadByPeriod)``).
    """
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        loc = _loc_text(tuple(p for p in err["loc"] if not _is_tag(p)))
        where = f"{prefix}: {loc}" if prefix and loc else (f"{prefix}:" if prefix else loc)
        kind, ctx = err["type"], err.get("ctx") or {}
        if kind == "missing":
            text = "is required"
        elif kind == "extra_forbidden":
            text = "is not a known field"
        elif kind == "greater_than_equal":
            text = f"must be >= {ctx.get('ge')}"
        elif kind == "greater_than":
            text = f"must be > {ctx.get('gt')}"
        elif kind == "less_than_equal":
            text = f"must be <= {ctx.get('le')}"
        elif kind in ("int_type", "int_from_float", "int_parsing"):
            text = "must be an integer"
        elif kind in ("string_type",):
            text = "must be a string"
        elif kind in ("bool_type",):
            text = "must be true or false"
        elif kind in ("float_type", "finite_number"):
            text = "must be a finite number"
        elif kind in ("list_type",):
            text = "must be a list"
        elif kind in ("dict_type", "model_type"):
            text = "must be an object"
        elif kind == "literal_error":
            text = f"must be one of {ctx.get('expected')}"
        elif kind == "string_too_short":
            text = "must not be empty"
        else:
            text = err["msg"][0].lower() + err["msg"][1:]
            if text.startswith("value error, "):
                text = text[len("value error, ") :]
        if kind != "missing" and "input" in err and ", got " not in text:
            text += f", got {short_value(err['input'])}"
        parts.append(f"{where} {text}".strip())
    more = len(exc.errors()) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _is_tag(part: Any) -> bool:
    """pydantic puts validator names (``function-after[...]``) into ``loc``; they are not fields."""
    return isinstance(part, str) and part.startswith("function-")


def short_value(value: Any) -> str:
    """``value`` as JSON text (its ``repr`` if no JSON), cut to 60 characters: how a refusal shows
    the offending value."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type, with its article: ``an object``, ``an array``, ``a string``,
    ``a number``, ``a boolean``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {dict: "an object", list: "an array", str: "a string"}.get(type(value), type(value).__name__)


def json_error(file: str, exc: json.JSONDecodeError) -> SnapshotError:
    """A ``SnapshotError`` for malformed JSON, at ``line N`` with the column and the line's text
    (up to 60 characters) in the problem."""
    lines = exc.doc.splitlines() if isinstance(exc.doc, str) else []
    near = lines[exc.lineno - 1].strip() if 0 < exc.lineno <= len(lines) else ""
    near = near if len(near) <= 60 else near[:57] + "..."
    shown = f", in the line {near!r}" if near else ", at the end of the file (cut off?)"
    return SnapshotError(file, exc.lineno, f"malformed JSON: {exc.msg} (column {exc.colno}){shown}", "line")
