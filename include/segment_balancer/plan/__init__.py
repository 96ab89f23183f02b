"""The published plan: the Great Expectations gate (:mod:`.validation`), the atomic publish, the
plan history, the HTML report and ``explain``. May import every package below it
(:mod:`segment_balancer.spark`, ``planner``, ``druid``, ``common``)."""
