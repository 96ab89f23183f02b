"""Tables at any terminal width (``tools.terminal``): a cell is never cut."""

from __future__ import annotations

import io

from rich.console import Console

from segment_balancer.tools.terminal import fits, print_table

NAME = "manual__2026-11-26T20_35_53.530739_00_00~d25a42c734de"
HEADERS = ["plan", "snapshot time", "cluster", "operations", "unreplicated after", "underreplicated after"]
ROWS = [[NAME, "2026-11-01T00:00:00.000Z", "generated-7458", "14,700 (+0)", "0 (+0)", "592 (-3)"]]


def printed(width: int) -> str:
    out = io.StringIO()
    print_table(Console(file=out, width=width, color_system=None), HEADERS, ROWS, numeric_from=3)
    return out.getvalue()


def test_narrow_terminals_get_a_block_per_row_with_the_name_whole():
    text = printed(80)
    lines = text.splitlines()
    assert lines[0] == f"plan {NAME}"
    assert all(len(line) <= 80 for line in lines[1:])
    assert "…" not in text
    assert "underreplicated after 592 (-3)" in " ".join(line.strip() for line in lines[1:])


def test_wide_terminals_get_the_table_with_every_cell_whole():
    assert not fits(HEADERS, ROWS, 80) and fits(HEADERS, ROWS, 200)
    text = printed(200)
    assert NAME in text and "14,700 (+0)" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 200
