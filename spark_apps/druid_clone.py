"""The ``druid`` coordinator (docs/DRUID_COORDINATOR.md), duties 7 and 8: CloneHistoricals and
CollectLoadQueueStats; writes the run's metrics and what every historical holds after it.
Runs when the config key ``coordinator`` is ``druid``; hands the groups on otherwise.

Spark entry point: ``spark-submit spark_apps/druid_clone.py --snapshot DIR --work DIR --groups-in FILE
--groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("druid_clone")
