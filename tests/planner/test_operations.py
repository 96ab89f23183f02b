"""``segment_balancer.planner.operations``: where an operation sorts among its step's operations."""

from segment_balancer.planner.operations import ORDER_COLUMNS, OpOrder


def test_a_dependent_drop_sorts_right_after_its_load_and_before_the_next_operation():
    load = OpOrder(3, "hot", 7)
    scheduled = [OpOrder(3, "hot", 8), load.then(), OpOrder(3, "cold", 9), load, OpOrder(2, "hot", 9)]
    assert sorted(scheduled) == [OpOrder(2, "hot", 9), OpOrder(3, "cold", 9), load, load.then(), OpOrder(3, "hot", 8)]
    assert load.then() == OpOrder(3, "hot", 7, after=1)


def test_the_order_columns_are_the_fields_in_sort_order():
    assert ORDER_COLUMNS == [f"order_{name}" for name in OpOrder._fields]
