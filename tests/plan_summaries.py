"""Hand-written ``summary.json`` contents for tests that need a plan directory without planning one
(publish, history, report, the UI plugin): built through the summary's model
(:class:`segment_balancer.planner.summary.PlanSummary`), so a test summary has the real shape, with
numbers chosen by the test."""

from __future__ import annotations

import json
from pathlib import Path

from segment_balancer.planner.summary import PlanSummary


def whatif_record(
    decommission: tuple[str, ...] = (),
    remove: tuple[str, ...] = (),
    added: tuple[str, ...] = (),
    snapshot: str = "/snapshots/prod",
) -> dict:
    """A summary's ``whatif``: the edits as ``tools.whatif`` records them (``add`` as asked for: one
    entry per added historical, in tier ``hot``)."""
    return {
        "decommission": list(decommission),
        "remove": list(remove),
        "add": [{"tier": "hot", "count": 1, "max_size": 10_000} for _ in added],
        "added": list(added),
        "snapshot": snapshot,
    }


def summary(
    cluster: str = "prod",
    snapshot_time: str = "2024-01-01T00:00:00.000Z",
    *,
    loads: int = 0,
    drops: int = 0,
    moves: int = 0,
    unreplicated: tuple[int, int] = (0, 0),
    underreplicated: tuple[int, int] = (0, 0),
    spread: tuple[int, int] = (0, 0),
    deferred: int = 0,
    waiting: int = 0,
    whatif: dict | None = None,
    tier: str = "hot",
) -> dict:
    """A plan summary of one tier ``tier`` with two historicals (``h1``, ``h2``), as the JSON of a
    :class:`PlanSummary`: ``unreplicated``, ``underreplicated`` and ``spread`` (max − min segments)
    are (before, after) pairs; operations = loads + drops; ``whatif``: a :func:`whatif_record`."""
    model = PlanSummary(
        snapshot_id=f"{cluster}@{snapshot_time}",
        cluster=cluster,
        snapshot_time=snapshot_time,
        snapshot=f"/snapshots/{cluster}/{snapshot_time}",
        operations=loads + drops,
        loads=loads,
        drops=drops,
        moves=moves,
        by_stage_tier_action=([{"stage": 1, "tier": tier, "action": "LOAD", "count": loads}] if loads else [])
        + ([{"stage": 12, "tier": tier, "action": "DROP", "count": drops}] if drops else []),
        by_reason={**({"unreplicated": loads} if loads else {}), **({"overreplicated": drops} if drops else {})},
        status_before={
            "unreplicated": unreplicated[0],
            "tiers": {tier: {"underreplicated": underreplicated[0], "fully_replicated": 5}},
        },
        status_after={
            "unreplicated": unreplicated[1],
            "tiers": {tier: {"underreplicated": underreplicated[1], "fully_replicated": 5}},
        },
        groups_before={
            "Unreplicated": unreplicated[0],
            f"Underreplicated[{tier}]": underreplicated[0],
            f"FullyReplicated[{tier}]": 5,
        },
        groups_after={"StillUnreplicated": unreplicated[1], f"StillUnderreplicated[{tier}]": underreplicated[1]},
        balance_before={
            tier: {"servers": 2, "segments_max_minus_min": spread[0], "bytes_max_minus_min": spread[0] * 1000}
        },
        balance_after={
            tier: {"servers": 2, "segments_max_minus_min": spread[1], "bytes_max_minus_min": spread[1] * 1000}
        },
        servers=[
            {
                "server": f"h{i}",
                "tier": tier,
                "max_size": 10_000,
                "decommissioning": False,
                "segments_before": 5 + i * spread[0],
                "bytes_before": (5 + i * spread[0]) * 1000,
                "segments_after": 5 + i * spread[1],
                "bytes_after": (5 + i * spread[1]) * 1000,
            }
            for i in (0, 1)
        ],
        druid_metrics=[{"metric": "segment/assigned/count", "tier": tier, "value": loads, "at": "plan"}],
        timeline={"per_datasource": {"wiki": {"visible": 5}}, "flag_disagreements": 0, "flag_examples": []},
        availability={"deferred_drops": deferred, "deferred_segments": deferred, "deferred_examples": []},
        overshadowed_waiting={"segments": waiting, "served_replicas": waiting, "per_datasource": {}},
        unlisted={"segments": 0, "served_replicas": 0, "per_datasource": {}, "examples": []},
        alerts=[],
        balancer={
            "strategy": "cost",
            "pairs": [],
            "previous_counts": {},
            "state_warning": None,
            "state_written": whatif is None,
        },
        config={"maxSegmentsInNodeLoadingQueue": 100},
        ignored_config=[],
        whatif=whatif,
        timings_seconds={
            "used_segments": {"stage": 0, "seconds": 0.5, "started_at": "2024-01-01T00:05:00.000000Z"},
            "prepare": {"stage": 0, "seconds": 1.5},
            "stage01_unreplicated": {"stage": 1, "seconds": 0.5},
        },
        planned_at="2024-01-01T00:05:00.000000Z",
    )
    return model.model_dump(mode="json")


def write_plan_dir(path: Path, summary_dict: dict, valid: bool = True) -> Path:
    """A plan directory at ``path`` with ``summary.json`` (``summary_dict`` as given, once it has
    passed :class:`PlanSummary`) and ``validation.json`` (success ``valid``)."""
    PlanSummary.model_validate(summary_dict)  # a test's edits keep the real shape
    path.mkdir(parents=True, exist_ok=True)
    (path / "summary.json").write_text(json.dumps(summary_dict))
    (path / "validation.json").write_text(
        json.dumps(
            {
                "success": valid,
                "checks": [
                    {"name": "capacity", "success": valid, "unexpected_count": 0, "examples": [], "expectations": []}
                ],
            }
        )
    )
    return path


def write_stand_in_operations(path, segment: str) -> None:
    """``path`` (``operations.parquet``): one stand-in LOAD of ``segment``, so that two plans' files
    differ and the report can read the table of operations."""
    import pandas as pd

    pd.DataFrame(
        {
            "op_id": [0],
            "stage": pd.array([1], dtype="int32"),
            "action": ["LOAD"],
            "queue_type": ["loading"],
            "segment_id": [segment],
            "datasource": ["wiki"],
            "tier": ["hot"],
            "server": ["h1"],
            "size_bytes": [10],
            "depends_on": pd.array([None], dtype="float64"),
            "reason": ["unreplicated"],
        }
    ).to_parquet(path)
