"""Atomic writes: a table that fails its check never appears, and what was there stays."""

import pandas as pd
import pytest

from segment_balancer.common.files import WriteError, replace_dir, staged_parquet


def test_a_staged_table_appears_only_when_its_check_passes(spark, tmp_path):
    path = tmp_path / "t.parquet"
    spark.createDataFrame([(1,)], "n int").write.parquet(str(path))  # an earlier table
    frame = spark.createDataFrame([(2,), (3,)], "n int")
    with pytest.raises(ValueError):
        with staged_parquet(frame, path) as written:
            assert spark.read.parquet(str(written)).count() == 2  # the check reads the aside copy
            raise ValueError("bad row")
    assert pd.read_parquet(path)["n"].tolist() == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]  # no aside copy left behind

    with staged_parquet(frame, path):
        pass
    assert sorted(pd.read_parquet(path)["n"].tolist()) == [2, 3]
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_replace_dir_is_whole_or_nothing(tmp_path):
    dest = tmp_path / "plan" / "simulation"
    replace_dir(dest, lambda tmp: (tmp / "runs.csv").write_text("run\n1\n"))
    assert (dest / "runs.csv").read_text() == "run\n1\n"

    def half_then_fail(tmp):
        (tmp / "runs.csv").write_text("run\n")
        raise ValueError("run 2 refused")

    with pytest.raises(WriteError, match="run 2 refused"):
        replace_dir(dest, half_then_fail)
    assert (dest / "runs.csv").read_text() == "run\n1\n"  # the earlier content is kept
    assert sorted(p.name for p in dest.parent.iterdir()) == ["simulation"]  # no temporaries left
    replace_dir(dest, lambda tmp: (tmp / "runs.csv").write_text("run\n2\n"))
    assert sorted(p.name for p in dest.iterdir()) == ["runs.csv"] and "2" in (dest / "runs.csv").read_text()
