"""Pydantic models of the small snapshot files (docs/ARCHITECTURE.md "Input snapshot directory").

``Server``, ``QueueEntry`` and ``SnapshotMeta`` are what the loaders return; ``ServerRow``,
``QueueItem`` and ``RuleSpec`` validate raw JSON. Sizes are bytes, instants epoch ms UTC.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from segment_balancer.druid.partial_load import CannotMatch, matcher_from_json
from segment_balancer.druid.releases import UNKNOWN_VERSION, VERSION_FORMAT, parse_version
from segment_balancer.druid.rules import PARTIAL_RULE_TYPES, RULE_KINDS, Period, Rule, parse_instant_ms, parse_interval

QueueType = Literal["loading", "decommissioning", "balancing"]
"""The three load-queue types of a load (Druid ``SegmentAction``: LOAD, MOVE_TO from
decommissioning servers, MOVE_TO by balancing); ALGORITHM.md "Load-queue limits"."""
QUEUE_TYPES: tuple[QueueType, ...] = get_args(QueueType)

__all__ = [
    "Server",
    "ServerRow",
    "QueueEntry",
    "QueueItem",
    "RuleSpec",
    "SnapshotMeta",
    "SYS_SERVERS_COLUMNS",
    "QUEUE_TYPES",
    "DRUID_DEFAULT_TIER",
    "HISTORICAL",
    "DRUID_DEFAULT_NUM_REPLICANTS",
    "is_historical",
]

DRUID_DEFAULT_TIER = "_default_tier"  # DruidServer.DEFAULT_TIER
HISTORICAL = "historical"  # sys.servers server_type of a historical (NodeRole.HISTORICAL, lower case)
DRUID_DEFAULT_NUM_REPLICANTS = 2  # DruidServer.DEFAULT_NUM_REPLICANTS
_INT32 = 2**31 - 1  # Java's int: Druid's replica counts, priorities
_INT64 = 2**63 - 1  # Java's long: Druid's sizes in bytes

_Frozen = ConfigDict(frozen=True, extra="forbid")

SYS_SERVERS_COLUMNS: tuple[str, ...] = (
    "server",
    "host",
    "plaintext_port",
    "tls_port",
    "server_type",
    "tier",
    "curr_size",
    "max_size",
    "storage_size",
    "is_leader",
    "start_time",
    "version",
    "build_revision",
    "labels",
    "available_processors",
    "total_memory",
)
"""The columns of Druid's ``sys.servers`` in Druid 38.0.0's order (``SystemSchema.SERVERS_SIGNATURE``):
``version`` from 35.0.0 (apache/druid#18542); ``labels`` (#18547), ``available_processors`` and
``total_memory`` (#18613) from 36.0.0; ``storage_size`` (#18979) and ``build_revision`` (#19123)
from 37.0.0; ``start_time`` from 27.0.0 (#13358); the others from earlier releases. No release has
a ``priority`` column."""


def _jackson_bool(value: Any) -> Any:
    """Jackson coerces the strings "true"/"false" (any case) to Boolean; so do we."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


JacksonBool = Annotated[StrictBool, BeforeValidator(_jackson_bool)]


def is_historical(server_type: object) -> bool:
    """Whether a ``servers.json`` (``sys.servers``) row's ``server_type`` names a historical:
    ``historical`` in any case. The one reading of it, for the loader, ``simulate`` and ``capture``."""
    return isinstance(server_type, str) and server_type.lower() == HISTORICAL


class Server(BaseModel):
    """A historical server (a ``sys.servers`` row with ``server_type`` historical).

    ``current_size``/``max_size`` in bytes; ``priority`` Druid's ``druid.server.priority``;
    ``version`` the Druid version it runs as its row gives it (``sys.servers.version``, Druid 35+;
    None when the row has none); ``storage_size`` bytes of its segment locations (Druid 37+, what the
    ``tier/storage/capacity`` metric sums; ``max_size`` differs when ``druid.server.maxSize`` is set
    or storage is virtual; None when the row has none); ``labels`` its
    ``druid.labels`` as the row gives them (Druid 36+: a JSON string; a JSON object when written by
    hand; None when absent).
    """

    model_config = _Frozen
    server: str
    host: str
    tier: str
    current_size: int
    max_size: int
    priority: int = 0
    version: str | None = None
    storage_size: int | None = None
    labels: str | dict[str, Any] | None = None


class ServerRow(BaseModel):
    """Raw ``servers.json`` row (``sys.servers``, :data:`SYS_SERVERS_COLUMNS`); the columns not
    declared here (ports, ``start_time``, ``build_revision``, ``available_processors``,
    ``total_memory``, any other) are ignored.

    ``version`` must be a release number (:func:`segment_balancer.druid.releases.parse_version`) or
    Druid's ``"unknown"``; ``is_leader`` is 1, 0 or null as Druid gives it; ``storage_size`` bytes.
    """

    model_config = ConfigDict(extra="ignore")
    server: StrictStr = Field(min_length=1)
    server_type: StrictStr
    host: StrictStr | None = None
    tier: StrictStr | None = None
    current_size: StrictInt | None = Field(default=None, ge=0, le=_INT64)
    curr_size: StrictInt | None = Field(default=None, ge=0, le=_INT64)
    max_size: StrictInt | None = Field(default=None, ge=0, le=_INT64)
    priority: StrictInt = Field(default=0, ge=-_INT32 - 1, le=_INT32)
    is_leader: StrictInt | None = Field(default=None, ge=0, le=1)
    version: StrictStr | None = None
    storage_size: StrictInt | None = Field(default=None, ge=0, le=_INT64)
    labels: StrictStr | dict[str, Any] | None = None

    @field_validator("version")
    @classmethod
    def _check_version(cls, value: str | None) -> str | None:
        if value is not None and value != UNKNOWN_VERSION:
            try:
                parse_version(value)
            except ValueError:
                raise ValueError(f"must be {VERSION_FORMAT} or {UNKNOWN_VERSION!r}") from None
        return value

    @field_validator("labels", mode="before")
    @classmethod
    def _check_labels(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, (str, dict)):
            raise ValueError("must be a JSON string or an object (the server's druid.labels)")
        return value

    @property
    def is_historical(self) -> bool:
        return is_historical(self.server_type)

    def to_server(self) -> Server:
        """The ``Server`` of a historical row. Raises ValueError on a missing tier/size."""
        if not self.tier:
            raise ValueError(f"tier is required for a historical server, got {json.dumps(self.tier)}")
        if self.max_size is None:
            raise ValueError("max_size is required for a historical server")
        if self.current_size is not None and self.curr_size is not None and self.current_size != self.curr_size:
            raise ValueError(f"current_size {self.current_size} and curr_size {self.curr_size} disagree")
        size = self.current_size if self.current_size is not None else self.curr_size
        if size is None:
            raise ValueError("current_size (or curr_size) is required for a historical server")
        return Server(
            server=self.server,
            host=self.host or self.server,
            tier=self.tier,
            current_size=size,
            max_size=self.max_size,
            priority=self.priority,
            version=self.version,
            storage_size=self.storage_size,
            labels=self.labels,
        )


class QueueEntry(BaseModel):
    """One queued segment action on a server at snapshot time (``load_queues.json``).

    ``queue_type`` is ``loading``/``decommissioning``/``balancing`` for loads, ``None`` for drops;
    ``requested_at_ms`` epoch ms UTC or ``None``.
    """

    model_config = _Frozen
    server: str
    segment_id: str
    action: Literal["LOAD", "DROP"]
    queue_type: Literal["loading", "decommissioning", "balancing"] | None = None
    requested_at_ms: int | None = None


class QueueItem(BaseModel):
    """Raw object entry of ``segmentsToLoad``/``segmentsToDrop``."""

    model_config = ConfigDict(extra="forbid")
    segment_id: StrictStr = Field(min_length=1)
    queue_type: Literal["loading", "decommissioning", "balancing"] | None = None
    requested_at: StrictStr | None = None

    def requested_at_ms(self) -> int | None:
        return None if self.requested_at is None else parse_instant_ms(self.requested_at)


class SnapshotMeta(BaseModel):
    """``snapshot.json``: ``snapshot_time_ms`` (epoch ms UTC, the ``now`` of period rules), ``cluster``,
    ``snapshot_id`` = ``cluster@yyyy-MM-ddTHH:mm:ss.SSSZ``, and ``druid_version``, the Druid version
    the cluster ran as captured (None for a snapshot that does not record one)."""

    model_config = _Frozen
    snapshot_time_ms: int
    cluster: str
    snapshot_id: str
    druid_version: str | None = None


class RuleSpec(BaseModel):
    """Raw Druid rule JSON, validated per ``type`` as Druid's Jackson bindings do.

    Fields: ``type``; ``tieredReplicants`` ({tier: int >= 0}) and ``useDefaultTierForNull`` (load rules;
    a missing map means ``{"_default_tier": 2}``, or ``{}`` with ``useDefaultTierForNull: false``, as
    ``LoadRule`` does); ``interval`` (``*ByInterval``); ``period`` (``*ByPeriod``); ``includeFuture``
    (``loadByPeriod``, ``dropByPeriod``, ``broadcastByPeriod``; default true). Legacy (Druid < 0.7)
    ``tier`` + ``replicants`` on load rules mean ``{tier: replicants}`` when ``tieredReplicants`` is
    absent. ``colocatedDataSources`` (broadcast rules of Druid 0.12-0.18) is accepted and ignored.
    The partial-load rules of Druid 38 (``loadPartialForever``, ``loadPartialByInterval``,
    ``loadPartialByPeriod``) take the fields of ``loadForever``, ``loadByInterval``, ``loadByPeriod``
    (without the legacy ``tier``/``replicants``) and ``matcher`` (required:
    :func:`~segment_balancer.druid.partial_load.matcher_from_json`) and ``onCannotMatch``
    (``fullLoad`` when absent or unknown, as Druid reads it). Any other field is an error.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: StrictStr
    tieredReplicants: dict[str, StrictInt | None] | None = None
    useDefaultTierForNull: JacksonBool | None = None
    tier: StrictStr | None = None
    replicants: StrictInt | None = None
    interval: StrictStr | None = None
    period: StrictStr | None = None
    includeFuture: JacksonBool | None = None
    colocatedDataSources: list[StrictStr] | None = None
    matcher: Any = None
    onCannotMatch: Any = None

    @model_validator(mode="after")
    def _check_fields(self) -> RuleSpec:
        t = self.type
        if t not in RULE_KINDS:
            raise ValueError(f"unknown rule type {t!r}; known: {', '.join(RULE_KINDS)}")
        allowed = {"type"}
        if RULE_KINDS[t] == "load":
            allowed |= {"tieredReplicants", "useDefaultTierForNull"}
            allowed |= {"matcher", "onCannotMatch"} if t in PARTIAL_RULE_TYPES else {"tier", "replicants"}
        if RULE_KINDS[t] == "broadcast":
            allowed |= {"colocatedDataSources"}
        if t.endswith("ByInterval"):
            allowed.add("interval")
        if t.endswith("ByPeriod"):
            allowed.add("period")
            if t != "dropBeforeByPeriod":
                allowed.add("includeFuture")
        given = {k for k in type(self).model_fields if getattr(self, k) is not None}
        wrong = sorted(given - allowed)
        if wrong:
            raise ValueError(f"field(s) {', '.join(wrong)} not allowed in a {t} rule")
        if t.endswith("ByInterval") and self.interval is None:
            raise ValueError(f"a {t} rule needs an interval")
        if t.endswith("ByPeriod") and self.period is None:
            raise ValueError(f"a {t} rule needs a period")
        if t in PARTIAL_RULE_TYPES and self.matcher is None:
            raise ValueError(f"a {t} rule needs a matcher (exactProjection, globProjection or globClusterGroup)")
        if isinstance(self.onCannotMatch, (dict, list)):
            raise ValueError(f"onCannotMatch must be fullLoad or fallThrough, got {json.dumps(self.onCannotMatch)}")
        if (self.tier is None) != (self.replicants is None):
            raise ValueError("legacy 'tier' and 'replicants' must be given together")
        for tier, n in (self.tieredReplicants or {}).items():
            if n is None:
                raise ValueError(f"invalid number of replicas for tier [{tier}]: must not be null")
            if n < 0:
                raise ValueError(f"invalid number of replicas for tier [{tier}]: must be >= 0, got {n}")
            if n > _INT32:
                raise ValueError(f"invalid number of replicas for tier [{tier}]: must be <= {_INT32}, got {n}")
        if self.replicants is not None and not 0 <= self.replicants <= _INT32:
            raise ValueError(f"replicants must be between 0 and {_INT32}, got {self.replicants}")
        return self

    def to_rule(self) -> Rule:
        """The ``Rule``. Raises ValueError on a malformed interval, period or matcher."""
        kind = RULE_KINDS[self.type]
        tiered: dict[str, int] = {}
        if kind == "load":
            if self.tieredReplicants is not None:
                tiered = {k: int(v) for k, v in self.tieredReplicants.items() if v is not None}
            elif self.tier is not None and self.replicants is not None:
                tiered = {self.tier: self.replicants}
            elif self.useDefaultTierForNull is not False:
                tiered = {DRUID_DEFAULT_TIER: DRUID_DEFAULT_NUM_REPLICANTS}
        start = end = None
        if self.interval is not None:
            start, end = parse_interval(self.interval)
        period = Period.parse(self.period) if self.period is not None else None
        matcher = on_cannot_match = None
        if self.type in PARTIAL_RULE_TYPES:
            try:
                matcher = matcher_from_json(self.matcher)
            except ValueError as exc:
                raise ValueError(f"matcher: {exc}") from None
            on_cannot_match = CannotMatch.from_json(self.onCannotMatch)
        return Rule(
            type=self.type,
            kind=kind,
            tiered_replicants=tiered,
            interval_start_ms=start,
            interval_end_ms=end,
            period=period,
            include_future=True if self.includeFuture is None else self.includeFuture,
            matcher=matcher,
            on_cannot_match=on_cannot_match,
        )
