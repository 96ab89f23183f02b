"""Which published plans a plans root keeps: by age and by count per cluster, never the ones a
reader or the next run needs.

:func:`plans_to_remove` decides on the plan history (:func:`segment_balancer.plan.history.plan_history`,
newest first); :func:`remove_plans` applies it under the plans root's publish lock
(:func:`segment_balancer.plan.publish.plans_lock`), so no plan is removed while ``LATEST`` moves.

A plan is removed when it is older than ``max_age_days`` (its publish time) or is not among the
``per_cluster`` newest plans of its cluster, unless it is protected:

- the plan ``LATEST`` names;
- the newest plan of each cluster;
- the newest plan of each cluster without what-if edits: the plan whose balancer state the next
  scheduled run is handed (``resolve.previous_balancer_state``).

A limit of 0 removes nothing by that rule. Directories that history does not read as plans (no or
an unreadable ``summary.json``, hidden ones) are never removed, but for the temporaries an interrupted
publish or removal left (``common.files.is_leftover``) once older than a day.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from segment_balancer.common.files import is_leftover, remove_dir
from segment_balancer.plan.history import PlanEntry, plan_history

log = logging.getLogger(__name__)

DAY_SECONDS = 86_400
LEFTOVER_AGE_SECONDS = DAY_SECONDS
"""How old a leftover temporary must be before it is removed: no publish takes that long."""


@dataclass(frozen=True)
class Removed:
    """One directory removed: ``path``, ``reason`` (``age``, ``count``, ``leftover``) and the
    ``bytes`` it held."""

    path: str
    reason: str
    bytes: int


def _age_days(entry: PlanEntry, now: float) -> float:
    published = datetime.fromisoformat(entry.published_at.replace("Z", "+00:00")).timestamp()
    return (now - published) / DAY_SECONDS


def plans_to_remove(
    entries: list[PlanEntry], latest: str | None, now: float, max_age_days: float, per_cluster: int
) -> list[tuple[PlanEntry, str]]:
    """The plans of ``entries`` (newest first, as ``plan_history`` gives them) to remove, each with
    its reason (``age`` or ``count``), oldest last; ``latest``: the name ``LATEST`` holds (None:
    none); ``now``: seconds since the epoch. Module docstring for the rules."""
    protected = {latest}
    newest: set[str] = set()
    newest_not_whatif: set[str] = set()
    rank: dict[str, int] = {}
    out = []
    for entry in entries:
        if entry.cluster not in newest:
            newest.add(entry.cluster)
            protected.add(entry.name)
        if not entry.whatif and entry.cluster not in newest_not_whatif:
            newest_not_whatif.add(entry.cluster)
            protected.add(entry.name)
        rank[entry.cluster] = rank.get(entry.cluster, 0) + 1
        if entry.name in protected:
            continue
        if max_age_days and _age_days(entry, now) > max_age_days:
            out.append((entry, "age"))
        elif per_cluster and rank[entry.cluster] > per_cluster:
            out.append((entry, "count"))
    return out


def remove_plans(
    plans_root: str | Path, max_age_days: float, per_cluster: int, now: float | None = None
) -> list[Removed]:
    """Remove, under the publish lock of ``plans_root``, the plans :func:`plans_to_remove` names
    and leftover temporaries older than a day; log and return each :class:`Removed`. A plan whose
    removal fails is logged and left (``OSError``); nothing is raised for it."""
    from segment_balancer.plan.publish import plans_lock

    root = Path(plans_root)
    if not root.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    with plans_lock(root):
        try:
            latest = (root / "LATEST").read_text().strip() or None
        except FileNotFoundError:
            latest = None
        doomed = [
            (Path(e.path), reason)
            for e, reason in plans_to_remove(plan_history(root), latest, now, max_age_days, per_cluster)
        ]
        doomed += [
            (p, "leftover")
            for p in sorted(root.iterdir())
            if is_leftover(p) and now - p.lstat().st_mtime > LEFTOVER_AGE_SECONDS
        ]
        for path, reason in doomed:
            try:
                size = remove_dir(path) if path.is_dir() and not path.is_symlink() else _unlink(path)
            except OSError as exc:
                log.warning("retention: could not remove %s (%s): %s", path, reason, exc)
                continue
            removed.append(Removed(str(path), reason, size))
            log.info("retention: removed %s (%s, %.1f MiB)", path, reason, size / 2**20)
    return removed


def _unlink(path: Path) -> int:
    size = path.lstat().st_size
    path.unlink()
    return size
