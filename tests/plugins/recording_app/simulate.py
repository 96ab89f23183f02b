"""Stands in for ``spark_apps/simulate.py`` in the operator tests: writes the argv it got, as JSON,
to ``<--out>/argv.json`` (no Spark session: only the submit is under test)."""

import json
import sys
from pathlib import Path

if __name__ == "__main__":
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "argv.json").write_text(json.dumps(sys.argv[1:]))
