"""No file of the repository names a path that exists only on one development machine.

Every file ``git ls-files`` lists is read as text (binary files, Parquet, gzip and images are
skipped) and searched for the roots of such paths (:data:`PATTERNS`: a workspace, home directories,
a mirrored source, a shell's job directories, the system's temporary directory). A root counts only
where a path starts: a run's work directory under a configured home (``<run dir>/work``) is not
one. The temporary directory is allowed on the lines of a documented ``segment_balancer`` command,
whose example output directories are scratch directories made when the command runs. A failure
names each ``file:line``.

Outside a git checkout (an sdist, an unpacked wheel) there is no list of files: the test is skipped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Built from pieces, so that this file, which git lists too, names none of them.
_START = r"(?<![\w.\-<>])"
PATTERNS = {
    "/" + "work/": re.compile(_START + "/" + "work/"),
    "/" + "home/": re.compile(_START + "/" + "home/"),
    "/" + "root/": re.compile(_START + "/" + "root/"),
    "/" + "Users/": re.compile(_START + "/" + "Users/"),
    "." + "mirror/": re.compile(r"\." + "mirror/"),
    "bash" + "_jobs": re.compile("bash" + "_jobs"),
    "/" + "tmp/": re.compile(_START + "/" + "tmp/"),
}
TMP = "/" + "tmp/"
COMMAND_LINE = re.compile(r"segment_balancer\b|^\s+--")
"""A line that runs a ``segment_balancer`` command, or continues one (indented, an option first)."""

SKIPPED_SUFFIXES = (".parquet", ".gz", ".png", ".jpg", ".jpeg", ".gif", ".ico", ".zip", ".jar", ".whl", ".pyc")


def tracked_files() -> list[Path] | None:
    """The files git lists for the checkout :data:`ROOT` is the top of; None outside one."""
    git = shutil.which("git")
    if git is None:
        return None
    top = subprocess.run([git, "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != ROOT:
        return None
    listed = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [ROOT / name for name in listed.stdout.decode("utf-8").split("\0") if name]


def text_of(path: Path) -> str | None:
    """The file's text; None for a binary file or one that is not there (deleted, not committed)."""
    if path.name.endswith(SKIPPED_SUFFIXES) or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def machine_paths(text: str) -> list[tuple[int, str]]:
    """``(line number, pattern)`` of every machine path in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for name, pattern in PATTERNS.items():
            if not pattern.search(line):
                continue
            if name == TMP and COMMAND_LINE.search(line):
                continue
            found.append((number, name))
    return found


def test_the_patterns_tell_machine_paths_from_others():
    assert machine_paths("see " + "/" + "work/shared/data/x.sql") == [(1, "/" + "work/")]
    assert machine_paths("`" + "/" + "tmp/bash" + "_jobs.1000/1/stdout`")[0] == (1, "bash" + "_jobs")
    assert machine_paths("the checkout in " + "." + "mirror/owner+name") == [(1, "." + "mirror/")]
    assert machine_paths("works in `$HOME/runs/<run dir>/" + "work/` and publishes") == []
    assert machine_paths("python -m segment_balancer summary " + "/" + "tmp/plan") == []
    assert machine_paths("a scratch copy in " + "/" + "tmp/x") == [(1, "/" + "tmp/")]


def test_no_tracked_file_names_a_development_machine_path():
    files = tracked_files()
    if files is None:
        pytest.skip("not a git checkout (no git, or the tests are not at the top of one): no list of files")
    found = []
    for path in files:
        text = text_of(path)
        if text is None:
            continue
        for number, name in machine_paths(text):
            found.append(f"{path.relative_to(ROOT)}:{number}: {name}")
    assert not found, "development-machine paths in tracked files:\n" + "\n".join(found)
