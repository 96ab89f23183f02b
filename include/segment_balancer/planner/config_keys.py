"""Every key of the Coordinator dynamic config this planner reads, declared once.

A :class:`Key` gives the name as Druid (or the seed) spells it, its JSON type, default, range,
unit, one-line meaning and source. From :data:`KEYS` come the config parser's checks and refusals
(``planner.config``), ``EffectiveConfig.as_dict``, the trigger form's typed fields
(``segment_balancer_airflow.params``: :meth:`Key.json_schema`), the table of
``docs/CONFIGURATION.md`` (:func:`markdown_table`) and the CLI's ``--config`` help. Constraints
across keys are stated in the meaning of each key they bind and checked by the parser, which
names both keys.

Standard library only: the DAG file imports it when it is parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from segment_balancer.druid.releases import NEWEST_RELEASE
from segment_balancer.planner.coordinators import COORDINATOR_NAMES, DEFAULT_COORDINATOR

INT32 = 2**31 - 1
"""Java's ``int``, the type of Druid's integer config keys."""
INT64 = 2**63 - 1

DEFAULT_FUNCTION = (
    "function (numServersInTier, targetReplicants) { return targetReplicants + "
    "Math.floor(Math.log(numServersInTier) / Math.log(numBestServersChoosingFunctionDefaultLogBase)); }"
)
MOVE_TRIGGERS = ("betterServerInTopB", "outsideTopB")
"""Values of ``balancingMoveTrigger``, the default first."""
BALANCER_STRATEGIES = ("cost", "avgShedder")
"""Values of ``balancerStrategy`` (ALGORITHM.md "Balancing strategy ``avgShedder``"), the default first."""


@dataclass(frozen=True)
class Key:
    """One config key. ``type``: the JSON type (``integer``, ``number``, ``boolean``, ``string``,
    ``array`` of strings, ``object`` of strings); bounds as JSON Schema has them (``minimum``/``maximum`` inclusive,
    ``exclusive_minimum``/``exclusive_maximum`` not); ``choices`` for a string of fixed values;
    ``unit`` of a number; ``form``: a typed field of the trigger form; ``items``: the type of an
    ``object``'s values (``string``, or ``array`` of strings)."""

    name: str
    type: str
    default: Any
    meaning: str
    source: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    choices: tuple[str, ...] | None = None
    form: bool = False
    items: str = "string"

    def range_problem(self, value: float) -> str | None:
        """What is wrong with the number ``value`` against the bounds (``must be >= 0``,
        ``must be between 0 and 100`` …, without the value), or None. A range of two bounds is
        named whole, unless its top is only Java's integer limit."""
        lo, hi, xlo, xhi = self.minimum, self.maximum, self.exclusive_minimum, self.exclusive_maximum
        if (
            (lo is None or value >= lo)
            and (hi is None or value <= hi)
            and (xlo is None or value > xlo)
            and (xhi is None or value < xhi)
        ):
            return None
        if hi is not None and hi not in (INT32, INT64):
            if lo is not None:
                return f"must be between {_num(lo)} and {_num(hi)}"
            if xlo is not None:
                return f"must be above {_num(xlo)} and at most {_num(hi)}"
        if lo is not None and xhi is not None:
            return f"must be at least {_num(lo)} and below {_num(xhi)}"
        if lo is not None and value < lo:
            return f"must be >= {_num(lo)}"
        if xlo is not None and value <= xlo:
            return f"must be > {_num(xlo)}"
        if hi is not None and value > hi:
            return f"must be <= {_num(hi)}"
        return f"must be < {_num(xhi)}"

    def json_schema(self) -> dict[str, Any]:
        """The trigger form's schema of the key: null (the snapshot's value) or a value in range,
        with the key as title and its meaning, unit and default as description."""
        schema: dict[str, Any] = {"title": self.name, "description": self.describe()}
        if self.type == "array":
            schema.update(type=["null", "array"], items={"type": "string"})
        elif self.type == "object":
            values = {"type": "array", "items": {"type": "string"}} if self.items == "array" else {"type": "string"}
            schema.update(type=["null", "object"], additionalProperties=values)
        else:
            schema["type"] = ["null", self.type]
        for field, word in (
            ("minimum", "minimum"),
            ("maximum", "maximum"),
            ("exclusive_minimum", "exclusiveMinimum"),
            ("exclusive_maximum", "exclusiveMaximum"),
        ):
            if getattr(self, field) is not None:
                schema[word] = getattr(self, field)
        if self.choices:
            schema["enum"] = [None, *self.choices]
        return schema

    def describe(self) -> str:
        """The meaning, unit and default in one sentence for a form or a table."""
        unit = f" ({self.unit})" if self.unit else ""
        return f"{self.meaning}{unit}. Empty = the snapshot's value; default {_default(self)}."


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _default(key: Key) -> str:
    """The default as JSON writes it (the long default function by name)."""
    if isinstance(key.default, str) and len(key.default) >= 40:
        return "the seed's function"
    return json.dumps(key.default)


_PERCENT = {"minimum": 0, "maximum": 100, "unit": "%"}
_SEED = 'seed "Configurations"'

KEYS: tuple[Key, ...] = (
    Key(
        "coordinator",
        "string",
        DEFAULT_COORDINATOR,
        "Who plans: issue7458, the algorithm of Druid issue #7458, or druid, what Druid's own Coordinator "
        "(of the release druidVersion names) queues in one run (docs/DRUID_COORDINATOR.md)",
        "this project",
        choices=COORDINATOR_NAMES,
        form=True,
    ),
    Key(
        "maxSegmentsInNodeLoadingQueue",
        "integer",
        500,
        "Load-queue size of every historical, 0 = unlimited",
        _SEED,
        "segments",
        minimum=0,
        maximum=INT32,
        form=True,
    ),
    Key(
        "numBestServersChoosingFunction",
        "string",
        DEFAULT_FUNCTION,
        "JavaScript function (numServersInTier, targetReplicants) giving B, the number of best servers; "
        "it may read numBestServersChoosingFunctionDefaultLogBase",
        _SEED,
    ),
    Key(
        "numBestServersChoosingFunctionDefaultLogBase",
        "number",
        5.0,
        "Log base of the default function giving B",
        _SEED,
        exclusive_minimum=1,
        form=True,
    ),
    Key(
        "loadingMinPercent",
        "number",
        70.0,
        "Share of each load queue kept for loading; with decommissioningMinPercent and balancingMinPercent: "
        "one given, the other two share the rest in their default proportion; all three given, they sum to 100",
        _SEED,
        **_PERCENT,
        form=True,
    ),
    Key(
        "decommissioningMinPercent",
        "number",
        10.0,
        "Share of each load queue kept for moves off decommissioning historicals (sums to 100 with "
        "loadingMinPercent and balancingMinPercent)",
        _SEED,
        **_PERCENT,
        form=True,
    ),
    Key(
        "balancingMinPercent",
        "number",
        20.0,
        "Share of each load queue kept for balancing moves (sums to 100 with loadingMinPercent and "
        "decommissioningMinPercent)",
        _SEED,
        **_PERCENT,
        form=True,
    ),
    Key(
        "decommissioningMaxPercent",
        "number",
        70.0,
        "Most of each load queue that moves off decommissioning historicals may take",
        _SEED,
        **_PERCENT,
        form=True,
    ),
    Key(
        "segmentLoadingMaxSecondsBeforeAlerting",
        "number",
        900.0,
        "A load queued longer than this is raised as an alert",
        _SEED,
        "seconds",
        minimum=0,
    ),
    Key(
        "coordinatorPeriodMillis",
        "integer",
        60_000,
        "The Coordinator's period (or druid.coordinator.period as an ISO-8601 period; both given, they agree)",
        "Druid druid.coordinator.period",
        "milliseconds",
        minimum=1,
        maximum=INT32,
    ),
    Key(
        "druid.coordinator.period",
        "string",
        "PT60S",
        "The Coordinator's period as a fixed ISO-8601 period, e.g. PT60S",
        "Druid druid.coordinator.period",
    ),
    Key(
        "decommissioningNodes",
        "array",
        [],
        "Historicals being decommissioned, by server name (coordinator_config.json may write them as Druid's "
        "comma-separated string)",
        "Druid CoordinatorDynamicConfig",
        form=True,
    ),
    Key(
        "historicalTierAliases",
        "object",
        {},
        "Tier aliases, {alias: [tier, ...]}: a load rule's replicas on an alias are asked on every tier of "
        "it (a tier the rule names itself keeps its own count); no tier under two aliases, no alias a tier",
        "Druid 38.0.0 CoordinatorDynamicConfig (#19204, #19595)",
        items="array",
    ),
    Key(
        "balancerRandomSeed",
        "integer",
        0,
        "Seed of the balancing draws: the same seed gives the same plan",
        "ALGORITHM.md stage 7",
        minimum=0,
        maximum=INT64,
        form=True,
    ),
    Key(
        "balancingIterationWindow",
        "integer",
        100,
        "Balancing draws at least this many iterations",
        "ALGORITHM.md stage 7",
        "iterations",
        minimum=1,
        maximum=INT32,
    ),
    Key(
        "balancingFailedIterationThreshold",
        "integer",
        80,
        "Balancing stops once this many of the last balancingIterationWindow iterations failed "
        "(at most balancingIterationWindow)",
        "ALGORITHM.md stage 7",
        "iterations",
        minimum=0,
        maximum=INT32,
    ),
    Key(
        "balancingMoveTrigger",
        "string",
        MOVE_TRIGGERS[0],
        "When balancing moves a replica: a non-holding server of top B beats the worst-ranked holder "
        "(betterServerInTopB), or a holder is outside top B (outsideTopB)",
        "ALGORITHM.md stage 7",
        choices=MOVE_TRIGGERS,
    ),
    Key(
        "balancingMinCostReductionPercent",
        "number",
        0.0,
        "How much cheaper a server must be to take a balancing move from a holder; equal costs never move",
        "ALGORITHM.md stage 7",
        "%",
        minimum=0,
        exclusive_maximum=100,
        form=True,
    ),
    Key(
        "topBReuse",
        "boolean",
        True,
        "Loading stages reuse a segment's top B from the stage that first ranked it (false: rank afresh)",
        'ALGORITHM.md "When a segment is ranked"',
    ),
    Key(
        "balancerStrategy",
        "string",
        BALANCER_STRATEGIES[0],
        "Balancing of stages 7, 10 and 11: cost (Druid's placement cost), or avgShedder, which pairs the "
        "fullest historical of a tier with the emptiest and moves bytes between them once their usage gap "
        "has lasted several runs",
        'ALGORITHM.md "Balancing strategy avgShedder"; seed 002',
        choices=BALANCER_STRATEGIES,
        form=True,
    ),
    Key(
        "avgShedderLowThresholdPercent",
        "number",
        15.0,
        "avgShedder: a pair hits when its usage gap is above this (at most avgShedderHighThresholdPercent)",
        "seed 002",
        "points of %",
        exclusive_minimum=0,
        maximum=100,
        form=True,
    ),
    Key(
        "avgShedderHighThresholdPercent",
        "number",
        40.0,
        "avgShedder: a gap above this sheds after fewer hits (at least avgShedderLowThresholdPercent)",
        "seed 002",
        "points of %",
        exclusive_minimum=0,
        maximum=100,
        form=True,
    ),
    Key(
        "avgShedderHitCountLowThreshold",
        "integer",
        8,
        "avgShedder: runs in a row a gap above the low threshold must last before it sheds",
        "seed 002",
        "runs",
        minimum=1,
        maximum=INT32,
        form=True,
    ),
    Key(
        "avgShedderHitCountHighThreshold",
        "integer",
        2,
        "avgShedder: runs in a row a gap above the high threshold must last before it sheds",
        "seed 002",
        "runs",
        minimum=1,
        maximum=INT32,
        form=True,
    ),
)

_DRUID = "Druid 35.0.0 CoordinatorDynamicConfig"
_DRUID_38 = "Druid 38.0.0"
_DRUID_NOTES = "docs/DRUID_COORDINATOR_NOTES.md"

DRUID_KEYS: tuple[Key, ...] = (
    Key(
        "druidVersion",
        "string",
        NEWEST_RELEASE,
        "druid coordinator: the Druid release whose Coordinator to reproduce (35.0.0 or 38.0.0; another "
        "release names the one that places as it does: 36 and 37 as 35, later ones as 38); unset, the "
        "release of the snapshot's cluster (servers.json's version), else the newest",
        "this project; Druid sys.servers.version (#18542)",
    ),
    Key(
        "maxSegmentsToMove",
        "integer",
        100,
        "druid coordinator, smartSegmentLoading off: most segments a tier's balancing moves a run (0 = none)",
        _DRUID,
        "segments",
        minimum=0,
        maximum=INT32,
    ),
    Key(
        "replicationThrottleLimit",
        "integer",
        500,
        "druid coordinator, smartSegmentLoading off: most replicas a tier starts loading a run, less those "
        "already loading",
        _DRUID,
        "segments",
        minimum=0,
        maximum=INT32,
    ),
    Key(
        "replicantLifetime",
        "integer",
        15,
        "druid coordinator, smartSegmentLoading off: runs a queued load waits before Druid alerts (no effect "
        "on the plan)",
        _DRUID,
        "runs",
        minimum=0,
        maximum=INT32,
    ),
    Key(
        "balancerComputeThreads",
        "integer",
        None,
        "druid coordinator, smartSegmentLoading off: threads computing costs (at least 1; unset: half of "
        "coordinatorCores); it bounds nothing in the plan then",
        _DRUID,
        "threads",
        minimum=0,
        maximum=INT32,
    ),
    Key(
        "smartSegmentLoading",
        "boolean",
        True,
        "druid coordinator: compute the queue limit, the replication throttle, round-robin assignment and the "
        "segments to move instead of taking them from the keys above",
        _DRUID,
    ),
    Key(
        "useRoundRobinSegmentAssignment",
        "boolean",
        True,
        "druid coordinator, smartSegmentLoading off: assign replicas to a tier's historicals in turn rather "
        "than by the strategy's cost",
        _DRUID,
    ),
    Key(
        "replicateAfterLoadTimeout",
        "boolean",
        False,
        "druid coordinator: read by no code of Druid 35.0.0, so without effect",
        _DRUID,
    ),
    Key(
        "pauseCoordination",
        "boolean",
        False,
        "druid coordinator: the run does nothing",
        _DRUID,
    ),
    Key(
        "millisToWaitBeforeDeleting",
        "integer",
        900_000,
        "druid coordinator: how long after it starts the Coordinator marks overshadowed segments unused "
        "(the plan assumes a Coordinator up longer)",
        _DRUID,
        "milliseconds",
        minimum=0,
        maximum=INT64,
    ),
    Key(
        "cloneServers",
        "object",
        {},
        "druid coordinator: target historical -> source historical, by host; a target is left out of "
        "assignment, balancing and replica counts and mirrors its source",
        _DRUID,
    ),
    Key(
        "turboLoadingNodes",
        "array",
        [],
        "druid coordinator: historicals that load with more threads (loading speed only, not the plan)",
        _DRUID,
    ),
    Key(
        "druid.coordinator.balancer.strategy",
        "string",
        "cost",
        "druid coordinator: the balancer strategy (the Coordinator's runtime property)",
        "Druid 35.0.0 BalancerStrategyFactory",
        choices=("cost", "cachingCost", "diskNormalized", "random"),
    ),
    Key(
        "druid.coordinator.balancer.diskNormalized.utilizationThreshold",
        "number",
        0.05,
        "druid coordinator of Druid 38, diskNormalized: the gap in disk utilization (a fraction) above the "
        "least used candidate within which the plain cost decides; above it the cost grows exponentially "
        "(the Coordinator's runtime property)",
        _DRUID_38 + " DiskNormalizedCostBalancerStrategyConfig (#19303, #19422, #19663)",
        exclusive_minimum=0,
        exclusive_maximum=1,
    ),
    Key(
        "coordinatorCores",
        "integer",
        8,
        "druid coordinator: processors of the Coordinator's machine, which no snapshot tells; with "
        "smartSegmentLoading, balancing computes with half of them (1 to 100 threads)",
        _DRUID_NOTES + " §11",
        "processors",
        minimum=1,
        maximum=INT32,
    ),
)
"""Keys only the ``druid`` coordinator reads, by Druid's names with Druid's defaults. It also reads
:data:`DRUID_SHARED_KEYS` of :data:`KEYS`."""

DRUID_SHARED_KEYS = (
    "maxSegmentsInNodeLoadingQueue",
    "decommissioningNodes",
    "historicalTierAliases",
    "coordinatorPeriodMillis",
    "druid.coordinator.period",
    "balancerRandomSeed",
)
"""Keys of :data:`KEYS` the ``druid`` coordinator reads too."""

DRUID_KEYS_WITHOUT_EFFECT: dict[str, str] = {
    "debugDimensions": "logging only",
    "killDataSourceWhitelist": "the kill duty",
    "killTaskSlotRatio": "the kill duty",
    "maxKillTaskSlots": "the kill duty",
    "killPendingSegmentsSkipList": "the kill duty",
}
"""Keys of Druid 35.0.0's dynamic config that decide no load, drop or move."""

BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
DRUID_BY_NAME: dict[str, Key] = {k.name: k for k in DRUID_KEYS}
FORM_KEYS: tuple[Key, ...] = tuple(k for k in KEYS if k.form)


def markdown_table() -> str:
    """The end of ``docs/CONFIGURATION.md``: the table of :data:`KEYS`, then a section with the
    table of :data:`DRUID_KEYS` and the Druid keys without effect."""
    without = ", ".join(f"`{k}` ({why})" for k, why in DRUID_KEYS_WITHOUT_EFFECT.items())
    return (
        _table(KEYS)
        + "\n## Keys of the `druid` coordinator\n\n"
        + "A plan of the `druid` coordinator (the Coordinator of Druid 38.0.0 or 35.0.0, docs/DRUID_COORDINATOR.md) "
        + "reads "
        + "these keys by Druid's names, with Druid's defaults, besides "
        + ", ".join(f"`{k}`" for k in DRUID_SHARED_KEYS)
        + f" of the table above. Druid keys without effect on its plan: {without}.\n\n"
        + _table(DRUID_KEYS)
    )


def _table(keys: tuple[Key, ...]) -> str:
    """A markdown table of ``keys``: key, type, default, range, meaning and source."""
    rows = ["| key | type | default | range | meaning | source |", "|---|---|---|---|---|---|"]
    for k in keys:
        bounds = []
        if k.minimum is not None:
            bounds.append(f">= {_num(k.minimum)}")
        if k.exclusive_minimum is not None:
            bounds.append(f"> {_num(k.exclusive_minimum)}")
        if k.maximum is not None:
            bounds.append(f"<= {_num(k.maximum)}")
        if k.exclusive_maximum is not None:
            bounds.append(f"< {_num(k.exclusive_maximum)}")
        if k.choices:
            bounds.append(" or ".join(f"`{c}`" for c in k.choices))
        default = _default(k) if isinstance(k.default, str) and len(k.default) >= 40 else f"`{_default(k)}`"
        unit = f" ({k.unit})" if k.unit else ""
        rows.append(
            f"| `{k.name}` | {k.type} | {default} | {', '.join(bounds) or '—'} | {k.meaning}{unit} | {k.source} |"
        )
    return "\n".join(rows) + "\n"


def help_text() -> str:
    """The keys for a ``--help`` epilog: one line each, name, type, default and range."""
    lines = ["Dynamic config keys (--config FILE.json: a JSON object of any of them; docs/CONFIGURATION.md):"]
    for k in KEYS:
        bounds = [
            f">= {_num(k.minimum)}" if k.minimum is not None else "",
            f"> {_num(k.exclusive_minimum)}" if k.exclusive_minimum is not None else "",
            f"<= {_num(k.maximum)}" if k.maximum is not None else "",
            f"< {_num(k.exclusive_maximum)}" if k.exclusive_maximum is not None else "",
            " | ".join(k.choices) if k.choices else "",
        ]
        default = _default(k)
        rng = ", ".join(b for b in bounds if b)
        lines.append(
            f"  {k.name}: {k.type}, default {default}"
            + (f", {rng}" if rng else "")
            + (f" ({k.unit})" if k.unit else "")
        )
    return "\n".join(lines)
