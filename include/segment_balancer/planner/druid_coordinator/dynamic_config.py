"""The dynamic config a ``druid`` coordinator run reads: Druid's keys (``config_keys.DRUID_KEYS``)
and the ones it shares with the #7458 planner (``maxSegmentsInNodeLoadingQueue``,
``decommissioningNodes``, ``historicalTierAliases``, the Coordinator's period, ``balancerRandomSeed``),
each checked against its declaration. Keys of neither are left alone: a captured config holds keys
of every Druid release.

The release reproduced (``DruidConfig.release``, one of ``druid.releases.REPRODUCED_RELEASES``) is
the one ``druidVersion`` names when given, else the one the snapshot's cluster ran (its
``servers.json``'s version), else the newest; a release names the reproduced one that places
segments as it does (``druid.releases.reproduced_release``). A vendor's calendar version
(``2024.03.0-iap``) tells no Apache release: a snapshot's is not used (the newest is, with a note),
and ``druidVersion`` refuses one.
Druid 35.0.0 does not know ``historicalTierAliases``: its run ignores the key, as Druid ignores a key
it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from segment_balancer.druid import tier_aliases
from segment_balancer.druid.releases import NEWEST_RELEASE, REPRODUCED_RELEASES, parse_version, reproduced_release
from segment_balancer.druid.rules import Period
from segment_balancer.planner.config_keys import BY_NAME, DRUID_BY_NAME, DRUID_SHARED_KEYS, Key
from segment_balancer.planner.druid_coordinator.loading_config import SegmentLoadingConfig, segment_loading_config

PERIOD_KEY = "druid.coordinator.period"
VERSION_KEY = "druidVersion"
NEWEST = NEWEST_RELEASE
REPRODUCED_OLDEST = REPRODUCED_RELEASES[0]
CALENDAR_MAJOR = 1000
"""A major version from this on is a vendor's calendar version (``2024.03.0-iap``), no Apache release."""

_DECLARED: dict[str, Key] = {**{k: BY_NAME[k] for k in DRUID_SHARED_KEYS}, **DRUID_BY_NAME}


def _checked(key: Key, value: Any) -> Any:
    """``value`` as ``key`` declares it, or ValueError naming the key, the value and what was expected."""
    shown = repr(value)
    if key.type == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise ValueError(f"{key.name}: expected true or false, got {shown}")
        return value
    if key.type == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key.name}: expected an integer, got {shown}")
        problem = key.range_problem(value)
        if problem:
            raise ValueError(f"{key.name}: {value} {problem}")
        return value
    if key.type == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key.name}: expected a number, got {shown}")
        problem = key.range_problem(value)
        if problem:
            raise ValueError(f"{key.name}: {value} {problem}")
        return float(value)
    if key.type == "string":
        if not isinstance(value, str):
            raise ValueError(f"{key.name}: expected a string, got {shown}")
        if key.choices and value not in key.choices:
            raise ValueError(f"{key.name}: {shown} is not one of {', '.join(key.choices)}")
        return value
    if key.type == "array":
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{key.name}: expected a list of strings, got {shown}")
        return list(value)
    if key.type == "object" and key.items == "array":
        return tier_aliases.parse_aliases(value)
    if key.type == "object":
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ValueError(f"{key.name}: expected an object of strings, got {shown}")
        return dict(value)
    raise ValueError(f"{key.name}: unsupported type {key.type}")


def apache_release(version: str) -> str:
    """The reproduced release of the Apache Druid ``version`` (``druid.releases.reproduced_release``).

    Raises:
        ValueError: not a Druid version, or a vendor's calendar version, which tells no Apache release.
    """
    if parse_version(version)[0] >= CALENDAR_MAJOR:
        raise ValueError(
            f"{version!r} is a vendor's calendar version, which tells no Apache Druid release "
            f"(name the Apache release it is built on, e.g. 35.0.0)"
        )
    return reproduced_release(version)


@dataclass(frozen=True)
class DruidConfig:
    """The values of one run, by Druid's key names (``config["smartSegmentLoading"]``), every
    declared key present (its default when not given); ``period_ms`` is the Coordinator's period;
    ``release`` the Druid release reproduced (one of ``DRUID_RELEASES``); ``release_from`` where it
    came from (``config``, ``snapshot``, ``default``)."""

    values: Mapping[str, Any]
    period_ms: int
    release: str = NEWEST
    release_from: str = "default"
    release_note: str | None = None
    """Why the release is not the snapshot's cluster's own, when it could not be (None otherwise)."""

    @property
    def is_38(self) -> bool:
        """Whether the run reproduces Druid 38.0.0 (tier aliases, partial-load rules, 38's
        ``diskNormalized``, 38's order of the drop budget's tiers and its under-replication count)."""
        return self.release == NEWEST

    @property
    def aliases(self) -> dict[str, tuple[str, ...]]:
        """``historicalTierAliases`` as the run reads it: none before Druid 38."""
        return dict(self.values[tier_aliases.KEY]) if self.is_38 else {}

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def loading(self, used_segments: int) -> SegmentLoadingConfig:
        """The run's limits (Druid's ``SegmentLoadingConfig.create``) for ``used_segments`` used
        segments (overshadowed ones included)."""
        return segment_loading_config(
            smart_segment_loading=self.values["smartSegmentLoading"],
            used_segments=used_segments,
            coordinator_cores=self.values["coordinatorCores"],
            max_segments_in_node_loading_queue=self.values["maxSegmentsInNodeLoadingQueue"],
            replication_throttle_limit=self.values["replicationThrottleLimit"],
            replicant_lifetime=self.values["replicantLifetime"],
            use_round_robin_segment_assignment=self.values["useRoundRobinSegmentAssignment"],
            balancer_compute_threads=self.balancer_compute_threads,
        )

    @property
    def balancer_compute_threads(self) -> int:
        """The configured threads (at least 1, as Druid clamps them), or half the cores when unset."""
        threads = self.values["balancerComputeThreads"]
        if threads is None:
            return min(max(1, self.values["coordinatorCores"] // 2), 100)
        return max(1, threads)


def druid_config(given: Mapping[str, Any] | None = None, cluster_version: str | None = None) -> DruidConfig:
    """The run's config from ``given`` (a ``coordinator_config.json`` object and overrides) and the
    snapshot's ``cluster_version`` (``servers.json``'s version, None when it has none).

    Raises:
        ValueError: a declared key has a value of the wrong type or out of range; the message names
            the key, the value and what was expected.
    """
    given = dict(given or {})
    values = {
        name: (_checked(key, given[name]) if given.get(name) is not None else key.default)
        for name, key in _DECLARED.items()
    }
    if given.get("coordinatorPeriodMillis") is not None:
        period_ms = values["coordinatorPeriodMillis"]
    elif given.get(PERIOD_KEY) is not None:
        try:
            period_ms = Period.parse(values[PERIOD_KEY]).fixed_ms()
        except ValueError as exc:
            raise ValueError(f"{PERIOD_KEY}: {exc}") from None
    else:
        period_ms = BY_NAME["coordinatorPeriodMillis"].default
    note = None
    if given.get(VERSION_KEY) is not None:
        try:
            release, source = apache_release(values[VERSION_KEY]), "config"
        except ValueError as exc:
            raise ValueError(f"{VERSION_KEY}: {exc}") from None
    elif cluster_version:
        try:
            release, source = apache_release(cluster_version), "snapshot"
        except ValueError as exc:
            release, source, note = NEWEST, "default", f"servers.json: {exc}; planned as {NEWEST}"
        if source == "snapshot" and parse_version(cluster_version) < parse_version(REPRODUCED_OLDEST):
            note = f"the cluster runs Druid {cluster_version}, older than any release reproduced; planned as {release}"
    else:
        release, source = NEWEST, "default"
    return DruidConfig(values, period_ms, release, source, note)
