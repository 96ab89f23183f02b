"""The ``druid`` coordinator (docs/DRUID_COORDINATOR.md), duties 1 to 3: PrepareBalancerAndLoadQueues,
RunRules (the loads, replicas, drops and broadcasts of the rules, segment by segment) and
CollectSegmentStats.
Runs when the config key ``coordinator`` is ``druid``; hands the groups on otherwise.

Spark entry point: ``spark-submit spark_apps/druid_rules.py --snapshot DIR --work DIR --groups-in FILE
--groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("druid_rules")
