"""What-if edits of a cluster: decommission historicals, remove them (as if lost), add empty ones.

Operators ask "what if I decommission these two historicals?", "what if I add four cold servers?"
(Druid #9087). :func:`apply_what_if` answers on a copy of the snapshot, never on the snapshot itself:

- ``decommission``: the historicals join ``decommissioningNodes`` (the snapshot's, or the config
  overrides' when they set it), so stages 5, 9 and 13 move their segments off.
- ``remove``: the historicals are gone, as if lost. Their ``servers.json`` rows stay, with
  ``server_type`` :data:`REMOVED_TYPE`, so the replica file need not be rewritten (millions of rows):
  the loader keeps a non-historical server's replicas out of the plan, exactly as for a broker.
  Their load queues are dropped.
- ``add``: ``count`` empty historicals of ``tier`` with ``max_size`` bytes each, named
  ``whatif-<tier>-<n>:8083`` (``n`` from 1), priority that of the tier's existing historicals (0 for
  a new tier).

The copy hard-links every file it does not change. The edits are validated against the snapshot
before anything is written: a name that is no historical of ``servers.json``, a historical both
decommissioned and removed, or an added name that exists is a :class:`WhatIfError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from segment_balancer.common.errors import InputError
from segment_balancer.common.files import link_or_copy, replace_dir, write_json_atomic
from segment_balancer.druid.snapshot.loader import QUEUES_FILE, SERVERS_FILE, load_all_servers, read_json
from segment_balancer.planner.config import CONFIG_FILE
from segment_balancer.spark.workdir import RECORD_FILE

REMOVED_TYPE = "removed by what-if"
"""``server_type`` of a removed historical in the edited copy (not ``historical``: ignored by the loader)."""
"""The edits of a run, as applied (:meth:`WhatIf.record`), in the run's work directory; ``assemble``
copies it into ``summary.json`` under ``whatif``."""


class WhatIfError(InputError):
    """The edits do not fit the snapshot (the message names the server and ``servers.json``)."""


class AddHistoricals(BaseModel):
    """``count`` (1–1000) new empty historicals of ``tier``, ``max_size`` bytes each (> 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tier: str = Field(min_length=1)
    count: int = Field(ge=1, le=1000)
    max_size: int = Field(gt=0)


class WhatIf(BaseModel):
    """The edits: server names to ``decommission`` and to ``remove``; historicals to ``add``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    decommission: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    add: tuple[AddHistoricals, ...] = ()

    @classmethod
    def parse(cls, decommission: Any = None, remove: Any = None, add: Any = None) -> WhatIf:
        """Build from loose values (None or a list each; ``add``: dicts ``{tier, count, max_size}``).
        Raises :class:`WhatIfError` naming the bad field."""
        try:
            return cls(decommission=tuple(decommission or ()), remove=tuple(remove or ()), add=tuple(add or ()))
        except (ValidationError, TypeError) as exc:
            raise WhatIfError(f"what-if edits: {exc}") from None

    @property
    def empty(self) -> bool:
        return not (self.decommission or self.remove or self.add)

    def record(self, added: list[str]) -> dict:
        """The JSON record of the edits (``decommission``, ``remove``, ``add``, ``added``: the new names)."""
        return {
            "decommission": list(self.decommission),
            "remove": list(self.remove),
            "add": [a.model_dump() for a in self.add],
            "added": added,
        }


def parse_add(spec: str) -> dict:
    """``TIER:COUNT:MAX_SIZE`` (the CLI's ``--add``; ``MAX_SIZE`` in bytes) as an ``add`` dict.
    Raises :class:`WhatIfError`."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3:
        raise WhatIfError(f"--add {spec!r}: expected TIER:COUNT:MAX_SIZE_BYTES")
    try:
        return {"tier": parts[0], "count": int(parts[1]), "max_size": int(parts[2])}
    except ValueError:
        raise WhatIfError(f"--add {spec!r}: COUNT and MAX_SIZE_BYTES must be integers") from None


def check_historicals(snapshot: Path, named: dict) -> list:
    """The historicals of ``snapshot``'s ``servers.json`` (``Server``, in file order), once every
    name of ``named`` (``{edit: names}``, e.g. ``{"remove": [...]}``) is one of them. Raises
    :class:`WhatIfError` naming the edit, the name, the file and some historicals, for the first
    name that is not."""
    historicals, _ = load_all_servers(snapshot)
    by_name = {s.server for s in historicals}
    for kind, name in ((kind, name) for kind, names in named.items() for name in names):
        if name not in by_name:
            known = ", ".join(sorted(by_name)[:8]) + (", ..." if len(by_name) > 8 else "")
            raise WhatIfError(
                f"{kind}: {name!r} is no historical of {Path(snapshot) / SERVERS_FILE} (historicals: {known})"
            )
    return historicals


def apply_what_if(snapshot: Path, edits: WhatIf, out: Path, overrides: dict | None = None) -> tuple[dict, dict]:
    """Write the edited copy of ``snapshot`` to ``out`` (replaced if present) and return
    ``(overrides, record)``: the config overrides with ``decommissioningNodes`` extended by
    ``edits.decommission`` (the overrides' list if they set one, else the snapshot's
    ``coordinator_config.json``), and :meth:`WhatIf.record` of what was applied.

    Raises :class:`WhatIfError` (nothing written) when a decommissioned or removed name is no
    historical of ``servers.json``, is both, or an added name exists; ``SnapshotError`` from the
    loader when ``servers.json`` itself is invalid; ``WriteError`` when writing the copy fails
    (``out`` then left as it was: ``common.files.replace_dir``).
    """
    snapshot, out = Path(snapshot), Path(out)
    historicals = check_historicals(snapshot, {"decommission": edits.decommission, "remove": edits.remove})
    both = sorted(set(edits.decommission) & set(edits.remove))
    if both:
        raise WhatIfError(f"{both[0]!r} is both decommissioned and removed; choose one")

    rows = read_json(snapshot, SERVERS_FILE)
    taken = {r["server"] for r in rows}
    added: list[dict] = []
    for spec in edits.add:
        priority = next((s.priority for s in historicals if s.tier == spec.tier), 0)
        for n in range(1, spec.count + 1):
            name = f"whatif-{spec.tier}-{n}:8083"
            if name in taken:
                raise WhatIfError(f"add: {name!r} already exists in {snapshot / SERVERS_FILE}")
            taken.add(name)
            added.append(
                {
                    "server": name,
                    "host": name,
                    "server_type": "historical",
                    "tier": spec.tier,
                    "curr_size": 0,
                    "max_size": spec.max_size,
                    "priority": priority,
                }
            )

    removed = set(edits.remove)

    def write_copy(tmp: Path) -> None:
        for entry in snapshot.iterdir():
            if entry.is_file() and entry.name not in (SERVERS_FILE, QUEUES_FILE):
                link_or_copy(entry, tmp / entry.name)
        write_json_atomic(
            [{**r, "server_type": REMOVED_TYPE} if r["server"] in removed else r for r in rows] + added,
            tmp / SERVERS_FILE,
        )
        queues = read_json(snapshot, QUEUES_FILE, required=False)
        if queues is not None:
            if isinstance(queues, dict):
                queues = {name: q for name, q in queues.items() if name not in removed}
            write_json_atomic(queues, tmp / QUEUES_FILE)

    replace_dir(out, write_copy)

    overrides = dict(overrides or {})
    if edits.decommission:
        if "decommissioningNodes" in overrides:
            base = list(overrides["decommissioningNodes"] or [])
        else:
            config = read_json(snapshot, CONFIG_FILE, required=False) or {}
            base = list(config.get("decommissioningNodes") or [])
        overrides["decommissioningNodes"] = base + [n for n in edits.decommission if n not in base]
    return overrides, edits.record([a["server"] for a in added])


def apply_to_run(snapshot: Path, work: Path, edits: WhatIf, overrides: dict | None = None) -> tuple[Path, dict]:
    """Apply ``edits`` for the run of work directory ``work``: the edited copy goes to
    ``work/snapshot-whatif`` and the record to ``work/`` :data:`RECORD_FILE`. Returns the snapshot
    the run plans on and its overrides (``snapshot`` and ``overrides`` unchanged when ``edits`` is
    empty: then nothing is written). Raises as :func:`apply_what_if`."""
    if edits.empty:
        return Path(snapshot), dict(overrides or {})
    copy = Path(work) / "snapshot-whatif"
    overrides, record = apply_what_if(snapshot, edits, copy, overrides)
    write_json_atomic({**record, "snapshot": str(Path(snapshot).resolve())}, Path(work) / RECORD_FILE)
    return copy, overrides
