"""``segment_balancer.planner.metrics``: which Druid metric each kind of #7458 operation counts in
(Druid ``Stats.Segments``: a move counts once, in ``segment/moved/count``, by its LOAD)."""

import pandas as pd
import pytest

from segment_balancer.planner.metrics import decision_metric, druid_metrics
from segment_balancer.planner.operations import MOVE_REASONS, Action, Reason


@pytest.mark.parametrize("reason", sorted(MOVE_REASONS))
def test_a_moves_drop_counts_in_no_metric_whichever_stage_moved(reason):
    queue = "decommissioning" if reason == Reason.DECOMMISSIONING else "balancing"
    assert decision_metric(Action.LOAD, queue, reason) == "segment/moved/count"
    assert decision_metric(Action.DROP, None, reason) is None


@pytest.mark.parametrize(
    ("action", "queue", "reason", "metric"),
    [
        (Action.LOAD, "loading", Reason.UNREPLICATED, "segment/assigned/count"),
        (Action.LOAD, "loading", Reason.UNDERBROADCAST, "segment/assigned/broadcast"),
        (Action.DROP, None, Reason.OVERREPLICATED, "segment/dropped/count"),
        (Action.DROP, None, Reason.CALLBACK, "segment/dropped/count"),
        (Action.DROP, None, Reason.DROP_RULE, "segment/dropped/count"),
        (Action.DROP, None, Reason.UNUSED, "segment/unneeded/count"),
        (Action.DROP, None, Reason.OVERSHADOWED, "segment/unneeded/count"),
        (Action.DROP, None, Reason.BROADCAST_ON_DECOMMISSIONING, "segment/dropped/broadcast"),
    ],
)
def test_every_other_reason_counts_in_its_metric(action, queue, reason, metric):
    assert decision_metric(action, queue, reason) == metric


def test_avg_shedder_moves_count_as_moves_only():
    """Three avgShedder moves in tier t: three LOADs (balancing queue) and three DROPs that wait
    for them; Druid counts three moves and no drop."""
    counts = pd.DataFrame(
        [("t", "LOAD", "balancing", "avg_shedder", 3), ("t", "DROP", None, "avg_shedder", 3)],
        columns=["tier", "action", "queue_type", "reason", "count"],
    )
    servers = pd.DataFrame({"tier": ["t", "t"], "max_size": [100, 100]})
    events = druid_metrics(counts, servers, {}, {}, 0, 0)
    plan = {e["metric"]: e["value"] for e in events if e["at"] == "plan" and e.get("tier") == "t"}
    assert plan == {"segment/moved/count": 3}
