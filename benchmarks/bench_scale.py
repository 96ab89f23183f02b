"""How a plan scales: the CLI in process and on a warm Spark Connect server, from ``druid_sample`` to
millions of segments.

Each run is ``python -m segment_balancer plan`` in a child process whose process tree (and, on a
Connect server, the server's tree) is sampled every 0.2 s: peak resident (RSS) and, every 2 s,
proportional (PSS) memory **per process kind** (``driver``: the JVM of the Spark driver, in
process or the Connect server; ``workers``: Spark's Python workers and their daemon; ``client``:
the CLI's own Python), and the bytes every process moved through ``read``/``write`` system calls
(``/proc/PID/io`` ``rchar``/``wchar``: files, pipes and sockets alike; memory-mapped reads are not
counted), attributed to the application that ran at the time (``WORK/timings.json``). Per
application it also reports its wall, its Spark jobs (the event log, by job tag) and the bytes it
left in the work directory. Inputs are ``druid_sample`` or a number of segments of
``segment_balancer generate``'s cluster (hourly and daily datasources over years, three tiers, two
historicals lost, one decommissioning, one added empty: a cluster shaped like production), cached
under ``--cache``. ``--plans`` says which plans, each a CLI run of its own: ``issue7458`` (``plan
--coordinator issue7458``: ``used_segments``, ``prepare``, the 13 stages, ``assemble``), ``druid``
(Druid's own Coordinator: ``used_segments``, ``prepare``, its duties, ``assemble``;
``Coordinator.run_apps``) and ``compare`` (``plan --compare``, what a DAG run does: the #7458 plan,
then ``compare_coordinators``, which plans with ``druid`` too and compares); all three by default.

``--machine-cache`` says what the machine's cache holds when a plan starts (stage 0's entries by
the snapshot's content, ``segment_balancer.common.cache``): ``new`` (default: empty, a first run
on the snapshot), ``kept`` (filled by the same plan run once before, unmeasured) or ``off``.

``--simulate SIZE …`` adds ``simulate --runs R`` (``--simulate-runs``, 10) with each coordinator on
those inputs (``8200``: the 8k simulation), in process: its wall, JVMs and peak memory. Usage::

    .venv/bin/python benchmarks/bench_scale.py [--sizes druid_sample 20000 100000 1000000] [--modes local connect]
        [--plans issue7458 druid compare] [--simulate 8200] [--simulate-runs 10]

Mode ``cluster`` (on request) runs the CLI's driver in process on a Spark standalone cluster of two
workers of one core each on this machine, and says how each application's tasks divided over the
two executors (tasks and task seconds, from the event log): the scale-out the applications keep.
The driver, the master, the workers and the executors are all JVMs (kind ``driver``).

(10M on request: ``--sizes 10000000 --modes local``: the 1M cluster copied ten times over,
``replicate_snapshot.py``, as ``generate`` cannot hold 10M segments in 24 GiB.) The output for this machine is kept in
``benchmarks/README.md``; never a timed assertion in a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_overhead  # noqa: E402
from bench_overhead import SNAPSHOTS, TAG, snapshot_for, start_cluster, start_server  # noqa: E402

from segment_balancer.planner.coordinators import (  # noqa: E402
    COMPARE_APP,
    COORDINATORS,
    DEFAULT_COORDINATOR,
    stage_number,
)

PLANS = (*COORDINATORS, "compare")
"""What ``--plans`` may name: a coordinator's plan, or ``compare`` (``plan --compare``)."""


def plan_args(plan: str) -> tuple[list[str], list[str]]:
    """``(CLI options, applications in run order)`` of the plan ``plan`` (one of :data:`PLANS`)."""
    if plan == "compare":
        return ["--coordinator", DEFAULT_COORDINATOR, "--compare"], [
            *COORDINATORS[DEFAULT_COORDINATOR].run_apps,
            COMPARE_APP,
        ]
    return ["--coordinator", plan], list(COORDINATORS[plan].run_apps)


KINDS = ("driver", "workers", "client")


def kind_of(proc: psutil.Process, root_pid: int) -> str:
    """``driver`` (a JVM), ``workers`` (Spark's Python daemon and workers) or ``client``."""
    try:
        if proc.name() == "java":
            return "driver"
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "client"
    return "workers" if "pyspark.daemon" in cmd or "pyspark.worker" in cmd else "client"


class Watch(bench_overhead.Watch):
    """Samples process trees until the root ends: peak RSS and PSS per kind (sum over the kind's
    processes at one instant), the JVMs started, and per sample the summed ``rchar``/``wchar``
    counters per process (for the bytes moved between two instants); ``run`` as the parent's, the
    command given ``cli_args`` at its end (the coordinator)."""

    def __init__(self, extra_pids: list[int] | None = None, cli_args: list[str] | None = None):
        self.extra = [psutil.Process(p) for p in extra_pids or []]
        self.cli_args = list(cli_args or [])
        self.peak = dict.fromkeys(KINDS, 0)
        self.peak_pss = dict.fromkeys(KINDS, 0)
        self.peak_total = self.peak_total_pss = 0
        self.jvms: set[int] = set()
        self.io: list[tuple[float, dict[int, tuple[int, int]]]] = []
        self.pss_at = 0.0

    def sample(self, root: psutil.Process) -> None:
        rss, pss, io, with_pss = defaultdict(int), defaultdict(int), {}, False
        for p, top, p_rss, p_pss in self.processes(root):
            kind = kind_of(p, root.pid)
            rss[kind] += p_rss
            if p_pss is not None:
                pss[kind] += p_pss
                with_pss = True
            try:
                counters = p.io_counters()
                io[p.pid] = (counters.read_chars, counters.write_chars)
            except psutil.Error:
                pass
            if kind == "driver" and top is root:
                self.jvms.add(p.pid)
        for kind in KINDS:
            self.peak[kind] = max(self.peak[kind], rss[kind])
            self.peak_pss[kind] = max(self.peak_pss[kind], pss[kind])
        self.peak_total = max(self.peak_total, sum(rss.values()))
        if with_pss:
            self.peak_total_pss = max(self.peak_total_pss, sum(pss.values()))
        self.io.append((time.time(), io))

    def run(self, cmd: list[str], env: dict, log: Path, timeout: float) -> int:
        return super().run([*cmd, *self.cli_args], env, log, timeout)

    def moved(self, since: float, until: float) -> tuple[int, int]:
        """Bytes read and written through system calls between two instants (epoch s), summed over
        the processes sampled at both ends of each interval."""
        read = written = 0
        for (t0, a), (t1, b) in zip(self.io, self.io[1:]):
            if t1 <= since or t0 >= until:
                continue
            for pid, (r, w) in b.items():
                if pid in a:
                    read += max(0, r - a[pid][0])
                    written += max(0, w - a[pid][1])
        return read, written


def app_windows(work: Path, apps: list[str]) -> dict[str, tuple[float, float]]:
    """``{application: (start, end)}`` (epoch s) of the run's applications ``apps`` from
    ``timings.json``: they ran one after another from the first one's ``started_at``."""
    from datetime import datetime

    timings = json.loads((work / "timings.json").read_text())
    start = datetime.fromisoformat(timings[apps[0]]["started_at"].replace("Z", "+00:00")).timestamp()
    out = {}
    for name in apps:
        seconds = timings.get(name, {}).get("seconds", 0.0)
        out[name] = (start, start + seconds)
        start += seconds
    return out


def written_per_app(work: Path, apps: list[str]) -> dict[str, int]:
    """Bytes each of the run's applications ``apps`` left in the work directory: ``timeline/``
    (used_segments), ``prepared/`` and ``state/00_*`` (prepare), ``passes/NN_*``,
    ``ops/stage_NN_*``, ``state/NN_*`` (the application of stage NN: ``stageNN_*``, or the
    ``druid`` coordinator's, ``planner.coordinators.stage_number``), ``druid/`` (the ``druid``
    coordinator's: ``druid/<application>*`` that application's, the rest its last one's),
    ``plan/`` (assemble)."""
    by_stage = {stage_number(n): n for n in apps if 1 <= stage_number(n) <= 13}
    druid_apps = [n for n in apps if n.startswith("druid")]
    out: dict[str, int] = defaultdict(int)
    for path in work.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(work).parts
        name = None
        if rel[0] == "timeline":
            name = "used_segments"
        elif rel[0] == "prepared" or (rel[0] == "state" and rel[1].startswith("00_")):
            name = "prepare"
        elif rel[0] in ("passes", "state") and rel[1][:2].isdigit():
            name = by_stage.get(int(rel[1][:2]))
        elif rel[0] == "ops" and rel[1].startswith("stage_"):
            name = by_stage.get(int(rel[1][6:8]))
        elif rel[0] == "druid" and druid_apps:
            name = next((n for n in druid_apps if rel[1].split(".")[0] == n), druid_apps[-1])
        elif rel[0] == "plan":
            name = "assemble"
        if name:
            out[name] += path.stat().st_size
    return dict(out)


MACHINE_CACHE = {
    "new": "an empty one, so stage 0 reads the snapshot and keeps what it found (a first run; the default)",
    "kept": "what the same plan, run once unmeasured before, kept (a later run on the same snapshot)",
    "off": "none: nothing is kept or taken",
}


def machine_cache(how: str, directory: Path) -> None:
    """Point the CLI's machine cache (``SEGMENT_BALANCER_CACHE``, inherited by the child process)
    at ``directory`` emptied (``new``), as it is (``kept``), or turn it off (``off``)."""
    import shutil

    from segment_balancer.common.cache import CACHE_ENV, CACHE_OFF

    if how == "off":
        os.environ[CACHE_ENV] = CACHE_OFF
        return
    if how == "new":
        shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    os.environ[CACHE_ENV] = str(directory)


def run_cli(snapshot: Path, mode: str, tmp: Path, server, timeout: float, plan: str = DEFAULT_COORDINATOR) -> dict:
    """:func:`bench_overhead.run_cli` with this script's :class:`Watch` (the CLI making the plan
    ``plan``, :func:`plan_args`), and per application the bytes left in the work directory and
    moved through system calls."""
    since = int(time.time() * 1000)
    options, apps = plan_args(plan)
    run = bench_overhead.run_cli(snapshot, mode, tmp, server, timeout, lambda pids: Watch(pids, options))
    work, watch = run.pop("work"), run.pop("watch")
    share = executor_share(tmp / "events", since) if mode == "cluster" else {}
    return {
        **run,
        "plan": plan,
        "apps_in_order": apps,
        "total": watch.peak_total,
        "total_pss": watch.peak_total_pss,
        "written": written_per_app(work, apps),
        "moved": {name: watch.moved(*window) for name, window in app_windows(work, apps).items()},
        "share": share,
    }


def executor_share(events: Path, since_ms: int) -> dict[str, dict[str, tuple[int, float]]]:
    """``{application: {executor id: (tasks, task seconds)}}`` of the tasks that ended after
    ``since_ms`` in the event logs under ``events`` (a task's application: its job's tag)."""
    app_of_stage: dict[int, str] = {}
    ended = []
    for log in events.rglob("*"):
        if not log.is_file():
            continue
        for line in open(log, errors="replace"):
            if '"SparkListenerJobStart"' in line:
                event = json.loads(line)
                tag = TAG.search(event.get("Properties", {}).get("spark.job.tags", "") or "")
                if tag and event.get("Submission Time", 0) >= since_ms:
                    app_of_stage.update(dict.fromkeys(event["Stage IDs"], tag.group(1)))
            elif '"SparkListenerTaskEnd"' in line:
                ended.append(json.loads(line))
    out: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for event in ended:
        app = app_of_stage.get(event["Stage ID"])
        if app is None:
            continue
        info = event["Task Info"]
        share = out[app][info["Executor ID"]]
        share[0] += 1
        share[1] += (info["Finish Time"] - info["Launch Time"]) / 1000
    return {app: {ex: (n, sec) for ex, (n, sec) in sorted(by.items())} for app, by in out.items()}


def gib(n: int) -> str:
    return f"{n / 2**30:.2f}"


def mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def print_tables(results: list[tuple[str, str, dict]]) -> None:
    print(
        f"{'input':<14} {'mode':<8} {'plan':<10} {'wall s':>7} {'JVMs':>5} {'jobs':>5} {'ops':>8} "
        f"{'RSS GiB':>8} {'PSS GiB':>8}   " + "  ".join(f"{k + ' RSS/PSS':>18}" for k in KINDS)
    )
    for name, mode, r in results:
        print(
            f"{name:<14} {mode:<8} {r['plan']:<10} {r['wall']:>7.1f} {r['jvms']:>5} {sum(r['jobs'].values()):>5} "
            f"{r['ops']:>8} "
            f"{gib(r['total']):>8} {gib(r['total_pss']):>8}   "
            + "  ".join(f"{gib(r['peak'][k]) + ' / ' + gib(r['pss'][k]):>18}" for k in KINDS)
        )
    print()
    for name, mode, r in results:
        apps = r["apps_in_order"]
        print(
            f"{name}, {mode}, plan {r['plan']}: per application (s; Spark jobs; MiB written "
            f"to the work directory; MiB read / written through system calls by every process meanwhile)"
        )
        print(f"  {'application':<34} {'s':>7} {'jobs':>5} {'work MiB':>9} {'read MiB':>9} {'write MiB':>9}")
        for app in apps:
            sec = r["apps"].get(app)
            read, written = r["moved"].get(app, (0, 0))
            print(
                f"  {app:<34} {'-' if sec is None else f'{sec:.2f}':>7} {r['jobs'].get(app, 0):>5} "
                f"{mib(r['written'].get(app, 0)):>9} {mib(read):>9} {mib(written):>9}"
            )
        untagged = r["jobs"].get(None, 0)
        rest = r["wall"] - sum(v for v in r["apps"].values())
        print(f"  {'(outside the applications)':<34} {rest:>7.2f} {untagged:>5}")
        print()
        if r["share"]:
            executors = sorted({ex for by in r["share"].values() for ex in by})
            print(f"{name}, {mode}: each application's tasks per executor (tasks / task seconds)")
            print(f"  {'application':<34} " + " ".join(f"{'executor ' + ex:>18}" for ex in executors))
            for app in apps:
                if app in r["share"]:
                    by = r["share"][app]
                    print(
                        f"  {app:<34} "
                        + " ".join(f"{f'{by[ex][0]} / {by[ex][1]:.1f}' if ex in by else '-':>18}" for ex in executors)
                    )
            print()


def run_simulate(snapshot: Path, mode: str, tmp: Path, server, timeout: float, coordinator: str, runs: int) -> dict:
    """One ``simulate --runs runs --coordinator coordinator`` of ``snapshot`` through the CLI under
    ``tmp`` (emptied first), in process or on the Connect server ``server``: its wall (s), JVMs,
    Spark jobs and peak RSS/PSS (bytes) in all and per process kind."""
    import shutil

    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / "simulation"
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    cmd = [sys.executable, "-m", "segment_balancer", "simulate", "--snapshot", str(snapshot)]
    cmd += ["--out", str(out), "--runs", str(runs), "--coordinator", coordinator]
    if mode == "connect":
        cmd += ["--remote", server.url]
    events, watch = bench_overhead.observe(mode, tmp, env, server, Watch)
    since = int(time.time() * 1000)
    started = time.monotonic()
    rc = watch.run(cmd, env, tmp / "cli.log", timeout)
    wall = time.monotonic() - started
    if rc != 0:
        raise RuntimeError(f"simulate failed ({rc}); see {tmp / 'cli.log'}:\n" + (tmp / "cli.log").read_text()[-3000:])
    return {
        "coordinator": coordinator,
        "runs": runs,
        "wall": wall,
        "jvms": len(watch.jvms),
        "jobs": sum(bench_overhead.jobs_per_app(events, since).values()),
        "total": watch.peak_total,
        "total_pss": watch.peak_total_pss,
        "peak": watch.peak,
        "pss": watch.peak_pss,
    }


def print_simulations(results: list[tuple[str, str, dict]]) -> None:
    print(
        f"{'input':<14} {'mode':<8} {'simulate':<10} {'runs':>5} {'wall s':>7} {'s/run':>6} {'JVMs':>5} {'jobs':>5} "
        f"{'RSS GiB':>8} {'PSS GiB':>8}"
    )
    for name, mode, r in results:
        print(
            f"{name:<14} {mode:<8} {r['coordinator']:<10} {r['runs']:>5} {r['wall']:>7.1f} "
            f"{r['wall'] / r['runs']:>6.1f} {r['jvms']:>5} {r['jobs']:>5} {gib(r['total']):>8} {gib(r['total_pss']):>8}"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes",
        nargs="*",
        default=["druid_sample", "20000", "100000", "1000000"],
        help="druid_sample or a number of generated segments (none: --sizes with no value)",
    )
    parser.add_argument("--modes", nargs="+", choices=["local", "connect", "cluster"], default=["local", "connect"])
    parser.add_argument(
        "--plans",
        nargs="+",
        choices=PLANS,
        default=list(PLANS),
        help="which plans, each a CLI run: a coordinator's (plan --coordinator C) or compare (plan --compare)",
    )
    parser.add_argument(
        "--simulate", nargs="*", default=[], metavar="SIZE", help="also simulate these inputs with each coordinator"
    )
    parser.add_argument("--simulate-runs", type=int, default=10, help="runs of each simulation (default 10)")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "segment_balancer-bench")
    parser.add_argument(
        "--machine-cache",
        choices=MACHINE_CACHE,
        default="new",
        help="the machine cache each plan finds (segment_balancer.common.cache): "
        + "; ".join(f"{k}: {v}" for k, v in MACHINE_CACHE.items()),
    )
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    results, simulations = [], []
    with tempfile.TemporaryDirectory(prefix="bench_scale-") as tmp:
        tmp = Path(tmp)
        for mode in args.modes:
            server = None
            try:
                if mode == "connect":
                    server, seconds = start_server(tmp)
                    print(f"Spark Connect server started and answering in {seconds:.1f} s", file=sys.stderr)
                    run_cli(SNAPSHOTS / "druid_sample", "connect", tmp / "warm", server, args.timeout)
                elif mode == "cluster":
                    server, seconds = start_cluster(tmp)
                    print(f"standalone cluster started in {seconds:.1f} s: {server.master_url}", file=sys.stderr)
                for name in args.sizes:
                    snap = snapshot_for(name, args.cache)
                    for plan in args.plans:
                        where = tmp / f"{mode}-{name}-{plan}"
                        machine_cache(args.machine_cache, tmp / "machine-cache")
                        if args.machine_cache == "kept":
                            print(f"filling the machine cache: {name} {mode} {plan}", file=sys.stderr, flush=True)
                            run_cli(snap, mode, where, server, args.timeout, plan)
                        r = run_cli(snap, mode, where, server, args.timeout, plan)
                        results.append((name, mode, r))
                        print(f"done: {name} {mode} {plan}: {r['wall']:.1f} s", file=sys.stderr, flush=True)
                if mode == "cluster":
                    continue
                for name in args.simulate:
                    snap = snapshot_for(name, args.cache)
                    for coordinator in COORDINATORS:
                        machine_cache(args.machine_cache, tmp / "machine-cache")
                        r = run_simulate(
                            snap,
                            mode,
                            tmp / f"sim-{mode}-{name}-{coordinator}",
                            server,
                            args.timeout,
                            coordinator,
                            args.simulate_runs,
                        )
                        simulations.append((name, mode, r))
                        print(
                            f"done: simulate {name} {mode} {coordinator}: {r['wall']:.1f} s",
                            file=sys.stderr,
                            flush=True,
                        )
            finally:
                if server is not None:
                    server.stop()
    if results:
        print_tables(results)
    if simulations:
        print_simulations(simulations)


if __name__ == "__main__":
    main()
