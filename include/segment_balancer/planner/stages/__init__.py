"""The stages, one module each (``s01_unreplicated`` … ``s13_broadcast_on_decomm``), and the registry
of the Spark applications of a run, in run order.

``APP_NAMES`` is the one list the DAG, the Spark entry points (``spark_apps/<name>.py``) and the CLI
share: stage 0 (``used_segments``, the timeline; ``prepare``, the run's tables) first, the thirteen
stages of Druid issue #7458, ``assemble`` last.

The Airflow DAG file imports this module at parse time, so keep it import-light: no Spark, pandas
or engine imports at module level (import them inside functions).
"""

from __future__ import annotations

APP_NAMES = [
    "used_segments",
    "prepare",
    "stage01_unreplicated",
    "stage02_underbroadcast",
    "stage03_underreplicated",
    "stage04_to_become_underreplicated",
    "stage05_decommissioning",
    "stage06_first_revisit",
    "stage07_balancing",
    "stage08_second_revisit",
    "stage09_still_loaded_on_decomm",
    "stage10_to_be_balanced",
    "stage11_repeat_balancing",
    "stage12_unload",
    "stage13_broadcast_on_decomm",
    "assemble",
]


def run_app(spark, name: str, snapshot, work, groups_in: dict | None, overrides: dict | None = None) -> dict:
    """Run one application of ``APP_NAMES`` and return its XCom dict (``stage``, ``groups``).

    ``groups_in``: the previous application's XCom (None for ``prepare``). Re-running an
    application first removes what it and later stages wrote, so retries are idempotent. A stage
    with nothing to schedule returns at once (:func:`skip_if_idle`). Its Spark jobs carry the tag
    :func:`job_tag` (``spark.job.tags``), on a classic session as on a Connect one.
    Raises ``KeyError`` for an unknown name, ``SnapshotError`` for bad input (``prepare``).
    """
    import time
    from pathlib import Path

    if name not in APP_NAMES:
        raise KeyError(f"unknown application {name!r}; one of {APP_NAMES}")
    stage = stage_number(name)
    # Spark resolves a relative path from its own working directory (a Connect server's is not ours).
    snapshot, work = Path(snapshot).absolute(), Path(work).absolute()
    started = time.monotonic()
    spark.addTag(job_tag(name))
    try:
        result = _run(spark, name, stage, snapshot, work, groups_in, overrides)
    finally:
        spark.removeTag(job_tag(name))
    if result.get("skipped"):
        return result["xcom"]
    _record_timing(Path(work), stage, name, time.monotonic() - started)
    record_groups(Path(work), name, result)
    return result


def job_tag(name: str) -> str:
    """The Spark job tag of application ``name``'s jobs (``spark.job.tags`` in the event log and the
    Spark UI), so jobs can be counted per application on a shared session or server."""
    return f"segment_balancer_app_{name}"


def _run(spark, name: str, stage: int, snapshot, work, groups_in, overrides) -> dict:
    """The body of :func:`run_app`: the application's XCom, or ``{"skipped": True, "xcom": …}``
    for a stage that has nothing to schedule."""
    from pathlib import Path

    from segment_balancer.planner import groups as G

    if name == "used_segments":
        from segment_balancer.spark.used_segments import used_segments

        result = used_segments(spark, Path(snapshot), Path(work))
    elif name == "prepare":
        from segment_balancer.spark.prepare import prepare

        result = prepare(spark, Path(snapshot), Path(work), overrides)
    elif (idle := skip_if_idle(name, work, groups_in)) is not None:
        return {"skipped": True, "xcom": idle}
    else:
        from segment_balancer.spark.workdir import Run

        run = Run(spark, Path(work))
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


def stage_number(name: str) -> int:
    """The algorithm's stage of an application: 0 for ``used_segments`` and ``prepare``, 1–13 for
    ``stageNN_*``, 14 for ``assemble``."""
    if name.startswith("stage"):
        return int(name[5:7])
    return 14 if name == "assemble" else 0


def skip_if_idle(name: str, work, groups_in: dict | None) -> dict | None:
    """The XCom of stage application ``name`` when it has nothing to schedule, else None.

    Decided without Spark from the input XCom ``groups_in`` (``{"groups": {name: base64 bitmap}}``):
    a stage is idle when every group it ``READS`` is absent or empty, or when its module's
    ``idle(groups, work)`` says so (stage 13: no decommissioning server holds only broadcast
    segments). Stages 12 and ``prepare``/``assemble`` always run. An idle stage's XCom is its input
    groups after its ``start_groups`` (the copies a stage starts from), exactly what running it
    would hand on; its ops of an earlier attempt are forgotten and its timing is recorded as
    ``skipped``. The DAG's operator calls this before ``spark-submit`` (a JVM and a Spark session
    cost seconds per application) and :func:`run_app` calls it too, so the CLI and the DAG agree.
    """
    from pathlib import Path

    from segment_balancer.planner import groups as G
    from segment_balancer.planner.kernels.state import split_group_name
    from segment_balancer.spark.workdir import reset_manifest

    if not name.startswith("stage"):
        return None
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


def _no_start(groups) -> None:
    """A stage without ``start_groups`` starts from its input groups as they are."""


def record_groups(work, name: str, xcom: dict) -> None:
    """Keep the groups application ``name`` hands on (its XCom's ``groups``: ``{group name: base64
    roaring bitmap}``) as ``WORK/groups/<name>.json``, so ``explain`` can say which groups a
    segment was in after every stage (``assemble`` gathers them into the plan's
    ``stage_groups.json``). Applications without groups (``used_segments``) write nothing."""
    from segment_balancer.common.files import write_json_atomic

    if "groups" in xcom and name != "assemble":
        write_json_atomic(xcom["groups"], work / "groups" / f"{name}.json")


def _record_timing(work, stage: int, name: str, seconds: float, skipped: bool = False) -> None:
    import json

    from segment_balancer.common.files import write_json_atomic

    path = work / "timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    position = APP_NAMES.index(name)
    timings = {k: v for k, v in timings.items() if k in APP_NAMES and APP_NAMES.index(k) < position}
    timings[name] = {"stage": stage, "seconds": round(seconds, 3), **({"skipped": True} if skipped else {})}
    write_json_atomic(timings, path)


STAGE_MODULES = {
    1: "s01_unreplicated", 2: "s02_underbroadcast", 3: "s03_underreplicated", 4: "s04_to_become_underreplicated",
    5: "s05_decommissioning", 6: "s06_first_revisit", 7: "s07_balancing", 8: "s08_second_revisit",
    9: "s09_still_loaded_on_decomm", 10: "s10_to_be_balanced", 11: "s11_repeat_balancing", 12: "s12_unload",
    13: "s13_broadcast_on_decomm",
}
"""The module of every stage (``segment_balancer.planner.stages.<module>``): each declares ``STAGE``,
``READS``, ``WRITES`` and ``stage(run, groups)``; optionally ``start_groups(groups)`` (the working
groups it copies from the start-of-run ones, run before ``stage``) and ``idle(groups, work)``
(whether it has nothing to schedule, when its ``READS`` alone cannot tell: see :func:`skip_if_idle`)."""


def stage_module(stage: int):
    """The module of ``stage`` (1–13), imported on first use."""
    import importlib

    return importlib.import_module(f".{STAGE_MODULES[stage]}", __name__)
