"""The params of the ``segment_balancing`` DAG (its trigger form) and what a run makes of them.

Every param has a valid default or accepts null, so the Airflow UI triggers and backfills with the
defaults: the form turns an emptied field into null, and refuses null for a type without
``"null"``. Sections of the form:

- *Snapshot*: ``snapshot`` (free text; empty = the newest at or before the run's date), ``cluster``
  (only that cluster's snapshots), ``snapshots_root``. The form proposes the snapshots directly
  under ``snapshots_root`` and the cluster directories of the capture DAG, never the captured
  snapshots themselves: the params are part of the serialized DAG, and a list that changed with
  every capture would make every capture a new DAG version (a new serialized DAG row, and a new
  entry in the scheduler's and the API server's DAG caches, which hold up to 512 versions).
- *Coordinator dynamic config*: one typed field per key operators change (:data:`CONFIG_KEYS`,
  Druid's names; empty = the snapshot's value), ``compare_with_druid`` (on: both coordinators plan
  and the other's plan is published beside the run's), and ``config_overrides`` for any other key.
- *What-if: cluster edits*: ``whatif_decommission``, ``whatif_remove`` (server names, one per line)
  and ``whatif_add`` (``[{"tier", "count", "max_size"}]``, bytes), applied to a copy of the
  snapshot (``segment_balancer.tools.whatif``).
- *What-if simulation*: ``simulate_runs``, ``simulate_loads_per_run``, ``simulate_load_failure_rate``.
- *Which config to set*: ``advise_runs`` (``segment_balancer.tools.advise``).

Parsing the DAG file must stay cheap: :func:`snapshot_examples` lists one directory and reads no file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from airflow.sdk import Param

import segment_balancer
from segment_balancer.planner.config_keys import FORM_KEYS
from segment_balancer.planner.coordinators import COORDINATORS, DEFAULT_COORDINATOR

SNAPSHOT = "Snapshot"
CONFIG = "Coordinator dynamic config"
EDITS = "What-if: cluster edits"
SIMULATION = "What-if simulation"
ADVICE = "Which config to set"

#: How the form shows the choices of ``balancerStrategy``.
_STRATEGY_DISPLAY = {
    "null": "(the snapshot's; cost unless it says)",
    "cost": "cost (Druid's placement cost)",
    "avgShedder": "avgShedder (usage pairs, shed after repeated gaps)",
}

#: How the form shows the choices of ``coordinator``: each one's title (``planner.coordinators``).
_COORDINATOR_DISPLAY = {
    "null": f"(the snapshot's; {DEFAULT_COORDINATOR} unless it says)",
    **{c.name: f"{c.name} ({c.title})" for c in COORDINATORS.values()},
}
_DISPLAY = {"balancerStrategy": _STRATEGY_DISPLAY, "coordinator": _COORDINATOR_DISPLAY}

#: Typed fields of the Coordinator dynamic config: Druid key -> JSON schema (null = the snapshot's
#: value), from the keys' one declaration (``segment_balancer.planner.config_keys``).
CONFIG_KEYS: dict[str, dict[str, Any]] = {
    key.name: {**key.json_schema(), **({"values_display": _DISPLAY[key.name]} if key.name in _DISPLAY else {})}
    for key in FORM_KEYS
}


def default_snapshots_root() -> str:
    """The snapshots root both DAGs default to: ``$SEGMENT_BALANCER_SNAPSHOTS``, else the package's
    bundled snapshots (``make airflow`` sets it to ``var/snapshots``, seeded with the bundled ones)."""
    bundled = Path(segment_balancer.__file__).resolve().parent / "snapshots"
    return os.environ.get("SEGMENT_BALANCER_SNAPSHOTS") or str(bundled)


def snapshot_examples(root: str | os.PathLike, limit: int = 50) -> tuple[list[str], list[str]]:
    """What the trigger form proposes under ``root``: the names of the snapshot directories directly
    under it (``druid_sample``) and of its cluster directories (``prod``, holding the capture DAG's
    ``<cluster>/<time>/``), each sorted, at most ``limit`` (the last by name). Neither changes when a
    capture adds a snapshot. Only directory listings; a missing root gives ([], [])."""
    snapshots, clusters = [], []
    try:
        for d in Path(root).iterdir():
            if not d.is_dir() or d.name.startswith("."):
                continue
            (snapshots if (d / "snapshot.json").is_file() else clusters).append(d.name)
    except OSError:
        return [], []
    return sorted(snapshots)[-limit:], sorted(clusters)[-limit:]


def dag_params(snapshots_root: str) -> dict[str, Param]:
    """The params of ``segment_balancing`` (module docstring), proposing what :func:`snapshot_examples`
    finds under ``snapshots_root``."""
    snapshots, clusters = snapshot_examples(snapshots_root)
    params = {
        "snapshot": Param(
            None,
            type=["null", "string"],
            title="Snapshot",
            section=SNAPSHOT,
            description="A snapshot directory, or its name under snapshots_root (a captured one is "
            "<cluster>/<time>, e.g. prod/2026-11-23T10-00-00Z); empty = the newest snapshot taken at "
            "or before the run's date (backfills replay history).",
            **({"examples": snapshots} if snapshots else {}),
        ),
        "cluster": Param(
            None,
            type=["null", "string"],
            title="Cluster",
            section=SNAPSHOT,
            description="Only snapshots of this cluster (snapshot.json's cluster); empty = any.",
            **({"examples": clusters} if clusters else {}),
        ),
        "snapshots_root": Param(
            snapshots_root,
            type="string",
            minLength=1,
            title="Snapshots root",
            section=SNAPSHOT,
            description="Directory holding the snapshots (one directory each, or "
            "<cluster>/<time>/ as the capture DAG writes them).",
        ),
    }
    for key, schema in CONFIG_KEYS.items():
        params[key] = Param(None, section=CONFIG, **schema)
    params["compare_with_druid"] = Param(
        True,
        type="boolean",
        title="Compare with Druid's own Coordinator",
        section=CONFIG,
        description="Plan with both coordinators (issue7458 and druid, the Coordinator of the cluster's Druid "
        "release), each in its branch of the run, and publish the other's plan beside this one, compared per "
        "tier in the report (compared/<coordinator>/).",
    )
    params["config_overrides"] = Param(
        {},
        type=["null", "object"],
        title="Other config keys",
        section=CONFIG,
        description="Any other Coordinator dynamic config key, as JSON; the typed fields above win.",
    )
    params.update(
        {
            "whatif_decommission": Param(
                [],
                type=["null", "array"],
                items={"type": "string"},
                title="Decommission historicals",
                section=EDITS,
                description="Server names (host:port) to decommission as well, one per line.",
            ),
            "whatif_remove": Param(
                [],
                type=["null", "array"],
                items={"type": "string"},
                title="Remove historicals (as if lost)",
                section=EDITS,
                description="Server names (host:port) gone from the cluster, one per line.",
            ),
            "whatif_add": Param(
                [],
                type=["null", "array"],
                title="Add historicals",
                section=EDITS,
                items={
                    "type": "object",
                    "required": ["tier", "count", "max_size"],
                    "additionalProperties": False,
                    "properties": {
                        "tier": {"type": "string", "minLength": 1},
                        "count": {"type": "integer", "minimum": 1, "maximum": 1000},
                        "max_size": {"type": "integer", "minimum": 1},
                    },
                },
                description='Empty historicals to add, e.g. [{"tier": "cold", "count": 4, "max_size": 10000000000000}] '
                "(max_size in bytes).",
            ),
            "simulate_runs": Param(
                0,
                type="integer",
                minimum=0,
                maximum=100,
                title="Simulated Coordinator runs",
                section=SIMULATION,
                description="0 = plan only. N = after publishing, apply the plan as the cluster would, plan again, "
                "N runs in all (the first is this plan); runs.csv under plans/<run dir>/simulation.",
            ),
            "simulate_loads_per_run": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                title="Loads per historical per run",
                section=SIMULATION,
                description="Loads each historical completes per simulated run; empty = all its queue.",
            ),
            "simulate_load_failure_rate": Param(
                0.0,
                type=["null", "number"],
                minimum=0,
                maximum=1,
                title="Load failure rate",
                section=SIMULATION,
                description="Probability that a simulated load fails (seeded: the same every time); empty = 0.",
            ),
            "advise_runs": Param(
                0,
                type="integer",
                minimum=0,
                maximum=50,
                title="Advice: runs per candidate config",
                section=ADVICE,
                description="0 = no advice. N = after publishing, simulate the cluster's own Coordinator for N runs "
                "under each candidate dynamic config (docs/ADVISOR.md), rank them and publish the config to POST, "
                "with #7458 on the same runs, under plans/<run dir>/advice.",
            ),
        }
    )
    return params


def config_overrides(params: dict) -> dict:
    """The run's Coordinator config overrides: ``config_overrides`` (null = {}), then every typed
    field of :data:`CONFIG_KEYS` that is not null. Raises ``ValueError`` if ``config_overrides``
    is no JSON object, and ``SnapshotError`` (a ``ValueError``) naming ``param config_overrides``,
    the key and the closest known key if it has a key the planner does not know."""
    from segment_balancer.planner.config import check_override_keys

    base = params.get("config_overrides") or {}
    if not isinstance(base, dict):
        raise ValueError(f"config_overrides must be a JSON object, got {type(base).__name__}")
    check_override_keys(base, "param config_overrides")
    return {**base, **{k: params[k] for k in CONFIG_KEYS if params.get(k) is not None}}


def what_if(params: dict):
    """The run's cluster edits (``segment_balancer.tools.whatif.WhatIf``; ``WhatIfError`` when malformed)."""
    from segment_balancer.tools.whatif import WhatIf

    return WhatIf.parse(params.get("whatif_decommission"), params.get("whatif_remove"), params.get("whatif_add"))
