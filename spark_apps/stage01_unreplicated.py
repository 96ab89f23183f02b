"""Stage 1 (loading): load one replica of every unreplicated segment on one of the top B servers,
primary tier first.

Spark entry point: ``spark-submit spark_apps/stage01_unreplicated.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage01_unreplicated")
