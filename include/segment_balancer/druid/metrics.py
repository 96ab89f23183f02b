"""The names of the metrics Druid's Coordinator emits, and which of a plan's counts take each, so a
plan lines up with a cluster's dashboards (``planner.metrics`` counts a plan under them).

Source: Druid ``org.apache.druid.server.coordinator.stats.Stats`` (``Segments``, ``Tier``) and the
metrics page of Druid's docs. Only the counts this project has in the same sense get a Druid name:

========================================  =========================================================
``segment/assigned/count``                LOADs of queue type ``loading`` (stages 1–4 and their
                                          revisits), per tier
``segment/assigned/broadcast``            LOADs of broadcast segments (stage 2), per tier
``segment/moved/count``                   moves: LOADs of queue type ``balancing`` or
                                          ``decommissioning`` (each with its dependent DROP), per tier
``segment/dropped/count``                 DROPs of excess replicas and of drop-rule segments
                                          (reasons ``overreplicated``, ``callback``, ``drop_rule``)
``segment/dropped/broadcast``             DROPs of broadcast segments from decommissioning servers
                                          (stage 13)
``segment/unneeded/count``                DROPs of unused and overshadowed segments' replicas
``segment/underReplicated/count``         replicas left to load, Σ max(0, target − count), per tier
``segment/unavailable/count``             used segments whose load rule asks for a replica (tiers
                                          without historicals included) and that have none in any
                                          tier
``tier/historical/count``                 historicals per tier (decommissioning ones included)
``tier/total/capacity``                   Σ ``max_size`` of a tier's historicals, bytes
========================================  =========================================================

Decision metrics (the first six) count the plan's operations, as one Coordinator run would report
its decisions. State metrics are given twice: ``at = "snapshot"`` (what Druid reports for the
snapshot's cluster) and ``at = "plan"`` (once every operation of the plan succeeded).
"""

from __future__ import annotations

# The names of Druid 35.0.0's and 38.0.0's ``Stats`` that a Coordinator run emits.
ASSIGNED = "segment/assigned/count"
DROPPED = "segment/dropped/count"
MOVED = "segment/moved/count"
DELETED = "segment/deleted/count"
ASSIGN_SKIPPED = "segment/assignSkipped/count"
DROP_SKIPPED = "segment/dropSkipped/count"
MOVE_SKIPPED = "segment/moveSkipped/count"
UNNEEDED = "segment/unneeded/count"
OVERSHADOWED = "segment/overshadowed/count"
UNAVAILABLE = "segment/unavailable/count"
UNDER_REPLICATED = "segment/underReplicated/count"
DEEP_STORAGE_ONLY = "segment/availableDeepStorageOnly/count"
ASSIGNED_TO_CLONE = "segment/clone/assigned/count"
DROPPED_FROM_CLONE = "segment/clone/dropped/count"
LOAD_QUEUE_COUNT = "segment/loadQueue/count"
LOAD_QUEUE_SIZE = "segment/loadQueue/size"
DROP_QUEUE_COUNT = "segment/dropQueue/count"
QUEUE_ASSIGNED = "segment/loadQueue/assigned"
QUEUE_SUCCESS = "segment/loadQueue/success"
QUEUE_FAILED = "segment/loadQueue/failed"
QUEUE_CANCELLED = "segment/loadQueue/cancelled"
REPLICATION_FACTOR = "tier/replication/factor"
REQUIRED_CAPACITY = "tier/required/capacity"
HISTORICAL_COUNT = "tier/historical/count"
TOTAL_CAPACITY = "tier/total/capacity"
PARTIAL_ASSIGNED = "segment/partial/assigned/count"
PARTIAL_STALE_DROPPED = "segment/partial/staleDropped/count"
PARTIAL_STALE_CANCELLED = "segment/partial/staleCancelled/count"
"""Druid 38.0.0's partial-load reconciliation (``Stats.Segments``, #19374)."""
CLONE_COUNT = "tier/historical/clone/count"
STORAGE_CAPACITY = "tier/storage/capacity"
"""Druid 38.0.0: Σ ``storage_size`` of a tier's managed historicals, bytes."""
ASSIGNED_BROADCAST = "segment/assigned/broadcast"
DROPPED_BROADCAST = "segment/dropped/broadcast"
"""Names of older Druid releases (before 27), which counted broadcast loads and drops apart."""
