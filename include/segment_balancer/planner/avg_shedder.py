"""The ``avgShedder`` balancing strategy's pairs (ALGORITHM.md "Balancing strategy ``avgShedder``",
seed 002, Pulsar PIP-364 ``AvgShedder``): per tier, the candidate historicals scored by their
projected usage, paired highest with lowest, each pair's hit count carried across runs, and which
pairs shed how many bytes this run.

Which segments a shedding pair moves (largest placement-cost reduction first, under the stage-7
limit and capacity) is the stage's work; this module decides only the pairs, from per-server byte
totals, and the hit counts the next run starts from (:mod:`segment_balancer.planner.balancer_state`).
Pure Python, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Usage", "Pair", "pair_tier", "pair_key", "next_counts", "remembered"]


@dataclass(frozen=True)
class Usage:
    """A candidate historical of a tier after stages 1–6: ``used_bytes`` = served + queued and
    scheduled loads − queued and scheduled drops (bytes), ``max_size`` (bytes, > 0)."""

    server: str
    used_bytes: int
    max_size: int

    @property
    def score(self) -> float:
        """Projected usage as a percentage of ``max_size``."""
        return 100.0 * self.used_bytes / self.max_size


def pair_key(a: str, b: str) -> tuple[str, str]:
    """The balancer state's key of the pair of servers ``a`` and ``b``: their names in order, so
    the same two servers are one pair whichever is the higher."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class Pair:
    """One pair of a tier this run.

    ``high``/``low``: the higher- and lower-scored server; ``difference`` = their score difference
    (percentage points); ``hit_count``: consecutive runs, this one included, in which the two formed
    a hitting pair (0 when the pair does not hit); ``sheds``: whether it sheds now; ``bytes_to_move``:
    ``x = (U_h·M_l − U_l·M_h) / (M_h + M_l)`` floored (bytes), what would make the scores equal;
    ``waiting``: for a hitting pair that does not shed, what it waits for (for the report).
    """

    tier: str
    high: Usage
    low: Usage
    difference: float
    hit_count: int
    sheds: bool
    bytes_to_move: int
    waiting: str

    @property
    def key(self) -> tuple[str, str]:
        return pair_key(self.high.server, self.low.server)


def pair_tier(
    tier: str,
    servers: Iterable[Usage],
    previous: Mapping[tuple[str, str], int],
    *,
    low_threshold: float = 15.0,
    high_threshold: float = 40.0,
    hit_count_low: int = 8,
    hit_count_high: int = 2,
) -> list[Pair]:
    """The pairs of ``tier`` this run, widest difference first (ties: the outer pair first, the
    order they were paired in; ALGORITHM.md "Balancing strategy ``avgShedder``").

    ``servers``: the tier's candidate historicals (``max_size`` > 0); ``previous``: hit counts of
    the previous run's state for this tier, by :func:`pair_key` (absent = 0). Sorted by score (ties:
    name), the highest is paired with the lowest, the second highest with the second lowest, …; an
    odd middle server is unpaired. A pair hits when its difference exceeds ``low_threshold``
    (strictly: exactly 15 does not hit); its hit count is the previous count + 1, else 0. It sheds
    when the difference exceeds ``high_threshold`` and the count reaches ``hit_count_high``, or
    exceeds ``low_threshold`` and the count reaches ``hit_count_low``.
    """
    ranked = sorted(servers, key=lambda u: (u.score, u.server))
    pairs = []
    for i in range(len(ranked) // 2):
        low, high = ranked[i], ranked[-1 - i]
        difference = high.score - low.score
        hits = difference > low_threshold
        count = previous.get(pair_key(high.server, low.server), 0) + 1 if hits else 0
        sheds = hits and ((difference > high_threshold and count >= hit_count_high) or count >= hit_count_low)
        x = (high.used_bytes * low.max_size - low.used_bytes * high.max_size) // (high.max_size + low.max_size)
        if not hits:
            waiting = f"no shedding: the gap {difference:.1f} is not above {low_threshold:g}"
        elif sheds:
            waiting = ""
        elif difference > high_threshold:
            waiting = (
                f"shed in {hit_count_high - count} more run(s) if the gap stays above {high_threshold:g}, "
                f"or {hit_count_low - count} if it stays above {low_threshold:g}"
            )
        else:
            waiting = f"shed in {hit_count_low - count} more run(s) if the gap stays above {low_threshold:g}"
        pairs.append(Pair(tier, high, low, difference, count, sheds, max(int(x), 0), waiting))
    return [p for _, p in sorted(enumerate(pairs), key=lambda ip: (-ip[1].difference, ip[0]))]


def remembered(hit_count: int, sheds: bool) -> bool:
    """Whether the next run starts from a pair's ``hit_count``: it hit and did not shed (a pair
    that shed, or did not hit, is forgotten)."""
    return hit_count > 0 and not sheds


def next_counts(pairs: Iterable[Pair]) -> dict[tuple[str, str], int]:
    """The hit counts the next run starts from, by :func:`pair_key` (:func:`remembered` pairs)."""
    return {p.key: p.hit_count for p in pairs if remembered(p.hit_count, p.sheds)}
