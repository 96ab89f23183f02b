"""The ``druid`` coordinator: what Druid 35.0.0's own Coordinator queues in one run, on the tables
``prepare`` wrote (docs/DRUID_COORDINATOR.md); takes the stages' place when the config key
``coordinator`` is ``druid``, and does nothing otherwise.

Spark entry point: ``spark-submit spark_apps/druid_coordinator.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("druid_coordinator")
