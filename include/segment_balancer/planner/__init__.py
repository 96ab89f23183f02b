"""The algorithm of Druid issue #7458, with no Spark: the effective config, the
``numBestServersChoosingFunction`` evaluator, the cost function and ranking, the run state
(:mod:`.runstate`), segment groups, replication status, the greedy kernels (:mod:`.kernels`) and
the thirteen stages (:mod:`.stages`). May import :mod:`segment_balancer.druid` and
:mod:`segment_balancer.common`; never ``pyspark`` (an import contract)."""
