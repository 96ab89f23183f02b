"""The ``druid`` coordinator: what the Coordinator of Druid 35.0.0 queues in one run, from the same
snapshot as the algorithm of #7458, so that a plan can say what the cluster's own Coordinator will do
and what #7458 would do instead. The Java source read, duty by duty, and Druid's expected values:
``docs/DRUID_COORDINATOR_NOTES.md``. No Spark here, as in the rest of the planner.
"""
