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
    for name, leftover in (
        (".plan.tmp-0123abcd", True),
        (".plan.old-0123456789ab", True),
        ("plan", False),
        (".plan", False),
        (".plan.tmp-xyz", False),
    ):
        assert is_leftover(tmp_path / name) is leftover, name


def test_a_replaced_directory_is_never_missing(tmp_path):
    """A reader polling the directory while it is replaced 200 times never finds it missing, nor
    without its file (the swap of ``renameat2(RENAME_EXCHANGE)``); no temporary is left."""
    import threading

    from segment_balancer.common.files import replace_path, sibling_tmp

    dest = tmp_path / "plan"
    replace_dir(dest, lambda tmp: (tmp / "summary.json").write_text("0"), durable=False)
    misses, done = [], threading.Event()

    def read():
        while not done.is_set():
            if not (dest / "summary.json").is_file():
                misses.append(1)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for k in range(1, 101):
            replace_dir(dest, lambda tmp, k=k: (tmp / "summary.json").write_text(str(k)), durable=False)
            tmp = sibling_tmp(dest)
            tmp.mkdir()
            (tmp / "summary.json").write_text(f"{k}b")
            replace_path(tmp, dest)
    finally:
        done.set()
        reader.join()
    assert misses == []
    assert (dest / "summary.json").read_text() == "100b"
    assert [p.name for p in tmp_path.iterdir()] == ["plan"]


def test_without_renameat2_a_directory_is_still_replaced_whole(tmp_path, monkeypatch):
    from segment_balancer.common import files

    monkeypatch.setattr(files, "_LIBC_RENAMEAT2", None)  # another OS: renamed aside, then in
    dest = tmp_path / "plan"
    replace_dir(dest, lambda tmp: (tmp / "a").write_text("1"))
    replace_dir(dest, lambda tmp: (tmp / "b").write_text("2"))
    tmp = files.sibling_tmp(dest)
    tmp.mkdir()
    (tmp / "c").write_text("3")
    files.replace_path(tmp, dest)
    assert [p.name for p in dest.iterdir()] == ["c"]
    assert [p.name for p in tmp_path.iterdir()] == ["plan"]
    files.rename_new(tmp_path / "plan", tmp_path / "other")
    (tmp_path / "plan").mkdir()
    with pytest.raises(FileExistsError):
        files.rename_new(tmp_path / "plan", tmp_path / "other")


def test_atomic_file_appears_whole_with_usual_permissions_or_not_at_all(tmp_path):
    import gzip
    import os

    from segment_balancer.common.files import atomic_file, write_json_atomic, write_text_atomic

    path = tmp_path / "sub" / "LATEST"
    write_text_atomic("run-1\n", path, durable=True)
    mask = os.umask(0)
    os.umask(mask)
    assert path.read_text() == "run-1\n" and path.stat().st_mode & 0o777 == 0o666 & ~mask
    with pytest.raises(RuntimeError):
        with atomic_file(path) as fh:
            fh.write("run-2\n")
            raise RuntimeError("interrupted")
    assert path.read_text() == "run-1\n" and [p.name for p in path.parent.iterdir()] == ["LATEST"]
    with atomic_file(tmp_path / "s.jsonl.gz", "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as out:
        out.write(b"{}\n")
    assert gzip.decompress((tmp_path / "s.jsonl.gz").read_bytes()) == b"{}\n"
    write_json_atomic({"a": [1]}, tmp_path / "x.json")
    assert (tmp_path / "x.json").read_text() == '{\n  "a": [\n    1\n  ]\n}'
    with pytest.raises(ValueError, match="mode 'w' or 'wb'"):
        with atomic_file(path, "a"):
            pass


def test_a_file_takes_the_place_of_a_directory(tmp_path):
    """What the assembler does to Spark's one-part parquet directory."""
    from segment_balancer.common.files import replace_path

    (tmp_path / "t.parquet").mkdir()
    (tmp_path / "t.parquet" / "part-0.parquet").write_bytes(b"PAR1")
    (tmp_path / "f").write_bytes(b"file")
    replace_path(tmp_path / "f", tmp_path / "t.parquet")
    assert (tmp_path / "t.parquet").read_bytes() == b"file"
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]
