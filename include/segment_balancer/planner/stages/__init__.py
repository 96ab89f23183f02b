"""The thirteen stages of Druid issue #7458, one module each (``s01_unreplicated`` …
``s13_broadcast_on_decomm``), in run order.

Each stage module declares ``STAGE``, ``READS`` and ``WRITES`` (the segment groups it reads and
leaves) and ``stage(run, groups)``, which schedules through a
:class:`~segment_balancer.planner.stages.run.StageRun` and never imports Spark. The Spark
applications that run them are :mod:`segment_balancer.spark.apps`.

Import-light (the Airflow DAG reads :data:`APP_NAMES` at parse time): the stage modules are
imported on first use.
"""

from __future__ import annotations

from segment_balancer.planner.config_keys import COORDINATORS
from segment_balancer.planner.druid_coordinator.duties import DUTY_APPS, DUTY_NAMES, DUTY_STAGES

STAGE_MODULES = {
    1: "s01_unreplicated",
    2: "s02_underbroadcast",
    3: "s03_underreplicated",
    4: "s04_to_become_underreplicated",
    5: "s05_decommissioning",
    6: "s06_first_revisit",
    7: "s07_balancing",
    8: "s08_second_revisit",
    9: "s09_still_loaded_on_decomm",
    10: "s10_to_be_balanced",
    11: "s11_repeat_balancing",
    12: "s12_unload",
    13: "s13_broadcast_on_decomm",
}
"""The module of every stage (``segment_balancer.planner.stages.<module>``): each declares ``STAGE``,
``READS``, ``WRITES`` and ``stage(run, groups)``; optionally ``start_groups(groups)`` (the working
groups it copies from the start-of-run ones, run before ``stage``) and ``idle(groups, work)``
(whether it has nothing to schedule, when its ``READS`` alone cannot tell: see
:func:`segment_balancer.spark.apps.skip_if_idle`)."""


def stage_module(stage: int):
    """The module of ``stage`` (1–13), imported on first use."""
    import importlib

    return importlib.import_module(f".{STAGE_MODULES[stage]}", __name__)


APP_NAMES = ["used_segments", "prepare", *[f"stage{m[1:]}" for _, m in sorted(STAGE_MODULES.items())], "assemble"]
"""Every application of a run, in run order: stage 0 (``used_segments``, the timeline; ``prepare``,
the run's tables and first run state), ``stage01_unreplicated`` … ``stage13_broadcast_on_decomm``
(one per module of :data:`STAGE_MODULES`), ``assemble`` last. The
one list the DAG, the Spark entry points (``spark_apps/<name>.py``) and the CLI share."""


DRUID_APPS = list(DUTY_APPS)
"""The applications of the ``druid`` coordinator: Druid's Coordinator, one run, duty by duty, on
``prepare``'s tables (``planner.druid_coordinator.duties.DUTY_APPS``)."""

COORDINATOR_APP_NAMES: dict[str, list[str]] = dict(
    zip(COORDINATORS, (APP_NAMES, [APP_NAMES[0], APP_NAMES[1], *DRUID_APPS, APP_NAMES[-1]]), strict=True)
)
"""The applications of a run of each coordinator (``config_keys.COORDINATORS``), in run order."""
DEFAULT_COORDINATOR = COORDINATORS[0]

COMPARE_APP = "compare_coordinators"
"""The application that plans the run's snapshot with the other coordinator too, after the run's own
``assemble`` (the DAG param ``compare_with_druid``, the CLI's ``plan --compare``): its applications
after ``prepare``, in a fork of the work directory (``segment_balancer.spark.workdir.fork_work``)."""

ALL_APP_NAMES = [APP_NAMES[0], APP_NAMES[1], *DRUID_APPS, *APP_NAMES[2:], COMPARE_APP]
"""Every application of either coordinator, each run's in its order, then :data:`COMPARE_APP`."""


def other_coordinator(coordinator: str) -> str:
    """The coordinator of ``config_keys.COORDINATORS`` that is not ``coordinator``."""
    return next(c for c in COORDINATORS if c != coordinator)


def stage_number(name: str) -> int:
    """The algorithm's stage of an application: 0 for ``used_segments`` and ``prepare``, 1–13 for
    ``stageNN_*``, the number of its first duty for a ``druid`` application (whose operations take
    the stages' place: ``druid_rules`` 1, ``druid_unload`` 4, ``druid_balance`` 6, ``druid_clone``
    7), 14 for ``assemble``, 15 for ``compare_coordinators``."""
    if name.startswith("stage"):
        return int(name[5:7])
    if name in DUTY_APPS:
        return DUTY_STAGES[DUTY_APPS[name][0]]
    return {"assemble": 14, COMPARE_APP: 15}.get(name, 0)


def stage_label(stage: int, coordinator: str = DEFAULT_COORDINATOR) -> str:
    """How a plan's ``stage`` number reads: ``"7 balancing"`` (the stage's module of
    :data:`STAGE_MODULES`) for ``issue7458``, ``"6 BalanceSegments"`` (Druid's duty) for ``druid``;
    the bare number for one neither knows."""
    names = DUTY_NAMES if coordinator == "druid" else {n: m[4:].replace("_", " ") for n, m in STAGE_MODULES.items()}
    name = names.get(int(stage))
    return f"{int(stage)} {name}" if name else str(int(stage))
