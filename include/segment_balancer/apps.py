"""Entry point shared by every Spark application in ``spark_apps/``.

``spark_apps/<name>.py`` calls :func:`main` with its name; everything the application needs arrives
in its arguments (docs/ARCHITECTURE.md "Spark applications"). The master is never set here: the
submitter decides where the application runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .io import write_json_atomic


def parse_args(name: str, argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=name, description=f"segment_balancer application {name}")
    parser.add_argument("--snapshot", required=True, type=Path, help="input snapshot directory")
    parser.add_argument("--work", required=True, type=Path, help="the run's work directory")
    parser.add_argument("--groups-in", type=Path, help="XCom of the previous task, as JSON")
    parser.add_argument("--groups-out", required=True, type=Path, help="where to write this task's XCom")
    parser.add_argument("--config", type=Path, help="JSON object of coordinator dynamic config overrides")
    return parser.parse_args(argv)


def read_overrides(path: Path | None) -> dict | None:
    """The overrides object of ``--config`` (None when absent); ``ValueError`` if not an object."""
    if path is None or not Path(path).exists():
        return None
    value = json.loads(Path(path).read_text() or "{}")
    if not isinstance(value, dict):
        raise ValueError(f"{path}: config overrides must be a JSON object")
    return value


def main(name: str, argv=None) -> int:
    """Run application ``name`` under ``spark-submit``; returns 0, or exits with code 2 on bad input."""
    from .snapshot.errors import SnapshotError
    from .sparkutil import get_session
    from .stages import run_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(name, argv)
    groups_in = json.loads(args.groups_in.read_text()) if args.groups_in and args.groups_in.exists() else None
    spark = get_session(f"segment_balancer.{name}")
    try:
        result = run_app(spark, name, args.snapshot, args.work, groups_in, read_overrides(args.config))
    except SnapshotError as exc:
        logging.getLogger(name).error("snapshot refused: %s", exc)
        print(f"snapshot refused: {exc}", file=sys.stderr)
        spark.stop()
        raise SystemExit(2) from exc
    write_json_atomic(result, args.groups_out)
    spark.stop()
    return 0
