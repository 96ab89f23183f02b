"""Where the time of one CLI command goes: the CLI's own ``main`` in this process, with the time
spent in each of its parts summed over the command (seconds). Prints one table.

Parts: ``applications`` (``spark.apps.run_app``: every stage, duty and assemble), ``validate``
(waiting for the validation process's answer, its GX import included; a simulation waits for a
run's answer after planning the next run), ``publish`` and within it
``report``, and for ``simulate`` ``apply`` (``apply_plan``) and ``run rows`` (``run_row``, the
measures of each run). Usage::

    .venv/bin/python benchmarks/bench_parts.py simulate --snapshot S --out DIR --runs 10
    .venv/bin/python benchmarks/bench_parts.py plan --snapshot S --out DIR

The arguments are the CLI's. ``--per-application`` also prints each application's seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "include"))

PARTS = ["applications", "validate", "publish", "report", "apply", "run rows"]


def timed(
    owner, name: str, label: str, totals: Counter, by_argument: Counter | None = None, main_thread: bool = False
) -> None:
    """Replace ``owner.name`` by a wrapper adding its seconds to ``totals[label]`` (and, with
    ``by_argument``, to ``by_argument[its second positional argument]``: an application's name)."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        started = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            seconds = time.monotonic() - started
            if not main_thread or threading.current_thread() is threading.main_thread():
                totals[label] += seconds
                if by_argument is not None and len(args) > 1:
                    by_argument[args[1]] += seconds

    setattr(owner, name, wrapper)


def main(argv: list[str]) -> int:
    per_application = "--per-application" in argv
    argv = [a for a in argv if a != "--per-application"]
    import segment_balancer.plan.publish as publish
    import segment_balancer.plan.report as report
    import segment_balancer.plan.validation_process as validation_process
    import segment_balancer.spark.apps as apps
    import segment_balancer.tools.simulate as simulate

    totals, per_app = Counter(), Counter()
    timed(apps, "run_app", "applications", totals, per_app)
    timed(validation_process.ValidationProcess, "validate", "validate", totals, main_thread=True)
    timed(simulate._Pending, "wait", "validate", totals)
    timed(publish, "publish_plan", "publish", totals)
    timed(report, "write_report", "report", totals)
    timed(simulate, "apply_plan", "apply", totals)
    timed(simulate, "run_row", "run rows", totals)
    from segment_balancer.tools.cli import main as cli

    started = time.monotonic()
    code = cli(argv)
    wall = time.monotonic() - started
    print(f"{'command':<10}{'wall s':>9}" + "".join(f"{p:>14}" for p in PARTS))
    print(f"{argv[0]:<10}{wall:>9.1f}" + "".join(f"{totals[p]:>14.1f}" for p in PARTS))
    if per_application:
        for name, seconds in per_app.most_common():
            print(f"  {name:<36}{seconds:>8.2f}")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
