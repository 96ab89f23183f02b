"""Fingerprints of plans: does a change of representation leave every plan as it was?

For each snapshot given, plans it in one local session (``tools.pipeline.run_plan``, the CLI's
path) and prints one JSON object per plan: a SHA-256 per plan file over its canonical content
(parquet tables read and sorted by every column; JSON with the run's own times and paths left
out), so two runs of different code on the same input compare file by file. Usage::

    .venv/bin/python benchmarks/plan_fingerprints.py --out fingerprints.json SNAPSHOT [SNAPSHOT ...]
    .venv/bin/python benchmarks/plan_fingerprints.py --compare before.json after.json

A snapshot is a directory, ``druid_sample`` / ``generated`` (bundled), ``scenarios`` (every
hand-worked scenario of ``tests/scenarios``), ``compaction`` (``tests/compaction_snapshot.py``) or
a number of generated segments (``generate --segments N``, cached under ``--cache``). Append
``@avgShedder`` to plan with ``balancerStrategy: avgShedder``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(ROOT / "tests"))

#: summary.json keys that name the run rather than the plan.
RUN_KEYS = ("timings_seconds", "planned_at", "snapshot")


SIGNIFICANT = 12
"""Decimal digits of the costs a decision records that a fingerprint compares: a placement cost is
a float64 sum whose last bits depend on the order its terms were added in (the order the run
state lists its replicas), which a change of representation may change without changing any
ranking; 12 digits is far above those bits (1e-16 relative) and far below any margin test."""


def _round_floats(value):
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round_floats(v) for v in value]
    return value


def table_digest(path: Path) -> str:
    """SHA-256 of a parquet table's rows, sorted by every column (the order a file happens to be
    written in is the writer's; op_id and the sort keys carry the plan's own order). A ``detail``
    column (the decisions' JSON) is compared with its floats to :data:`SIGNIFICANT` digits."""
    import pyarrow.parquet as pq

    frame = pq.read_table(path).to_pandas()
    if "detail" in frame:
        frame["detail"] = [json.dumps(_round_floats(json.loads(d)), sort_keys=True) if d else d for d in frame["detail"]]
    frame = frame.astype(str).sort_values(list(frame.columns), kind="stable").reset_index(drop=True)
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()


def _members(value):
    """``value`` with every base64 roaring bitmap (a group's ``bitset``, a stage's ``changed``)
    replaced by its members: a bitmap's bytes depend on how it was built, its members do not."""
    import base64

    from pyroaring import BitMap

    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "bitset" or (k == "changed" and isinstance(v, dict)):
                out[k] = (BitMap.deserialize(base64.b64decode(v)).to_array().tolist() if k == "bitset" else
                          {g: BitMap.deserialize(base64.b64decode(b)).to_array().tolist() for g, b in v.items()})
            else:
                out[k] = _members(v)
        return out
    if isinstance(value, list):
        return [_members(v) for v in value]
    return value


def json_digest(path: Path, drop: tuple[str, ...] = ()) -> str:
    value = json.loads(path.read_text())
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in drop}
    if path.name in ("groups.json", "stage_groups.json"):
        value = _members(value)
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def fingerprint(plan: Path) -> dict:
    """``{file: sha256}`` of every plan file but the report and the validation (which carries times)."""
    out = {}
    for path in sorted(plan.iterdir()):
        if path.suffix == ".parquet":
            out[path.name] = table_digest(path)
        elif path.name == "summary.json":
            out[path.name] = json_digest(path, RUN_KEYS)
        elif path.suffix == ".json" and path.name != "validation.json":
            out[path.name] = json_digest(path)
    return out


def snapshots(name: str, cache: Path) -> list[tuple[str, Path]]:
    bundled = ROOT / "include" / "segment_balancer" / "snapshots"
    if name in ("druid_sample", "generated"):
        return [(name, bundled / name)]
    if name == "scenarios":
        return [(p.name, p) for p in sorted((ROOT / "tests" / "scenarios").iterdir()) if p.is_dir()]
    if name == "compaction":
        from compaction_snapshot import write_snapshot

        return [(name, write_snapshot(Path(tempfile.mkdtemp()) / "snapshot"))]
    if name.isdigit():
        out = cache / f"generated-{name}"
        if not out.exists():
            subprocess.run([sys.executable, "-m", "segment_balancer", "generate", str(out), "--segments", name], check=True)
        return [(name, out)]
    return [(Path(name).name, Path(name))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshots", nargs="*")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        differ = 0
        for key in sorted(set(before) | set(after)):
            a, b = before.get(key), after.get(key)
            if a is None or b is None:
                print(f"{key}: only in {'after' if a is None else 'before'}")
                continue
            bad = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            differ += bool(bad)
            print(f"{key}: {'identical' if not bad else 'DIFFERS in ' + ', '.join(bad)}")
        raise SystemExit(1 if differ else 0)

    from segment_balancer.spark.session import local_session
    from segment_balancer.tools.pipeline import run_plan

    args.cache.mkdir(parents=True, exist_ok=True)
    spark = local_session("plan_fingerprints")
    results = json.loads(args.out.read_text()) if args.out and args.out.exists() else {}
    for spec in args.snapshots:
        base, _, strategy = spec.partition("@")
        for key, snap in snapshots(base, args.cache):
            key = f"{key}@{strategy}" if strategy else key
            overrides = {"balancerStrategy": strategy} if strategy else None
            out = Path(tempfile.mkdtemp(prefix="fingerprint-"))
            started = time.monotonic()
            run_plan(spark, snap, out / "plan", overrides=overrides, work=out / "work")
            results[key] = fingerprint(out / "plan")
            print(f"{key}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
            if args.out:
                args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    if not args.out:
        print(json.dumps(results, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
