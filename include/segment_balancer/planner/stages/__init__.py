"""The thirteen stages of Druid issue #7458, one module each (``s01_unreplicated`` …
``s13_broadcast_on_decomm``), in run order.

Each stage module declares ``STAGE``, ``READS`` and ``WRITES`` (the segment groups it reads and
leaves) and ``stage(run, groups)``, which schedules through a
:class:`~segment_balancer.planner.stages.run.StageRun` and never imports Spark. The Spark
applications that run them are :mod:`segment_balancer.spark.apps`; their names and order are the
``issue7458`` coordinator's (:mod:`segment_balancer.planner.coordinators`).

Import-light (the Airflow DAG reads it at parse time): the stage modules are imported on first use.
"""

from __future__ import annotations

import importlib

from segment_balancer.planner.coordinators import STAGES

STAGE_MODULES = {n: f"s{n:02d}_{name}" for n, name in STAGES.items()}
"""The module of every stage (``segment_balancer.planner.stages.<module>``): each declares ``STAGE``,
``READS``, ``WRITES`` and ``stage(run, groups)``; optionally ``start_groups(groups)`` (the working
groups it copies from the start-of-run ones, run before ``stage``) and ``idle(groups, work)``
(whether it has nothing to schedule, when its ``READS`` alone cannot tell: see
:func:`segment_balancer.spark.apps.skip_if_idle`)."""


def stage_module(stage: int):
    """The module of ``stage`` (1–13), imported on first use."""
    return importlib.import_module(f".{STAGE_MODULES[stage]}", __name__)
