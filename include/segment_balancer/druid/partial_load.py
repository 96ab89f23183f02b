"""Druid 38.0.0's partial-load matchers: which projections or cluster groups of a segment a
partial-load rule (``loadPartialForever``, ``loadPartialByInterval``, ``loadPartialByPeriod``)
loads, and the fingerprint Druid gives that choice.

Source: Druid 38.0.0 (commit ``aedca20599``), ``org.apache.druid.server.coordinator.rules``:
``Globs``, ``PartialLoadMatcher``, ``ProjectionPartialLoadMatcher``,
``ExactProjectionPartialLoadMatcher``, ``WildcardProjectionPartialLoadMatcher``,
``ClusterGroupPartialLoadMatcher``, ``WildcardClusterGroupPartialLoadMatcher``,
``UnknownPartialLoadMatcher``, ``CannotMatchBehavior``; ``loading.PartialLoadProfile``;
``org.apache.druid.timeline.ClusterGroupTuples`` and ``DataSegment`` (``projections``,
``clusterGroups``); ``segment.loading.PartialProjectionLoadSpec`` and
``PartialClusterGroupLoadSpec`` (``wireForm``). Druid PRs #19374, #19409, #19461, #19462, #19565,
#19682.

A segment is seen through its :class:`SegmentShape`: the ``projections`` of its payload (``None``
for a segment written before Druid 32, which knows no projections), its ``clusterGroups``
(:class:`ClusterGroups`, ``None`` when not clustered), its partition number and the number of core
partitions of its shard spec. A matcher's ``match(shape)`` is :class:`MatchResult` or ``None``
(the matcher does not apply: the rule's ``onCannotMatch`` decides, :class:`CannotMatch`).

Standard library and numpy only.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "EMPTY_LOAD_FINGERPRINT",
    "FINGERPRINT_VERSION",
    "MATCHER_TYPES",
    "CannotMatch",
    "ClusterGroups",
    "ClusteringColumn",
    "CompiledGlob",
    "ExactProjectionMatcher",
    "GlobClusterGroupMatcher",
    "GlobProjectionMatcher",
    "MatchResult",
    "PartialLoadProfile",
    "SegmentShape",
    "UnknownMatcher",
    "cluster_group_fingerprint",
    "compile_glob",
    "compile_globs",
    "glob_to_regex",
    "java_double_str",
    "java_float_str",
    "java_str",
    "matcher_from_json",
    "matches_any",
    "payload_fields",
    "projection_fingerprint",
]

FINGERPRINT_VERSION = "v1"
"""The prefix of every fingerprint (``ProjectionPartialLoadMatcher.FINGERPRINT_VERSION``)."""

EMPTY_LOAD_FINGERPRINT = "v1:partial-empty"
"""The fingerprint of the empty load: a cluster-group matcher that applies to a core partition of a
clustered segment but selects none of its groups (``PartialLoadMatcher.EMPTY_LOAD_FINGERPRINT``)."""

PROJECTION_LOAD_SPEC = "partialProjection"
"""The ``type`` of a projection matcher's wrapped load spec (``PartialProjectionLoadSpec.TYPE``)."""

CLUSTER_GROUP_LOAD_SPEC = "partialClusterGroup"
"""The ``type`` of a cluster-group matcher's wrapped load spec (``PartialClusterGroupLoadSpec.TYPE``)."""


# ------------------------------------------------------------------------------------- globs

_LINE_TERMINATORS = "\n\r\u0085\u2028\u2029"
_JAVA_DOT = f"[^{_LINE_TERMINATORS}]"
"""Java's ``.`` without ``DOTALL``: any character but a line terminator (Python's ``.`` only
refuses ``\\n``)."""

_JAVA_REGEX_META = frozenset(".()[]{}+|^$\\*?")
"""The characters ``Globs.appendLiteral`` escapes in a literal position."""


def _glob_tokens(glob: str) -> list:
    """The glob as tokens: ``"*"`` (any run), ``"?"`` (one character) or ``("lit", c)`` (the
    character ``c`` itself, escaped or not).

    Raises:
        ValueError: ``glob`` is not a string, or ends with an unescaped backslash.
    """
    if not isinstance(glob, str):
        raise ValueError(f"a glob pattern must be a string, got {json.dumps(glob)}")
    out: list = []
    escaping = False
    for c in glob:
        if escaping:
            out.append(("lit", c))
            escaping = False
        elif c == "\\":
            escaping = True
        elif c in "*?":
            out.append(c)
        else:
            out.append(("lit", c))
    if escaping:
        raise ValueError(f"glob pattern {glob!r} ends with an unescaped backslash (write \\\\ for a literal one)")
    return out


def glob_to_regex(glob: str) -> str:
    """The Java regular expression of a glob, as Druid's ``Globs.globToRegex`` writes it: ``*`` is
    ``.*``, ``?`` is ``.``, ``\\`` escapes the next character, regex metacharacters in literal
    positions are escaped with a backslash; the whole input must match.

    Raises:
        ValueError: the glob ends with an unescaped backslash.
    """
    parts = []
    for tok in _glob_tokens(glob):
        if tok == "*":
            parts.append(".*")
        elif tok == "?":
            parts.append(".")
        else:
            c = tok[1]
            parts.append("\\" + c if c in _JAVA_REGEX_META else c)
    return "".join(parts)


def _python_regex(glob: str) -> re.Pattern:
    """The glob compiled for Python with Java's semantics: ``.`` refuses every Java line
    terminator; literals match themselves exactly (``re.fullmatch`` is Java's ``matches``)."""
    parts = []
    for tok in _glob_tokens(glob):
        if tok == "*":
            parts.append(_JAVA_DOT + "*")
        elif tok == "?":
            parts.append(_JAVA_DOT)
        else:
            parts.append(re.escape(tok[1]))
    return re.compile("".join(parts))


def compile_globs(globs: Sequence[str]) -> tuple[re.Pattern, ...]:
    """Each glob compiled (``Globs.compileAll``); the literal ``*`` is ``.*`` here, no special case.

    Raises:
        ValueError: a glob ends with an unescaped backslash or is not a string.
    """
    return tuple(_python_regex(g) for g in globs)


def matches_any(name: str, patterns: Sequence[re.Pattern]) -> bool:
    """Whether ``name`` matches one of ``patterns`` whole (``Globs.matchesAny``)."""
    return any(p.fullmatch(name) for p in patterns)


@dataclass(frozen=True)
class CompiledGlob:
    """One column's glob of a cluster-group pattern (``Globs.CompiledGlob``): the literal ``*``
    matches any value, null included; any other glob matches the rendered value, never null."""

    glob: str
    match_any: bool
    pattern: re.Pattern | None = field(default=None, compare=False, repr=False)

    def matches(self, value: str | None) -> bool:
        if self.match_any:
            return True
        if value is None:
            return False
        assert self.pattern is not None
        return self.pattern.fullmatch(value) is not None


def compile_glob(glob: str) -> CompiledGlob:
    """``Globs.compile``: ``"*"`` is :class:`CompiledGlob` ``match_any``; any other glob a pattern.

    Raises:
        ValueError: the glob ends with an unescaped backslash or is not a string.
    """
    if glob == "*":
        return CompiledGlob("*", True)
    return CompiledGlob(glob, False, _python_regex(glob))


# ------------------------------------------------------------------------------ Java strings


def _shortest_digits(value: float, single: bool) -> tuple[str, int]:
    """The decimal digits and exponent (``d.ddd × 10^e``) of a finite non-zero value as Java 19+
    renders it (``Double.toString`` / ``Float.toString``, Raffaello Giulietti's algorithm): the
    shortest decimal that rounds to the value, the closest of those; when one digit suffices, the
    closest decimal of one or two digits that rounds to it."""
    as_binary = np.float32 if single else np.float64
    x = as_binary(value)
    text = np.format_float_scientific(x, unique=True, trim="-")
    mantissa, exponent = text.lstrip("-").split("e")
    digits, e = mantissa.replace(".", ""), int(exponent)
    if len(digits) == 1:
        two = np.format_float_scientific(x, precision=1, unique=False).lstrip("-")
        m2, e2 = two.split("e")
        back = as_binary(float(("-" if value < 0 else "") + m2 + "e" + e2))
        if back == x:
            digits, e = m2.replace(".", "").rstrip("0") or "0", int(e2)
    return digits, e


def _java_fp_str(value: float, single: bool) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits, e = _shortest_digits(value, single)
    if 1e-3 <= abs(value) < 1e7:
        if e >= 0:
            whole, frac = digits[: e + 1].ljust(e + 1, "0"), digits[e + 1 :]
        else:
            whole, frac = "0", "0" * (-e - 1) + digits
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{e}"


def java_double_str(value: float) -> str:
    """Java's ``Double.toString`` (JDK 19 and later; Druid 38 runs on Java 21): ``1.0``,
    ``1.0E10``, ``1.0E-5``, ``0.001``, ``NaN``, ``-Infinity``."""
    return _java_fp_str(float(value), single=False)


def java_float_str(value: float) -> str:
    """Java's ``Float.toString`` (JDK 19 and later) of a value already rounded to float32."""
    return _java_fp_str(float(value), single=True)


def java_str(value: Any) -> str:
    """``Objects.toString`` of a JSON value as Jackson reads it untyped (``Integer``/``Long``/
    ``BigInteger``, ``Double``, ``Boolean``, ``String``, ``ArrayList``, ``LinkedHashMap``):
    ``5``, ``1.5``, ``true``, ``[a, null]``, ``{k=v}``; ``None`` is ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, list):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_str(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"not a JSON value: {value!r}")


# ----------------------------------------------------------------------------- cluster groups

CLUSTERING_TYPES = ("STRING", "LONG", "DOUBLE", "FLOAT")
"""The clustering column types ``ClusterGroupTuples.coerceValue`` supports."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FLOAT32_MAX_EXCLUSIVE = 2**128  # a rounded magnitude at or past this is Float.POSITIVE_INFINITY


class _NonNumeric:
    """A ``NaN``/``Infinity`` literal in a payload: Python's JSON reader takes them, Jackson's
    (Druid's) refuses them."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _load_json(text: str) -> Any:
    """``json.loads`` with ``NaN``/``Infinity`` literals kept as :class:`_NonNumeric`."""
    return json.loads(text, parse_constant=_NonNumeric)


def _refuse_non_numeric(value: Any, where: str) -> None:
    if isinstance(value, _NonNumeric):
        raise ValueError(f"{where} holds {value.text}, which is not JSON")
    if isinstance(value, list):
        for v in value:
            _refuse_non_numeric(v, where)
    elif isinstance(value, dict):
        for v in value.values():
            _refuse_non_numeric(v, where)


def _column_type(raw: Any, name: str) -> str | None:
    """A clustering column's ``type`` as ``ColumnType`` reads it: ``STRING``/``LONG``/``DOUBLE``/
    ``FLOAT`` (any case), another type's name (``ARRAY<…>``, ``COMPLEX<…>``, ``STRING_ARRAY``…,
    which a tuple value cannot take), or ``None`` (absent or unknown: ``Types.fromString`` gives
    null).

    Raises:
        ValueError: an ``ARRAY<…>`` of an unknown element type, or a type that is no string or
        ``{"type": …}`` object of a known ``ValueType``.
    """
    if raw is None:
        return None
    if isinstance(raw, str):
        upper = raw.upper()
        if upper in CLUSTERING_TYPES:
            return upper
        if upper in ("STRING_ARRAY", "LONG_ARRAY", "DOUBLE_ARRAY", "COMPLEX"):
            return upper
        if raw.startswith("ARRAY<"):
            if _column_type(raw[len("ARRAY<") : -1], name) is None:
                raise ValueError(f"clustering column {name!r} has type {raw!r}: its array element type is unknown")
            return raw
        if raw.startswith("COMPLEX<"):
            return raw
        return None
    if isinstance(raw, dict):
        kind = raw.get("type")
        if not isinstance(kind, str) or kind.upper() not in (*CLUSTERING_TYPES, "ARRAY", "COMPLEX"):
            raise ValueError(f"clustering column {name!r} has type {json.dumps(raw)}: not a Druid column type")
        extra = any(raw.get(k) is not None for k in ("complexTypeName", "elementType"))
        return kind.upper() if not extra else json.dumps(raw, sort_keys=True)
    raise ValueError(f"clustering column {name!r} has type {json.dumps(raw)}: expected a type name such as LONG")


def _int_to_float32(n: int) -> float:
    """``(float) n`` of a Java integer (or ``BigInteger.floatValue``): rounded once, half to even."""
    m = abs(n)
    if m <= 1 << 24:
        return float(n)
    shift = m.bit_length() - 24
    q, r = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    v = q << shift
    if v >= _FLOAT32_MAX_EXCLUSIVE:
        return math.copysign(math.inf, n)
    return math.copysign(float(v), n)


def _to_int64(raw: int | float) -> int:
    """``Number.longValue()``: an integer wraps to 64 bits (``BigInteger.longValue``); a double
    truncates toward zero, saturating, NaN is 0 (Java's ``(long) d``)."""
    if isinstance(raw, int):
        return ((raw - _INT64_MIN) % (1 << 64)) + _INT64_MIN
    if math.isnan(raw):
        return 0
    if math.isinf(raw):
        return _INT64_MAX if raw > 0 else _INT64_MIN
    return max(_INT64_MIN, min(_INT64_MAX, int(raw)))


def _to_double(raw: int | float) -> float:
    """``Number.doubleValue()``: correctly rounded; an integer too large is infinite."""
    if isinstance(raw, float):
        return raw
    try:
        return float(raw)
    except OverflowError:
        return math.copysign(math.inf, raw)


def _to_float32(raw: int | float) -> float:
    """``Number.floatValue()``: the float32 value (as a Python float)."""
    if isinstance(raw, int):
        return _int_to_float32(raw)
    with np.errstate(over="ignore"):
        return float(np.float32(raw))


def coerce_value(column: str, kind: str | None, raw: Any) -> Any:
    """A tuple value canonicalized to its column's type, as ``ClusterGroupTuples.coerceValue``:
    null stays null; STRING takes any value as Java's ``toString`` of it (:func:`java_str`); LONG
    (int), DOUBLE and FLOAT (float: the float32 value) take only numbers.

    Raises:
        ValueError: a non-number for LONG/DOUBLE/FLOAT, a non-null value in a column of another
        type, or ``kind`` ``None`` (no declared type).
    """
    if kind is None:
        raise ValueError(f"clustering column {column!r} has no declared type")
    if raw is None:
        return None
    if not isinstance(raw, (str, int, float)):
        _refuse_non_numeric(raw, f"clustering column {column!r}")
    if kind == "STRING":
        return raw if type(raw) is str else java_str(raw)
    to_number = _TO_NUMBER.get(kind)
    if to_number is not None:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ValueError(f"cannot coerce the value {_short(raw)} of column {column!r} to {kind}: not a number")
        return to_number(raw)
    raise ValueError(
        f"clustering column {column!r} has type {kind}, which no tuple value can take "
        f"(supported: {', '.join(CLUSTERING_TYPES)})"
    )


_TO_NUMBER = {"LONG": _to_int64, "DOUBLE": _to_double, "FLOAT": _to_float32}


def render_value(kind: str, value: Any) -> str | None:
    """A canonical tuple value as Java's ``toString`` prints it (what a glob is matched against):
    a Long in decimal, a Double or Float in Java's form (``1.0``, ``1.0E10``), a String as it is."""
    if value is None:
        return None
    if kind == "DOUBLE":
        return java_double_str(value)
    if kind == "FLOAT":
        return java_float_str(value)
    return value if isinstance(value, str) else str(value)


def _vc_output_name(vc: Mapping) -> Any:
    """A virtual column's output name: ``outputName`` of ``nested-field``, ``name`` of the others."""
    return vc.get("outputName") if vc.get("type") == "nested-field" else vc.get("name")


def _parse_virtual_columns(raw: Any, where: str) -> tuple[dict, ...]:
    """Virtual columns as ``VirtualColumns.create`` accepts them: objects with a ``type`` and a
    non-empty output name other than ``__time``, no name twice.

    Raises:
        ValueError: naming ``where`` and the column.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{where} must be a list of virtual columns, got {json.dumps(raw)}")
    names: set = set()
    out = []
    for i, vc in enumerate(raw):
        if not isinstance(vc, dict) or not isinstance(vc.get("type"), str):
            raise ValueError(f"{where}[{i}] must be a virtual column object with a type, got {json.dumps(vc)}")
        _refuse_non_numeric(vc, f"{where}[{i}]")
        name = _vc_output_name(vc)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}[{i}] has no name (a virtual column needs a non-empty name)")
        if name == "__time":
            raise ValueError(f"{where}[{i}]: a virtual column cannot be named __time")
        if name in names:
            raise ValueError(f"{where}: the virtual column name {name!r} is used twice")
        names.add(name)
        out.append(vc)
    return tuple(out)


_WHITESPACE_OUTSIDE_QUOTES = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|\s+""")


def _expression_text(expression: Any) -> Any:
    """An expression with the whitespace outside quoted literals removed."""
    if not isinstance(expression, str):
        return expression
    return _WHITESPACE_OUTSIDE_QUOTES.sub(lambda m: m.group(1) or "", expression)


def _vc_equivalence_key(vc: Mapping) -> str | None:
    """What two virtual columns must share to be equivalent, whatever their names; ``None`` for a
    virtual column type that is never equivalent to another (Druid's
    ``VirtualColumn.getEquivalanceKey`` is null but for ``expression`` and ``nested-field``).

    ``expression``: the expression text with the whitespace outside quoted literals removed, and
    ``outputType`` (any case; absent is null). ``nested-field``: every field but the output name,
    as written. See :class:`GlobClusterGroupMatcher` for how this differs from Druid's
    ``findEquivalent``."""
    kind = vc.get("type")
    if kind == "expression":
        out_type = vc.get("outputType")
        out_type = out_type.upper() if isinstance(out_type, str) else out_type
        return json.dumps(["expression", _expression_text(vc.get("expression")), out_type])
    if kind == "nested-field":
        return json.dumps(
            ["nested-field", {k: v for k, v in vc.items() if k != "outputName"}], sort_keys=True, default=repr
        )
    return None


@dataclass(frozen=True)
class ClusteringColumn:
    """One column of ``clusteringColumns`` (a ``RowSignature`` entry): its ``name`` and ``type``
    (``STRING``/``LONG``/``DOUBLE``/``FLOAT``, another type's name, or ``None`` when unknown)."""

    name: str
    type: str | None


@dataclass(frozen=True)
class ClusterGroups:
    """A segment's ``clusterGroups`` (Druid 38 ``ClusterGroupTuples``): the clustering columns in
    order, the clustering virtual columns (JSON objects as written) and one tuple of values per
    cluster group, each value canonicalized to its column's type (str, int for LONG, float for
    DOUBLE and FLOAT — a FLOAT holds the float32 value) or ``None``.

    ``rendered`` is each tuple as Java's ``toString`` prints its values (what the globs of
    ``globClusterGroup`` are matched against). Build it with :meth:`from_json` or :meth:`parse`.
    """

    columns: tuple[ClusteringColumn, ...]
    virtual_columns: tuple[dict, ...] = field(default=(), hash=False)
    tuples: tuple[tuple[Any, ...], ...] = ()

    @functools.cached_property
    def rendered(self) -> tuple[tuple[str | None, ...], ...]:
        kinds = [c.type or "" for c in self.columns]
        return tuple(tuple(render_value(k, v) for k, v in zip(kinds, t)) for t in self.tuples)

    @classmethod
    def from_json(cls, obj: Any) -> ClusterGroups:
        """The ``clusterGroups`` JSON (an object ``{"clusteringColumns": [{"name", "type"}, ...],
        "virtualColumns": [...], "tuples": [[...], ...]}``, as Jackson writes it) read as Druid's
        ``ClusterGroupTuples`` reads it; unknown keys are ignored, as Druid's mapper does.

        Raises:
            ValueError: what Druid refuses: no object, no or empty ``clusteringColumns``, a column
            without a non-empty name, one name with two types, a bad virtual column, a tuple that is
            not a list of as many values as there are columns, a value of a column of no declared
            type, a non-number in a LONG/DOUBLE/FLOAT column, a non-null value in a column of
            another type, a ``NaN``/``Infinity`` literal.
        """
        if not isinstance(obj, dict):
            raise ValueError(f"clusterGroups must be a JSON object, got {_short(obj)}")
        raw_columns = obj.get("clusteringColumns")
        if raw_columns is not None and not isinstance(raw_columns, list):
            raise ValueError(f"clusterGroups.clusteringColumns must be a list, got {_short(raw_columns)}")
        if not raw_columns:
            raise ValueError("clusterGroups.clusteringColumns must not be null or empty")
        columns: list[ClusteringColumn] = []
        types: dict[str, str | None] = {}
        for i, col in enumerate(raw_columns):
            if not isinstance(col, dict):
                raise ValueError(f"clusterGroups.clusteringColumns[{i}] must be an object {{name, type}}")
            name = col.get("name")
            if isinstance(name, int):
                name = java_str(name)  # Jackson reads a number or boolean as its text
            if not isinstance(name, str) or not name:
                raise ValueError(f"clusterGroups.clusteringColumns[{i}] needs a non-empty name")
            kind = _column_type(col.get("type"), name)
            if name in types and types[name] != kind:
                raise ValueError(f"clustering column {name!r} has two types, {types[name]} and {kind}")
            types[name] = kind
            columns.append(ClusteringColumn(name, kind))
        vcs = _parse_virtual_columns(obj.get("virtualColumns"), "clusterGroups.virtualColumns")
        raw_tuples = obj.get("tuples")
        if raw_tuples is None:
            raw_tuples = []
        if not isinstance(raw_tuples, list):
            raise ValueError(f"clusterGroups.tuples must be a list of lists, got {_short(raw_tuples)}")
        n = len(columns)
        kinds = [types[c.name] for c in columns]
        tuples = []
        for t, tup in enumerate(raw_tuples):
            if tup is not None and not isinstance(tup, list):
                raise ValueError(f"clusterGroups.tuples[{t}] must be a list, got {_short(tup)}")
            if tup is None or len(tup) != n:
                size = "null" if tup is None else len(tup)
                raise ValueError(f"clusterGroups.tuples[{t}] has size {size} but there are {n} clustering columns")
            try:
                values = tuple([coerce_value(c.name, k, v) for c, k, v in zip(columns, kinds, tup)])
            except ValueError as exc:
                raise ValueError(f"clusterGroups.tuples[{t}]: {exc}") from None
            tuples.append(values)
        return cls(tuple(columns), vcs, tuple(tuples))

    @classmethod
    def parse(cls, text: str) -> ClusterGroups:
        """:meth:`from_json` of JSON text (the timeline table's ``cluster_groups``); cached by text.

        Raises:
            ValueError: not JSON, or what :meth:`from_json` refuses.
        """
        return _parse_cluster_groups(text)

    def index_of(self, name: str) -> int:
        """The position of a clustering column (the last one, were a name listed twice, as
        ``RowSignature.indexOf``), -1 when absent."""
        for i in range(len(self.columns) - 1, -1, -1):
            if self.columns[i].name == name:
                return i
        return -1

    def has_column(self, name: str) -> bool:
        return any(c.name == name for c in self.columns)

    def equivalent_virtual_column(self, vc: Mapping) -> str | None:
        """The output name of this segment's first clustering virtual column equivalent to ``vc``
        (:func:`_vc_equivalence_key`), or ``None``."""
        key = _vc_equivalence_key(vc)
        if key is None:
            return None
        for mine in self.virtual_columns:
            if _vc_equivalence_key(mine) == key:
                return _vc_output_name(mine)
        return None


@functools.lru_cache(maxsize=4096)
def _parse_cluster_groups(text: str) -> ClusterGroups:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"clusterGroups is not JSON: {exc}") from None
    return ClusterGroups.from_json(obj)


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ------------------------------------------------------------------------------ segment shape


@dataclass(frozen=True)
class SegmentShape:
    """What a matcher sees of a segment (Druid ``DataSegment``).

    Attributes:
        projections: the payload's ``projections`` (names), ``None`` for a segment that knows none
            (written before Druid 32), ``()`` for one that has none.
        cluster_groups: the payload's ``clusterGroups``, ``None`` when the segment is not clustered.
        partition_num: the shard spec's partition number.
        num_core_partitions: the shard spec's core partition count (0 for ``none``, ``linear`` and
            overwrite shard specs; ``None`` here reads as 0, which decides as Druid's 0 or -1 does).
        load_spec: the payload's ``loadSpec`` (the ``delegate`` of a wrapped load spec), if known.
    """

    projections: tuple[str, ...] | None = None
    cluster_groups: ClusterGroups | None = None
    partition_num: int = 0
    num_core_partitions: int | None = 0
    load_spec: Mapping | None = field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.projections is not None and not isinstance(self.projections, tuple):
            object.__setattr__(self, "projections", tuple(self.projections))

    @classmethod
    def from_columns(
        cls,
        projections: Sequence[str] | str | None,
        cluster_groups: str | None,
        partition_num: int,
        num_core_partitions: int | None,
    ) -> SegmentShape:
        """A shape from the timeline table's columns ``projections`` (list, comma-joined text or
        null), ``cluster_groups`` (JSON text or null), ``partition_num``, ``num_core_partitions``.

        Raises:
            ValueError: ``cluster_groups`` that :meth:`ClusterGroups.parse` refuses.
        """
        if isinstance(projections, str):
            projections = projections_from_text(projections)
        return cls(
            projections=None if projections is None else tuple(projections),
            cluster_groups=None if cluster_groups is None else ClusterGroups.parse(cluster_groups),
            partition_num=int(partition_num),
            num_core_partitions=None if num_core_partitions is None else int(num_core_partitions),
        )


def payload_fields(payload: Mapping) -> tuple[list[str] | None, str | None]:
    """The partial-load fields of a segment payload (a ``DataSegment`` JSON object, as read with
    :func:`json.loads`): ``projections`` and the ``clusterGroups`` JSON text (compact; ``None``
    when absent or null).

    ``projections`` is Druid's comma-joined string (``"a,b"``; ``CommaListJoinDeserializer``, empty
    names dropped as ``DataSegment`` drops them); a JSON list of strings is taken too.

    Raises:
        ValueError: ``projections`` of another type, or ``clusterGroups`` that Druid refuses
        (:meth:`ClusterGroups.from_json`).
    """
    raw = payload.get("projections")
    projections: list[str] | None
    if raw is None:
        projections = None
    elif isinstance(raw, str):
        projections = [p for p in raw.split(",") if p]
    elif isinstance(raw, list) and all(isinstance(p, str) for p in raw):
        projections = [p for p in raw if p]
    else:
        raise ValueError(f"projections must be a comma-separated string of projection names, got {_short(raw)}")
    groups = payload.get("clusterGroups")
    if groups is None:
        return projections, None
    text = json.dumps(groups, separators=(",", ":"), ensure_ascii=False, default=_not_json)
    ClusterGroups.from_json(groups)
    return projections, text


def _not_json(value: Any) -> Any:
    """``json.dumps``' hook for what is no JSON value: a ``NaN``/``Infinity`` literal of the input."""
    if isinstance(value, _NonNumeric):
        raise ValueError(f"clusterGroups holds {value.text}, which is not JSON")
    raise TypeError(f"not a JSON value: {value!r}")


def line_payload_fields(text: str) -> tuple[list[str] | None, str | None]:
    """:func:`payload_fields` of one ``segments.jsonl`` line.

    Raises:
        ValueError: the line is no JSON object, or what :func:`payload_fields` refuses.
    """
    try:
        obj = _load_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return payload_fields(obj)


def line_payload_texts(text: str) -> tuple[str | None, str | None]:
    """:func:`line_payload_fields` with ``projections`` as Druid writes them, the names joined by
    commas (``""``: none); what the segment readers carry through Spark (an array column makes
    Spark's Arrow exchanges several times slower, even all null).

    Raises:
        ValueError: what :func:`line_payload_fields` refuses.
    """
    projections, groups = line_payload_fields(text)
    return (None if projections is None else ",".join(projections)), groups


def projections_from_text(text: str | None) -> list[str] | None:
    """The projection names of their comma-joined form (``DataSegment``'s; ``None`` stays ``None``,
    ``""`` is no name)."""
    return None if text is None else [p for p in text.split(",") if p]


PAYLOAD_KEYS = ('"projections"', '"clusterGroups"')
"""A line that holds neither text has neither field: readers parse only the others in Python."""


# -------------------------------------------------------------------------------- fingerprints


def _fingerprint(data: bytes) -> str:
    return f"{FINGERPRINT_VERSION}:{hashlib.sha256(data).hexdigest()[:16]}"


def projection_fingerprint(names: Sequence[str]) -> str:
    """The fingerprint of sorted, deduplicated projection names
    (``ProjectionPartialLoadMatcher.computeFingerprint``): SHA-256 over each name's UTF-16 code
    units, little-endian (Guava's ``putUnencodedChars``), each name followed by a zero byte; the
    first 16 hex digits, after ``v1:``."""
    data = bytearray()
    for name in names:
        data += name.encode("utf-16-le", "surrogatepass")
        data.append(0)
    return _fingerprint(bytes(data))


def cluster_group_fingerprint(indices: Sequence[int]) -> str:
    """The fingerprint of sorted, deduplicated cluster-group indices
    (``ClusterGroupPartialLoadMatcher.computeFingerprint``): SHA-256 over each index as a 32-bit
    little-endian int (Guava's ``putInt``); the first 16 hex digits, after ``v1:``."""
    return _fingerprint(b"".join(struct.pack("<i", i) for i in indices))


def _java_sorted(names: Sequence[str] | set) -> list[str]:
    """Sorted as Java's ``String.compareTo`` (UTF-16 code units), deduplicated (``TreeSet``)."""
    return sorted(set(names), key=lambda s: s.encode("utf-16-be", "surrogatepass"))


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class MatchResult:
    """What a matcher decided for a segment (Druid ``PartialLoadMatcher.MatchResult``).

    Attributes:
        kind: ``projection`` or ``cluster_group``.
        parts: the sorted, deduplicated projection names or cluster-group indices to load (empty:
            the empty load).
        fingerprint: ``v1:`` and 16 hex digits, or :data:`EMPTY_LOAD_FINGERPRINT`.
        wrapped_load_spec: the wrapped load spec a load request carries (``partialProjection`` /
            ``partialClusterGroup``: ``type``, ``delegate`` — the segment's load spec —, the
            parts, ``fingerprint``).
    """

    kind: Literal["projection", "cluster_group"]
    parts: tuple
    fingerprint: str
    wrapped_load_spec: dict = field(hash=False)

    @property
    def is_empty(self) -> bool:
        """The empty load (``MatchResult.isEmpty``): Druid dispatches it only when a sibling of
        the same shard group matched something."""
        return self.fingerprint == EMPTY_LOAD_FINGERPRINT


@dataclass(frozen=True)
class PartialLoadProfile:
    """A partial load as a load request or an announcement carries it (Druid 38
    ``loading.PartialLoadProfile``): the wrapped load spec, its fingerprint and, once loaded, the
    bytes the historical holds (``loadedBytes``; ``None`` for a request). ``matcher``: the type of
    the rule's matcher that asked for it, when known (a note for the plan, not Druid's: no part of
    the profile's identity)."""

    wrapped_load_spec: dict = field(hash=False)
    fingerprint: str
    loaded_bytes: int | None = None
    matcher: str | None = field(default=None, compare=False)

    @classmethod
    def for_request(cls, wrapped_load_spec: Mapping | None, fingerprint: str) -> PartialLoadProfile:
        """The profile of a load request (``forRequest``).

        Raises:
            ValueError: an empty or missing wrapped load spec, or no fingerprint.
        """
        return cls._make(wrapped_load_spec, fingerprint, None)

    @classmethod
    def for_loaded(cls, wrapped_load_spec: Mapping | None, fingerprint: str, loaded_bytes: int) -> PartialLoadProfile:
        """The profile of a completed load (``forLoaded``), ``loaded_bytes`` in bytes.

        Raises:
            ValueError: an empty or missing wrapped load spec, or no fingerprint.
        """
        return cls._make(wrapped_load_spec, fingerprint, int(loaded_bytes))

    @classmethod
    def _make(cls, wrapped: Mapping | None, fingerprint: str, loaded: int | None) -> PartialLoadProfile:
        if not wrapped:
            raise ValueError("a partial load needs a wrapped load spec (wrappedLoadSpec must not be null or empty)")
        if fingerprint is None:
            raise ValueError("a partial load needs a fingerprint")
        return cls(dict(wrapped), fingerprint, loaded)

    @classmethod
    def of_match(cls, result: MatchResult, matcher: str | None = None) -> PartialLoadProfile:
        """The request profile of a matcher's ``result`` (``PartialLoadRule.run``), noting the
        ``matcher`` type that asked for it."""
        return dataclasses.replace(cls.for_request(result.wrapped_load_spec, result.fingerprint), matcher=matcher)

    def matches(self, fingerprint: str) -> bool:
        """Whether this replica or load holds the part of ``fingerprint`` (the reconciler's
        "matching"; ``PartialSegmentStatusInTier.classify``)."""
        return self.fingerprint == fingerprint

    @property
    def load_spec_type(self) -> str | None:
        """The wrapped load spec's ``type`` (``partialProjection``, ``partialClusterGroup``)."""
        return self.wrapped_load_spec.get("type")

    @property
    def parts(self) -> tuple:
        """What the load asks for: the projection names or cluster-group indices of the wrapped spec."""
        spec = self.wrapped_load_spec
        return tuple(spec.get("projections", spec.get("clusterGroupIndices", ())))


class CannotMatch(enum.Enum):
    """What a partial-load rule does with a segment its matcher does not apply to (Druid 38
    ``CannotMatchBehavior``): ``fullLoad`` (the default) applies the rule and loads the whole
    segment; ``fallThrough`` lets the next rule decide."""

    FULL_LOAD = "fullLoad"
    FALL_THROUGH = "fallThrough"

    @classmethod
    def from_json(cls, value: Any) -> CannotMatch:
        """``onCannotMatch`` as Druid reads it: ``fullLoad``/``fallThrough`` (exact case); absent,
        null or any other value is the default, ``fullLoad`` (``CannotMatchBehavior.fromString``
        gives null, and the rule's constructor its default)."""
        for member in cls:
            if member.value == value:
                return member
        return cls.FULL_LOAD


# ----------------------------------------------------------------------------------- matchers


def _delegate(shape: SegmentShape) -> dict:
    return dict(shape.load_spec) if shape.load_spec is not None else {}


_WIRE_FORMS = {
    "projection": (PROJECTION_LOAD_SPEC, "projections"),
    "cluster_group": (CLUSTER_GROUP_LOAD_SPEC, "clusterGroupIndices"),
}


def _match_result(kind: Literal["projection", "cluster_group"], shape: SegmentShape, parts: list, fingerprint: str):
    """The :class:`MatchResult` with its wrapped load spec (``PartialProjectionLoadSpec.wireForm``,
    ``PartialClusterGroupLoadSpec.wireForm``: the segment's load spec as ``delegate``)."""
    spec_type, key = _WIRE_FORMS[kind]
    wrapped = {"type": spec_type, "delegate": _delegate(shape), key: list(parts), "fingerprint": fingerprint}
    return MatchResult(kind, tuple(parts), fingerprint, wrapped)


def _projection_result(shape: SegmentShape, names: list[str]) -> MatchResult | None:
    """``ProjectionPartialLoadMatcher.match`` once the names are resolved (sorted, deduplicated)."""
    if not names:
        return None
    return _match_result("projection", shape, names, projection_fingerprint(names))


def _string_list(raw: Any, what: str, matcher: str) -> tuple[str, ...]:
    if raw is None or (isinstance(raw, list) and not raw):
        raise ValueError(f"{what} must not be null or empty for a {matcher} matcher")
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ValueError(f"{what} of a {matcher} matcher must be a list of strings, got {_short(raw)}")
    return tuple(raw)


@dataclass(frozen=True)
class ExactProjectionMatcher:
    """``exactProjection`` (Druid ``ExactProjectionPartialLoadMatcher``): the segment's projections
    named in ``names``; no match when the segment has none of them (or no projections)."""

    names: tuple[str, ...]

    TYPE = "exactProjection"

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", _string_list(list(self.names), "names", self.TYPE))

    def match(self, shape: SegmentShape) -> MatchResult | None:
        if not shape.projections:
            return None
        present = set(shape.projections)
        return _projection_result(shape, _java_sorted({n for n in self.names if n in present}))


@dataclass(frozen=True)
class GlobProjectionMatcher:
    """``globProjection`` (Druid ``WildcardProjectionPartialLoadMatcher``): the segment's projections
    that match a glob of ``patterns`` and none of ``exclude_patterns`` (``excludePatterns``)."""

    patterns: tuple[str, ...]
    exclude_patterns: tuple[str, ...] = ()
    _compiled: tuple = field(default=(), compare=False, repr=False, hash=False)
    _compiled_exclude: tuple = field(default=(), compare=False, repr=False, hash=False)

    TYPE = "globProjection"

    def __post_init__(self) -> None:
        patterns = _string_list(list(self.patterns), "patterns", self.TYPE)
        exclude = tuple(self.exclude_patterns or ())
        if not all(isinstance(x, str) for x in exclude):
            raise ValueError(f"excludePatterns of a {self.TYPE} matcher must be a list of strings")
        object.__setattr__(self, "patterns", patterns)
        object.__setattr__(self, "exclude_patterns", exclude)
        object.__setattr__(self, "_compiled", compile_globs(patterns))
        object.__setattr__(self, "_compiled_exclude", compile_globs(exclude))

    def match(self, shape: SegmentShape) -> MatchResult | None:
        if not shape.projections:
            return None
        picked = {
            name
            for name in shape.projections
            if not matches_any(name, self._compiled_exclude) and matches_any(name, self._compiled)
        }
        return _projection_result(shape, _java_sorted(picked))


def _pattern_maps(raw: Any, what: str) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Cluster-group patterns (a list of ``{column: glob}``) as tuples of items.

    Raises:
        ValueError: not a list of non-empty objects of string globs (``copyAndValidatePatterns``).
    """
    if not isinstance(raw, list):
        raise ValueError(f"{what} of a globClusterGroup matcher must be a list of {{column: glob}}, got {_short(raw)}")
    out = []
    for i, pattern in enumerate(raw):
        if not pattern:
            raise ValueError(f"{what}[{i}] must not be null or empty")
        if not isinstance(pattern, dict):
            raise ValueError(f"{what}[{i}] must be an object {{column: glob}}, got {_short(pattern)}")
        for column, glob in pattern.items():
            if not isinstance(glob, str):
                raise ValueError(f"{what}[{i}][{column!r}] must be a glob string, got {_short(glob)}")
        out.append(tuple(pattern.items()))
    return tuple(out)


@dataclass(frozen=True)
class GlobClusterGroupMatcher:
    """``globClusterGroup`` (Druid ``WildcardClusterGroupPartialLoadMatcher``): the cluster groups of
    a clustered segment whose tuple matches a pattern of ``patterns`` and none of
    ``exclude_patterns``. A pattern maps columns to globs matched against Java's rendering of the
    tuple value (:func:`java_str` of the canonical value: ``1.0`` for a DOUBLE 1); a column left
    out, or the glob ``*``, matches any value, null included; any other glob never matches null.

    A pattern key is, in this order: an operator virtual column of ``virtual_columns`` (then it
    resolves to the segment's clustering virtual column equivalent to it, and to nothing when the
    segment has none, even if a clustering column bears the key's name), else a clustering column
    of that name. A pattern with a key that resolves to nothing never matches on that segment;
    when no pattern resolves, the matcher does not apply (``None``).

    "Equivalent" here: two virtual columns of type ``expression`` with the same expression text
    once the whitespace outside quoted literals is removed and the same ``outputType`` (case aside),
    or two of type ``nested-field`` with the same fields but the output name; no other type is
    ever equivalent. Druid's ``VirtualColumns.findEquivalent`` compares the parsed expressions
    (``Expr.stringify``: ``a+b`` and ``(a + b)`` are equivalent; here they are not), a
    ``nested-field`` column's parsed path (``path`` and ``pathParts`` spellings of one path are
    equivalent there, not here), and rewrites an operator virtual column's references to other
    operator virtual columns to their segment equivalents first (not done here: such a column is
    equivalent only to one that names the same inputs).

    No group matching on a core partition (``partition_num < num_core_partitions``) is the empty
    load (:data:`EMPTY_LOAD_FINGERPRINT`); on another partition it is no match.
    """

    patterns: tuple[tuple[tuple[str, str], ...], ...]
    exclude_patterns: tuple[tuple[tuple[str, str], ...], ...] = ()
    virtual_columns: tuple[dict, ...] = field(default=(), hash=False)
    _compiled: tuple = field(default=(), compare=False, repr=False, hash=False)
    _compiled_exclude: tuple = field(default=(), compare=False, repr=False, hash=False)

    TYPE = "globClusterGroup"

    def __post_init__(self) -> None:
        if not self.patterns:
            raise ValueError(f"patterns must not be null or empty for a {self.TYPE} matcher")
        for name, value in (("patterns", self.patterns), ("excludePatterns", self.exclude_patterns or ())):
            for i, pattern in enumerate(value):
                if not pattern:
                    raise ValueError(f"{name}[{i}] must not be null or empty")
        object.__setattr__(self, "exclude_patterns", tuple(self.exclude_patterns or ()))
        object.__setattr__(
            self, "virtual_columns", _parse_virtual_columns(list(self.virtual_columns or ()), "virtualColumns")
        )
        compile_all = lambda ps: tuple(tuple((k, compile_glob(g)) for k, g in p) for p in ps)  # noqa: E731
        object.__setattr__(self, "_compiled", compile_all(self.patterns))
        object.__setattr__(self, "_compiled_exclude", compile_all(self.exclude_patterns))

    @classmethod
    def from_lists(
        cls,
        patterns: Sequence[Mapping[str, str]],
        exclude_patterns: Sequence[Mapping[str, str]] | None = None,
        virtual_columns: Sequence[Mapping] | None = None,
    ) -> GlobClusterGroupMatcher:
        """The matcher of Druid's JSON fields (lists of ``{column: glob}`` maps).

        Raises:
            ValueError: an empty ``patterns``, an empty pattern map, a glob that is no string or
            ends with an unescaped backslash, a bad virtual column.
        """
        if not patterns:
            raise ValueError(f"patterns must not be null or empty for a {cls.TYPE} matcher")
        return cls(
            _pattern_maps(list(patterns), "patterns"),
            _pattern_maps(list(exclude_patterns or []), "excludePatterns"),
            tuple(dict(v) for v in (virtual_columns or ())),
        )

    def _operator_vc(self, key: str) -> Mapping | None:
        for vc in self.virtual_columns:
            if _vc_output_name(vc) == key:
                return vc
        return None

    def _resolve_key(self, key: str, groups: ClusterGroups) -> str | None:
        vc = self._operator_vc(key)
        if vc is not None:
            name = groups.equivalent_virtual_column(vc)
            return name if name is not None and groups.has_column(name) else None
        return key if groups.has_column(key) else None

    def _resolve(self, compiled: tuple, groups: ClusterGroups) -> list[tuple[tuple[int, CompiledGlob], ...] | None]:
        """Each pattern as (column position, glob) pairs on this segment, ``None`` when a key
        resolves to no clustering column."""
        out: list = []
        for pattern in compiled:
            pairs = []
            for key, glob in pattern:
                column = self._resolve_key(key, groups)
                if column is None:
                    pairs = None
                    break
                pairs.append((groups.index_of(column), glob))
            out.append(None if pairs is None else tuple(pairs))
        return out

    @staticmethod
    def _matches_any(rendered: tuple, resolved: list) -> bool:
        for pairs in resolved:
            if pairs is not None and all(g.matches(rendered[i]) for i, g in pairs):
                return True
        return False

    def match(self, shape: SegmentShape) -> MatchResult | None:
        groups = shape.cluster_groups
        if groups is None:
            return None
        resolved = self._resolve(self._compiled, groups)
        if all(r is None for r in resolved):
            return None
        excludes = self._resolve(self._compiled_exclude, groups)
        indices = [
            i
            for i, rendered in enumerate(groups.rendered)
            if self._matches_any(rendered, resolved) and not self._matches_any(rendered, excludes)
        ]
        if not indices and shape.partition_num >= (shape.num_core_partitions or 0):
            return None
        fingerprint = cluster_group_fingerprint(indices) if indices else EMPTY_LOAD_FINGERPRINT
        return _match_result("cluster_group", shape, indices, fingerprint)


@dataclass(frozen=True)
class UnknownMatcher:
    """A matcher of a type Druid 38 does not know (``UnknownPartialLoadMatcher``): it never matches,
    so the rule's ``onCannotMatch`` decides. ``type`` is the type as written (may be ``None``)."""

    type: str | None = None

    def match(self, shape: SegmentShape) -> MatchResult | None:
        return None


Matcher = ExactProjectionMatcher | GlobProjectionMatcher | GlobClusterGroupMatcher | UnknownMatcher

MATCHER_TYPES = (ExactProjectionMatcher.TYPE, GlobProjectionMatcher.TYPE, GlobClusterGroupMatcher.TYPE)
"""The matcher types Druid 38.0.0 knows; any other ``type`` is :class:`UnknownMatcher`."""


def matcher_from_json(obj: Any) -> Matcher:
    """A rule's ``matcher`` JSON as Druid 38 reads it (``PartialLoadMatcher`` subtypes by ``type``;
    an unknown or missing type is :class:`UnknownMatcher`; unknown fields are ignored).

    Raises:
        ValueError: what Druid refuses when it builds the matcher: no object, ``names`` or
        ``patterns`` null or empty, an empty pattern map, a glob ending with an unescaped
        backslash, values of the wrong JSON type, a bad virtual column.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"matcher must be an object with a type, got {_short(obj)}")
    kind = obj.get("type")
    if kind == ExactProjectionMatcher.TYPE:
        return ExactProjectionMatcher(_string_list(obj.get("names"), "names", kind))
    if kind == GlobProjectionMatcher.TYPE:
        patterns = _string_list(obj.get("patterns"), "patterns", kind)
        exclude = obj.get("excludePatterns")
        if exclude is not None and (not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude)):
            raise ValueError(f"excludePatterns of a {kind} matcher must be a list of strings, got {_short(exclude)}")
        return GlobProjectionMatcher(patterns, tuple(exclude or ()))
    if kind == GlobClusterGroupMatcher.TYPE:
        patterns = obj.get("patterns")
        if patterns is None or patterns == []:
            raise ValueError(f"patterns must not be null or empty for a {kind} matcher")
        vcs = obj.get("virtualColumns")
        return GlobClusterGroupMatcher(
            _pattern_maps(patterns, "patterns"),
            _pattern_maps(obj.get("excludePatterns") or [], "excludePatterns")
            if obj.get("excludePatterns") is not None
            else (),
            _parse_virtual_columns(vcs, "virtualColumns"),
        )
    return UnknownMatcher(kind if isinstance(kind, str) else None)
