"""The advice of a DAG run (the ``advise_runs`` param): Druid's Coordinator simulated under candidate
configs, ranked, with #7458 beside it; see ``segment_balancer.tools.advise``.

Spark entry point: ``spark-submit spark_apps/advise.py --snapshot DIR --work DIR --runs N --out DIR
[--config FILE] [--seed N]``.
"""

from segment_balancer.tools.advise import main

if __name__ == "__main__":
    main()
