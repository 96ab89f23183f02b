"""Stage 9 (decommissioning): repeat stage 5 for StillLoadedOnDecommServers segments, up to
decommissioningMaxPercent.

Spark entry point: ``spark-submit spark_apps/stage09_still_loaded_on_decomm.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage09_still_loaded_on_decomm")
