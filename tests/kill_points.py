"""Processes killed at a chosen point, for the fault tests (``tests/test_faults.py``).

Run as a script (never imported by a test process that holds a JVM, so that it may fork freely):

- ``python kill_points.py stage SNAPSHOT WORK APP N``: runs the applications of a plan in order on
  one local Spark session, up to ``APP``, writing the XCom ``APP`` gets to ``WORK/xcom-in.json``;
  then runs ``APP`` and SIGKILLs itself at its ``N``-th rename into place (:data:`RENAMES`: a
  table or file written aside, about to be renamed into place: the middle of a write). Exits 0
  if ``APP`` made fewer.
- ``python kill_points.py publish OLD NEW OUT``: for every ``k`` = 1, 2, …: a copy of a plans
  root where plan ``OLD`` is published as ``run-old`` (``LATEST``), then a forked child publishes
  plan ``NEW`` as ``run-new`` and SIGKILLs itself at its ``k``-th file-system step (every
  rename of :data:`RENAMES`, ``os.fsync``, ``shutil.copyfile``, ``os.makedirs``,
  ``tempfile.mkstemp``, ``os.unlink``, ``shutil.rmtree``); the parent records what ``LATEST`` and
  the plan directories hold, publishes ``NEW`` again and records that too. Stops after the first
  ``k`` the child survives. Writes the records as JSON to ``OUT``.
- ``python kill_points.py race A B ROOT ROUNDS``: two forked children publish plans ``A`` and ``B``
  (``B`` the newer) as ``run-a`` and ``run-b`` into ``ROOT`` at the same moment, ``ROUNDS`` times.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from segment_balancer.common import files

#: A rename into place is ``os.replace``/``os.rename`` or, for a directory already there, the swap
#: of ``files._renameat2``.
RENAMES = [(os, "replace"), (os, "rename"), (files, "_renameat2")]
STEPS = [
    *RENAMES,
    (os, "fsync"),
    (shutil, "copyfile"),
    (os, "makedirs"),
    (tempfile, "mkstemp"),
    (os, "unlink"),
    (shutil, "rmtree"),
]


def die_at(n: int, steps=STEPS) -> list[int]:
    """Make the ``n``-th call of any of ``steps`` SIGKILL this process before it runs; returns the
    one-item list counting the calls so far."""
    count = [0]
    for module, name in steps:
        real = getattr(module, name)

        def step(*args, _real=real, **kwargs):
            count[0] += 1
            if count[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return _real(*args, **kwargs)

        setattr(module, name, step)
    return count


def stage(snapshot: Path, work: Path, app: str, n: int) -> None:
    from segment_balancer.planner.coordinators import ISSUE7458

    APP_NAMES = list(ISSUE7458.run_apps)
    from segment_balancer.spark.apps import run_app
    from segment_balancer.spark.session import local_session

    spark = local_session("kill_points")
    xcom = None
    for name in APP_NAMES[: APP_NAMES.index(app)]:
        xcom = run_app(spark, name, snapshot, work, xcom)
    (work / "xcom-in.json").write_text(json.dumps(xcom))
    die_at(n, RENAMES)
    run_app(spark, app, snapshot, work, xcom)


def plan_state(root: Path) -> dict:
    """What a plans root holds: ``LATEST``'s text and, per directory, whether it is a whole plan
    (its files are the ones validated, with a report) and which plan (its summary's cluster)."""
    from segment_balancer.plan.publish import plan_fingerprint

    state: dict = {"latest": (root / "LATEST").read_text() if (root / "LATEST").exists() else None, "dirs": {}}
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            expected = json.loads((d / "validation.json").read_text())["plan_files"]
            whole = plan_fingerprint(d) == expected and (d / "report.html").is_file()
            cluster = json.loads((d / "summary.json").read_text())["cluster"]
        except (OSError, ValueError, KeyError):
            whole, cluster = False, None
        state["dirs"][d.name] = {"whole": whole, "cluster": cluster}
    return state


def publish(old: Path, new: Path, out: Path) -> None:
    from segment_balancer.plan.publish import publish_plan

    base = Path(tempfile.mkdtemp(prefix="kill-points-"))
    template = base / "template"
    publish_plan(old, template / "run-old")
    records = []
    for k in range(1, 1000):
        root = base / f"k{k}"
        shutil.copytree(template, root)
        pid = os.fork()
        if pid == 0:
            die_at(k)
            try:
                publish_plan(new, root / "run-new")
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        after_kill = plan_state(root)
        publish_plan(new, root / "run-new")  # the next run
        records.append({"k": k, "killed": killed, "after_kill": after_kill, "after_next": plan_state(root)})
        if not killed:
            break
    shutil.rmtree(base, ignore_errors=True)
    out.write_text(json.dumps(records, indent=1))


def race(a: Path, b: Path, root: Path, rounds: int) -> None:
    from segment_balancer.plan.publish import publish_plan

    root.mkdir(parents=True, exist_ok=True)
    for _ in range(rounds):
        read, write = os.pipe()
        children = []
        for plan, name in ((a, "run-a"), (b, "run-b")):
            pid = os.fork()
            if pid == 0:
                os.close(write)
                os.read(read, 1)  # both start at once
                try:
                    publish_plan(plan, root / name)
                    os._exit(0)
                except BaseException:  # noqa: BLE001
                    os._exit(1)
            children.append(pid)
        os.close(read)
        os.write(write, b"go")
        os.close(write)
        for pid in children:
            _, status = os.waitpid(pid, 0)
            if os.WEXITSTATUS(status) != 0:
                raise SystemExit(f"a publish failed (status {status})")


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "stage":
        stage(Path(args[0]), Path(args[1]), args[2], int(args[3]))
    elif mode == "publish":
        publish(Path(args[0]), Path(args[1]), Path(args[2]))
    elif mode == "race":
        race(Path(args[0]), Path(args[1]), Path(args[2]), int(args[3]))
    else:
        raise SystemExit(__doc__)
