"""The coordinators' branches of ``segment_balancing``: one task group per coordinator
(``segment_balancer.planner.coordinators.COORDINATORS``), named after it, holding a task per
application of its own and its ``assemble``; the branch task ``choose_coordinators`` follows the
branch of the run's coordinator and, when the run compares, of the one it is compared with, and
skips the others.

Light at DAG-parse time: no Spark.
"""

from __future__ import annotations

from segment_balancer.planner.coordinators import ASSEMBLE_APP, COORDINATORS, STAGE0_APPS, Coordinator


def branch_apps(coordinator: Coordinator) -> tuple[str, ...]:
    """The applications of ``coordinator``'s task group, in order: its own, then ``assemble``."""
    return (*coordinator.applications, ASSEMBLE_APP)


def branch_task_id(coordinator: str, app: str) -> str:
    """The task id of application ``app`` in the task group of ``coordinator`` (Airflow's prefix)."""
    return f"{coordinator}.{app}"


def first_task_ids(coordinators: list[str]) -> list[str]:
    """The task ids that start the branches of ``coordinators`` (what the branch task returns)."""
    return [branch_task_id(c, COORDINATORS[c].applications[0]) for c in coordinators]


STAGE_TASK_IDS: tuple[str, ...] = (
    *STAGE0_APPS,
    *(branch_task_id(c.name, app) for c in COORDINATORS.values() for app in branch_apps(c)),
)
"""Every task of ``segment_balancing`` that runs an application, whose XCom holds segment groups
(what ``remove_work`` and the retention DAG delete with a run)."""
