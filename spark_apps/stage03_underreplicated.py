"""Stage 3 (loading): load underreplicated segments on the top B servers of the tier up to the target
replication count.

Spark entry point: ``spark-submit spark_apps/stage03_underreplicated.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("stage03_underreplicated")
