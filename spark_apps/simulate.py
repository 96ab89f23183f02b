"""What-if simulation after a DAG run (the ``simulate_runs`` param): apply the published plan as a
cluster would, plan again, repeat; see ``segment_balancer.tools.simulate``.

Spark entry point: ``spark-submit spark_apps/simulate.py --snapshot DIR --plan DIR --work DIR
--runs N --out DIR [--config FILE] [--loads-per-run N] [--load-failure-rate P] [--seed N]``.
"""

from segment_balancer.tools.simulate import main

if __name__ == "__main__":
    main()
