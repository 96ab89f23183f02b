"""Stage 7 (balancing): move randomly chosen segments onto their top B servers until 80 of the last
100 tries fail.

Spark entry point: ``spark-submit spark_apps/stage07_balancing.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage07_balancing")
