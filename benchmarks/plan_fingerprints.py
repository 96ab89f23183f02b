"""Fingerprints of plans: does a change of representation leave every plan as it was?

For each snapshot given, plans it in one local session (``tools.pipeline.run_plan``, the CLI's
path) and prints one JSON object per plan: its fingerprint (``segment_balancer.plan.fingerprint``,
a SHA-256 per plan file over its canonical content), so two runs of different code on the same
input compare file by file. Usage::

    .venv/bin/python benchmarks/plan_fingerprints.py --out fingerprints.json SNAPSHOT [SNAPSHOT ...]
    .venv/bin/python benchmarks/plan_fingerprints.py --compare before.json after.json
    .venv/bin/python benchmarks/plan_fingerprints.py --decisions PLAN_DIR PLAN_DIR

A snapshot is a directory, ``druid_sample`` / ``generated`` (bundled), ``scenarios`` (every
hand-worked scenario of ``tests/scenarios``), ``compaction`` (``tests/compaction_snapshot.py``) or
a number of generated segments (``generate --segments N``, cached under ``--cache``). Append
``@avgShedder`` to plan with ``balancerStrategy: avgShedder``, or ``@KEY=VALUE[,KEY=VALUE]`` to plan
with those config overrides (``@coordinator=druid``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(ROOT / "tests"))


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
            subprocess.run(
                [sys.executable, "-m", "segment_balancer", "generate", str(out), "--segments", name], check=True
            )
        return [(name, out)]
    return [(Path(name).name, Path(name))]


def _overrides(suffix: str) -> dict | None:
    """The config overrides a snapshot's ``@`` suffix names: a strategy, or ``KEY=VALUE`` pairs."""
    if not suffix:
        return None
    if "=" not in suffix:
        return {"balancerStrategy": suffix}
    return dict(pair.split("=", 1) for pair in suffix.split(","))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshots", nargs="*")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument(
        "--decisions",
        nargs=2,
        type=Path,
        metavar=("PLAN", "PLAN"),
        help="compare two plan directories' decisions without rounding their costs",
    )
    args = parser.parse_args()
    if args.decisions:
        from segment_balancer.plan.fingerprint import compare_decisions

        structural, worst = compare_decisions(*args.decisions)
        print(
            f"decision rows differing in more than a float: {structural}; "
            f"largest relative float difference: {worst:.3g}"
        )
        raise SystemExit(1 if structural else 0)
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

    from segment_balancer.plan.fingerprint import fingerprint
    from segment_balancer.spark.session import local_session
    from segment_balancer.tools.pipeline import run_plan

    args.cache.mkdir(parents=True, exist_ok=True)
    spark = local_session("plan_fingerprints")
    results = json.loads(args.out.read_text()) if args.out and args.out.exists() else {}
    for spec in args.snapshots:
        base, _, strategy = spec.partition("@")
        for key, snap in snapshots(base, args.cache):
            key = f"{key}@{strategy}" if strategy else key
            overrides = _overrides(strategy)
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
