"""Stage 6 (loading): revisit stages 1-4 for what is left, with the loading + decommissioning limit.

Spark entry point: ``spark-submit spark_apps/stage06_first_revisit.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage06_first_revisit")
