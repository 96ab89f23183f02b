"""Plan history: the published plans under a plans root, newest first, with their headline numbers
and what changed since the previous plan of the same cluster ("the plans page").

A published plan is a directory ``<plans root>/<name>/`` holding ``summary.json`` (the DAG's
``$SEGMENT_BALANCER_HOME/plans/<run dir>/``, or any ``--out`` of the CLI under one root). Hidden
directories (a publish under way), files (``LATEST``) and directories without ``summary.json`` are
not plans. The plans are ordered by the time of their snapshot, then by publish time (the mtime of
``summary.json``): a backfill replays old snapshots, and its plans take their place in history.

The *previous* plan of a plan is the newest older plan of the same cluster that has no what-if
edits: a what-if plan answers a question about a cluster that does not exist, so it is compared
with history but never becomes history itself.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from segment_balancer.common.errors import InputError
from segment_balancer.druid.instants import parse_instant_ms
from segment_balancer.plan.layout import ADVICE_DIR
from segment_balancer.planner.summary import SUMMARY_FILE, PlanSummary, read_plan_summary

log = logging.getLogger(__name__)

HEADLINE_KEYS = (
    "operations",
    "loads",
    "drops",
    "moves",
    "unreplicated_before",
    "unreplicated_after",
    "underreplicated_before",
    "underreplicated_after",
    "deferred_drops",
    "overshadowed_waiting",
)
"""The integer headline numbers of a plan, as :func:`headline` computes them from ``summary.json``."""

DIFF_KEYS = ("operations", "loads", "drops", "moves", "unreplicated_after", "underreplicated_after")
"""The headline numbers whose change from the previous plan :func:`plan_history` reports."""


def headline(summary: PlanSummary) -> dict:
    """The headline numbers of one plan from its ``summary.json``: ``operations``, ``loads``,
    ``drops``, ``moves`` (drops that wait for a load), ``unreplicated_before``/``_after`` (used
    load-rule segments with no replica in any tier, at the snapshot and once every operation
    succeeded), ``underreplicated_before``/``_after`` (segments
    below their target, summed over tiers), ``deferred_drops`` (refused by the availability rule),
    ``overshadowed_waiting`` (overshadowed segments kept until what overshadows them is served),
    and ``max_minus_min_after`` / ``max_minus_min_before`` (``{tier: segments}``, max − min of
    segments over a tier's non-decommissioning historicals). All ints."""

    def under(status) -> int:
        return sum(t.get("underreplicated", 0) for t in status.tiers.values())

    before, after = summary.status_before, summary.status_after
    return {
        "operations": summary.operations,
        "loads": summary.loads,
        "drops": summary.drops,
        "moves": summary.moves,
        "unreplicated_before": before.unreplicated,
        "unreplicated_after": after.unreplicated,
        "underreplicated_before": under(before),
        "underreplicated_after": under(after),
        "deferred_drops": summary.availability.deferred_drops,
        "overshadowed_waiting": summary.overshadowed_waiting.segments,
        "max_minus_min_before": {t: b.segments_max_minus_min for t, b in summary.balance_before.items()},
        "max_minus_min_after": {t: b.segments_max_minus_min for t, b in summary.balance_after.items()},
    }


@dataclass
class PlanEntry:
    """One published plan of the history.

    ``name``: its directory name (the DAG's ``resolve.run_dir_name``); ``path``: the directory;
    ``cluster``, ``snapshot_id``; ``snapshot_time`` and ``published_at``: ISO-8601 UTC strings;
    ``whatif``: the plan has what-if edits; ``valid``: ``validation.json`` says success;
    ``has_report`` / ``has_simulation`` / ``has_advice``: ``report.html`` /
    ``simulation/report.html`` / ``advice/report.html`` are there;
    ``numbers``: :func:`headline`; ``previous``: the name of the plan it is compared with, or
    None; ``diff``: this plan's :data:`DIFF_KEYS` minus the previous plan's, and ``max_minus_min_after``
    per tier present in both (empty without a previous plan).
    """

    name: str
    path: str
    cluster: str
    snapshot_id: str
    snapshot_time: str
    published_at: str
    whatif: bool
    valid: bool
    has_report: bool
    has_simulation: bool
    numbers: dict
    previous: str | None = None
    has_advice: bool = False
    diff: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def read_plan(plan_dir: Path) -> PlanEntry:
    """The :class:`PlanEntry` of one published plan directory (``previous`` and ``diff`` unset).

    Raises ``FileNotFoundError`` without ``summary.json``, ``InputError`` (a ``ValueError``) when
    it (:func:`~segment_balancer.planner.summary.read_plan_summary`) or ``validation.json`` cannot
    be read as a plan's.
    """
    plan_dir = Path(plan_dir)
    path = plan_dir / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    summary = read_plan_summary(plan_dir)
    numbers = headline(summary)
    valid = False
    if (plan_dir / "validation.json").is_file():
        try:
            valid = json.loads((plan_dir / "validation.json").read_text()).get("success") is True
        except (OSError, ValueError, AttributeError) as exc:
            raise InputError(f"{plan_dir / 'validation.json'}: unreadable ({exc})") from exc
    snapshot_time = summary.snapshot_time or summary.snapshot_id.rpartition("@")[2]
    edits = summary.whatif
    return PlanEntry(
        name=plan_dir.name,
        path=str(plan_dir),
        cluster=summary.cluster,
        snapshot_id=summary.snapshot_id,
        snapshot_time=snapshot_time,
        published_at=_iso(path.stat().st_mtime),
        whatif=edits is not None and bool(edits.decommission or edits.remove or edits.added),
        valid=valid,
        has_report=(plan_dir / "report.html").is_file(),
        has_simulation=(plan_dir / "simulation" / "report.html").is_file(),
        numbers=numbers,
        has_advice=(plan_dir / ADVICE_DIR / "report.html").is_file(),
    )


def signed_change(n: int) -> str:
    """A difference as a person reads it: ``+3``, ``−2`` (a minus sign), ``±0``; thousands separated."""
    return f"+{n:,}" if n > 0 else f"\N{MINUS SIGN}{-n:,}" if n < 0 else "\N{PLUS-MINUS SIGN}0"


def diff(current: dict, previous: dict) -> dict:
    """``current`` minus ``previous`` (two :func:`headline` dicts): every :data:`DIFF_KEYS` and
    ``max_minus_min_after`` for the tiers both have."""
    out = {k: current[k] - previous[k] for k in DIFF_KEYS}
    out["max_minus_min_after"] = {
        t: current["max_minus_min_after"][t] - previous["max_minus_min_after"][t]
        for t in current["max_minus_min_after"]
        if t in previous["max_minus_min_after"]
    }
    return out


def plan_history(plans_root: str | Path, cluster: str | None = None) -> list[PlanEntry]:
    """Every published plan under ``plans_root`` (of ``cluster`` only, when given), newest first
    (by snapshot time, then publish time, then name), each with ``previous`` and ``diff`` set
    (module docstring). A plan whose summary cannot be read is left out with a warning in the log;
    a missing ``plans_root`` has no plans.
    """
    root = Path(plans_root)
    if not root.is_dir():
        return []
    entries = []
    for d in sorted(root.iterdir()):
        if not d.is_dir() or d.name.startswith(".") or not (d / "summary.json").is_file():
            continue
        try:
            entry = read_plan(d)
        except (OSError, ValueError) as exc:
            log.warning("plan history: %s left out: %s", d, exc)
            continue
        if cluster is None or entry.cluster == cluster:
            entries.append(entry)
    entries.sort(key=lambda e: (e.snapshot_time, e.published_at, e.name))
    last: dict[str, PlanEntry] = {}
    for entry in entries:
        prev = last.get(entry.cluster)
        if prev is not None:
            entry.previous, entry.diff = prev.name, diff(entry.numbers, prev.numbers)
        if not entry.whatif:
            last[entry.cluster] = entry
    return entries[::-1]


def previous_plan(plans_root: str | Path, cluster: str, snapshot_time: str) -> PlanEntry | None:
    """The plan a run of ``cluster`` on the snapshot taken at ``snapshot_time`` (ISO-8601 UTC, as
    ``summary.json`` writes it) follows: the newest published plan of that cluster without what-if
    edits whose snapshot is older (of several plans of that snapshot, the last published). A
    scheduled run gets the plan of the run before it; a backfill, the plan of the snapshot before
    its own, however the runs were ordered; a second plan of one snapshot, the same plan as the
    first (so planning a snapshot again gives the same plan). None: no such plan."""
    older = [
        e
        for e in plan_history(plans_root, cluster)
        if not e.whatif and e.valid and _instant(e.snapshot_time) < _instant(snapshot_time)
    ]
    return older[0] if older else None


def _instant(text: str) -> int:
    """Epoch ms of an ISO-8601 instant (``summary.json``'s ``snapshot_time``)."""
    return parse_instant_ms(text)
