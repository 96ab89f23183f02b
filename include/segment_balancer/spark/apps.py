"""Entry point shared by every Spark application in ``spark_apps/``.

``spark_apps/<name>.py`` calls :func:`main` with its name; everything the application needs arrives
in its arguments (docs/ARCHITECTURE.md "Spark applications"). ``spark_apps/simulate.py`` calls
:func:`simulate_main`, the DAG's what-if simulation after a plan is published. The master is never
set here: the submitter decides where the application runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from segment_balancer.common.files import write_json_atomic


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
    from segment_balancer.druid.snapshot.errors import SnapshotError
    from segment_balancer.spark.session import get_session
    from segment_balancer.planner.stages import run_app

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


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a simulation, shared by ``python -m segment_balancer simulate`` and
    ``spark_apps/simulate.py``: ``--snapshot``, ``--runs``, ``--out``, ``--config``,
    ``--loads-per-run``, ``--load-failure-rate``, ``--seed``."""
    parser.add_argument("--snapshot", required=True, type=Path)
    parser.add_argument("--runs", required=True, type=int, help="Coordinator runs to simulate")
    parser.add_argument("--out", required=True, type=Path,
                        help="run-NNN/{plan,snapshot,historicals.csv} and runs.csv go here")
    parser.add_argument("--config", type=Path, help="JSON object of dynamic config overrides, for every run")
    parser.add_argument("--loads-per-run", type=int, help="loads each historical completes per run (default: all)")
    parser.add_argument("--load-failure-rate", type=float, default=0.0,
                        help="probability that a load fails (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the load failures")


class SimulationRefused(ValueError):
    """A simulation that cannot start: a refused snapshot or bad options (``runs`` < 1); nothing
    was written."""


def simulate_published(spark, snapshot: Path, plan: Path, work: Path, runs: int, out: Path,
                       overrides: dict | None = None, loads_per_run: int | None = None,
                       load_failure_rate: float = 0.0, seed: int = 0) -> None:
    """Simulate ``runs`` Coordinator runs of which the first is the plan ``plan`` already made in
    work directory ``work`` (a DAG run's published plan), with
    :func:`segment_balancer.tools.simulate.simulate`, into ``out``, written whole or not at all
    (:func:`segment_balancer.plan.publish.replace_dir`). Shared by ``spark_apps/simulate.py`` and the
    DAG's Spark Connect task. Raises :class:`SimulationRefused` on bad input, leaving an earlier
    ``out`` as it was.
    """
    from segment_balancer.plan.publish import PublishError, replace_dir
    from segment_balancer.tools.simulate import simulate
    from segment_balancer.druid.snapshot.errors import SnapshotError

    snapshot, plan, work, out = (Path(p).absolute() for p in (snapshot, plan, work, out))
    try:
        replace_dir(out, lambda tmp: simulate(
            spark, snapshot, tmp, runs, overrides, loads_per_run=loads_per_run,
            load_failure_rate=load_failure_rate, seed=seed, first_plan=plan, first_work=work))
    except PublishError as exc:
        cause = exc.__cause__
        if isinstance(cause, (SnapshotError, ValueError)):
            raise SimulationRefused(f"simulation refused: {cause}") from exc
        raise


def simulate_main(argv=None) -> int:
    """``spark-submit spark_apps/simulate.py --snapshot S --plan P --work W --runs N --out O
    [--config C] [--loads-per-run N] [--load-failure-rate P] [--seed N]``: :func:`simulate_published`.
    Returns 0; exits with code 2 on bad input (a refused snapshot, ``runs`` < 1), leaving an
    earlier ``O`` as it was.
    """
    from segment_balancer.spark.session import get_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="simulate", description="segment_balancer what-if simulation of a DAG run")
    add_simulate_arguments(parser)
    parser.add_argument("--plan", required=True, type=Path, help="run 1's plan, already made (published)")
    parser.add_argument("--work", required=True, type=Path, help="the work directory run 1's plan was made in")
    args = parser.parse_args(argv)
    log = logging.getLogger("simulate")
    spark = get_session("segment_balancer.tools.simulate")
    try:
        simulate_published(spark, args.snapshot, args.plan, args.work, args.runs, args.out,
                           read_overrides(args.config), loads_per_run=args.loads_per_run,
                           load_failure_rate=args.load_failure_rate, seed=args.seed)
    except SimulationRefused as exc:
        log.error("%s", exc)
        print(str(exc), file=sys.stderr)
        spark.stop()
        raise SystemExit(2) from exc
    log.info("simulation of %d runs written to %s", args.runs, args.out)
    spark.stop()
    return 0
