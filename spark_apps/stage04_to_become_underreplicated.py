"""Stage 4 (loading): load ToBecomeUnderreplicated segments on the top B servers found in stage 1 up
to the target.

Spark entry point: ``spark-submit spark_apps/stage04_to_become_underreplicated.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage04_to_become_underreplicated")
