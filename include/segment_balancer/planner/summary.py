"""``summary.json``: the typed contents of a plan's summary (:class:`PlanSummary`), and reading it.

``assemble`` builds a :class:`PlanSummary` and writes ``model_dump(mode="json")`` as the plan's
:data:`SUMMARY_FILE` and the model's JSON schema as :data:`SCHEMA_FILE` beside it; every reader
(the report, the plan history, ``explain --plan``, the CLI's ``summary``, a simulation) reads it
back with :func:`read_plan_summary`. The key names are the file's; a key the assembler leaves out
when it has nothing to say (an alert's ``count``, a cluster-wide metric's ``tier``, an
application's ``skipped``) is absent from the JSON rather than ``null``.

:data:`SCHEMA_VERSION` is written as ``schema_version``; a summary without one (written before it
was recorded) reads as version 1. Counts are ints, sizes bytes, times ISO-8601 UTC texts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from segment_balancer.common.errors import InputError
from segment_balancer.planner.coordinators import COORDINATOR_NAMES, DEFAULT_COORDINATOR

__all__ = [
    "SCHEMA_VERSION",
    "SUMMARY_FILE",
    "SCHEMA_FILE",
    "PlanSummary",
    "read_plan_summary",
    "parse_plan_summary",
    "summary_schema",
]

SCHEMA_VERSION = 1
"""The version of :class:`PlanSummary` this code writes (``schema_version``) and the newest it reads."""
SUMMARY_FILE = "summary.json"
"""The plan's summary, in the plan directory."""
SCHEMA_FILE = "summary.schema.json"
"""The JSON schema of :data:`SUMMARY_FILE` (:func:`summary_schema`), beside it in the plan directory."""


def _absent(value: Any) -> bool:
    return value is None


class _Part(BaseModel):
    """A part of the summary: no key but the declared ones; attribute docstrings are the schema's
    descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class StageTierActionCount(_Part):
    """Operations of one stage, tier and action."""

    stage: int
    """The stage that scheduled them (1-13)."""
    tier: str | None
    """The tier of the server they act on."""
    action: str
    """``LOAD`` or ``DROP``."""
    count: int
    """Number of operations."""


class ReplicationStatus(_Part):
    """Used load-rule segments by replication status, at the snapshot or once every operation succeeded."""

    unreplicated: int
    """Segments with a target in some tier and no replica in any tier."""
    tiers: dict[str, dict[str, int]]
    """``{tier: {status: segments}}``, status one of ``underreplicated``, ``fully_replicated``,
    ``overreplicated``; a tier lists only the statuses it has."""


class TierBalance(_Part):
    """How even one tier is, over its historicals that are not decommissioning."""

    servers: int
    """Historicals counted (not decommissioning)."""
    segments_max_minus_min: int
    """Max − min of the segments one of them holds."""
    bytes_max_minus_min: int
    """Max − min of the bytes one of them holds."""


class ServerHoldings(_Part):
    """One historical's holdings at the snapshot and once every operation succeeded."""

    server: str
    """The server (``host:port``)."""
    tier: str
    """Its tier."""
    max_size: int
    """Its capacity, bytes."""
    decommissioning: bool
    """Named by ``decommissioningNodes``."""
    segments_before: int
    """Segments it holds at the snapshot (served, no drop queued, or loading)."""
    bytes_before: int
    """Bytes of ``segments_before``."""
    segments_after: int
    """Segments it holds once the plan succeeded."""
    bytes_after: int
    """Bytes of ``segments_after``."""


class TierUndone(_Part):
    """What one tier still lacks once the plan succeeded, what stopped it, and the runs to finish
    (:mod:`segment_balancer.planner.undone`)."""

    underreplicated: int
    """Segments with fewer replicas in the tier than their target."""
    missing_replicas: int
    """The replicas those segments miss in the tier."""
    on_decommissioning: int
    """Segments still on the tier's decommissioning historicals."""
    spread_segments: int
    """Max − min of the segments its live historicals hold."""
    stopped_by: dict[str, int]
    """Segments left undone by cause (``undone.CAUSES``), each under the cause of its last decision."""
    runs_to_finish: int | None
    """Runs until the tier holds every replica and nothing is on a decommissioning historical
    (loads only; null when more runs do not help or no queue limit bounds them)."""
    runs_how: str
    """How ``runs_to_finish`` was estimated, or why there is none."""


class Undone(_Part):
    """What the plan leaves undone."""

    unavailable: int
    """Used segments whose load rule asks for some replica (tiers without historicals included)
    and that have none in any tier."""
    tiers: dict[str, TierUndone]
    """Per tier: every tier with historicals, and every tier a load rule names that has none."""


class DruidMetric(_Part):
    """One count under the name Druid's Coordinator emits it (:mod:`segment_balancer.druid.metrics`)."""

    metric: str
    """Druid's metric name, e.g. ``segment/assigned/count``."""
    tier: str | None = Field(default=None, exclude_if=_absent)
    """The tier; absent for a cluster-wide metric (``segment/unavailable/count``)."""
    value: int
    """The count (``tier/total/capacity``: bytes)."""
    at: Literal["snapshot", "plan"]
    """``snapshot``: the cluster as captured; ``plan``: the plan's decisions, or the state once it succeeded."""


class TimelineCounts(_Part):
    """The segment timeline of the snapshot (the ``used_segments`` application)."""

    per_datasource: dict[str, dict[str, int]]
    """``{datasource: {status: segments}}``, status ``visible``, ``standby``, ``overshadowed`` or
    ``unused``; only the statuses a datasource has."""
    flag_disagreements: int
    """Segments whose input ``overshadowed`` flag disagrees with the computed timeline."""
    flag_examples: list[str]
    """A few of them, described."""


class Availability(_Part):
    """Drops the availability rule deferred (stage 12)."""

    deferred_drops: int
    """Drops deferred to a later run."""
    deferred_segments: int
    """Segments those drops belong to."""
    deferred_examples: list[str]
    """Up to five of those segment ids."""


class DatasourceReplicas(_Part):
    """Segments of one datasource and their served replicas."""

    segments: int
    """Segments."""
    served_replicas: int
    """Their replicas held at the snapshot (served or loading)."""


class OvershadowedWaiting(_Part):
    """Overshadowed segments stage 12 keeps until what overshadows them is served."""

    segments: int
    """Segments kept."""
    served_replicas: int
    """Their served replicas."""
    per_datasource: dict[str, DatasourceReplicas]
    """The same per datasource."""


class Unlisted(_Part):
    """Segments served or queued that ``segments.jsonl`` does not list (unused): stage 12 drops their replicas."""

    segments: int
    """Segments."""
    served_replicas: int
    """Their served replicas."""
    per_datasource: dict[str, DatasourceReplicas]
    """The same per datasource."""
    examples: list[str]
    """Up to five of those segment ids."""


class Alert(_Part):
    """Something about the input the plan warns of."""

    kind: str
    """What it is about, e.g. ``unknown_tier``, ``load_queued_too_long``, ``unknown_config_key``."""
    count: int | None = Field(default=None, exclude_if=_absent)
    """How many things it concerns; absent for an alert about one thing."""
    key: str | None = Field(default=None, exclude_if=_absent)
    """The config key (``unknown_config_key`` only)."""
    message: str
    """A sentence for a person."""
    examples: list[str] | None = Field(default=None, exclude_if=_absent)
    """A few of the things it concerns; absent for an alert about one thing."""


class ShedPair(_Part):
    """One pair of historicals of the ``avgShedder`` strategy (stage 7;
    :func:`segment_balancer.planner.kernels.shedding.pair_record`)."""

    tier: str
    """The tier."""
    high: str
    """The higher-scored server."""
    low: str
    """The lower-scored server."""
    high_score: float
    """``high``'s projected usage, percent of its ``max_size``."""
    low_score: float
    """``low``'s projected usage, percent of its ``max_size``."""
    difference: float
    """``high_score`` − ``low_score``, percentage points."""
    high_used_bytes: int
    """``high``'s projected usage, bytes."""
    low_used_bytes: int
    """``low``'s projected usage, bytes."""
    hit_count: int
    """Consecutive runs, this one included, the two formed a hitting pair (0: not hitting)."""
    sheds: bool
    """The pair sheds this run."""
    bytes_to_move: int
    """Bytes that would make the two scores equal."""
    moves: int
    """Segments shedding moved."""
    bytes_moved: int
    """Bytes shedding moved."""
    waiting: str
    """For a pair that does not shed, what it waits for."""


class Balancer(_Part):
    """The balancing strategy's part of the summary."""

    strategy: str
    """``cost`` or ``avgShedder`` (``balancerStrategy``)."""
    pairs: list[ShedPair]
    """The ``avgShedder`` pairs, by tier then widest difference; empty for ``cost``."""
    previous_counts: dict[str, list[tuple[str, str, int]]]
    """The hit counts the run started from: ``{tier: [[server, server, hit_count], ...]}``."""
    state_warning: str | None
    """Why a balancer state given to the run was not used; null when none was refused."""
    state_written: bool
    """The plan carries ``balancer_state.json`` (false for a what-if)."""


class IgnoredConfigKey(_Part):
    """A key of the snapshot's Coordinator config the plan did not use."""

    key: str
    """The Druid key."""
    value: Any
    """Its value, as the config has it."""
    note: str
    """Why it was not used."""


class AddedHistoricals(_Part):
    """Historicals a what-if adds."""

    tier: str
    """Their tier."""
    count: int
    """How many."""
    max_size: int
    """The capacity of each, bytes."""


class WhatIfRecord(_Part):
    """The what-if edits the plan was made with (applied to a copy of the snapshot)."""

    decommission: list[str]
    """Servers decommissioned (added to ``decommissioningNodes``)."""
    remove: list[str]
    """Servers removed from the cluster."""
    add: list[AddedHistoricals]
    """Historicals added, as asked for."""
    added: list[str]
    """The names the added historicals got."""
    snapshot: str
    """The snapshot the copy was made of (path)."""


class AppTiming(_Part):
    """The wall-clock time of one application of the run."""

    stage: int
    """Its stage (0: ``used_segments`` and ``prepare``)."""
    seconds: float
    """Seconds it ran (0 when skipped)."""
    skipped: bool = Field(default=False, exclude_if=lambda value: not value)
    """It had nothing to schedule and did not run; absent when it ran."""
    started_at: str | None = Field(default=None, exclude_if=_absent)
    """When it started (UTC); the first application's only."""


class DruidRunMetric(_Part):
    """One metric Druid's Coordinator would emit at the end of its run (``druid`` coordinator)."""

    metric: str
    """Druid's metric name, e.g. ``segment/assignSkipped/count``."""
    tier: str | None = Field(default=None, exclude_if=_absent)
    tierAlias: str | None = Field(default=None, exclude_if=_absent)  # noqa: N815 (Druid 38's dimension)
    dataSource: str | None = Field(default=None, exclude_if=_absent)  # noqa: N815 (Druid's dimension)
    server: str | None = Field(default=None, exclude_if=_absent)
    description: str | None = Field(default=None, exclude_if=_absent)
    """Druid's dimensions of the row, where it has them."""
    value: int
    """The value (bytes for sizes)."""


class DruidRun(_Part):
    """What the ``druid`` coordinator's run did beyond its operations."""

    release: str
    """The Druid release whose Coordinator it is (``35.0.0`` or ``38.0.0``)."""
    release_from: Literal["config", "snapshot", "default"] = Field(default="default")
    """Where the release came from: the config key ``druidVersion``, the snapshot's cluster
    (``servers.json``'s version), or the default, the newest."""
    release_note: str | None = Field(default=None, exclude_if=_absent)
    """Why the release is not the cluster's own, when it could not be."""
    metrics: list[DruidRunMetric]
    """Every metric of the run, as Druid emits them (rows of value 0 included)."""
    marked_unused: int
    """Segments its drop rules mark unused (dropped by a later run)."""
    overshadowed_marked_unused: int
    """Overshadowed segments it marks unused."""
    max_segments_to_move: int
    """The most segments balancing picks per tier."""
    config: dict[str, Any]
    """The dynamic config it ran with, by Druid's key names."""


class PlanSummary(_Part):
    """A plan's ``summary.json``: counts per stage, tier and action, replication status and balance
    before and after, every historical's holdings, Druid-named metrics, the timeline, deferred
    drops, alerts, the effective config, what-if edits and timings. "Before" is the snapshot;
    "after" is once every operation of the plan succeeded."""

    schema_version: int = Field(default=1, ge=1, le=SCHEMA_VERSION)
    """The version of this layout; 1 when absent."""
    snapshot_id: str
    """The snapshot's id (``cluster@snapshot_time``)."""
    cluster: str
    """The cluster's name."""
    snapshot_time: str | None = Field(default=None, exclude_if=_absent)
    """When the snapshot was taken (ISO-8601 UTC, milliseconds); absent in summaries written
    before it was recorded (then the end of ``snapshot_id``)."""
    snapshot: str
    """The snapshot directory planned (path)."""
    operations: int
    """Operations of the plan (loads + drops)."""
    loads: int
    """LOAD operations."""
    drops: int
    """DROP operations."""
    moves: int
    """Drops that wait for a load (moves and callbacks)."""
    by_stage_tier_action: list[StageTierActionCount]
    """Operations per stage, tier and action, by stage, tier, action."""
    by_reason: dict[str, int]
    """Operations per reason (``unreplicated``, ``balancing``, ...)."""
    status_before: ReplicationStatus
    """Replication status at the snapshot."""
    status_after: ReplicationStatus
    """Replication status once the plan succeeded."""
    groups_before: dict[str, int]
    """Members of each segment group at the start of the run (``Kind[tier]``: segments)."""
    groups_after: dict[str, int]
    """Members of each segment group at the end of the run."""
    balance_before: dict[str, TierBalance]
    """Balance per tier at the snapshot."""
    balance_after: dict[str, TierBalance]
    """Balance per tier once the plan succeeded."""
    servers: list[ServerHoldings]
    """Every historical, by tier then server."""
    druid_metrics: list[DruidMetric]
    """The plan's counts under Druid's metric names, by metric then tier."""
    timeline: TimelineCounts
    """The snapshot's segment timeline."""
    availability: Availability
    """Drops deferred by the availability rule."""
    overshadowed_waiting: OvershadowedWaiting
    """Overshadowed segments kept waiting."""
    unlisted: Unlisted
    """Served segments ``segments.jsonl`` does not list."""
    alerts: list[Alert]
    """Warnings about the input."""
    balancer: Balancer
    """The balancing strategy's part."""
    config: dict[str, Any]
    """The effective Coordinator config by Druid key (percents, milliseconds, seconds as the key
    says), plus ``ignored`` (as ``ignored_config``) and ``derived`` (``{key: how its value was derived}``)."""
    ignored_config: list[IgnoredConfigKey]
    """Keys of the snapshot's config the plan did not use."""
    whatif: WhatIfRecord | None
    """The what-if edits; null for a plan of the snapshot as it is."""
    timings_seconds: dict[str, AppTiming]
    """Per application of the run, in run order, its time."""
    planned_at: str | None
    """When the run began (UTC, the first application's start); null without timings."""
    coordinator: Literal[COORDINATOR_NAMES] = Field(
        default=DEFAULT_COORDINATOR, exclude_if=lambda v: v == DEFAULT_COORDINATOR
    )
    """Which coordinator planned (``planner.coordinators``; absent: the default, #7458's algorithm);
    ``druid``'s release is ``druid_run.release``."""
    druid_run: DruidRun | None = Field(default=None, exclude_if=_absent)
    """The ``druid`` coordinator's run; absent otherwise."""
    undone: Undone | None = Field(default=None, exclude_if=_absent)
    """What the plan leaves undone, per tier (absent in summaries written before it was)."""


def summary_schema() -> dict:
    """The JSON schema of :class:`PlanSummary` (what :data:`SCHEMA_FILE` holds)."""
    return PlanSummary.model_json_schema()


def _describe(exc: ValidationError) -> str:
    """The first problems of ``exc`` as ``field.path: message (got value)``."""
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        where = ""
        for part in err["loc"]:
            where += f"[{part}]" if isinstance(part, int) else ("." if where else "") + str(part)
        text = f"{where or '(top level)'}: {err['msg']}"
        if err["type"] != "missing":
            got = json.dumps(err.get("input"), default=str)
            text += f" (got {got if len(got) <= 60 else got[:57] + '...'})"
        parts.append(text)
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_plan_summary(data: Any, source: str | Path) -> PlanSummary:
    """``data`` (a summary as JSON loads it) as a :class:`PlanSummary`; raises
    :class:`~segment_balancer.common.errors.InputError` naming ``source`` and the fields that do
    not fit."""
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: not a plan summary: a JSON object expected, got {type(data).__name__}")
    try:
        return PlanSummary.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{source}: not a plan summary: {_describe(exc)}") from None


def read_plan_summary(plan_dir: str | Path) -> PlanSummary:
    """The :data:`SUMMARY_FILE` of the plan directory ``plan_dir``. Raises
    :class:`~segment_balancer.common.errors.InputError` naming the file when it is missing, is no
    JSON or does not fit :class:`PlanSummary` (and which fields); ``OSError`` when it cannot be read."""
    path = Path(plan_dir) / SUMMARY_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{Path(plan_dir)}: no {SUMMARY_FILE}; not a plan directory") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not a plan summary: not JSON ({exc})") from None
    return parse_plan_summary(data, path)
