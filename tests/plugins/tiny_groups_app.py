"""A tiny real PySpark application speaking the stage protocol, for the operator tests.

Reads ``--groups-in`` (when given), adds one group ``Stage<N+1>`` whose bitmap is computed with
Spark (every third index below 30 000: ~11 KiB of base64, so one group stays under the 16 KiB
XCom object-storage threshold and two go over it), and writes
``{"groups": {...}, "stage": N+1}`` to ``--groups-out``. Also records the argv it got in
``WORK/tiny_app_argv.json`` and its driver JVM's options in ``WORK/tiny_app_jvm.json``.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--snapshot", "--work", "--groups-out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--groups-in")
    parser.add_argument("--config")
    parser.add_argument("--refusal-out")
    args = parser.parse_args(argv)

    from pyroaring import BitMap
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("tiny_groups_app").getOrCreate()
    indexes = [r.id for r in spark.range(0, 30_000, 3).collect()]
    jvm_args = list(
        spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    spark.stop()

    payload = {"groups": {}, "stage": 0}
    if args.groups_in:
        payload = json.loads(Path(args.groups_in).read_text())
    stage = payload["stage"] + 1
    bitmap = BitMap(indexes)
    payload = {
        "groups": {**payload["groups"], f"Stage{stage}": base64.b64encode(bitmap.serialize()).decode()},
        "stage": stage,
    }
    out = Path(args.groups_out)
    from segment_balancer.common.files import write_json_atomic

    write_json_atomic(payload, out)
    (Path(args.work) / "tiny_app_argv.json").write_text(json.dumps(sys.argv[1:]))
    (Path(args.work) / "tiny_app_jvm.json").write_text(json.dumps(jvm_args))


if __name__ == "__main__":
    main()
