"""Stage 8 (loading): revisit stages 1-4 again, up to the full maxSegmentsInNodeLoadingQueue.

Spark entry point: ``spark-submit spark_apps/stage08_second_revisit.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage08_second_revisit")
