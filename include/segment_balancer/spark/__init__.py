"""Spark glue: the session (:mod:`.session`), the applications of a run (:mod:`.apps`), the work
directory and its run state on disk (:mod:`.workdir`, :mod:`.state_store`), the per-tier passes
the stages schedule through (:mod:`.tierpass`, :mod:`.stage_run`), the whole-cluster Spark jobs
(stage 0, stage 3's callbacks, stage 12, status, assemble) and the Connect and standalone
servers. May import :mod:`segment_balancer.planner`, :mod:`segment_balancer.druid` and
:mod:`segment_balancer.common`."""
