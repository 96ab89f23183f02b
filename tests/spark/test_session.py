"""The shared Spark idioms: several small answers in one job, literal-map lookups, one task per item."""

import base64

from segment_balancer.common.spark_columns import lookup
from segment_balancer.spark.session import collect_small, run_tasks


def test_collect_small_answers_every_query_in_order_with_nulls_left_out(spark):
    rows = spark.createDataFrame([(3, "c", None), (1, "a", "x"), (2, "b", "y")], "n int, name string, tag string")
    found = collect_small(
        {
            "first_two": rows.orderBy("n").limit(2),
            "count": rows.groupBy().count(),
            "none": rows.filter("n > 10"),
            "bytes": rows.filter("n = 1").selectExpr("cast(name as binary) as data"),
        }
    )
    assert found["first_two"] == [{"n": 1, "name": "a", "tag": "x"}, {"n": 2, "name": "b", "tag": "y"}]
    assert found["count"] == [{"count": 3}]
    assert found["none"] == []
    assert base64.b64decode(found["bytes"][0]["data"]) == b"a"
    assert collect_small({}) == {}


def test_collect_small_keeps_a_null_field_out_of_the_row(spark):
    found = collect_small({"q": spark.createDataFrame([(3, None)], "n int, tag string")})
    assert found["q"] == [{"n": 3}]


def test_lookup_maps_keys_and_leaves_unknown_ones_null(spark):
    df = spark.createDataFrame([("h1",), ("h2",), ("peon",)], "server string")
    got = (
        df.select("server", lookup("server", {"h1": "hot", "h2": "cold"}, "string").alias("tier"))
        .orderBy("server")
        .collect()
    )
    assert [(r.server, r.tier) for r in got] == [("h1", "hot"), ("h2", "cold"), ("peon", None)]
    # values of mixed widths are cast to one type; an empty mapping is a typed null
    got = df.select(
        lookup("server", {"h1": 1, "h2": 2**40}, "long").alias("v"), lookup("server", {}, "long").alias("e")
    ).collect()
    assert sorted((r.v for r in got), key=lambda v: (v is None, v)) == [1, 2**40, None] and {r.e for r in got} == {None}


def test_run_tasks_returns_each_items_result_in_order(spark):
    assert run_tasks(spark, ["a", "bb", "ccc"], len) == [1, 2, 3]
    assert run_tasks(spark, [], len) == []
