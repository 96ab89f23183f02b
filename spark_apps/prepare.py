"""Stage 0 (after used_segments): build the run's tables, the used-segment index, replication targets and status, and
the start-of-run placement-cost ranking.

Spark entry point: ``spark-submit spark_apps/prepare.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("prepare")
