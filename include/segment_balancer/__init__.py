"""segment_balancer: the Druid Coordinator segment balancing/loading plan of Druid issue #7458.

Given a snapshot of a Druid cluster, computes the ordered plan of segment LOADs, moves and DROPs
that the thirteen-stage algorithm of ``shared/seeds/000`` (as decided by ``docs/ALGORITHM.md``) makes.
See ``docs/ARCHITECTURE.md`` for the modules and data contracts.
"""

__version__ = "0.1.0"
