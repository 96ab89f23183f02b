"""ServerState limits: ALGORITHM.md "Load-queue limits" and "Capacity", worked by hand."""

from segment_balancer.planner.runstate import ServerState, StageLimit


def holder(projected=0, max_size=100, **loads):
    h = ServerState("s1", "t", max_size=max_size, projected_size=projected)
    h.loads.update(loads)
    return h


def test_capacity_counts_projected_size_and_never_subtracts_drops():
    # 60 projected + 40 = 100 fits exactly; 60 + 41 does not.
    assert holder(projected=60).can_load(40, StageLimit(queue_type="loading"))
    assert not holder(projected=60).can_load(41, StageLimit(queue_type="loading"))


def test_typed_limit_counts_only_its_type():
    # M = 10, loadingMinPercent 70 -> loading <= 7. Six loading + three balancing queued:
    # one more loading makes 7 (ok) and 10 in total (ok); with 7 loading it would be 8 (refused).
    limit = StageLimit(queue_type="loading", counted="loading", cap=7, total_cap=10)
    assert holder(loading=6, balancing=3).can_load(1, limit)
    assert not holder(loading=7).can_load(1, limit)


def test_total_limit_applies_to_every_stage():
    # Full M = 10 with 10 loads queued (any types): nothing more.
    assert not holder(decommissioning=5, balancing=5).can_load(
        1, StageLimit(queue_type="loading", counted="loading", cap=7, total_cap=10)
    )
    assert not holder(decommissioning=5, balancing=5).can_load(1, StageLimit(queue_type="loading", total_cap=10))


def test_all_loads_limit_of_stage_six():
    # Stage 6: all loads <= floor(10 * (70 + 10) / 100) = 8.
    limit = StageLimit(queue_type="loading", counted="all", cap=8, total_cap=10)
    assert holder(loading=4, balancing=3).can_load(1, limit)  # 8 after
    assert not holder(loading=4, balancing=4).can_load(1, limit)  # 9 after


def test_unlimited_queue_leaves_only_capacity():
    # maxSegmentsInNodeLoadingQueue = 0: no count limit at all.
    assert holder(loading=10_000).can_load(1, StageLimit(queue_type="loading"))


def test_add_load_updates_size_and_type():
    h = holder(projected=10)
    h.add_load(5, "balancing")
    assert (h.projected_size, h.loads["balancing"], h.available_bytes) == (15, 1, 85)


def test_refusal_names_what_stops_a_load_and_agrees_with_can_load():
    # The same cases as above, with the reason explain reports (ALGORITHM.md "Capacity" first,
    # then the total M, then the stage's own cap).
    stage1 = StageLimit(stage=1, queue_type="loading", counted="loading", cap=7, total_cap=10)
    stage6 = StageLimit(stage=6, queue_type="loading", counted="all", cap=8, total_cap=10)
    cases = [
        (holder(projected=60), 41, stage1, "capacity: 40 bytes available, the segment has 41"),
        (
            holder(projected=120),
            1,
            stage1,
            "capacity: 0 bytes available, the segment has 1",
        ),  # overfull: no negative bytes
        (holder(loading=7), 1, stage1, "load queue full for stage 1: 7 loading loads queued, its limit 7"),
        (
            holder(decommissioning=5, balancing=5),
            1,
            stage1,
            "load queue full: 10 loads queued, maxSegmentsInNodeLoadingQueue 10",
        ),
        (holder(loading=4, balancing=4), 1, stage6, "load queue full for stage 6: 8 loads queued, its limit 8"),
        (holder(loading=6, balancing=3), 1, stage1, None),
        (holder(), 1, StageLimit(stage=12), "stage 12 only drops"),
    ]
    for h, size, limit, expected in cases:
        assert h.refusal(size, limit) == expected
        assert h.can_load(size, limit) is (expected is None)
