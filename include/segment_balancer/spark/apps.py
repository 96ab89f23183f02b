"""The Spark applications of a run (:data:`APP_NAMES`, :func:`run_app`) and the entry point every
``spark_apps/<name>.py`` shares (:func:`main`).

``spark_apps/<name>.py`` calls :func:`main` with its name; everything the application needs arrives
in its arguments (docs/ARCHITECTURE.md "Spark applications"). The master is never set here: the
submitter decides where the application runs.

Spark and the applications' modules (``used_segments``, ``prepare``, ``druid_plan``, ``stage_run``,
``assemble``) are imported inside functions only: the CLI imports this module at its start.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import write_json_atomic, write_text_atomic
from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.druid.snapshot.files import segments_path
from segment_balancer.planner import groups as G
from segment_balancer.planner.coordinators import (
    ALL_APP_NAMES,
    ASSEMBLE_APP,
    COMPARE_APP,
    COORDINATOR_NAMES,
    DEFAULT_COORDINATOR,
    DUTY_APPS,
    STAGE0_APPS,
    coordinator,
    stage_number,
)
from segment_balancer.planner.groups import split_group_name
from segment_balancer.planner.stages import stage_module
from segment_balancer.spark.session import driver_tasks, driver_tasks_at_most_segments, get_session, local_session
from segment_balancer.spark.workdir import compare_requested, compared_work, fork_work, reset_manifest


def parse_args(name: str, argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=name, description=f"segment_balancer application {name}")
    parser.add_argument("--snapshot", required=True, type=Path, help="input snapshot directory")
    parser.add_argument("--work", required=True, type=Path, help="the run's work directory")
    parser.add_argument("--groups-in", type=Path, help="XCom of the previous task, as JSON")
    parser.add_argument("--groups-out", required=True, type=Path, help="where to write this task's XCom")
    parser.add_argument("--config", type=Path, help="JSON object of coordinator dynamic config overrides")
    parser.add_argument("--refusal-out", type=Path, help="where to write the one-line refusal of a bad snapshot")
    parser.add_argument(
        "--branch", choices=COORDINATOR_NAMES, help="the coordinator whose branch of the run this application is in"
    )
    return parser.parse_args(argv)


def read_overrides(path: Path | None) -> dict | None:
    """The overrides object of ``--config`` (None when absent); ``ValueError`` if not an object."""
    if path is None or not Path(path).exists():
        return None
    value = json.loads(Path(path).read_text() or "{}")
    if not isinstance(value, dict):
        raise InputError(f"{path}: config overrides must be a JSON object")
    return value


def main(name: str, argv=None) -> int:
    """Run application ``name`` under ``spark-submit``; returns 0, or exits with code 2 on bad input
    (after writing the refusal's one line to ``--refusal-out`` when given)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(name, argv)
    groups_in = json.loads(args.groups_in.read_text()) if args.groups_in and args.groups_in.exists() else None
    spark = get_session(f"segment_balancer.{name}")
    try:
        result = run_app(spark, name, args.snapshot, args.work, groups_in, read_overrides(args.config), args.branch)
    except InputError as exc:
        logging.getLogger(name).error("input refused: %s", exc)
        print(f"input refused: {exc}", file=sys.stderr)
        if args.refusal_out:
            write_text_atomic(str(exc), args.refusal_out)
        spark.stop()
        raise SystemExit(2) from None
    write_json_atomic(result, args.groups_out)
    spark.stop()
    return 0


def run_app(
    spark,
    name: str,
    snapshot,
    work,
    groups_in: dict | None,
    overrides: dict | None = None,
    branch: str | None = None,
) -> dict:
    """Run one application of ``ALL_APP_NAMES`` and return its XCom dict (``stage``, ``groups``).

    ``groups_in``: the previous application's XCom (None for ``prepare``). ``branch``: the
    coordinator whose applications this one is among (a task group of the DAG): the run's own plans
    in ``work``, the compared one in its fork (:func:`branch_work`, made by
    :func:`start_branches`); None: the run's own. Re-running an
    application first removes what it and later stages wrote, so retries are idempotent. A stage
    with nothing to schedule returns at once (:func:`skip_if_idle`). Its Spark jobs carry the tag
    :func:`job_tag` (``spark.job.tags``), on a classic session as on a Connect one.
    Raises ``KeyError`` for an unknown name, ``SnapshotError`` for bad input (``prepare``).
    """
    if name not in ALL_APP_NAMES:
        raise KeyError(f"unknown application {name!r}; one of {ALL_APP_NAMES}")
    stage = stage_number(name)
    # Spark resolves a relative path from its own working directory (a Connect server's is not ours).
    snapshot, work = Path(snapshot).absolute(), branch_work(Path(work).absolute(), branch)
    if branch is not None:
        overrides = {**(overrides or {}), "coordinator": branch}
    started = time.monotonic()
    spark.addTag(job_tag(name))
    try:
        with driver_tasks(small_run(snapshot)):
            result = _run(spark, name, stage, snapshot, work, groups_in, overrides)
    finally:
        spark.removeTag(job_tag(name))
    if result.get("skipped"):
        return result["xcom"]
    _record_timing(Path(work), stage, name, time.monotonic() - started)
    record_groups(Path(work), name, result)
    return result


def small_run(snapshot) -> bool:
    """Whether the run of ``snapshot`` is small enough for its task functions to run on the driver:
    at most ``session.driver_tasks_at_most_segments()`` rows in its ``segments.jsonl[.gz]``
    (:func:`~segment_balancer.druid.snapshot.lines.count_rows`, reading no further than that).
    False when the file is missing or unreadable (``used_segments`` refuses it, in Spark)."""
    limit = driver_tasks_at_most_segments()
    if limit < 0:
        return False
    try:
        path = segments_path(Path(snapshot))
        st = path.stat()
        return _at_most(str(path), st.st_ino, st.st_mtime_ns, st.st_size, limit)
    except (SnapshotError, OSError, EOFError):
        return False


@functools.lru_cache(maxsize=16)
def _at_most(path: str, inode: int, mtime_ns: int, size: int, limit: int) -> bool:
    """Whether the file ``path`` (as it is: its inode, modification time and size) has at most
    ``limit`` rows: counted once per version of the file for a run's applications, not once each."""
    from segment_balancer.druid.snapshot.lines import count_rows

    return count_rows(path, limit) <= limit


def job_tag(name: str) -> str:
    """The Spark job tag of application ``name``'s jobs (``spark.job.tags`` in the event log and the
    Spark UI), so jobs can be counted per application on a shared session or server."""
    return f"segment_balancer_app_{name}"


def _run(spark, name: str, stage: int, snapshot, work, groups_in, overrides) -> dict:
    """The body of :func:`run_app`: the application's XCom, or ``{"skipped": True, "xcom": …}``
    for a stage that has nothing to schedule."""
    if name == "used_segments":
        from segment_balancer.spark.used_segments import used_segments

        result = used_segments(spark, Path(snapshot), Path(work))
    elif name == "prepare":
        from segment_balancer.spark.prepare import prepare

        result = prepare(spark, Path(snapshot), Path(work), overrides)
    elif (idle := skip_if_idle(name, work, groups_in)) is not None:
        return {"skipped": True, "xcom": idle}
    elif name in DUTY_APPS:
        from segment_balancer.spark.druid_plan import run_druid_app

        run_druid_app(spark, name, Path(snapshot), Path(work), overrides)
        result = {"stage": stage, "groups": (groups_in or {}).get("groups", {})}
    elif name == COMPARE_APP:
        plan_other_coordinator(spark, Path(snapshot), Path(work), overrides)
        result = {"stage": stage, "groups": (groups_in or {}).get("groups", {})}
    else:
        from segment_balancer.spark.stage_run import SparkStageRun

        run = SparkStageRun(spark, Path(work))
        run.reset_from(stage)
        groups = G.decode_all((groups_in or {}).get("groups", {}))
        if name == "assemble":
            from segment_balancer.spark.assemble import assemble

            assemble(run, groups, Path(snapshot))
        else:
            module = stage_module(stage)
            getattr(module, "start_groups", _no_start)(groups)
            module.stage(run, groups)
        result = {"stage": stage, "groups": G.encode_all(groups)}
    return result


def skip_if_idle(name: str, work, groups_in: dict | None, branch: str | None = None) -> dict | None:
    """The XCom of stage application ``name`` when it has nothing to schedule, else None
    (``branch``: as :func:`run_app`'s).

    Decided without Spark from the input XCom ``groups_in`` (``{"groups": {name: base64 bitmap}}``):
    a stage is idle when every group it ``READS`` is absent or empty, or when its module's
    ``idle(groups, work)`` says so (stage 13: no decommissioning server holds only broadcast
    segments). Stages 12 and ``prepare``/``assemble`` always run. An idle stage's XCom is its input
    groups after its ``start_groups`` (the copies a stage starts from), exactly what running it
    would hand on; its ops of an earlier attempt are forgotten and its timing is recorded as
    ``skipped``. The DAG's operator calls this before ``spark-submit`` (a JVM and a Spark session
    cost seconds per application) and :func:`run_app` calls it too, so the CLI and the DAG agree.
    """
    if name == COMPARE_APP and not compare_requested(Path(work)):
        return {"stage": stage_number(name), "groups": (groups_in or {}).get("groups", {})}
    if not name.startswith("stage"):
        return None
    work = branch_work(Path(work).absolute(), branch)
    stage = stage_number(name)
    module = stage_module(stage)
    groups = G.decode_all((groups_in or {}).get("groups", {}))
    if hasattr(module, "idle"):
        idle = module.idle(groups, Path(work))
    else:
        kinds = {r.removesuffix("[T]") for r in module.READS}
        idle = bool(kinds) and not any(len(bm) for n, bm in groups.items() if split_group_name(n)[0] in kinds)
    if not idle:
        return None
    getattr(module, "start_groups", _no_start)(groups)
    reset_manifest(Path(work), stage)
    _record_timing(Path(work), stage, name, 0.0, skipped=True)
    result = {"stage": stage, "groups": G.encode_all(groups)}
    record_groups(Path(work), name, result)
    return result


def plan_other_coordinator(spark, snapshot: Path, work: Path, overrides: dict | None) -> Path:
    """The ``compare_coordinators`` application: the other coordinator than the run's plans the same
    snapshot from the same timeline and prepared tables, in a fork of ``work``
    (:func:`segment_balancer.spark.workdir.fork_work`: ``WORK/compared_work/<coordinator>/``), each
    of its applications after ``prepare`` in order (``assemble`` last: its plan is
    ``WORK/compared_work/<coordinator>/plan``; validated and set beside the run's plan by
    ``segment_balancer.plan.compare.place_compared``). Returns the fork. When
    :func:`compare_alongside` started them beside the run's own applications, this waits for them
    (and raises what they raised)."""
    alongside = _ALONGSIDE.pop(str(Path(work).absolute()), None)
    if alongside is not None:
        return alongside.result()
    fork = _fork_other(work)
    _plan_fork(spark, snapshot, work, fork, overrides)
    return fork


def _fork_other(work: Path) -> Path:
    """The compared coordinator's work directory, forked now (:func:`start_branches`). Raises
    ``RuntimeError`` when the run compares nothing."""
    compared = start_branches(work)[1:]
    if not compared:
        raise RuntimeError(f"{work}: the run asks for no comparison")
    return compared_work(work, compared[0])


def _plan_fork(spark, snapshot: Path, work: Path, fork: Path, overrides: dict | None, stop=None) -> None:
    """The other coordinator's applications after ``prepare`` in ``fork``, in order; before each,
    none when ``stop`` (a ``threading.Event``) is set."""
    other = coordinator_of(fork)
    xcom = {"stage": 0, "groups": json.loads((Path(work) / "groups" / f"{STAGE0_APPS[-1]}.json").read_text())}
    log = logging.getLogger("segment_balancer.compare")
    for name in (*coordinator(other).applications, ASSEMBLE_APP):
        if stop is not None and stop.is_set():
            raise RuntimeError(f"compared plan abandoned before {name}: the run's own plan failed")
        log.info("running %s (compared)", name)
        xcom = run_app(spark, name, snapshot, fork, xcom, {**(overrides or {}), "coordinator": other})


class _Alongside:
    """The other coordinator's applications in a thread of their own (:func:`compare_alongside`)."""

    def __init__(self, spark, snapshot: Path, work: Path, overrides: dict | None):
        self.spark, self.fork = spark, _fork_other(work)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(
            target=self._run, args=(snapshot, work, overrides), name="compare_coordinators", daemon=True
        )
        self.thread.start()

    def _run(self, snapshot, work, overrides) -> None:
        try:
            _plan_fork(self.spark, snapshot, work, self.fork, overrides, self.stop)
        except BaseException as exc:  # handed to the thread that waits for the result
            self.error = exc

    def result(self) -> Path:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.fork

    def abandon(self, wait: bool = True) -> None:
        """Start no other application, interrupt the Spark jobs of the one running (their job tags:
        the run failed, none of its own is running), and wait for the thread (``wait``)."""
        self.stop.set()
        if self.thread.is_alive():
            for name in (*coordinator(coordinator_of(self.fork)).applications, ASSEMBLE_APP):
                try:
                    self.spark.interruptTag(job_tag(name))
                except Exception:  # noqa: BLE001 - a session already stopping: its jobs end with it
                    logging.getLogger("segment_balancer.compare").debug("could not interrupt %s", name)
        if wait:
            self.thread.join()


_ALONGSIDE: dict[str, _Alongside] = {}

ALONGSIDE_AT_MOST_SEGMENTS = 2_000_000
"""The largest run (segments of its timeline) whose compared plan runs beside its own
(:func:`alongside_fits`): the two coordinators' Python workers then hold their runs at once (at 1M
the ``druid_rules`` worker peaks at 4.4 GiB, #7458's stage workers at 2.6 GiB), which a larger
run would not fit in this 24 GiB machine beside the driver; a larger one compares after."""


def alongside_fits(snapshot: Path, work: Path) -> bool:
    """Whether the run in ``work`` (after ``prepare``) plans the other coordinator beside its own
    (:func:`compare_alongside`): its task functions run in Spark (not :func:`small_run`) and its
    timeline has at most :data:`ALONGSIDE_AT_MOST_SEGMENTS` segments."""
    from segment_balancer.spark.used_segments import read_summary, segment_count

    return not small_run(snapshot) and segment_count(read_summary(work)) <= ALONGSIDE_AT_MOST_SEGMENTS


def compare_alongside(spark, snapshot: Path, work: Path, overrides: dict | None) -> None:
    """Start ``compare_coordinators``' work now, right after ``prepare``, beside the run's own
    applications: the fork of ``work`` made at once, then the other coordinator's applications in
    a thread of their own, their Spark jobs in the same session as the run's (the CLI's ``plan
    --compare``; each application still one :func:`run_app`, with its own job tag and timing in the
    fork). The other coordinator's plan reads only what ``prepare`` left, so it is the plan it would
    be after the run's. ``compare_coordinators`` (:func:`plan_other_coordinator`) then waits for
    it. For a run of :func:`alongside_fits` only (on the driver the two would take turns on one
    Python interpreter). :func:`abandon_alongside` when the run fails."""
    _ALONGSIDE[str(Path(work).absolute())] = _Alongside(spark, snapshot, Path(work), overrides)


def abandon_alongside(work: Path, wait: bool = True) -> None:
    """After the run's own applications failed: the other coordinator's started by
    :func:`compare_alongside`, if any, are stopped (the running one's Spark jobs interrupted, no
    other started) and waited for; not waited for when the process is being interrupted (``wait``
    False: Ctrl+C), whose session's end ends them (their thread is a daemon)."""
    alongside = _ALONGSIDE.pop(str(Path(work).absolute()), None)
    if alongside is not None:
        alongside.abandon(wait)


def coordinator_of(work: Path) -> str:
    """Who plans the run in ``work``: the config key ``coordinator`` ``prepare`` kept in
    ``prepared/meta.json`` (the default before ``prepare`` has run)."""
    path = Path(work) / "prepared" / "meta.json"
    if not path.exists():
        return DEFAULT_COORDINATOR
    return json.loads(path.read_text())["config"].get("coordinator", DEFAULT_COORDINATOR)


def branches(work: Path) -> list[str]:
    """The coordinators that plan the run in ``work`` (after ``prepare``): the run's own, then the
    one it is compared with when the run compares (``spark.workdir.compare_requested``)."""
    own = coordinator(coordinator_of(Path(work)))
    return [own.name, own.compared_with] if compare_requested(Path(work)) else [own.name]


def start_branches(work: Path) -> list[str]:
    """:func:`branches`, each compared one's work directory forked now
    (``spark.workdir.fork_work``, replacing an earlier fork). The DAG's branch task
    ``choose_coordinators`` follows the branch of each; :func:`run_app` of a branch's application
    then works in :func:`branch_work`."""
    names = branches(work)
    for name in names[1:]:
        fork_work(Path(work), name)
    return names


def planned_branches(work: Path) -> dict[str, str]:
    """``{coordinator: its plan directory}`` of each of :func:`branches`, once they have run (what
    the DAG's ``compare`` hands on). Raises ``FileNotFoundError`` naming a branch that left no
    plan."""
    plans = {name: branch_work(Path(work), name) / "plan" for name in branches(work)}
    for name, plan in plans.items():
        if not (plan / "summary.json").is_file():
            raise FileNotFoundError(f"{plan}: the {name} branch left no plan")
    return {name: str(plan) for name, plan in plans.items()}


def branch_work(work: Path, branch: str | None) -> Path:
    """The work directory of the coordinator ``branch``'s applications of the run in ``work``:
    ``work`` itself for the run's own coordinator (or None), its fork
    (``spark.workdir.compared_work``) for the compared one. Raises ``RuntimeError`` when that fork
    was never made (:func:`start_branches`)."""
    if branch is None or branch == coordinator_of(work):
        return work
    coordinator(branch)  # a KeyError naming the choices for an unknown one
    fork = compared_work(work, branch)
    if not (fork / "prepared" / "meta.json").is_file():
        raise RuntimeError(f"{fork}: no fork of the run for {branch}'s applications; the branch task makes it")
    return fork


def _no_start(groups) -> None:
    """A stage without ``start_groups`` starts from its input groups as they are."""


def record_groups(work, name: str, xcom: dict) -> None:
    """Keep the groups application ``name`` hands on (its XCom's ``groups``: ``{group name: base64
    roaring bitmap}``) as ``WORK/groups/<name>.json``, so ``explain`` can say which groups a
    segment was in after every stage (``assemble`` gathers them into the plan's
    ``stage_groups.json``). Applications without groups (``used_segments``) write nothing."""
    if "groups" in xcom and name != "assemble":
        write_json_atomic(xcom["groups"], work / "groups" / f"{name}.json")


def _record_timing(work, stage: int, name: str, seconds: float, skipped: bool = False) -> None:
    path = work / "timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    position = ALL_APP_NAMES.index(name)
    timings = {k: v for k, v in timings.items() if k in ALL_APP_NAMES and ALL_APP_NAMES.index(k) < position}
    timings[name] = {"stage": stage, "seconds": round(seconds, 3), **({"skipped": True} if skipped else {})}
    if position == 0:  # when the run began (UTC): what orders two plans of one snapshot (plan.publish)
        began = datetime.now(UTC) - timedelta(seconds=seconds)
        timings[name]["started_at"] = began.isoformat(timespec="microseconds").replace("+00:00", "Z")
    write_json_atomic(timings, path)


def run_workload(names: list[str], snapshot: Path, work: Path) -> None:
    """Run the applications ``names`` in order on ``snapshot`` in one local session (work in
    ``work``): the training run of the JVM class archive (:func:`segment_balancer.spark.jvm_archive.build_archive`
    runs ``python -m segment_balancer.spark.apps --workload NAMES SNAPSHOT WORK``)."""
    spark = local_session("segment_balancer.jvm_archive")
    xcom = None
    for name in names:
        xcom = run_app(spark, name, snapshot, work, xcom)
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1:2] != ["--workload"] or len(sys.argv) != 5:
        raise SystemExit("usage: python -m segment_balancer.spark.apps --workload NAME[,NAME...] SNAPSHOT WORK")
    run_workload(sys.argv[2].split(","), Path(sys.argv[3]), Path(sys.argv[4]))
