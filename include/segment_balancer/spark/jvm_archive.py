"""A class-data-sharing archive of the Spark driver JVM, so local Spark starts in half the time.

Every stage of the DAG is its own ``spark-submit``: a fresh driver JVM that loads and verifies
some 15,000 classes of Spark's jars before the application's first job. On this machine that is
about 12 s of a trivial submit. HotSpot's application class-data sharing (JDK 13+, JEP 350) maps
the classes of an earlier run from a file instead: with the archive a trivial submit takes about
6 s, and a stage of the DAG saves as much.

The archive is built once per environment (``make venv`` runs :func:`build_archive`), by running the
first applications of the planner (:data:`WORKLOAD`) on the bundled ``druid_sample`` snapshot in a
driver started with ``-XX:ArchiveClassesAtExit``, so it holds what stage applications load. Local drivers then get
``-XX:SharedArchiveFile`` (:func:`local_driver_java_options`). The archive is only an accelerator:
a JVM that cannot use it (another JDK build, another Spark classpath, a damaged file) says so in one
``[warning][cds]`` line and starts the slow way; a missing archive is simply not used.

Run ``python -m segment_balancer.spark.jvm_archive`` to (re)build it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from segment_balancer.common.files import replace_path

#: Environment variable naming the archive file (default: :data:`DEFAULT_ARCHIVE`).
ARCHIVE_ENV = "SEGMENT_BALANCER_JVM_ARCHIVE"
#: Default place of the archive: beside this interpreter's environment (the venv).
DEFAULT_ARCHIVE = Path(sys.prefix) / "share" / "segment_balancer" / "spark-driver.jsa"

#: The log4j 2 configuration of local drivers (``log4j2.properties`` beside this module): Spark's
#: default at WARN, without the three copies of a failed task's stack trace that precede the
#: application's own one-line refusal of a bad input.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

# Short runs: C1-only JIT and the serial collector start faster and spend less CPU than the
# server defaults (about a quarter less per plan).
BASE_DRIVER_JAVA_OPTIONS = (
    f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m -XX:+UseSerialGC -Dlog4j2.configurationFile={LOG4J_CONFIG}"
)

#: Applications run to fill the archive: between them they read and write parquet, join, window,
#: aggregate, run a kernel in ``applyInPandas`` and collect to pandas, as every later stage does.
#: (The whole plan fills it a little more, for half a minute more of build.)
WORKLOAD = ("used_segments", "prepare", "stage01_unreplicated")


def archive_path() -> Path:
    """Where the archive is (or would be): ``$SEGMENT_BALANCER_JVM_ARCHIVE`` or :data:`DEFAULT_ARCHIVE`."""
    return Path(os.environ.get(ARCHIVE_ENV) or DEFAULT_ARCHIVE)


def local_driver_java_options() -> str:
    """JVM options for a driver on a ``local`` master: :data:`BASE_DRIVER_JAVA_OPTIONS`, plus
    ``-XX:SharedArchiveFile=<archive>`` when the archive file exists."""
    path = archive_path()
    if path.is_file() and path.stat().st_size > 0:
        return f"{BASE_DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path}"
    return BASE_DRIVER_JAVA_OPTIONS


def build_archive(path: Path | None = None, snapshot: Path | None = None) -> Path:
    """Build the archive at ``path`` (default :func:`archive_path`) and return it.

    Runs the applications of :data:`WORKLOAD` on ``snapshot`` (default: the bundled
    ``druid_sample``) in a child process whose driver JVM dumps its loaded classes on exit to a
    file beside ``path``, then renames that file over ``path`` (a failed build leaves an existing
    archive as it was). Takes about 50 s and 190 MB. Raises ``RuntimeError`` when the child fails or
    no archive was written.
    """
    path = Path(path or archive_path())
    snapshot = Path(snapshot or Path(__file__).resolve().parents[1] / "snapshots" / "druid_sample")
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    aside.unlink(missing_ok=True)
    java_options = f"{BASE_DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={aside} -Xlog:cds=error,cds+dynamic=error"
    env = {
        **os.environ,
        "PYSPARK_SUBMIT_ARGS": f'--driver-java-options "{java_options}" pyspark-shell',
        "SPARK_MASTER": "local[2]",
    }
    env.pop(ARCHIVE_ENV, None)
    with tempfile.TemporaryDirectory(prefix="segment_balancer-jvm-archive-") as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "segment_balancer.spark.apps", "--workload", ",".join(WORKLOAD), str(snapshot), tmp],
            env=env,
            capture_output=True,
            text=True,
        )
    if done.returncode != 0 or not aside.is_file():
        aside.unlink(missing_ok=True)
        raise RuntimeError(f"building the JVM archive failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    replace_path(aside, path)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m segment_balancer.spark.jvm_archive [PATH]``: build the archive, print where it is."""
    args = sys.argv[1:] if argv is None else argv
    path = build_archive(Path(args[0]) if args else None)
    print(f"JVM class archive for local Spark drivers: {path} ({path.stat().st_size // 2**20} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
