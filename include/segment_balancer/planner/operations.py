"""An operation of a plan, declared once: its actions, its queue types and its columns in the run's
op log and in the published plan.

Every coordinator's applications append operations to the run's op log
(``WORK/ops/stage_NN_step.parquet``, in ``spark.workdir.OPS_ARROW_SCHEMA`` of :data:`OP_FIELDS`);
``assemble`` publishes them as ``operations.parquet`` with :data:`PLAN_OPS_COLUMNS`; the gate
(``plan.validation``) requires :data:`GATE_OPS_COLUMNS`; a LOAD's queue types are
``druid.snapshot.models.QUEUE_TYPES``. Imports nothing (the DAG reads it at parse time, through
``planner.coordinators``).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = [
    "Action",
    "Reason",
    "MOVE_REASONS",
    "UNNEEDED_REASONS",
    "OpOrder",
    "ORDER_FIELDS",
    "ORDER_COLUMNS",
    "OP_FIELDS",
    "OPS_COLUMNS",
    "PARTIAL_OP_COLUMNS",
    "RUN_ONLY_OP_COLUMNS",
    "PLAN_OPS_COLUMNS",
    "GATE_OPS_COLUMNS",
]


class Action(enum.StrEnum):
    """What an operation asks of a historical (the plan's ``action``)."""

    LOAD = "LOAD"
    """Load a replica (``queue_type``: the load queue it goes in)."""
    DROP = "DROP"
    """Drop a replica; with ``depends_on``, once that LOAD succeeded (a move or a callback)."""
    CANCEL = "CANCEL"
    """Cancel a queued request (the ``druid`` coordinator's): a queued load (``queue_type`` its
    queue) or a queued drop (``queue_type`` null)."""


class Reason(enum.StrEnum):
    """Why a #7458 operation was scheduled (the plan's ``reason``): the step of the stage that
    scheduled it (``planner.coordinators.STAGES``), or for stage 12's drops the segment's fate
    (``planner.runstate.FATES``). A ``druid`` plan's ``reason`` is Druid's ``SegmentAction`` name
    (``LOAD``, ``REPLICATE``, ``MOVE_TO``, ``MOVE_FROM``, ``DROP``) instead."""

    UNREPLICATED = "unreplicated"
    UNDERBROADCAST = "underbroadcast"
    UNDERREPLICATED = "underreplicated"
    TO_BECOME_UNDERREPLICATED = "to_become_underreplicated"
    CALLBACK = "callback"
    """A stage-3 callback: a DROP in an overreplicated tier once a LOAD in another succeeded."""
    DECOMMISSIONING = "decommissioning"
    BALANCING = "balancing"
    AVG_SHEDDER = "avg_shedder"
    TO_BE_BALANCED = "to_be_balanced"
    OVERREPLICATED = "overreplicated"
    DROP_RULE = "drop_rule"
    UNUSED = "unused"
    OVERSHADOWED = "overshadowed"
    BROADCAST_ON_DECOMMISSIONING = "broadcast_on_decommissioning"


MOVE_REASONS = frozenset({Reason.DECOMMISSIONING, Reason.BALANCING, Reason.AVG_SHEDDER, Reason.TO_BE_BALANCED})
"""The reasons of a move: a LOAD and the DROP at its source that waits for it."""
UNNEEDED_REASONS = frozenset({Reason.UNUSED, Reason.OVERSHADOWED})
"""The reasons of a DROP of a segment no rule wants any more (Druid's ``segment/unneeded/count``)."""


class OpOrder(NamedTuple):
    """Where an operation sorts among the operations of one step, whichever task scheduled it
    (a step's tasks run in parallel; ``op_id`` follows this order). Sorts as a tuple.

    ``idx``: the segment's index for a step that works segment by segment (stages 1–4, 6–10, 12:
    ``idx``, or ``s12_unload.UNUSED_LAST`` outside the used set), 0 for a step that works move by
    move (balancing); ``key``: the tier, the server (stage 13), or stage 12's ``"<segment_id>|<server>"``; ``seq``: the
    task's own count of what it scheduled (0 where ``idx`` and ``key`` decide alone); ``after``:
    0, or 1 for a DROP that waits for the LOAD at the same place (a move's source, a callback), so
    it sorts right after that LOAD."""

    idx: int
    key: str
    seq: int
    after: int = 0

    def then(self) -> OpOrder:
        """The place right after this one: a dependent DROP's, after its LOAD."""
        return self._replace(after=1)


ORDER_FIELDS: tuple[tuple[str, str], ...] = (
    ("order_idx", "int64"),
    ("order_key", "string"),
    ("order_seq", "int64"),
    ("order_after", "int32"),
)
""":class:`OpOrder`'s fields as the columns of a step's output rows (``spark.workdir.OUT_FIELDS``),
with their Arrow types, in sort order."""
ORDER_COLUMNS = [name for name, _ in ORDER_FIELDS]


OP_FIELDS: tuple[tuple[str, str], ...] = (
    ("op_id", "int64"),
    ("stage", "int32"),
    ("action", "string"),
    ("queue_type", "string"),
    ("idx", "int64"),
    ("code", "int64"),
    ("segment_id", "string"),
    ("datasource", "string"),
    ("tier", "string"),
    ("server", "string"),
    ("size_bytes", "int64"),
    ("depends_on", "int64"),
    ("reason", "string"),
    ("partial_matcher", "string"),
    ("partial_type", "string"),
    ("partial_parts", "string"),
    ("partial_fingerprint", "string"),
)
"""The op log's columns in order, with their Arrow types: ``op_id`` (the run's order of the
operation), ``stage`` (the #7458 stage or Druid duty that scheduled it, ``planner.coordinators``),
``action`` (:class:`Action`), ``queue_type`` (null for a DROP), ``idx`` (the segment's index in the
run's groups), ``code`` (its row of the run's segment table), ``size_bytes`` (bytes),
``depends_on`` (the ``op_id`` of the LOAD a DROP waits for, null for none), ``reason`` (why, a code
of the stage), ``partial_*`` (what part a LOAD of a partial-load rule's segment asks, Druid 38;
null for every other operation)."""
OPS_COLUMNS = [name for name, _ in OP_FIELDS]
PARTIAL_OP_COLUMNS = [c for c in OPS_COLUMNS if c.startswith("partial_")]
RUN_ONLY_OP_COLUMNS = ("idx", "code")
"""The op log's columns a published plan leaves out (the run's own numbering of segments)."""
PLAN_OPS_COLUMNS = [c for c in OPS_COLUMNS if c not in RUN_ONLY_OP_COLUMNS]
"""The columns of a published plan's ``operations.parquet``, in order."""
GATE_OPS_COLUMNS = [c for c in PLAN_OPS_COLUMNS if c not in PARTIAL_OP_COLUMNS]
"""The columns of ``operations.parquet`` every plan has (a plan of a release without partial-load
rules may lack the ``partial_*`` ones)."""
