"""The metrics one Druid Coordinator run emits (Druid 35.0.0 and 38.0.0 ``CoordinatorRunStats``;
docs/DRUID_COORDINATOR_NOTES.md §1.3), by the names of ``druid.metrics``.

A row is a metric and its dimensions (``tier``, ``tierAlias`` (Druid 38: the alias of an aliased
tier), ``dataSource``, ``server``, ``description``, in Druid's ``Dimension`` order); a row exists once
anything is added to it, 0 included, and every row is emitted at the end of the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

DIMENSIONS = ("tier", "tierAlias", "dataSource", "server", "description")
_KNOWN = frozenset(DIMENSIONS)


@dataclass(frozen=True)
class Row:
    """One emitted value: ``metric``, its ``dims`` (dimension -> value) and ``value``."""

    metric: str
    dims: dict[str, str]
    value: int


@dataclass
class RunStats:
    """The rows of one run, in the order they were first added."""

    values: dict[tuple[str, tuple[tuple[str, str], ...]], int] = field(default_factory=dict)

    @staticmethod
    def _key(metric: str, dims: dict[str, str | None]) -> tuple[str, tuple[tuple[str, str], ...]]:
        if not dims.keys() <= _KNOWN:
            raise ValueError(f"unknown dimensions {sorted(set(dims) - _KNOWN)} of {metric}")
        return metric, tuple((d, str(v)) for d in DIMENSIONS if (v := dims.get(d)) is not None)

    def add(self, metric: str, value: int, **dims: str | None) -> None:
        """Add ``value`` to the row of ``metric`` and ``dims`` (created at 0). Raises ValueError for
        a dimension Druid does not have."""
        key = self._key(metric, dims)
        self.values[key] = self.values.get(key, 0) + int(value)

    def update_max(self, metric: str, value: int, **dims: str | None) -> None:
        """Keep the larger of the row's value and ``value``."""
        key = self._key(metric, dims)
        self.values[key] = max(self.values.get(key, value), int(value))

    def rows(self) -> Iterator[Row]:
        """Every row, in the order first added."""
        for (metric, dims), value in self.values.items():
            yield Row(metric, dict(dims), value)

    def matching(self, metric: str, **filter_: str) -> list[int]:
        """The values of ``metric``'s rows whose dimensions include ``filter_`` (Druid's
        ``MetricsVerifier`` filters)."""
        return [
            r.value for r in self.rows() if r.metric == metric and all(r.dims.get(k) == v for k, v in filter_.items())
        ]

    def get(self, metric: str, **dims: str) -> int | None:
        """The value of the row of ``metric`` with exactly ``dims`` (Druid's ``get(stat, rowKey)``), None
        when no such row was added (Druid reads it as 0)."""
        return self.values.get(self._key(metric, dims))

    def total(self, metric: str, **filter_: str) -> int:
        """The sum of :meth:`matching` (Druid's ``verifySum``; 0 without rows)."""
        return sum(self.matching(metric, **filter_))
