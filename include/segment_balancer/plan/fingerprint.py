"""A plan's fingerprint: one SHA-256 per plan file over its canonical content, so that two plans of
the same input compare file by file whatever wrote them (``benchmarks/plan_fingerprints.py``, and
the test that every bundled plan is the one it was).

Canonical: a parquet table's rows sorted by every column (the order a file happens to be written in
is the writer's; ``op_id`` and the order keys carry the plan's own order); a group's bitmap as its
members (a bitmap's bytes depend on how it was built); the costs a decision records to
:data:`SIGNIFICANT` digits; ``summary.json`` without what names the run (:data:`RUN_KEYS`). The
report and ``validation.json`` (which carries times) are left out.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from pyroaring import BitMap

RUN_KEYS = ("timings_seconds", "planned_at", "snapshot")
"""summary.json keys that name the run rather than the plan."""
FORMAT_KEYS = ("schema_version",)
"""summary.json keys that name the file's layout rather than the plan."""
DERIVED_KEYS = ("undone",)
"""summary.json keys derived from the rest of the plan alone (``undone``: from the final status,
the holdings, the decisions and the config, all fingerprinted)."""
LEFT_OUT = ("validation.json", "summary.schema.json")
"""JSON files of a plan directory that are no part of the plan: the validation (it carries times)
and the summary's JSON schema (the code's, whatever the plan)."""
SIGNIFICANT = 9
"""Decimal digits of the costs a decision records that a fingerprint compares. A placement cost is a
float64 sum whose last bits depend on the order its terms were added in (the order the run state
lists its replicas), which a change of representation may change without changing any ranking:
seen at most 6.3e-16 relative on the 1M-segment plan. Nine digits sit far above those bits and far
below any margin test; :func:`compare_decisions` compares two plans' decisions without rounding."""


def _round_floats(value):
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round_floats(v) for v in value]
    return value


def table_digest(path: Path) -> str:
    """SHA-256 of a parquet table's rows, sorted by every column; a ``detail`` column (the
    decisions' JSON) with its floats to :data:`SIGNIFICANT` digits."""
    frame = pq.read_table(path).to_pandas()
    if "detail" in frame:
        frame["detail"] = [
            json.dumps(_round_floats(json.loads(d)), sort_keys=True) if d else d for d in frame["detail"]
        ]
    frame = frame.astype(str).sort_values(list(frame.columns), kind="stable").reset_index(drop=True)
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()


def _members(value):
    """``value`` with every base64 roaring bitmap (a group's ``bitset``, a stage's ``changed``)
    replaced by its members."""

    def members(text: str) -> list[int]:
        return BitMap.deserialize(base64.b64decode(text)).to_array().tolist()

    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "bitset":
                out[k] = members(v)
            elif k == "changed" and isinstance(v, dict):
                out[k] = {g: members(b) for g, b in v.items()}
            else:
                out[k] = _members(v)
        return out
    if isinstance(value, list):
        return [_members(v) for v in value]
    return value


def json_digest(path: Path) -> str:
    """SHA-256 of a plan's JSON file (``summary.json`` without :data:`RUN_KEYS`,
    :data:`FORMAT_KEYS` and :data:`DERIVED_KEYS`, bitmaps as members)."""
    value = json.loads(path.read_text())
    if path.name == "summary.json":
        value = {k: v for k, v in value.items() if k not in RUN_KEYS + FORMAT_KEYS + DERIVED_KEYS}
    if path.name in ("groups.json", "stage_groups.json"):
        value = _members(value)
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def fingerprint(plan: Path) -> dict[str, str]:
    """``{file: sha256}`` of every file of the plan directory ``plan`` but the report and
    :data:`LEFT_OUT`."""
    out = {}
    for path in sorted(Path(plan).iterdir()):
        if path.suffix == ".parquet":
            out[path.name] = table_digest(path)
        elif path.suffix == ".json" and path.name not in LEFT_OUT:
            out[path.name] = json_digest(path)
    return out


def compare_decisions(a: Path, b: Path) -> tuple[int, float]:
    """Two plans' decisions (``decisions.parquet`` of plan directories ``a`` and ``b``) compared
    row by row: the number of rows whose detail differs in anything but a float, and the largest
    relative difference of a float. Raises ``ValueError`` when the rows themselves differ."""
    key = ["stage", "step", "idx", "segment_id", "tier", "outcome"]
    x, y = (pd.read_parquet(Path(p) / "decisions.parquet") for p in (a, b))
    m = x.merge(y, on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    if (m["_merge"] != "both").any():
        raise ValueError(f"{int((m['_merge'] != 'both').sum())} decision rows are in one plan only")
    worst, structural = 0.0, 0

    def walk(p, q) -> bool:
        nonlocal worst
        if isinstance(p, float) and isinstance(q, float):
            if p != q:
                worst = max(worst, abs(p - q) / max(abs(p), abs(q)))
            return True
        if isinstance(p, dict) and isinstance(q, dict):
            return set(p) == set(q) and all([walk(p[k], q[k]) for k in p])
        if isinstance(p, list) and isinstance(q, list):
            return len(p) == len(q) and all([walk(i, j) for i, j in zip(p, q)])
        return p == q

    for p, q in zip(m["detail_a"], m["detail_b"]):
        structural += not walk(json.loads(p) if p else p, json.loads(q) if q else q)
    return structural, worst
