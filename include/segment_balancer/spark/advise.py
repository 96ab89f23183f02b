"""The advisor's candidates as Spark work: one Spark task per candidate, each simulating Druid's
Coordinator for its runs from the run's prepared tables (``planner.advisor.simulate_candidate``),
the same on ``local[*]``, a standalone cluster and a Connect server (``session.run_tasks``).

A task writes what it has done to ``WORK/advise/`` as it goes: ``progress-NN.json`` (``{"runs":
k}``, after each run) and ``candidate-NN.json`` (its row of ``advice.json``, with ``seconds``, the
task's time, once done), so the driver shows progress by reading the directory, whatever runs the
tasks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from segment_balancer.common.files import write_json_atomic
from segment_balancer.planner.advisor import Candidate, result_row, simulate_candidate
from segment_balancer.spark.druid_plan import cluster_state
from segment_balancer.spark.session import run_tasks

ADVISE_DIR = "advise"
"""The advisor's directory in the work directory."""
POLL_S = 0.5
"""How often the driver reads the tasks' progress, seconds."""


def candidate_file(work: Path, position: int) -> Path:
    """Where the task of candidate ``position`` (0-based) writes its row."""
    return Path(work) / ADVISE_DIR / f"candidate-{position:02d}.json"


def _progress_file(work: Path, position: int) -> Path:
    return Path(work) / ADVISE_DIR / f"progress-{position:02d}.json"


def simulate_candidates(
    spark,
    work: Path,
    snapshot: Path,
    base: Mapping[str, Any],
    candidates: Sequence[Candidate],
    *,
    runs: int,
    now_ms: int,
    seed: int = 0,
    restart: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every candidate's row of ``advice.json`` (``planner.advisor.result_row``), in the order of
    ``candidates``: one Spark task each, in one Spark job. ``work``: the run's work directory after
    ``prepare`` (absolute, read by every task); ``base``: the snapshot's config (Druid's key names,
    ``druidVersion`` set); ``restart``: as ``simulate_candidate``'s; ``progress(runs_done)``: the
    runs done over every candidate, called from a thread of the driver while the job runs and once
    at its end.

    Raises:
        ValueError: a candidate value Druid's config refuses (from the task that met it).
    """
    work = Path(work).absolute()
    (work / ADVISE_DIR).mkdir(parents=True, exist_ok=True)
    for old in (work / ADVISE_DIR).glob("*.json"):
        old.unlink()
    items = [
        (str(work), str(snapshot), dict(base), c, runs, now_ms, seed, tuple(restart), i)
        for i, c in enumerate(candidates)
    ]
    stop = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(target=_watch, args=(work, len(candidates), progress, stop), daemon=True)
        watcher.start()
    try:
        rows = run_tasks(spark, items, _candidate_task)
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
    if progress is not None:
        progress(runs * len(candidates))
    return rows


def _watch(work: Path, count: int, progress: Callable[[int], None], stop: threading.Event) -> None:
    last = -1
    while not stop.wait(POLL_S):
        done = 0
        for position in range(count):
            try:
                done += json.loads(_progress_file(work, position).read_text())["runs"]
            except (OSError, ValueError, KeyError):
                continue
        if done != last:
            last = done
            progress(done)


def _candidate_task(item) -> dict[str, Any]:
    """One candidate's runs: ``(work, snapshot, base, candidate, runs, now_ms, seed, restart, position)``."""
    work, snapshot, base, candidate, runs, now_ms, seed, restart, position = item
    started = time.monotonic()
    work = Path(work)
    state = cluster_state(work, Path(snapshot))

    def ran(run: int) -> None:
        write_json_atomic({"runs": run}, _progress_file(work, position))

    result = simulate_candidate(
        state, base, candidate, runs=runs, now_ms=now_ms, seed=seed, restart=restart, progress=ran
    )
    row = {**result_row(result), "seconds": round(time.monotonic() - started, 1)}
    write_json_atomic(row, candidate_file(work, position))
    return row
