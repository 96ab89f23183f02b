"""Stage 12: unload excessively overreplicated segments (and segments a drop rule applies to).

Spark entry point: ``spark-submit spark_apps/stage12_unload.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage12_unload")
