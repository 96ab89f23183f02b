"""Both coordinators on one snapshot: after the run's own ``assemble``, the other coordinator
(``issue7458`` or ``druid``) plans the same snapshot from the same prepared tables, in a fork of the
work directory (``WORK/compared_work/<coordinator>/``), when the run asks for it (the DAG param
``compare_with_druid``); otherwise it hands the groups on.

Spark entry point: ``spark-submit spark_apps/compare_coordinators.py --snapshot DIR --work DIR
--groups-in FILE --groups-out FILE [--config FILE]`` (see docs/ARCHITECTURE.md).
"""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("compare_coordinators")
