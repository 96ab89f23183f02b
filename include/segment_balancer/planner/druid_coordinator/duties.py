"""The duties of one Druid Coordinator run that change load queues or metadata (Druid 35.0.0
``HistoricalManagementDuties``), and the Spark application (one Airflow task each) that runs them.

Import-light (the DAG reads :data:`DUTY_APPS` at parse time through ``planner.stages``).
"""

from __future__ import annotations

DUTIES = ("prepare", "rules", "unload", "balance", "clone")
"""The duties that change load queues, in the order they run."""
DUTY_STAGES = {"prepare": 1, "rules": 2, "unload": 4, "balance": 6, "clone": 7}
"""A duty's number in the run (the plan's ``stage`` of its operations)."""
DUTY_NAMES = {
    1: "PrepareBalancerAndLoadQueues",
    2: "RunRules",
    4: "UnloadUnusedSegments",
    6: "BalanceSegments",
    7: "CloneHistoricals",
}
"""Druid's class of each duty that changes load queues, by its number."""

DUTY_APPS = {
    "druid_rules": ("prepare", "rules"),
    "druid_unload": ("unload",),
    "druid_balance": ("balance",),
    "druid_clone": ("clone",),
}
"""The ``druid`` coordinator's Spark applications, in run order, and the duties each runs:
``druid_rules`` also counts the segments (``CollectSegmentStats``, 3), ``druid_unload`` marks
overshadowed segments unused (``MarkOvershadowedSegmentsAsUnused``, 5: metadata only), ``druid_balance``
runs one Spark task per tier, ``druid_clone`` counts the load queues (``CollectLoadQueueStats``, 8).
``PrepareBalancerAndLoadQueues`` runs first in every application (it only cancels loads on
decommissioning servers, which every later duty must see cancelled)."""
