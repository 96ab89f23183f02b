"""The validation gate in a Python process of its own, started before the plan is made.

Importing Great Expectations costs some 6 s of Python (scipy, altair, SQLAlchemy come with it). A
thread importing it beside the planning would hold the GIL against the planning: on a 100-segment
snapshot, planning without Spark takes about 2 s alone and about 7 s beside that import. A child
process imports it on another core instead, then validates each plan it is sent
(:func:`segment_balancer.plan.validation.validate_run`) and answers with the report, or the error,
pickled. The CLI's ``plan`` and every run of a ``simulate`` use one; the DAG's ``validate_plan``
task validates in its own process.

The child is ``python -m segment_balancer.plan.validation_process FD`` (FD: its end of a
``multiprocessing`` pipe): it imports nothing of the caller's main module, so it suits a CLI, a
``spark-submit`` application and an Airflow task alike. It ends when told to, when its pipe closes
(the parent gone) and, from :meth:`ValidationProcess.close`, at once.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
import traceback
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path


class ValidationProcessError(RuntimeError):
    """The validation process ended without answering (killed, out of memory); the message names
    its exit code."""


class ValidationProcess:
    """A child process that imports Great Expectations at once and validates the plans
    :meth:`validate` sends it, one at a time. A context manager: leaving it ends the child."""

    def __init__(self):
        parent, child = Pipe()
        fd = child.fileno()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._conn = parent
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(fd)], pass_fds=[fd], env=env, stdin=subprocess.DEVNULL
        )
        child.close()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the child is still running."""
        return self._proc.poll() is None

    def validate(self, plan_dir: str | Path, work_dir: str | Path) -> dict:
        """:func:`~segment_balancer.plan.validation.validate_run` of ``plan_dir`` in the child:
        returns its report, raises what it raised (``PlanValidationError`` with its report, bad
        input's errors), or :class:`ValidationProcessError` when the child is gone."""
        try:
            self._conn.send((str(plan_dir), str(work_dir)))
            kind, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            code = self._proc.poll()
            raise ValidationProcessError(
                f"the validation process ended without answering (exit code {code})"
                if code is not None
                else f"the validation process does not answer ({exc})"
            ) from exc
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """End the child (at once: nothing it holds is worth waiting for) and its pipe."""
        if self._proc.poll() is None:
            self._proc.terminate()
        self._proc.wait()
        self._conn.close()

    def __enter__(self) -> ValidationProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _portable(exc: BaseException) -> BaseException:
    """``exc`` with the child's traceback as a note, or, when it does not pickle, a
    ``RuntimeError`` naming its type and message."""
    exc.add_note("in the validation process:\n" + "".join(traceback.format_exception(exc)))
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception that does not survive the trip
        portable = RuntimeError(f"{type(exc).__name__}: {exc}")
        portable.__notes__ = exc.__notes__
        return portable


VALIDATING_COMMANDS = ("plan", "simulate", "advise")
"""The CLI's commands whose plans a validation process checks (``python -m segment_balancer``
starts it before anything else)."""

UNUSED_BACKENDS = ("pyspark", "sqlalchemy")
"""Great Expectations' optional back ends that the checks do not use (they run on pandas frames):
the validation process keeps them from importing (``None`` in ``sys.modules``), as if they were
not installed, which GX's ``compatibility`` modules provide for; some 0.6 s less of its import."""

DEFERRED_MODULES = ("scipy.stats",)
"""Modules GX imports at once but the checks do not use (``scipy.stats``: statistical
expectations such as the KL divergence one): the validation process binds them to a module that
runs its code on first use (``importlib.util.LazyLoader``), some 1.2 s less of GX's import. A
check that does use one loads it then."""


def defer(name: str) -> None:
    """Bind the module ``name`` (and its parent's attribute) to one that loads on first attribute
    use, unless it is imported already or cannot be found."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:
        return
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def serve(conn: Connection) -> None:
    """The child's loop: import GX (without :data:`UNUSED_BACKENDS`, :data:`DEFERRED_MODULES`
    loading on first use), then answer each
    ``(plan_dir, work_dir)`` received with ``("report", report)`` or ``("error", exception)``,
    until ``None`` or the pipe's end."""
    for name in UNUSED_BACKENDS:
        sys.modules.setdefault(name, None)
    for name in DEFERRED_MODULES:
        defer(name)
    from segment_balancer.plan import validation

    validation.gx()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        try:
            conn.send(("report", validation.validate_run(*request)))
        except Exception as exc:  # noqa: BLE001 - every error goes back to the caller
            conn.send(("error", _portable(exc)))


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
