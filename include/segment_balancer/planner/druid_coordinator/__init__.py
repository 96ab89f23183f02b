"""The ``druid`` coordinator: what the Coordinator of Druid 38.0.0 or 35.0.0 (``DruidConfig.release``)
queues in one run, from the same snapshot as the algorithm of #7458, so that a plan can say what the
cluster's own Coordinator will do and what #7458 would do instead. Druid's classes it reproduces,
where each is in Druid's source, and Druid's expected values: ``docs/DRUID_COORDINATOR_NOTES.md``.
No Spark here, as in the rest of the planner.
"""
