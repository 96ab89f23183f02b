"""The effective Coordinator dynamic config of a run (seed "Configurations"; ALGORITHM.md "Load-queue limits").

``build_config(file_values, overrides)`` merges ``coordinator_config.json`` with overrides (overrides win
per key), applies the seed's defaults and derivations, accepts every Druid key the seed retires or
this algorithm does not use (listed in ``EffectiveConfig.ignored``), all before any stage runs. A
key it does not know in ``coordinator_config.json`` is accepted with a warning (logged, and listed
in ``ignored`` with the closest known key), as Druid's Coordinator ignores properties it does not
know (``CoordinatorDynamicConfigTest.testDeserializationWithUnknownProperties``): a snapshot of a
newer Druid release still plans. A key it does not know in the overrides (the user's own words) is
refused, with the closest known key. Errors are ``SnapshotError`` naming ``coordinator_config.json`` or
``config overrides``.

Every key, its type, default, range, unit and meaning is declared once in
:mod:`segment_balancer.planner.config_keys` (the table of docs/CONFIGURATION.md), and checked here
against that declaration. What this module adds are the derivations:

- ``loadingMinPercent`` (70), ``decommissioningMinPercent`` (10), ``balancingMinPercent`` (20): one given,
  the other two share ``100 - given`` in their default proportion; two given, the third complements;
  three given, they must sum to 100. Computed exactly (decimal fractions), floored only in limits.
- ``decommissioningMaxPercent``: else legacy ``decommissioningMaxPercentOfMaxSegmentsToMove``.
- ``segmentLoadingMaxSecondsBeforeAlerting``: else legacy ``replicantLifetime`` x coordinator period.
  The period comes from ``druid.coordinator.period`` (ISO period, e.g. ``PT60S``) or
  ``coordinatorPeriodMillis`` (both given, they must agree); default 60 s, Druid's default.
- ``decommissioningNodes``: a list of server names, or Druid's comma-separated string.
- ``historicalTierAliases``: checked as Druid 38.0.0 checks it (``druid.tier_aliases``).
- ``balancingFailedIterationThreshold`` at most ``balancingIterationWindow``;
  ``avgShedderHighThresholdPercent`` at least ``avgShedderLowThresholdPercent``.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

from segment_balancer.druid import tier_aliases
from segment_balancer.druid.rules import Period
from segment_balancer.druid.snapshot.errors import SnapshotError, json_kind, short_value
from segment_balancer.druid.snapshot.loader import read_json
from segment_balancer.druid.snapshot.models import QueueType
from segment_balancer.planner.bestservers import BestServersError, BestServersFunction, compile_function
from segment_balancer.planner.config_keys import (
    BALANCER_STRATEGIES,
    DEFAULT_FUNCTION,
    DRUID_KEYS,
    KEYS,
    MOVE_TRIGGERS,
)
from segment_balancer.planner.config_keys import BY_NAME as KEYS_BY_NAME
from segment_balancer.planner.coordinators import DEFAULT_COORDINATOR
from segment_balancer.planner.runstate import StageLimit

log = logging.getLogger(__name__)

__all__ = [
    "EffectiveConfig",
    "StageLimit",
    "build_config",
    "DEFAULT_FUNCTION",
    "RETIRED_KEYS",
    "CONFIG_FILE",
    "OVERRIDES",
    "BALANCER_STRATEGIES",
]

CONFIG_FILE = "coordinator_config.json"
OVERRIDES = "config overrides"
LOG_BASE_KEY = "numBestServersChoosingFunctionDefaultLogBase"
_MIN_PERCENTS = {
    k: Fraction(str(KEYS_BY_NAME[k].default))
    for k in ("loadingMinPercent", "decommissioningMinPercent", "balancingMinPercent")
}
"""The three min-percents' defaults, exact: their proportion shares what one or two given leave."""
_PERIOD_KEYS = ("druid.coordinator.period", "coordinatorPeriodMillis")
_AVG_SHEDDER_PERCENTS = {
    k: KEYS_BY_NAME[k].default for k in ("avgShedderLowThresholdPercent", "avgShedderHighThresholdPercent")
}
_AVG_SHEDDER_COUNTS = {
    k: KEYS_BY_NAME[k].default for k in ("avgShedderHitCountLowThreshold", "avgShedderHitCountHighThreshold")
}
_DEFAULT_PERIOD_MS = 60_000

_UNUSED = "a Druid key this algorithm does not use"
RETIRED_KEYS: dict[str, str] = {
    "maxSegmentsToMove": "retired by the seed (balancing ends on the failed-iteration rule)",
    "replicationThrottleLimit": "retired by the seed (load-queue limits replace it)",
    "replicantLifetime": "retired by the seed",
    "decommissioningMaxPercentOfMaxSegmentsToMove": "retired by the seed",
    "historicalNodesInMaintenance": "pre-release name of decommissioningNodes; not mapped",
    "nodesInMaintenancePriority": "pre-release name of decommissioningMaxPercentOfMaxSegmentsToMove; not mapped",
    "pauseCoordination": _UNUSED + " (the plan is computed as if coordination ran)",
    "smartSegmentLoading": _UNUSED + " (limits come from maxSegmentsInNodeLoadingQueue and the percents)",
    **{
        k: _UNUSED
        for k in (
            "balancerComputeThreads",
            "costBalancerThreads",
            "emitBalancingStats",
            "mergeBytesLimit",
            "mergeSegmentsLimit",
            "millisToWaitBeforeDeleting",
            "killDataSourceWhitelist",
            "killAllDataSources",
            "killPendingSegmentsSkipList",
            "killTaskSlotRatio",
            "maxKillTaskSlots",
            "compactionConfigs",
            "compactionTaskSlotRatio",
            "maxCompactionTaskSlots",
            "replicateAfterLoadTimeout",
            "maxNonPrimaryReplicantsToLoad",
            "useBatchedSegmentSampler",
            "percentOfSegmentsToConsiderPerMove",
            "useRoundRobinSegmentAssignment",
            "debugDimensions",
            "turboLoadingNodes",
            "cloneServers",
        )
    },
}
RETIRED_KEYS.update({k.name: "read by the druid coordinator only" for k in DRUID_KEYS if k.name not in RETIRED_KEYS})
_KNOWN = set(KEYS_BY_NAME)
#: Druid key -> ``EffectiveConfig`` field (the key in snake case; the period in milliseconds), in
#: the declared order: the order of ``as_dict``.
_FIELDS = {
    **{k.name: re.sub(r"(?<!^)(?=[A-Z])", "_", k.name).lower() for k in KEYS if "." not in k.name},
    "coordinatorPeriodMillis": "coordinator_period_ms",
}

_STAGE_QUEUE_TYPE: dict[int, QueueType | None] = {
    1: "loading",
    2: "loading",
    3: "loading",
    4: "loading",
    5: "decommissioning",
    6: "loading",
    7: "balancing",
    8: "loading",
    9: "decommissioning",
    10: "balancing",
    11: "balancing",
    12: None,
    13: None,
}


class EffectiveConfig(BaseModel):
    """The effective dynamic config; build it with ``build_config`` or ``load_config``.

    Percents are floats for display; exact values (``Fraction``) drive ``limit``. Sizes none; times:
    ``segment_loading_max_seconds_before_alerting`` seconds, ``coordinator_period_ms`` ms.
    ``ignored``: ``[{"key", "value", "note"}]`` for retired/unused keys. ``derived``: ``{key: how}``.
    """

    model_config = ConfigDict(frozen=True)
    coordinator: str = DEFAULT_COORDINATOR
    max_segments_in_node_loading_queue: int = 500
    num_best_servers_choosing_function: str = DEFAULT_FUNCTION
    num_best_servers_choosing_function_default_log_base: float = 5.0
    loading_min_percent: float = 70.0
    decommissioning_min_percent: float = 10.0
    balancing_min_percent: float = 20.0
    decommissioning_max_percent: float = 70.0
    segment_loading_max_seconds_before_alerting: float = 900.0
    coordinator_period_ms: int = _DEFAULT_PERIOD_MS
    decommissioning_nodes: tuple[str, ...] = ()
    historical_tier_aliases: dict[str, tuple[str, ...]] = {}
    balancer_random_seed: int = 0
    balancing_iteration_window: int = 100
    balancing_failed_iteration_threshold: int = 80
    balancing_move_trigger: str = MOVE_TRIGGERS[0]
    balancing_min_cost_reduction_percent: float = 0.0
    top_b_reuse: bool = True
    balancer_strategy: str = BALANCER_STRATEGIES[0]
    avg_shedder_low_threshold_percent: float = 15.0
    avg_shedder_high_threshold_percent: float = 40.0
    avg_shedder_hit_count_low_threshold: int = 8
    avg_shedder_hit_count_high_threshold: int = 2
    ignored: tuple[dict[str, Any], ...] = ()
    derived: dict[str, str] = {}
    _exact: dict[str, Fraction] = PrivateAttr(default_factory=dict)
    _fn: BestServersFunction | None = PrivateAttr(default=None)  # the same object for the same text in a process

    @property
    def segment_loading_max_ms(self) -> int:
        """``segmentLoadingMaxSecondsBeforeAlerting`` in ms (rounded)."""
        return int(round(self.segment_loading_max_seconds_before_alerting * 1000))

    def _pct(self, key: str) -> Fraction:
        return self._exact[key] if key in self._exact else Fraction(str(getattr(self, key)))

    def limit(self, stage: int) -> StageLimit:
        """The load-queue limits of ``stage`` (1-13), table of ALGORITHM.md "Load-queue limits".

        Raises:
            ValueError: stage outside 1-13.
        """
        if stage not in _STAGE_QUEUE_TYPE:
            raise ValueError(f"stage must be 1..13, got {stage}")
        qt = _STAGE_QUEUE_TYPE[stage]
        m = self.max_segments_in_node_loading_queue
        if m == 0 or qt is None:
            return StageLimit(stage, qt, None, None, None if m == 0 else m)
        lo, dmin = self._pct("loading_min_percent"), self._pct("decommissioning_min_percent")
        spec: dict[int, tuple[str, Fraction]] = {
            1: ("loading", lo),
            2: ("loading", lo),
            3: ("loading", lo),
            4: ("loading", lo),
            5: ("decommissioning", dmin),
            6: ("all", lo + dmin),
            7: ("balancing", self._pct("balancing_min_percent")),
            9: ("decommissioning", self._pct("decommissioning_max_percent")),
        }
        counted, pct = spec.get(stage, ("all", Fraction(100)))
        return StageLimit(stage, qt, counted, math.floor(m * pct / 100), m)  # type: ignore[arg-type]

    def num_best_servers(self, num_servers_in_tier: int, target_replicants: int) -> int:
        """``B = min(max(floor(f(n, t)), t), n)`` (ALGORITHM.md "Best servers").

        ``f`` is ``numBestServersChoosingFunction``, run by V8 once per distinct ``(n, t)``
        (:mod:`segment_balancer.planner.bestservers`); a NaN result counts as ``t``; ``n`` wins when
        ``t > n`` (no more servers than the tier has).

        Raises:
            BestServersError: ``f(n, t)`` threw, returned a non-number or exceeded its time or memory limit.
        """
        n, t = int(num_servers_in_tier), int(target_replicants)
        if self._fn is None:
            self._fn = _compile(self.num_best_servers_choosing_function, self)
        value = self._fn(n, t)
        b = t if value != value else (math.floor(value) if math.isfinite(value) else (n if value > 0 else t))
        return max(0, min(max(b, t), n))

    def as_dict(self) -> dict[str, Any]:
        """The effective config by Druid key, plus ``ignored`` and ``derived``, for the run summary."""
        values: dict[str, Any] = {}
        for name, field in _FIELDS.items():
            value = getattr(self, field)
            if isinstance(value, dict):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
            values[name] = list(value) if isinstance(value, tuple) else value
        return {**values, "ignored": [dict(e) for e in self.ignored], "derived": dict(self.derived)}


def _compile(text: str, cfg: EffectiveConfig) -> BestServersFunction:
    return compile_function(text, {LOG_BASE_KEY: cfg.num_best_servers_choosing_function_default_log_base})


# ------------------------------------------------------------------------------------ building


class _Ctx:
    def __init__(self, file_values: Mapping[str, Any], overrides: Mapping[str, Any], overrides_source: str = OVERRIDES):
        self.values = {**file_values, **overrides}
        self.from_override = set(overrides)
        self.overrides_source = overrides_source

    def src(self, *keys: str) -> str:
        over = [k in self.from_override for k in keys if k in self.values]
        if over and all(over):
            return self.overrides_source
        return CONFIG_FILE + (f" (with {self.overrides_source})" if any(over) else "")

    def fail(self, key: str, problem: str, *others: str) -> SnapshotError:
        return SnapshotError(self.src(key, *others), None, f"{key} {problem}")

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def given(self, key: str) -> bool:
        return self.values.get(key) is not None

    def integer(self, key: str, default: int | None = None, hi: int | None = None, hi_key: str = "") -> int:
        """The integer value of ``key`` in its declared range (``config_keys``), or ``default`` (the
        declared one when None); ``hi``: a bound set by the key ``hi_key``."""
        decl = KEYS_BY_NAME[key]
        v = self.get(key)
        if v is None:
            return decl.default if default is None else default
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(key, f"must be an integer, got {v!r}")
        problem = decl.range_problem(v)
        if problem:
            raise self.fail(key, f"{problem}, got {v}")
        if hi is not None and v > hi:
            raise self.fail(key, f"must be <= {hi} ({hi_key}), got {v}", hi_key)
        return v

    def number(self, key: str, like: str = "") -> Fraction | None:
        """The number value of ``key`` in its declared range (exact; a legacy key in the range of
        the key ``like``), or None when not given."""
        v = self.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(key, f"must be a finite number, got {v!r}")
        problem = KEYS_BY_NAME[like or key].range_problem(v)
        if problem:
            raise self.fail(key, f"{problem}, got {v!r}")
        return Fraction(str(v)) if isinstance(v, float) else Fraction(v)

    percent = number

    def choice(self, key: str) -> str:
        """The value of ``key`` among its declared choices, or its default."""
        decl = KEYS_BY_NAME[key]
        v = self.get(key)
        if v is None:
            return decl.default
        if v not in decl.choices:
            raise self.fail(key, f"must be one of {', '.join(map(repr, decl.choices))}, got {v!r}")
        return v


def _min_percents(ctx: _Ctx, derived: dict[str, str]) -> dict[str, Fraction]:
    given = {k: ctx.percent(k) for k in _MIN_PERCENTS}
    known = {k: v for k, v in given.items() if v is not None}
    missing = [k for k in _MIN_PERCENTS if k not in known]
    rest = 100 - sum(known.values(), Fraction(0))
    if len(known) == 3:
        if rest != 0:
            shown = " + ".join(f"{k}={ctx.get(k)}" for k in _MIN_PERCENTS)
            raise ctx.fail(
                "loadingMinPercent",
                f"+ decommissioningMinPercent + balancingMinPercent must be 100, got {shown} = {float(100 - rest):g}",
                *_MIN_PERCENTS,
            )
        return known
    if rest < 0:
        raise ctx.fail(" + ".join(known), f"sum to {float(100 - rest):g}, more than 100", *known)
    if len(known) == 2:
        known[missing[0]] = rest
        derived[missing[0]] = f"100 - {' - '.join(k for k in _MIN_PERCENTS if k != missing[0])}"
        return known
    share = sum(_MIN_PERCENTS[k] for k in missing)
    for k in missing:
        known[k] = rest * _MIN_PERCENTS[k] / share
        if len(missing) < 3:
            derived[k] = (
                f"(100 - {next(iter(given.keys() - set(missing)))}) x {_MIN_PERCENTS[k]}/{share} (default proportion)"
            )
    return known


def _period_ms(ctx: _Ctx) -> int:
    ms = None
    if ctx.given("druid.coordinator.period"):
        text = ctx.get("druid.coordinator.period")
        try:
            ms = Period.parse(text).fixed_ms()
        except ValueError as exc:
            raise ctx.fail("druid.coordinator.period", f"must be a fixed ISO-8601 period like PT60S: {exc}") from None
    if ctx.given("coordinatorPeriodMillis"):
        other = ctx.integer("coordinatorPeriodMillis")
        if ms is not None and ms != other:
            raise ctx.fail(
                "coordinatorPeriodMillis",
                f"{other} disagrees with druid.coordinator.period ({ms} ms)",
                "druid.coordinator.period",
            )
        ms = other
    if ms is not None and ms <= 0:
        raise ctx.fail("druid.coordinator.period", f"must be positive, got {ms} ms")
    return _DEFAULT_PERIOD_MS if ms is None else ms


def _nodes(ctx: _Ctx) -> tuple[str, ...]:
    v = ctx.get("decommissioningNodes")
    if v is None:
        return ()
    if isinstance(v, str):  # Druid's parseJsonStringOrArray accepts "a,b"
        v = [p.strip() for p in v.split(",") if p.strip()]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ctx.fail("decommissioningNodes", f"must be a list of server names, got {v!r}")
    return tuple(dict.fromkeys(v))


def _aliases(ctx: _Ctx) -> dict[str, tuple[str, ...]]:
    try:
        return tier_aliases.parse_aliases(ctx.get(tier_aliases.KEY))
    except ValueError as exc:
        raise SnapshotError(ctx.src(tier_aliases.KEY), None, str(exc)) from None


UNKNOWN_NOTE = "not a key this planner knows (a newer Druid release's?), ignored as Druid ignores unknown keys"
"""The ``note`` of an unknown key of ``coordinator_config.json`` in ``EffectiveConfig.ignored``."""


def unknown_keys(config: EffectiveConfig) -> list[dict[str, Any]]:
    """The entries of ``config.ignored`` for keys of ``coordinator_config.json`` this planner does
    not know (``{"key", "value", "note"}``, by key): what the plan's alerts warn about."""
    return [e for e in config.ignored if str(e.get("note", "")).startswith(UNKNOWN_NOTE)]


def check_override_keys(overrides: Mapping[str, Any] | None, source: str) -> None:
    """Refuse an unknown key of a user's own overrides where they were given, so the error names
    them: ``source`` is e.g. ``--config my.json`` or ``param config_overrides``.

    Raises:
        SnapshotError: ``file`` = ``source``, problem ``unknown key 'k' (did you mean 'K'?)``
            (the closest known key, when one is close); also when ``overrides`` is no object.
    """
    if overrides is None:
        return
    if not isinstance(overrides, Mapping):
        raise SnapshotError(source, None, f"must be a JSON object, got {json_kind(overrides)}")
    for key in overrides:
        if key not in _KNOWN and key not in RETIRED_KEYS:
            close = _closest(key)
            raise SnapshotError(source, None, f"unknown key {key!r}" + (f" (did you mean {close!r}?)" if close else ""))


def _closest(key: str) -> str | None:
    """The known key (used, retired or unused) most like ``key``, or None (``difflib``)."""
    close = difflib.get_close_matches(key, sorted(_KNOWN | set(RETIRED_KEYS)), n=1)
    return close[0] if close else None


def build_config(
    file_values: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None, overrides_source: str = OVERRIDES
) -> EffectiveConfig:
    """Build the effective config from the file's values and overrides (module docstring).

    Args:
        file_values: the JSON object of ``coordinator_config.json`` (``None``/``{}``: all defaults).
        overrides: keys that replace the file's (e.g. the ``--config`` file of a run).
        overrides_source: how errors name where ``overrides`` came from (``--config my.json``,
            ``param config_overrides``; default ``config overrides``).

    An unknown key of ``file_values`` is logged as a warning and listed in ``ignored`` (note
    :data:`UNKNOWN_NOTE` and the closest known key).

    Raises:
        SnapshotError: an unknown key of ``overrides`` (with the closest known key), wrong type or
            range, min-percents not summing to 100, a ``numBestServersChoosingFunction`` that V8 refuses
            or whose ``f(1, 1)`` throws, returns a non-number or exceeds its time or memory limit
            (:func:`segment_balancer.planner.bestservers.compile_function`). ``file`` is
            ``coordinator_config.json`` or ``config overrides``; ``row`` is ``None``.
    """
    if file_values is not None and not isinstance(file_values, Mapping):
        raise SnapshotError(CONFIG_FILE, None, f"must be a JSON object, got {json_kind(file_values)}")
    check_override_keys(overrides, overrides_source)
    unknown: list[dict[str, Any]] = []
    for key, value in (file_values or {}).items():
        if key not in _KNOWN and key not in RETIRED_KEYS:
            close = _closest(key)
            note = UNKNOWN_NOTE + (f"; closest known key: {close!r}" if close else "")
            log.warning("%s: key %r %s", CONFIG_FILE, key, note)
            unknown.append({"key": key, "value": value, "note": note})
    known_file = {k: v for k, v in (file_values or {}).items() if k in _KNOWN or k in RETIRED_KEYS}
    ctx = _Ctx(known_file, overrides or {}, overrides_source)
    derived: dict[str, str] = {}
    ignored: list[dict[str, Any]] = list(unknown)

    m = ctx.integer("maxSegmentsInNodeLoadingQueue")
    base = ctx.number(LOG_BASE_KEY)
    fn_text = ctx.get("numBestServersChoosingFunction")
    if fn_text is None:
        fn_text = DEFAULT_FUNCTION
    pcts = _min_percents(ctx, derived)

    dmax = ctx.percent("decommissioningMaxPercent")
    legacy_dmax = ctx.get("decommissioningMaxPercentOfMaxSegmentsToMove")
    if dmax is None and legacy_dmax is not None:
        dmax = ctx.number("decommissioningMaxPercentOfMaxSegmentsToMove", like="decommissioningMaxPercent")
        derived["decommissioningMaxPercent"] = "decommissioningMaxPercentOfMaxSegmentsToMove (legacy)"
    dmax = Fraction(70) if dmax is None else dmax

    period_ms = _period_ms(ctx)
    alert = ctx.number("segmentLoadingMaxSecondsBeforeAlerting")
    if alert is None and ctx.given("replicantLifetime"):
        lifetime = ctx.get("replicantLifetime")
        if isinstance(lifetime, bool) or not isinstance(lifetime, int) or lifetime < 0:
            raise ctx.fail("replicantLifetime", f"must be an integer >= 0, got {lifetime!r}")
        alert = Fraction(lifetime * period_ms, 1000)
        derived["segmentLoadingMaxSecondsBeforeAlerting"] = (
            f"replicantLifetime ({lifetime}) x coordinator period ({period_ms} ms) (legacy)"
        )
    alert = Fraction(900) if alert is None else alert

    window = ctx.integer("balancingIterationWindow")
    threshold = ctx.integer("balancingFailedIterationThreshold", hi=window, hi_key="balancingIterationWindow")
    trigger = ctx.choice("balancingMoveTrigger")
    margin = ctx.number("balancingMinCostReductionPercent")
    reuse = ctx.get("topBReuse")
    if reuse is not None and not isinstance(reuse, bool):
        raise ctx.fail("topBReuse", f"must be true or false, got {reuse!r}")
    strategy = ctx.choice("balancerStrategy")
    coordinator = ctx.choice("coordinator")
    shed_pct = {}
    for key, default in _AVG_SHEDDER_PERCENTS.items():
        value = ctx.number(key)
        shed_pct[key] = float(value) if value is not None else float(default)
    if shed_pct["avgShedderHighThresholdPercent"] < shed_pct["avgShedderLowThresholdPercent"]:
        raise ctx.fail(
            "avgShedderHighThresholdPercent",
            f"must be >= avgShedderLowThresholdPercent ({shed_pct['avgShedderLowThresholdPercent']:g}), "
            f"got {shed_pct['avgShedderHighThresholdPercent']:g}",
            "avgShedderLowThresholdPercent",
        )
    shed_count = {key: ctx.integer(key) for key in _AVG_SHEDDER_COUNTS}

    for key in (file_values or {}).keys() | (overrides or {}).keys():
        if key in RETIRED_KEYS:
            note = RETIRED_KEYS[key]
            if key == "decommissioningMaxPercentOfMaxSegmentsToMove":
                note += (
                    "; mapped to decommissioningMaxPercent"
                    if "decommissioningMaxPercent" in derived
                    else "; superseded by decommissioningMaxPercent"
                )
            if key == "replicantLifetime":
                note += (
                    "; mapped to segmentLoadingMaxSecondsBeforeAlerting"
                    if "segmentLoadingMaxSecondsBeforeAlerting" in derived
                    else "; superseded by segmentLoadingMaxSecondsBeforeAlerting"
                )
            ignored.append({"key": key, "value": ctx.get(key), "note": note})
    ignored.sort(key=lambda e: e["key"])

    cfg = EffectiveConfig(
        coordinator=coordinator,
        max_segments_in_node_loading_queue=m,
        num_best_servers_choosing_function=fn_text if isinstance(fn_text, str) else str(fn_text),
        num_best_servers_choosing_function_default_log_base=float(base) if base is not None else 5.0,
        loading_min_percent=float(pcts["loadingMinPercent"]),
        decommissioning_min_percent=float(pcts["decommissioningMinPercent"]),
        balancing_min_percent=float(pcts["balancingMinPercent"]),
        decommissioning_max_percent=float(dmax),
        segment_loading_max_seconds_before_alerting=float(alert),
        coordinator_period_ms=period_ms,
        decommissioning_nodes=_nodes(ctx),
        historical_tier_aliases=_aliases(ctx),
        balancer_random_seed=ctx.integer("balancerRandomSeed"),
        balancing_iteration_window=window,
        balancing_move_trigger=trigger,
        balancing_min_cost_reduction_percent=float(margin) if margin is not None else 0.0,
        top_b_reuse=True if reuse is None else reuse,
        balancer_strategy=strategy,
        avg_shedder_low_threshold_percent=shed_pct["avgShedderLowThresholdPercent"],
        avg_shedder_high_threshold_percent=shed_pct["avgShedderHighThresholdPercent"],
        avg_shedder_hit_count_low_threshold=shed_count["avgShedderHitCountLowThreshold"],
        avg_shedder_hit_count_high_threshold=shed_count["avgShedderHitCountHighThreshold"],
        balancing_failed_iteration_threshold=threshold,
        ignored=tuple(ignored),
        derived=derived,
    )
    cfg._exact.update(
        {
            "loading_min_percent": pcts["loadingMinPercent"],
            "decommissioning_min_percent": pcts["decommissioningMinPercent"],
            "balancing_min_percent": pcts["balancingMinPercent"],
            "decommissioning_max_percent": dmax,
        }
    )
    if not isinstance(fn_text, str):
        raise ctx.fail("numBestServersChoosingFunction", f"must be a string, got {fn_text!r}")
    try:
        cfg._fn = _compile(fn_text, cfg)
    except BestServersError as exc:
        problem = f"{short_value(fn_text)} is not accepted: {exc.reason}"
        raise ctx.fail("numBestServersChoosingFunction", problem) from None
    return cfg


def load_config(
    directory: str | os.PathLike[str], overrides: dict[str, Any] | None = None, overrides_source: str = OVERRIDES
) -> EffectiveConfig:
    """The effective dynamic config: ``coordinator_config.json`` (absent = defaults) merged with ``overrides``.

    Raises:
        SnapshotError: see :func:`build_config`; also a file that is not a JSON object.
    """
    data = read_json(directory, CONFIG_FILE, required=False)
    return build_config(data if data is not None else {}, overrides, overrides_source)


def config_from_dict(values: Mapping[str, Any]) -> EffectiveConfig:
    """The effective config back from its :meth:`EffectiveConfig.as_dict` form (``meta.json``'s
    ``config``): every value as it was. ``ignored`` and ``derived`` are notes of the first build,
    not read back; a min percent the first build derived from the other two is derived again
    (exactly: its printed float may not sum to 100 with them). Raises ``SnapshotError`` as
    :func:`build_config` does."""
    rederived = set(values.get("derived") or {}) & set(_MIN_PERCENTS)
    return build_config({k: v for k, v in values.items() if k not in ("ignored", "derived", *rederived)})
