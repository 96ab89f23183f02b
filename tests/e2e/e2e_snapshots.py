"""Two small snapshots for the browser test: ``tests/scenarios/c_decommissioning`` copied as
``early`` and ``late`` with their own ``snapshot_time`` and ``cluster`` (a DAG run on one takes a
minute or two, the bundled snapshots several).

``python tests/e2e/e2e_snapshots.py DIR`` writes them into DIR.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "c_decommissioning"

#: name -> snapshot_time. A run dated 2024-01-02T00:00 plans on ``early``, one dated 2024-01-03 on ``late``.
SNAPSHOTS = {"early": "2024-01-01T00:00:00.000Z", "late": "2024-01-02T12:00:00.000Z"}


def write_snapshots(root: Path) -> dict[str, Path]:
    """Write the snapshots of :data:`SNAPSHOTS` under ``root``; returns name -> directory."""
    root.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, when in SNAPSHOTS.items():
        target = root / name
        shutil.copytree(SCENARIO, target, dirs_exist_ok=True)
        meta = json.loads((target / "snapshot.json").read_text())
        meta.update(snapshot_time=when, cluster=f"e2e-{name}")
        (target / "snapshot.json").write_text(json.dumps(meta, indent=2) + "\n")
        written[name] = target
    return written


if __name__ == "__main__":
    for name, path in write_snapshots(Path(sys.argv[1])).items():
        print(name, path)
