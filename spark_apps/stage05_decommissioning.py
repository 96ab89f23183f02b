"""Stage 5 (decommissioning): move replicated segments away from decommissioning servers (load, then
drop).

Spark entry point: ``spark-submit spark_apps/stage05_decommissioning.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage05_decommissioning")
