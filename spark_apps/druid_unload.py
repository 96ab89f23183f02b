"""The ``druid`` coordinator (docs/DRUID_COORDINATOR.md), duties 4 and 5: UnloadUnusedSegments (loads of
unused segments cancelled, served ones dropped) and MarkOvershadowedSegmentsAsUnused.
Runs when the config key ``coordinator`` is ``druid``; hands the groups on otherwise.

Spark entry point: ``spark-submit spark_apps/druid_unload.py --snapshot DIR --work DIR --groups-in FILE
--groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("druid_unload")
