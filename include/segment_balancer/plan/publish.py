"""Atomic publish of a validated plan directory.

``publish_plan(plan_dir, dest_dir)`` copies the plan to a hidden temporary sibling of ``dest_dir``,
writes its ``report.html`` there and renames it into place; an existing ``dest_dir`` is swapped out
in the same step and deleted once the new one is in (:func:`segment_balancer.common.files.replace_dir`).
A ``LATEST`` file beside ``dest_dir`` then names the newest plan published there: of the newest
snapshot, and of two plans of one snapshot the one whose run began later (``summary.json``'s
``snapshot_time`` and ``planned_at``). Runs that publish at once (two DAG runs, a backfill beside
the schedule, the CLI) take a lock on the plans directory for that step, so ``LATEST`` always names
a whole plan and a backfill of old snapshots does not take it from the plan of the newest.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from segment_balancer.common.files import WriteError, is_plain_child, replace_dir, write_text_atomic
from segment_balancer.plan.compare import COMPARED_DIR
from segment_balancer.plan.report import write_report

log = logging.getLogger(__name__)
FINGERPRINTED = ("operations.parquet", "assignment.parquet")


class PublishError(WriteError):
    """The plan was not published (not validated, changed since validation, or an I/O failure)."""


def plan_fingerprint(plan_dir: str | Path) -> dict[str, str]:
    """``{file name: sha256 hex}`` of the validated plan files present in ``plan_dir``."""
    out = {}
    for name in FINGERPRINTED:
        path = Path(plan_dir) / name
        if path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
            out[name] = digest.hexdigest()
    return out


def _check_validated(plan_dir: Path) -> None:
    report_path = plan_dir / "validation.json"
    try:
        report = json.loads(report_path.read_text())
    except FileNotFoundError:
        raise PublishError(f"{plan_dir}: no validation.json; validate the plan first") from None
    except (OSError, ValueError) as exc:
        raise PublishError(f"{report_path}: unreadable ({exc})") from exc
    if not isinstance(report, dict) or report.get("success") is not True:
        failed = (
            [c.get("name") for c in report.get("checks", []) if not c.get("success")]
            if isinstance(report, dict)
            else []
        )
        raise PublishError(f"{plan_dir}: validation did not succeed (failed checks: {failed})")
    expected = report.get("plan_files")
    if expected is not None and plan_fingerprint(plan_dir) != expected:
        raise PublishError(f"{plan_dir}: plan files changed since validation; validate again")


def plan_order(plan_dir: Path) -> tuple[str, str]:
    """``(snapshot_time, planned_at)`` of a published plan (ISO-8601 UTC texts, which sort as
    times): what makes one plan newer than another for ``LATEST``. ``("", "")`` when its
    ``summary.json`` is unreadable (a plan of an older release: any plan is newer)."""
    try:
        summary = json.loads((plan_dir / "summary.json").read_text())
        return str(summary.get("snapshot_time") or ""), str(summary.get("planned_at") or "")
    except (OSError, ValueError, AttributeError):
        return "", ""


@contextmanager
def plans_lock(directory: Path):
    """An exclusive ``flock`` on the plans root ``directory`` itself (no lock file to leave behind)
    while the block runs: what publishing (``LATEST``) and retention take."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _update_latest(parent: Path, name: str) -> str:
    """Make ``parent/LATEST`` name ``name`` unless it names a newer plan (:func:`plan_order`);
    returns the name ``LATEST`` holds after."""
    with plans_lock(parent):
        try:
            current = (parent / "LATEST").read_text().strip()
        except FileNotFoundError:
            current = ""
        if (
            current
            and current != name
            and (parent / current).is_dir()
            and plan_order(parent / current) > plan_order(parent / name)
        ):
            return current
        _write_latest(parent, name)
        return name


def _write_latest(parent: Path, name: str) -> None:
    write_text_atomic(name + "\n", parent / "LATEST", durable=True)


def _check_destination(dest: Path, plans_root: Path | None) -> None:
    """Raise ``PublishError`` unless ``dest`` is a non-hidden direct child of ``plans_root`` (of
    ``dest``'s own parent when None), as written and once resolved."""
    root = plans_root if plans_root is not None else dest.parent
    if not is_plain_child(dest, root):
        raise PublishError(
            f"cannot publish to {dest}: a plan is published as a non-hidden directory right under the plans root {root}"
        )


def publish_plan(plan_dir: str | Path, dest_dir: str | Path, plans_root: str | Path | None = None) -> Path:
    """Publish the validated plan in ``plan_dir`` as ``dest_dir``; return ``dest_dir``.

    ``dest_dir`` must be a plan's own directory: a non-hidden direct child of ``plans_root`` when
    given (the DAG's ``plans/``), of its own parent otherwise, also once resolved; so ``plans/.``,
    ``plans/..`` or a symbolic link out of the root is refused before anything is written.

    Requires ``plan_dir/validation.json`` with ``"success": true`` (and, when it records
    ``plan_files``, unchanged plan files). Every file of ``plan_dir`` except dotfiles is copied
    into place with :func:`replace_dir`, with the plan's ``report.html``
    (:func:`segment_balancer.plan.report.write_report`) written beside them, and the report of
    every other coordinator's plan under ``compared/``: a published plan always has its report.
    ``dest_dir.parent/LATEST`` is then replaced atomically with
    ``"<dest_dir name>\\n"``, unless it names a newer plan (:func:`plan_order`; logged). Raises
    ``PublishError``; on any failure the previously
    published ``dest_dir`` is left as it was and temporaries are removed.
    """
    _check_destination(Path(dest_dir), Path(plans_root) if plans_root is not None else None)
    plan_dir, dest = Path(plan_dir).resolve(), Path(dest_dir).resolve()
    if not plan_dir.is_dir():
        raise PublishError(f"{plan_dir}: not a directory")
    if dest == plan_dir or plan_dir in dest.parents or dest in plan_dir.parents:
        raise PublishError(f"cannot publish {plan_dir} onto {dest}")
    _check_validated(plan_dir)

    def copy(tmp: Path) -> None:
        shutil.copytree(plan_dir, tmp, ignore=shutil.ignore_patterns(".*"), dirs_exist_ok=True)
        for compared in sorted((tmp / COMPARED_DIR).glob("*/")):
            write_report(compared)
        write_report(tmp)

    try:
        replace_dir(dest, copy)
    except WriteError as exc:
        raise PublishError(f"publishing {plan_dir} to {dest} failed: {exc.__cause__ or exc}") from exc
    try:
        latest = _update_latest(dest.parent, dest.name)
        if latest != dest.name:
            log.info(
                "published %s; LATEST still names %s, a newer plan (snapshot time, run start: %s against %s)",
                dest,
                latest,
                plan_order(dest.parent / latest),
                plan_order(dest),
            )
    except OSError as exc:
        raise PublishError(f"{dest} published but LATEST not updated: {exc}") from exc
    log.info("plan published to %s; its report: %s", dest, dest / "report.html")
    return dest
