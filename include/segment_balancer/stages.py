"""The stage registry: the Spark application of every step of a run, in run order.

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
    application first removes what it and later stages wrote, so retries are idempotent.
    Raises ``KeyError`` for an unknown name, ``SnapshotError`` for bad input (``prepare``).
    """
    import time
    from pathlib import Path

    from . import groups as G

    if name not in APP_NAMES:
        raise KeyError(f"unknown application {name!r}; one of {APP_NAMES}")
    stage = stage_number(name)
    started = time.monotonic()
    if name == "used_segments":
        from .used_segments import used_segments

        result = used_segments(spark, Path(snapshot), Path(work))
    elif name == "prepare":
        from .prepare import prepare

        result = prepare(spark, Path(snapshot), Path(work), overrides)
    else:
        from .run import Run

        run = Run(spark, Path(work))
        run.reset_from(stage)
        groups = G.decode_all((groups_in or {}).get("groups", {}))
        if name == "assemble":
            from .assemble import assemble

            assemble(run, groups, Path(snapshot))
        else:
            STAGE_FUNCTIONS[stage](run, groups)
        result = {"stage": stage, "groups": G.encode_all(groups)}
    _record_timing(Path(work), stage, name, time.monotonic() - started)
    return result


def stage_number(name: str) -> int:
    """The algorithm's stage of an application: 0 for ``used_segments`` and ``prepare``, 1–13 for
    ``stageNN_*``, 14 for ``assemble``."""
    if name.startswith("stage"):
        return int(name[5:7])
    return 14 if name == "assemble" else 0


def _record_timing(work, stage: int, name: str, seconds: float) -> None:
    import json

    from .io import write_json_atomic

    path = work / "timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    position = APP_NAMES.index(name)
    timings = {k: v for k, v in timings.items() if k in APP_NAMES and APP_NAMES.index(k) < position}
    timings[name] = {"stage": stage, "seconds": round(seconds, 3)}
    write_json_atomic(timings, path)


def _copy(groups, src_kind: str, dst_kind: str) -> None:
    from .engine.state import split_group_name

    for name in [n for n in groups if split_group_name(n)[0] == src_kind]:
        tier = split_group_name(name)[1]
        groups[f"{dst_kind}[{tier}]" if tier is not None else dst_kind] = groups[name].copy()


def _stage1(run, groups):
    from pyroaring import BitMap

    from . import steps

    groups["StillUnreplicated"] = groups.get("Unreplicated", BitMap()).copy()
    steps.step_unreplicated(run, groups, 1, run.limit(1))


def _stage2(run, groups):
    from . import steps

    _copy(groups, "Underbroadcast", "StillUnderbroadcast")
    steps.step_underbroadcast(run, groups, 2, run.limit(2))


def _stage3(run, groups):
    from . import steps

    _copy(groups, "Underreplicated", "StillUnderreplicated")
    steps.step_underreplicated(run, groups, 3, run.limit(3), "StillUnderreplicated")


def _stage4(run, groups):
    from . import steps

    steps.step_underreplicated(run, groups, 4, run.limit(4), "ToBecomeUnderreplicated")


def _stage5(run, groups):
    from . import steps

    _copy(groups, "ToMoveAwayFromDecommServers", "StillLoadedOnDecommServers")
    steps.step_decommissioning(run, groups, 5, run.limit(5))


def _revisit(stage):
    def revisit(run, groups):
        from . import steps

        limit = run.limit(stage)
        steps.step_unreplicated(run, groups, stage, limit)
        steps.step_underbroadcast(run, groups, stage, limit)
        steps.step_underreplicated(run, groups, stage, limit, "StillUnderreplicated")
        steps.step_underreplicated(run, groups, stage, limit, "ToBecomeUnderreplicated")

    return revisit


def _stage7(run, groups):
    from . import steps

    steps.step_balancing(run, groups, 7, run.limit(7), record=True)


def _stage9(run, groups):
    from . import steps

    steps.step_decommissioning(run, groups, 9, run.limit(9))


def _stage10(run, groups):
    from . import steps

    steps.step_to_be_balanced(run, groups, 10, run.limit(10))


def _stage11(run, groups):
    from . import steps

    steps.step_balancing(run, groups, 11, run.limit(11), record=False)


def _stage12(run, groups):
    from . import steps

    steps.step_unload(run, groups, 12)


def _stage13(run, groups):
    from . import steps

    steps.step_broadcast_on_decomm(run, groups, 13)


STAGE_FUNCTIONS = {1: _stage1, 2: _stage2, 3: _stage3, 4: _stage4, 5: _stage5, 6: _revisit(6), 7: _stage7,
                   8: _revisit(8), 9: _stage9, 10: _stage10, 11: _stage11, 12: _stage12, 13: _stage13}
