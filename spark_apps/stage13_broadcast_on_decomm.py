"""Stage 13: unload broadcasted segments from decommissioning servers that hold only broadcasted
segments.

Spark entry point: ``spark-submit spark_apps/stage13_broadcast_on_decomm.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage13_broadcast_on_decomm")
