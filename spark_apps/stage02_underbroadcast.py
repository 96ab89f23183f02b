"""Stage 2 (loading): load underbroadcasted segments on every server of the tier that does not hold
them yet.

Spark entry point: ``spark-submit spark_apps/stage02_underbroadcast.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage02_underbroadcast")
