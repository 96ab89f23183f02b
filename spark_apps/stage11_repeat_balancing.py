"""Stage 11 (balancing): repeat stage 7 up to the full maxSegmentsInNodeLoadingQueue, skipping
segments visited in stage 7.

Spark entry point: ``spark-submit spark_apps/stage11_repeat_balancing.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage11_repeat_balancing")
