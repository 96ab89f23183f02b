"""Every section of ALGORITHM.md that the repository cites is a heading of ``docs/ALGORITHM.md``.

A citation is ``ALGORITHM.md`` followed by section names in double quotes and stage numbers, joined
by commas or "and", optionally after ``, section``: ``ALGORITHM.md "Terms"``, ``ALGORITHM.md stage
7``, ``ALGORITHM.md stages 7, 10, 11``, ``ALGORITHM.md stage 12 and "Availability"``,
``ALGORITHM.md "Stages" 1–6, 8, 9`` (numbers after a name are stages too). A citation may run on
over the next line of a docstring or a comment. ``ALGORITHM.md`` followed by anything else (a
colon, a semicolon, prose) names no section and is not checked; ``ALGORITHM.md table`` or
``ALGORITHM.md, section`` with no name is refused as vague.

A heading answers to its whole text and to the part before its first ``: `` or `` (``; backticks do
not count, and runs of white space are one space. ``stage N`` names the heading ``Stage N``
(``### Stage 7: balancing``). The page says so in its introduction.

Files read, all inside the repository: the Python files of ``include/``, ``plugins/``, ``dags/``,
``spark_apps/``, ``tests/`` and ``benchmarks/``, and ``README.md`` and ``docs/*.md`` (but
``docs/ALGORITHM.md`` itself). This file is left out: its examples are not citations.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ALGORITHM.md"
PYTHON_DIRS = ("include", "plugins", "dags", "spark_apps", "tests", "benchmarks")

_NUMS = r"\d+(?:\s*[–-]\s*\d+|\s*,\s*\d+|\s+and\s+\d+)*"
_LEAD = re.compile(r"`*(?:,?\s+section)?\s+")
_ITEM = re.compile(rf'"(?P<name>[^"]{{1,100}})"(?:\s+(?P<after>{_NUMS}))?|stages?\s+(?P<stages>{_NUMS})')
_SEP = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+")
_VAGUE = re.compile(r'ALGORITHM\.md`*(?:,?\s+section|\s+table)\b(?!\s+")')
_CONTINUATION = re.compile(r"\s*\n[ \t]*(?:#+[ \t]*)?")
"""A line break inside a docstring or a run of comments, with the next line's indent and ``#``."""


def normalize(name: str) -> str:
    """``name`` without backticks, its white space runs one space."""
    return " ".join(name.replace("`", "").split())


def stage_numbers(text: str) -> list[int]:
    """``"7, 10, 11"``, ``"5 and 12"``, ``"1–6, 8, 9"`` → the stage numbers, ranges expanded."""
    out: list[int] = []
    for part in re.split(r"\s*,\s*|\s+and\s+", text.strip()):
        low, _, high = re.sub(r"\s+", "", part).replace("–", "-").partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def cited_sections(text: str) -> list[tuple[int, str]]:
    """``(line, section)`` for every section that ``text`` cites, stages as ``Stage N``."""
    found = []
    for hit in re.finditer(r"ALGORITHM\.md", text):
        line = text.count("\n", 0, hit.start()) + 1
        rest = _CONTINUATION.sub(" ", text[hit.end() : hit.end() + 600])
        lead = _LEAD.match(rest)
        pos = lead.end() if lead else None
        while pos is not None:
            item = _ITEM.match(rest, pos)
            if item is None:
                break
            if item["name"] is not None:
                found.append((line, normalize(item["name"])))
            numbers = item["stages"] or item["after"]
            if numbers:
                found.extend((line, f"Stage {n}") for n in stage_numbers(numbers))
            sep = _SEP.match(rest, item.end())
            pos = sep.end() if sep and _ITEM.match(rest, sep.end()) else None
    return found


def vague_citations(text: str) -> list[int]:
    """Lines where ``text`` cites ALGORITHM.md by ``section`` or ``table`` with no name."""
    return [text.count("\n", 0, hit.start()) + 1 for hit in _VAGUE.finditer(text)]


def heading_names(markdown: str) -> dict[str, str]:
    """Every name of every heading of ``markdown`` (outside fenced code) → the heading's text."""
    names: dict[str, str] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        heading = re.match(r"#{1,6}\s+(.+?)\s*#*\s*$", line)
        if fenced or heading is None:
            continue
        text = normalize(heading[1])
        short = re.split(r": | \(", text, maxsplit=1)[0]
        for name in {text, short}:
            assert names.get(name, text) == text, f"two headings answer to {name!r}: {names[name]!r}, {text!r}"
            names[name] = text
    return names


def citing_files() -> list[Path]:
    """The repository's files that may cite ALGORITHM.md (module docstring)."""
    files = [p for d in PYTHON_DIRS for p in sorted((ROOT / d).rglob("*.py"))]
    files += [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    skipped = (DOC.resolve(), Path(__file__).resolve())
    return [p for p in files if p.is_file() and p.resolve().is_relative_to(ROOT) and p.resolve() not in skipped]


def citations() -> list[tuple[str, str]]:
    """``(file:line, section)`` of every citation in :func:`citing_files`."""
    out = []
    for path in citing_files():
        for line, name in cited_sections(path.read_text(encoding="utf-8")):
            out.append((f"{path.relative_to(ROOT)}:{line}", name))
    return out


def test_every_cited_section_is_a_heading():
    names = heading_names(DOC.read_text(encoding="utf-8"))
    found = citations()
    assert found, "no citation of ALGORITHM.md found: the extractor is broken"
    missing = [f"{where}: {name!r}" for where, name in found if name not in names]
    assert not missing, "sections cited but not headings of docs/ALGORITHM.md:\n" + "\n".join(missing)


def test_no_vague_citation():
    vague = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in citing_files()
        for line in vague_citations(path.read_text(encoding="utf-8"))
    ]
    assert not vague, "ALGORITHM.md cited by 'section' or 'table' with no name:\n" + "\n".join(vague)


def test_every_stage_has_a_heading():
    names = heading_names(DOC.read_text(encoding="utf-8"))
    assert [n for n in range(1, 14) if f"Stage {n}" not in names] == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ('(ALGORITHM.md "Terms": Target).', ["Terms"]),
        (
            'Source: ALGORITHM.md "Terms", "Best servers", "Load-queue limits", "Capacity".',
            ["Terms", "Best servers", "Load-queue limits", "Capacity"],
        ),
        ('Source: ALGORITHM.md, section "Best servers (top B)"; Druid', ["Best servers (top B)"]),
        ("(ALGORITHM.md stage 7; seed 000 stage 7)", ["Stage 7"]),
        ("Source: seed 000 stages 7, 10, 11; ALGORITHM.md stages 7, 10, 11.", ["Stage 7", "Stage 10", "Stage 11"]),
        ('(ALGORITHM.md stage 12 and "Availability"; seed 000)', ["Stage 12", "Availability"]),
        ('(ALGORITHM.md "Availability", "Inputs", stages 5 and 12)', ["Availability", "Inputs", "Stage 5", "Stage 12"]),
        (
            'ALGORITHM.md "Stages" 1–3, 8 and "Best servers".',
            ["Stages", "Stage 1", "Stage 2", "Stage 3", "Stage 8", "Best servers"],
        ),
        ('(ALGORITHM.md\n    "Balancing strategy ``avgShedder``"; seed 002)', ["Balancing strategy avgShedder"]),
        ('# (ALGORITHM.md "Rules of\n    # Druid 38")', ["Rules of Druid 38"]),
        ('    "ALGORITHM.md stage 7",\n    minimum=0, "x"', ["Stage 7"]),
        ('(ALGORITHM.md "Best servers"), the "other" words', ["Best servers"]),
        ("worked out by hand from ALGORITHM.md. Run 1: stage 3", []),
        ("(ALGORITHM.md: the self joint cost is subtracted)", []),
        ("``docs/ALGORITHM.md``) makes", []),
    ],
)
def test_cited_sections_reads_each_form(text, expected):
    assert [name for _, name in cited_sections(text)] == expected


def test_vague_citations_are_found():
    assert vague_citations("limits (ALGORITHM.md table).\nALGORITHM.md, section 3") == [1, 2]
    assert vague_citations('ALGORITHM.md, section "Terms"') == []


def test_heading_names():
    names = heading_names("# Top\n## Best servers (top `B`)\n### Stage 7: balancing\n```\n# not one\n```\n")
    assert names["Best servers"] == names["Best servers (top B)"] == "Best servers (top B)"
    assert names["Stage 7"] == "Stage 7: balancing"
    assert "not one" not in names
