"""``explain``: every candidate server's placement cost for one segment, its rank, whether it is in
the top ``B``, and why it is ineligible if it is (ALGORITHM.md "Best servers"); the segment's
``required`` loaded replicas and whether it waits for the segments that overshadow it
(ALGORITHM.md "Availability", stage 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from segment_balancer.common.errors import InputError
from segment_balancer.druid.timeline import explain_overshadowing
from segment_balancer.planner import groups as G
from segment_balancer.planner.coordinators import coordinator, stage_number
from segment_balancer.planner.cost import COST_WINDOW_MS
from segment_balancer.planner.operations import Action
from segment_balancer.planner.ranking import rank_one
from segment_balancer.planner.summary import read_plan_summary
from segment_balancer.planner.undone import NOTHING_UNDONE
from segment_balancer.spark.workdir import num_best_function


def _table(path: Path, filter=None, columns=None):
    """The rows of a parquet file or directory of ``WORK/prepared`` matching ``filter`` (pyarrow)."""
    return ds.dataset(str(path), format="parquet").to_table(filter=filter, columns=columns)


def explain_segment(work: Path, segment_id: str, tier: str | None = None) -> dict:
    """Explain ``segment_id`` against the start-of-run state prepared in ``work`` (``used_segments``
    and ``prepare``'s tables, read with pyarrow: no Spark).

    Reads only the segment's rows and the projected segments inside its cost window. Raises
    ``KeyError`` for an unknown segment id.
    """
    prepared = Path(work) / "prepared"
    meta = json.loads((prepared / "meta.json").read_text())
    found = _table(prepared / "segments.parquet", ds.field("segment_id") == segment_id).slice(0, 1).to_pylist()
    if not found:
        raise KeyError(f"segment {segment_id} is not in the snapshot")
    seg = found[0]
    servers = pd.read_parquet(prepared / "servers.parquet")
    targets = (
        _table(prepared / "targets.parquet", ds.field("idx") == seg["idx"]).to_pylist()
        if seg["idx"] is not None
        else []
    )
    target = {r["tier"]: int(r["target"]) for r in targets}
    mine = _table(prepared / "replicas.parquet", ds.field("segment_id") == segment_id).to_pylist()
    here = {r["server"]: r for r in mine}
    tiers = sorted({t for t in target} | {r["tier"] for r in mine}) if tier is None else [tier]
    # what the tiers' servers project at the start of the run (served without a queued drop, plus
    # queued loads: spark.status.start_projection), of the segments inside the cost window
    near = _table(
        prepared / "segments.parquet",
        (ds.field("start_ms") < seg["end_ms"] + COST_WINDOW_MS)
        & (ds.field("end_ms") > seg["start_ms"] - COST_WINDOW_MS),
        ["segment_id", "idx", "datasource", "start_ms", "end_ms"],
    )
    projected = (ds.field("served") & ~ds.field("queued_drop")) | ds.field("queued_load")
    replicas = _table(
        prepared / "replicas.parquet",
        # typed: with no tier (no historical at all) an untyped empty set matches no string column
        projected
        & ds.field("segment_id").isin(near["segment_id"])
        & ds.field("tier").isin(pa.array(tiers, pa.string())),
        ["segment_id", "server", "tier"],
    )
    window = replicas.to_pandas().merge(near.to_pandas(), on="segment_id")[
        ["server", "tier", "idx", "datasource", "start_ms", "end_ms"]
    ]
    window["idx"] = window["idx"].fillna(-1).astype("int64")
    num_best = num_best_function(meta["config"])
    out = {
        "segment_id": segment_id,
        "idx": seg["idx"],
        "used": bool(seg["used"]),
        "overshadowed": bool(seg["overshadowed"]),
        "rule_kind": seg["rule_kind"],
        "size_bytes": int(seg["size_bytes"]),
        # min(2, Σ tieredReplicants): loaded replicas stage 12 keeps (ALGORITHM.md "Availability")
        "required": seg["required"],
        # overshadowed, and kept: some overshadowing segment needs a replica and is served nowhere
        "waiting": seg["waiting"],
        # false: only server_segments.json / load_queues.json name it (unused, size unknown)
        "listed": bool(seg["listed"]),
        "timeline": _timeline(Path(work), seg),
        "tiers": [],
    }
    for t in tiers:
        part = servers[servers["tier"] == t].copy()
        part["available_bytes"] = part["max_size"] - part["projected_size"]
        order, costs = rank_one(seg, window[window["tier"] == t], part)
        b = num_best(len(order), target.get(t, 0)) if target.get(t, 0) > 0 else 0
        rows = []
        for rank, (name, cost) in enumerate(zip(order, costs), start=1):
            srv = part[part["server"] == name].iloc[0]
            rows.append(
                {
                    "server": name,
                    "rank": rank,
                    "cost": cost,
                    "in_top_b": rank <= b,
                    "available_bytes": int(srv["available_bytes"]),
                    "ineligible": _why(name, srv, seg, here),
                }
            )
        for _, srv in part[part["decommissioning"]].iterrows():
            rows.append(
                {
                    "server": srv["server"],
                    "rank": None,
                    "cost": None,
                    "in_top_b": False,
                    "available_bytes": int(srv["available_bytes"]),
                    "ineligible": "decommissioning",
                }
            )
        out["tiers"].append({"tier": t, "target": target.get(t, 0), "b": b, "servers": rows})
    return out


def render_snapshot_explain(answer: dict) -> str:
    """:func:`explain_segment`'s answer as text: the segment, then per tier its target, B and every
    server by rank (cost, in top B, bytes available, why it cannot take the segment)."""
    lines = [
        f"segment {answer['segment_id']}",
        f"  {answer['size_bytes']:,} bytes; rule {answer['rule_kind'] or 'none'}; used {answer['used']}; "
        f"overshadowed {answer['overshadowed']}; loaded replicas required {answer['required']}",
    ]
    timeline = answer.get("timeline") or {}
    if timeline.get("status"):
        by = timeline.get("overshadowed_by") or []
        lines.append(f"  timeline: {timeline['status']}" + (f", overshadowed by {', '.join(by)}" if by else ""))
    for tier in answer["tiers"]:
        lines.append(f"tier {tier['tier']}: target {tier['target']}, top B = {tier['b']}")
        for row in tier["servers"]:
            rank = "-" if row["rank"] is None else str(row["rank"])
            cost = "" if row["cost"] is None else f"cost {row['cost']:.6g}"
            top = " top B" if row["in_top_b"] else ""
            why = f"; {row['ineligible']}" if row["ineligible"] else ""
            lines.append(f"  {rank:>3}. {row['server']}  {cost}{top}; {row['available_bytes']:,} bytes available{why}")
    return "\n".join(lines)


def _why(name: str, srv, seg: dict, here: dict) -> str | None:
    rep = here.get(name)
    if rep and rep["served"] and not rep["queued_drop"]:
        return "serves the segment"
    if rep and rep["queued_load"]:
        return "is already loading the segment"
    if int(srv["available_bytes"]) < int(seg["size_bytes"]):
        return f"not enough room ({int(srv['available_bytes'])} bytes available)"
    return None


def _timeline(work: Path, seg: dict) -> dict:
    """The segment's timeline status and which segments overshadow it and why, from the used
    segments of its datasource that overlap it (the only ones that can)."""
    from segment_balancer.spark.used_segments import TIMELINE_COLUMNS

    near = (
        (ds.field("datasource") == seg["datasource"])
        & ds.field("used")
        & (ds.field("start_ms") < seg["end_ms"])
        & (ds.field("end_ms") > seg["start_ms"])
    )
    pdf = _table(Path(work) / "timeline" / "segments.parquet", near, list(TIMELINE_COLUMNS)).to_pandas()
    if seg["segment_id"] not in set(pdf["segment_id"]):
        return {"status": "unused"}
    return explain_overshadowing(pdf, seg["segment_id"])


# ---- explain --plan: what the plan did with a segment, and why ------------------------------------
OUTCOME_TEXT = {
    "no_target": "no tier has a target for it, so no stage can load it",
    "not_loaded": "no server of any tier's top B could take its first replica",
    "short": "the tier still holds fewer replicas than its target",
    "underbroadcast": "some servers that should hold this broadcast segment could not load it",
    "left_on_decomm": "replicas stay on decommissioning servers: no destination could take them",
    "excess_on_decomm": "replicas on decommissioning servers not moved: the tier holds its target without them, "
    "stage 12 drops them",
    "no_destination": "the balancing trigger picked a holder to move, but no server of top B cheaper than it by the "
    "margin could take it",
    "balanced": "drawn for balancing, and no non-holding server of top B is cheaper than a holder by the margin "
    "(balancingMinCostReductionPercent; equal costs never move): nothing to move",
    "already_visited": "drawn again after an earlier balancing stage had visited it",
    "deferred": "drops refused by the availability rule: fewer loaded replicas than required would remain",
    "waiting": "overshadowed, kept until a segment overshadowing it is served",
    "shed": "moved by avgShedder: its holder was the higher server of a shedding pair, and its placement-cost "
    "reduction ranked it among the bytes that equalise the pair",
    "not_shed": "not moved by avgShedder, though its holder was the higher server of a shedding pair",
}
"""One sentence per decision outcome (:mod:`segment_balancer.planner.kernels.decisions`)."""


class PlanExplainError(InputError, LookupError):
    """``explain --plan`` cannot answer: the plan directory lacks its explain tables, or the
    segment is not in the plan's snapshot."""


OPERATION_KEYS = ("op_id", "action", "tier", "server", "queue_type", "reason", "depends_on")
"""What ``explain --plan`` shows of an operation; a partial load adds ``partial``."""


def _operation(o: dict) -> dict:
    """An operation of the plan as ``explain --plan`` reports it: :data:`OPERATION_KEYS`, and for a
    load of a part (Druid 38's partial-load rules) ``partial``: ``matcher``, ``type``, ``parts``
    (a list) and ``fingerprint``."""
    out = {k: o[k] for k in OPERATION_KEYS}
    if o.get("partial_fingerprint") is not None:
        out["partial"] = {
            "matcher": o.get("partial_matcher"),
            "type": o.get("partial_type"),
            "parts": json.loads(o["partial_parts"]) if o.get("partial_parts") else [],
            "fingerprint": o["partial_fingerprint"],
        }
    return out


def _rows(path: Path, segment_id: str, columns: list[str] | None = None) -> list[dict]:
    table = ds.dataset(str(path), format="parquet").to_table(
        filter=ds.field("segment_id") == segment_id, columns=columns
    )
    return table.to_pylist()


FOUND_LIMIT = 100
"""The most segment ids :func:`find_segments` returns."""


def find_segments(plan_dir: str | Path, prefix: str = "", datasource: str | None = None) -> dict:
    """The segments of a plan's snapshot (``segments.parquet``) whose id starts with ``prefix`` (case
    kept), of ``datasource`` when given: ``{"segments": [{"segment_id", "datasource",
    "size_bytes", "operations"}] (the first FOUND_LIMIT by id), "total": int}``; ``operations``
    counts the segment's operations in ``operations.parquet``. Raises :class:`PlanExplainError`
    without ``segments.parquet``."""
    plan = Path(plan_dir)
    if not (plan / "segments.parquet").is_file():
        raise PlanExplainError(f"{plan}: no segments.parquet; the plan cannot be searched")
    table = ds.dataset(str(plan / "segments.parquet"), format="parquet").to_table(
        columns=["segment_id", "datasource", "size_bytes"]
    )
    mask = pc.starts_with(table["segment_id"], prefix) if prefix else None
    if datasource:
        same = pc.equal(table["datasource"], datasource)
        mask = same if mask is None else pc.and_(mask, same)
    found = table if mask is None else table.filter(mask)
    total = found.num_rows
    found = found.sort_by("segment_id").slice(0, FOUND_LIMIT).to_pylist()
    counts: dict[str, int] = {}
    if found and (plan / "operations.parquet").is_file():
        ids = [r["segment_id"] for r in found]
        ops = ds.dataset(str(plan / "operations.parquet"), format="parquet").to_table(
            columns=["segment_id"], filter=ds.field("segment_id").isin(ids)
        )
        for segment_id in ops["segment_id"].to_pylist():
            counts[segment_id] = counts.get(segment_id, 0) + 1
    return {
        "segments": [{**r, "operations": counts.get(r["segment_id"], 0)} for r in found],
        "total": total,
    }


def plan_datasources(plan_dir: str | Path) -> list[str]:
    """Every datasource of a plan's snapshot (``segments.parquet``), sorted; empty without it."""
    path = Path(plan_dir) / "segments.parquet"
    if not path.is_file():
        return []
    return sorted(pc.unique(pq.read_table(path, columns=["datasource"])["datasource"]).to_pylist())


def explain_plan(plan_dir: str | Path, segment_id: str) -> dict:
    """What the published plan in ``plan_dir`` did with ``segment_id``, and why.

    Reads only the segment's rows of the plan's ``segments.parquet``, ``operations.parquet``,
    ``assignment.parquet`` and ``decisions.parquet`` (pyarrow filters, no Spark) and its
    memberships in ``stage_groups.json``. Returns a dict:

    - the segment (``idx``, ``datasource``, ``size_bytes`` bytes, ``used``, ``overshadowed``,
      ``rule_kind``, ``required``, ``waiting``);
    - ``tiers``: per tier, ``target``, ``count_before``/``count_after`` (``count(s, T)`` at the
      snapshot and once every operation succeeded) and ``servers_before``/``servers_after``;
    - ``stages``: per application of the run (``used_segments`` … ``stage13_…``), ``stage``,
      ``groups`` (the groups it was in afterwards), ``counts`` (``{tier: count}`` afterwards),
      ``operations`` (its ops of the segment: ``op_id``, ``action``, ``tier``, ``server``,
      ``queue_type``, ``reason``, ``depends_on``) and ``decisions`` (why the stage left it undone:
      ``outcome``, ``why`` (a sentence), ``tier`` and ``detail``: the servers tried and what
      stopped each);
    - ``strategy``: the balancing strategy (``name``) and, for ``avgShedder``, ``holders``: per
      server that served the segment at the snapshot, its pair this run and what that meant for
      the segment (:func:`avg_shedder_notes`).

    Raises ``PlanExplainError`` when the plan has no explain tables or the segment is unknown, and
    ``InputError`` when its ``summary.json`` is not a plan summary
    (:func:`~segment_balancer.planner.summary.read_plan_summary`).
    Source: :mod:`segment_balancer.planner.kernels.decisions`; ALGORITHM.md "Stages".
    """
    plan = Path(plan_dir)
    needed = ["segments.parquet", "decisions.parquet", "stage_groups.json", "operations.parquet", "assignment.parquet"]
    missing = [n for n in needed if not (plan / n).exists()]
    if not plan.is_dir():
        raise PlanExplainError(f"{plan}: no such directory")
    if missing and not (plan / "summary.json").is_file():
        snapshot = (plan / "snapshot.json").is_file() or (plan / "segments.jsonl").is_file()
        raise PlanExplainError(
            f"{plan}: a snapshot, not a plan; explain --snapshot {plan} ranks every server for a segment"
            if snapshot
            else f"{plan}: not a plan directory (no summary.json)"
        )
    if missing:
        raise PlanExplainError(
            f"{plan}: no {', '.join(missing)}; the plan was made before explain --plan existed, "
            "plan again to explain it"
        )
    summary = read_plan_summary(plan)
    planner = coordinator(summary.coordinator)
    found = _rows(plan / "segments.parquet", segment_id)
    if not found:
        raise PlanExplainError(f"segment {segment_id} is not in the snapshot of the plan {plan}")
    seg = found[0]
    targets = json.loads(seg["targets"]) if seg["targets"] else {}
    ops = sorted(_rows(plan / "operations.parquet", segment_id), key=lambda o: o["op_id"])
    after = _rows(plan / "assignment.parquet", segment_id)
    decisions = _rows(plan / "decisions.parquet", segment_id)

    servers_after: dict[str, set[str]] = {}
    for r in after:
        servers_after.setdefault(r["tier"], set()).add(r["server"])
    servers_before = {t: set(s) for t, s in servers_after.items()}
    for op in reversed(ops):
        held = servers_before.setdefault(op["tier"], set())
        (held.discard if _adds(op) else held.add)(op["server"])
    tiers = sorted(set(targets) | set(servers_before) | set(servers_after))
    out = {
        "segment_id": segment_id,
        **{
            k: seg[k]
            for k in ("idx", "datasource", "size_bytes", "used", "overshadowed", "rule_kind", "required", "waiting")
        },
        "tiers": {
            t: {
                "target": int(targets.get(t, 0)),
                "count_before": len(servers_before.get(t, ())),
                "count_after": len(servers_after.get(t, ())),
                "servers_before": sorted(servers_before.get(t, ())),
                "servers_after": sorted(servers_after.get(t, ())),
            }
            for t in tiers
        },
        "stages": [],
    }
    stage_groups = json.loads((plan / "stage_groups.json").read_text())
    counts = {t: len(servers_before.get(t, ())) for t in tiers}
    idx = seg["idx"]
    member: dict[str, bool] = {}
    for name in planner.run_apps:  # the applications that handed groups on, with their operations
        if name not in stage_groups:
            continue
        stage = stage_number(name)
        entry = stage_groups[name]
        member = {g: member.get(g, False) for g in entry["names"]}
        member.update({g: idx is not None and idx in G.decode(text) for g, text in entry["changed"].items()})
        mine = [o for o in ops if o["stage"] == stage]
        for o in mine:
            counts[o["tier"]] = counts.get(o["tier"], 0) + (1 if _adds(o) else -1)
        groups = sorted(g for g, yes in member.items() if yes)
        why = [
            {
                "tier": d["tier"],
                "outcome": d["outcome"],
                "why": OUTCOME_TEXT.get(d["outcome"], d["outcome"]),
                "step": d["step"],
                "detail": json.loads(d["detail"]) if d["detail"] else {},
            }
            for d in decisions
            if d["stage"] == stage
        ]
        out["stages"].append(
            {
                "app": name,
                "stage": stage,
                "groups": groups,
                "counts": dict(sorted(counts.items())),
                "operations": [_operation(o) for o in mine],
                "decisions": why,
            }
        )
    if not planner.hands_groups:  # its operations by the step (Druid's duty) that queued them
        for stage, duty in planner.stage_names.items():
            mine = [o for o in ops if o["stage"] == stage]
            if not mine:
                continue
            for o in mine:
                counts[o["tier"]] = counts.get(o["tier"], 0) + (1 if _adds(o) else -1)
            out["stages"].append(
                {
                    "app": duty,
                    "stage": stage,
                    "groups": [],
                    "counts": dict(sorted(counts.items())),
                    "operations": [_operation(o) for o in mine],
                    "decisions": [],
                }
            )
    balancer = summary.balancer
    out["strategy"] = {"name": balancer.strategy}
    if balancer.strategy == "avgShedder":
        moved = {o["server"] for o in ops if o["stage"] == 7 and o["action"] == Action.DROP}
        pairs = [p.model_dump() for p in balancer.pairs]
        out["strategy"]["holders"] = avg_shedder_notes(pairs, servers_before, moved)
    return out


def _adds(op: dict) -> bool:
    """Whether an operation adds a replica to its server's projection: a LOAD, or the cancel of a
    queued drop (a ``druid`` plan's); a DROP and the cancel of a queued load take one away."""
    return op["action"] == Action.LOAD or (op["action"] == Action.CANCEL and not op.get("queue_type"))


def avg_shedder_notes(pairs: list[dict], servers_before: dict[str, set[str]], moved_from: set[str]) -> list[dict]:
    """For each server that served a segment at the snapshot (``servers_before``: ``{tier: servers}``),
    what ``avgShedder`` made of it this run: ``tier``, ``server``, ``role`` (``higher``/``lower``
    server of a pair, or ``unpaired``), the ``pair`` (``kernels.shedding.pair_record``, or None) and
    ``note``, a sentence: moved off it, not moved though its pair shed (the decisions say why), a
    pair that waits (and for what), a gap too small, or segments move onto it, not off it.
    ``moved_from``: the servers stage 7 dropped the segment from (a move's source)."""
    notes = []
    for tier, held in sorted(servers_before.items()):
        for server in sorted(held):
            pair = next((p for p in pairs if p["tier"] == tier and server in (p["high"], p["low"])), None)
            role = "unpaired" if pair is None else "higher" if pair["high"] == server else "lower"
            if pair is None:
                note = (
                    f"{server} was paired with no other historical of {tier} this run (an odd middle server, or "
                    "too few historicals): nothing moves off it"
                )
            else:
                gap = (
                    f"pair {pair['high']} ({pair['high_score']:.2f} %) with {pair['low']} ({pair['low_score']:.2f} %), "
                    f"gap {pair['difference']:.2f} points, hit count {pair['hit_count']}"
                )
                if role == "lower":
                    note = f"{server} is the lower server of the {gap}: segments move onto it, not off it"
                elif server in moved_from:
                    note = (
                        f"moved off {server} to {pair['low']}: the {gap}; the pair shed {pair['bytes_moved']:,} "
                        f"of the {pair['bytes_to_move']:,} bytes that equalise it"
                    )
                elif pair["sheds"]:
                    note = (
                        f"stays on {server}: the {gap}; the pair shed, but not this segment "
                        "(stage 7's decision says why)"
                    )
                else:
                    note = f"stays on {server}: the {gap}; {pair['waiting']}"
            notes.append({"tier": tier, "server": server, "role": role, "pair": pair, "note": note})
    return notes


def render_explain(report: dict) -> str:
    """:func:`explain_plan`'s answer as text for a person: the segment, its tiers before and after,
    then stage by stage what it did and, where a stage left the segment undone, why."""
    lines = [
        f"segment {report['segment_id']}",
        f"  datasource {report['datasource']}, {report['size_bytes']} bytes, rule {report['rule_kind'] or 'none'}"
        f"{', unused' if not report['used'] else ''}{', overshadowed' if report['overshadowed'] else ''}"
        f"{', waiting for what overshadows it' if report['waiting'] else ''}",
    ]
    for tier, t in report["tiers"].items():
        lines.append(
            f"  tier {tier}: target {t['target']}, count {t['count_before']} -> {t['count_after']}  "
            f"[{', '.join(t['servers_before']) or '-'}] -> [{', '.join(t['servers_after']) or '-'}]"
        )
    previous: list[str] | None = None
    for st in report["stages"]:
        changed = st["groups"] != previous
        if not (st["operations"] or st["decisions"] or changed):
            continue
        lines.append(f"{st['app']} (stage {st['stage']}):")
        if changed:
            lines.append(f"  groups after: {', '.join(st['groups']) or '-'}; counts {st['counts']}")
        previous = st["groups"]
        for o in st["operations"]:
            dep = f", after op {o['depends_on']}" if o["depends_on"] is not None else ""
            queue = f" ({o['queue_type']} queue)" if o["queue_type"] else ""
            part = o.get("partial")
            part = f", part {part['parts']} ({part['matcher']}, {part['fingerprint']})" if part else ""
            lines.append(
                f"  op {o['op_id']}: {o['action']} on {o['server']} [{o['tier']}]{queue}, reason {o['reason']}{dep}"
                + part
            )
        for d in st["decisions"]:
            where = f" in {d['tier']}" if d["tier"] else ""
            label = "considered" if d["outcome"] in NOTHING_UNDONE else "why not"
            lines.append(f"  {label}{where}: {d['why']}")
            lines += _detail_lines(d["detail"])
    strategy = report.get("strategy", {})
    if strategy.get("name") == "avgShedder":
        lines.append("balancing strategy avgShedder (stage 7):")
        lines += [f"  {h['note']}" for h in strategy.get("holders", [])] or [
            "  the segment was served nowhere at the snapshot"
        ]
    return "\n".join(lines)


def _detail_lines(detail: dict) -> list[str]:
    out = []
    if "tiers" in detail and isinstance(detail["tiers"], dict):
        for tier, sub in detail["tiers"].items():
            out.append(f"    tier {tier}:")
            out += ["  " + line for line in _detail_lines(sub)]
        return out
    facts = {k: v for k, v in detail.items() if k not in ("tried", "tiers", "top_b", "refused", "costs", "threshold")}
    if facts:
        out.append("    " + ", ".join(f"{k} {v}" for k, v in facts.items()))
    if detail.get("top_b"):
        out.append(f"    top B: {', '.join(detail['top_b'])}")
    if isinstance(detail.get("costs"), dict):
        out.append("    placement costs: " + ", ".join(f"{s} {c:.6g}" for s, c in detail["costs"].items()))
    if "threshold" in detail and "source" in detail:
        out.append(
            f"    margin test: a destination must cost below {detail['threshold']:.6g} = "
            f"{detail['costs'].get(detail['source'], float('nan')):.6g} (holder {detail['source']}) "
            f"x (1 - {detail.get('margin', 0)}/100)"
        )
    for server, why in detail.get("tried", []):
        out.append(f"    {server}: {why}")
    for tier, server in detail.get("refused", []):
        out.append(
            f"    dropping from {server} [{tier}] refused: it would leave fewer than {detail.get('required')} "
            "loaded replicas"
        )
    return out
