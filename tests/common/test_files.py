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


def test_remove_dir_goes_whole_and_counts_its_bytes(tmp_path):
    from segment_balancer.common.files import is_leftover, remove_dir, tree_bytes

    d = tmp_path / "plan"
    (d / "sub").mkdir(parents=True)
    (d / "a").write_bytes(b"x" * 10)
    (d / "sub" / "b").write_bytes(b"y" * 32)
    (d / "link").symlink_to(tmp_path / "elsewhere-not-followed")
    assert tree_bytes(d) == 42 + len(str(tmp_path / "elsewhere-not-followed"))  # a link counts as itself
    assert tree_bytes(d / "a") == 10 and tree_bytes(tmp_path / "missing") == 0
    assert remove_dir(d) == 42 + len(str(tmp_path / "elsewhere-not-followed"))
    assert list(tmp_path.iterdir()) == []
    d.mkdir()
    (d / "a").write_bytes(b"x" * 7)
    assert remove_dir(d) == 7
    for name, leftover in ((".plan.tmp-0123abcd", True), (".plan.old-0123456789ab", True), ("plan", False),
                           (".plan", False), (".plan.tmp-xyz", False)):
        assert is_leftover(tmp_path / name) is leftover, name
