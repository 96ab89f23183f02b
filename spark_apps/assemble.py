"""Build the plan tables (operations, assignment, groups, summary) from the stages' operation logs.

Spark entry point: ``spark-submit spark_apps/assemble.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("assemble")
