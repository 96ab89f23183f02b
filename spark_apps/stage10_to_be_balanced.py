"""Stage 10 (balancing): move ToBeBalanced segments from servers outside their top B to servers
within it.

Spark entry point: ``spark-submit spark_apps/stage10_to_be_balanced.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage10_to_be_balanced")
