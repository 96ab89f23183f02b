"""The one exception type of bad input.

:class:`InputError` is what the user can mend: a snapshot, a config override, a SQL dump, a what-if
edit, a flag, a path given. The CLI reports it as ``input refused: <message>`` with exit code 2, and
a DAG task as ``refusal.InputRefused`` (no retry). Every other exception is the tool's own
(an internal error: exit code 1 and a traceback) or the machine's (``OSError``: a full disk).
The errors of each input (``SnapshotError``, ``SqlImportError``, ``WhatIfError``, …) subclass it.
"""

from __future__ import annotations

#: How bad input is reported, before its message: by the CLI (exit code 2) and by a DAG task.
INPUT_REFUSED = "input refused: "


class InputError(ValueError):
    """Bad input: the message names the file or flag, the row or key, the value and what was expected."""
