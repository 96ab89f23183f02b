"""snapshot.lines: rows numbered in the JVM across many partitions, in file order."""

from segment_balancer.druid.snapshot.lines import numbered_lines, with_row_numbers


def test_row_numbers_are_consecutive_across_partitions(spark):
    df = spark.range(0, 1000, numPartitions=7)
    got = with_row_numbers(df, "n", first=5).collect()
    assert sorted((r["id"], r["n"]) for r in got) == [(i, i + 5) for i in range(1000)]


def test_lines_of_a_file_split_into_many_partitions_keep_their_numbers(spark, tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("".join(f"line {i} " + "x" * (i % 50) + "\n" for i in range(1, 5001)))
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "8k")
    try:
        df = numbered_lines(spark, path)
        assert df.rdd.getNumPartitions() > 10
        got = df.collect()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before)
    assert len(got) == 5000
    assert all(r["text"].split()[1] == str(r["line"]) for r in got)
