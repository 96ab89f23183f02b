"""The coordinators that plan a run, and the only module that knows which there are.

A run is planned by one :class:`Coordinator` (the config key ``coordinator``, default
:data:`DEFAULT_COORDINATOR`) and, when the run compares (the DAG param ``compare_with_druid``, the
CLI's ``plan --compare``), by the one it is compared with too. Each is a value of
:data:`COORDINATORS`: its Spark applications between ``prepare`` and ``assemble`` (one Airflow
task each, a task group of the DAG), how its plan's ``stage`` column reads, which actions its plan
holds, how its gate counts a historical's bytes and load queue, which stages balance, and how
``explain`` walks its steps. Everything else asks this module and never compares a coordinator's
name.

- ``issue7458``: the thirteen stages of Druid issue #7458 (:data:`STAGES`, one module each in
  ``planner.stages``), each handing segment groups on to the next (docs/ALGORITHM.md).
- ``druid``: Druid's own Coordinator of the release ``druidVersion`` names, one run, duty by duty
  (:data:`DUTY_APPS`, run by ``planner.druid_coordinator``, docs/DRUID_COORDINATOR.md).

Imports nothing of the planner but the operation's declaration (``planner.operations``; every part
of the planner may ask this module) and nothing heavy (the DAG reads it at parse time).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from segment_balancer.planner.operations import Action

STAGES = {
    1: "unreplicated",
    2: "underbroadcast",
    3: "underreplicated",
    4: "to_become_underreplicated",
    5: "decommissioning",
    6: "first_revisit",
    7: "balancing",
    8: "second_revisit",
    9: "still_loaded_on_decomm",
    10: "to_be_balanced",
    11: "repeat_balancing",
    12: "unload",
    13: "broadcast_on_decomm",
}
"""The thirteen stages of Druid issue #7458 by number (seed 000): the application of stage ``n`` is
``stage<nn>_<name>``, its module ``planner.stages.s<nn>_<name>``."""

DUTIES = ("prepare", "rules", "unload", "balance", "clone")
"""The duties of one Druid Coordinator run that change load queues or metadata, in the order they
run (Druid 35.0.0 ``HistoricalManagementDuties``)."""
DUTY_STAGES = {"prepare": 1, "rules": 2, "unload": 4, "balance": 6, "clone": 7}
"""A duty's number in the run (the plan's ``stage`` of its operations)."""
DUTY_NAMES = {
    1: "PrepareBalancerAndLoadQueues",
    2: "RunRules",
    4: "UnloadUnusedSegments",
    6: "BalanceSegments",
    7: "CloneHistoricals",
}
"""Druid's class of each duty that changes load queues, by its number."""
DUTY_APPS = {
    "druid_rules": ("prepare", "rules"),
    "druid_unload": ("unload",),
    "druid_balance": ("balance",),
    "druid_clone": ("clone",),
}
"""The ``druid`` coordinator's Spark applications (one Airflow task each), in run order, and the
duties each runs: ``druid_rules`` also counts the segments (``CollectSegmentStats``, 3),
``druid_unload`` marks overshadowed segments unused (``MarkOvershadowedSegmentsAsUnused``, 5:
metadata only), ``druid_balance`` runs one Spark task per tier, ``druid_clone`` counts the load
queues (``CollectLoadQueueStats``, 8). ``PrepareBalancerAndLoadQueues`` runs first in every
application (it only cancels loads on decommissioning servers, which every later duty must see
cancelled)."""
STAGE0_APPS = ("used_segments", "prepare")
"""Stage 0, shared by every coordinator of a run: the timeline (``used_segments``) and the run's
tables and start state (``prepare``)."""
ASSEMBLE_APP = "assemble"
"""The last application of every coordinator's run: the plan's files (``spark.assemble``)."""
COMPARE_APP = "compare_coordinators"
"""The application that plans the run's snapshot with the compared coordinator too, in a fork of
the work directory (``spark.workdir.fork_work``), in a process that runs a whole plan (the CLI's
``plan --compare``, ``tools.pipeline``); the DAG runs that coordinator's applications as tasks of
its own branch instead."""
STAGE_OF_APP = {ASSEMBLE_APP: 14, COMPARE_APP: 15}
"""The ``stage`` number of the applications that are no stage or duty."""


class GateCounting(enum.Enum):
    """How the plan's gate (``plan.validation``) counts what a historical holds and queues."""

    PROJECTED = "projected"
    """As the run state does (docs/ALGORITHM.md "Limits"): current size plus queued and planned
    loads, drops never subtracted; each stage's loads against its own queue limit."""
    SERVER_HOLDER = "server_holder"
    """As Druid's ``ServerHolder`` does when it decides a load: drops subtracted, cancelled
    requests undone, the clone duty's loads unchecked; one load-queue size for every duty."""


@dataclass(frozen=True)
class Coordinator:
    """One coordinator: what it runs and how its plans read.

    ``name``: the value of the config key ``coordinator``; ``title``: how a report names it;
    ``applications``: its Spark applications after ``prepare`` and before ``assemble``, in run
    order; ``stage_names``: a plan's ``stage`` number → its step's name; ``step_word``: what a
    step is called (``stage``, ``duty``); ``hands_groups``: whether its applications hand segment
    groups on (``explain`` walks them through the groups); ``actions``: the actions of its plans;
    ``gate``: how its gate counts; ``balancing_stages``: the stages whose loads are balancing moves
    (``simulate``'s ``runs.csv``); ``compared_with``: the coordinator its runs are compared with;
    ``headline``: one line saying what a plan of it is, ``{release}`` the Druid release of the run
    (None: nothing to say)."""

    name: str
    title: str
    applications: tuple[str, ...]
    stage_names: Mapping[int, str]
    step_word: str
    hands_groups: bool
    actions: tuple[Action, ...]
    gate: GateCounting
    balancing_stages: tuple[int, ...]
    compared_with: str
    headline: str | None = None

    @property
    def run_apps(self) -> tuple[str, ...]:
        """Every application of a run of it, in run order: stage 0, its own, ``assemble``."""
        return (*STAGE0_APPS, *self.applications, ASSEMBLE_APP)

    @property
    def last_app(self) -> str:
        """The last of its own applications, after which ``assemble`` runs."""
        return self.applications[-1]

    def stage_label(self, stage: int) -> str:
        """How a plan's ``stage`` number reads: ``"7 balancing"``, ``"6 BalanceSegments"``; the bare
        number for a stage it does not name."""
        name = self.stage_names.get(int(stage))
        return f"{int(stage)} {name}" if name else str(int(stage))


ISSUE7458 = Coordinator(
    name="issue7458",
    title="Druid issue #7458",
    applications=tuple(f"stage{n:02d}_{name}" for n, name in sorted(STAGES.items())),
    stage_names=MappingProxyType({n: name.replace("_", " ") for n, name in STAGES.items()}),
    step_word="stage",
    hands_groups=True,
    actions=(Action.LOAD, Action.DROP),
    gate=GateCounting.PROJECTED,
    balancing_stages=(7, 10, 11),
    compared_with="druid",
)
DRUID = Coordinator(
    name="druid",
    title="Druid's Coordinator",
    applications=tuple(DUTY_APPS),
    stage_names=MappingProxyType(dict(DUTY_NAMES)),
    step_word="duty",
    hands_groups=False,
    actions=(Action.LOAD, Action.DROP, Action.CANCEL),
    gate=GateCounting.SERVER_HOLDER,
    balancing_stages=(DUTY_STAGES["balance"],),
    compared_with="issue7458",
    headline="what Druid {release}'s Coordinator queues in one run",
)

COORDINATORS: Mapping[str, Coordinator] = MappingProxyType({c.name: c for c in (ISSUE7458, DRUID)})
"""Every coordinator by name, the default first."""
COORDINATOR_NAMES = tuple(COORDINATORS)
"""The values of the config key ``coordinator``, the default first."""
DEFAULT_COORDINATOR = COORDINATOR_NAMES[0]

ALL_APP_NAMES = (
    *STAGE0_APPS,
    *(app for c in COORDINATORS.values() for app in c.applications),
    ASSEMBLE_APP,
    COMPARE_APP,
)
"""Every application of any coordinator (each ``spark_apps/<name>.py``): stage 0, each
coordinator's own in its order, ``assemble``, :data:`COMPARE_APP`."""


def coordinator(name: str | None) -> Coordinator:
    """The coordinator called ``name`` (None: the default). Raises ``KeyError`` naming the choices."""
    if name is None:
        return COORDINATORS[DEFAULT_COORDINATOR]
    try:
        return COORDINATORS[name]
    except KeyError:
        raise KeyError(f"unknown coordinator {name!r}; one of {', '.join(COORDINATOR_NAMES)}") from None


def owner(app: str) -> Coordinator | None:
    """The coordinator whose own application ``app`` is; None for stage 0, ``assemble`` and
    :data:`COMPARE_APP`."""
    return next((c for c in COORDINATORS.values() if app in c.applications), None)


def stage_number(app: str) -> int:
    """The plan's ``stage`` of application ``app``: 0 for stage 0, 1–13 for ``stageNN_*``, the
    number of its first duty for a ``druid`` application (``druid_rules`` 1, ``druid_unload`` 4,
    ``druid_balance`` 6, ``druid_clone`` 7), 14 for ``assemble``, 15 for :data:`COMPARE_APP`."""
    if app.startswith("stage"):
        return int(app[5:7])
    if app in DUTY_APPS:
        return DUTY_STAGES[DUTY_APPS[app][0]]
    return STAGE_OF_APP.get(app, 0)


def stage_label(stage: int, name: str | None = None) -> str:
    """:meth:`Coordinator.stage_label` of the coordinator ``name`` (None: the default)."""
    return coordinator(name).stage_label(stage)
