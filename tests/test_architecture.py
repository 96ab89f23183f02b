"""docs/ARCHITECTURE.md matches the tree file for file, and every module says what it is.

The import rules themselves are `lint-imports` contracts (pyproject.toml), run by `make test`;
here: the page that explains them names every module that exists and nothing that does not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "include" / "segment_balancer"
DOC = (REPO / "docs" / "ARCHITECTURE.md").read_text()
STAGE_RANGE = "`planner/stages/s01_unreplicated.py` … `s13_broadcast_on_decomm.py`"


def _section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end > 0 else None]


def _table_paths(section: str) -> set[str]:
    """The file paths the first cell of every table row names; a bare ``name.py`` is in the folder
    of the path before it in the same cell; the stage range names every stage module."""
    paths: set[str] = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        if STAGE_RANGE in cell:
            paths |= {str(p.relative_to(PACKAGE)) for p in (PACKAGE / "planner" / "stages").glob("s[0-9][0-9]_*.py")}
            continue
        folder = ""
        for name in re.findall(r"`([^`]+)`", cell):
            if "/" in name:
                folder = name.rsplit("/", 1)[0]
                paths.add(name)
            elif name.endswith(".py"):
                paths.add(f"{folder}/{name}" if folder else name)
    return paths


def _has_code(path: Path) -> bool:
    """A package's ``__init__.py`` counts as a module when it holds more than its docstring."""
    body = ast.parse(path.read_text()).body
    return len(body) > (1 if body and isinstance(body[0], ast.Expr) else 0)


def _modules() -> set[str]:
    return {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "snapshots" not in p.parts and (p.name != "__init__.py" or _has_code(p))
    }


def test_every_module_is_on_the_page_and_every_module_on_the_page_exists():
    documented = {
        p
        for p in _table_paths(_section("Layout"))
        if p.endswith(".py") and not p.startswith(("dags/", "plugins/", "spark_apps/", "include/", "tests/"))
    }
    modules = _modules()
    assert modules - documented == set(), "modules ARCHITECTURE.md does not name"
    assert documented - modules == set(), "ARCHITECTURE.md names modules that do not exist"


def test_every_dag_and_plugin_file_is_on_the_page_and_exists():
    documented = {
        p for p in _table_paths(_section("Layout")) if p.startswith(("dags/", "plugins/")) and p.endswith(".py")
    }
    files = {
        str(p.relative_to(REPO))
        for d in ("dags", "plugins")
        for p in (REPO / d).rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }
    assert files - documented == set()
    assert documented - files == set()


def test_every_package_has_its_paragraph_and_says_what_it_may_import():
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert packages == ["common", "druid", "plan", "planner", "spark", "tools"]
    section = _section("Packages")
    for name in packages:
        paragraph = re.search(rf"- \*\*`{name}/`\*\* (.+?)(?=\n- \*\*|\n\n)", section, re.S)
        assert paragraph, name
        assert "import" in paragraph.group(1).lower(), name


@pytest.mark.parametrize(
    "path",
    sorted(p for p in PACKAGE.rglob("*.py") if "snapshots" not in p.parts),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_every_module_opens_with_one_line_saying_what_it_is(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and doc.splitlines()[0].strip(), f"{path.relative_to(PACKAGE)} has no opening docstring"


COORDINATOR_NAME_TEST = re.compile(r"""[!=]=\s*["'](issue7458|druid)["']|["'](issue7458|druid)["']\s*(if|[!=]=)\b""")
"""A comparison with a coordinator's name (``== "druid"``, ``"issue7458" if``)."""


def test_no_branch_on_a_coordinators_name_outside_the_registry():
    """Which coordinators there are, and what each does differently, is ``planner.coordinators``'
    alone: no module of the package, plugin or DAG compares a coordinator's name (Druid's own
    coordinator, ``planner/druid_coordinator/``, is the ``druid`` one and never asks)."""
    allowed = {PACKAGE / "planner" / "coordinators.py"}
    files = [*PACKAGE.rglob("*.py"), *(REPO / "plugins").rglob("*.py"), *(REPO / "dags").glob("*.py")]
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in files
        if path not in allowed and "druid_coordinator" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if COORDINATOR_NAME_TEST.search(line)
    ]
    assert not found, found
    assert COORDINATOR_NAME_TEST.search('druid = summary.coordinator == "druid"')
    assert COORDINATOR_NAME_TEST.search("x = 'druid' if d else 'issue7458'")
    assert not COORDINATOR_NAME_TEST.search('tags=["druid", "segment-balancing"]')
