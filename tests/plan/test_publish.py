"""Atomic publish: refuses unvalidated plans, replaces idempotently, never half-publishes."""

from __future__ import annotations

import json
import os

import pytest
from plan_summaries import summary, write_stand_in_operations

from segment_balancer.plan import publish
from segment_balancer.plan.publish import PublishError, plan_fingerprint, publish_plan


def make_plan(path, content: bytes, success=True, fingerprint=True):
    """A plan directory with stand-in plan files and a validation.json."""
    path.mkdir(parents=True)
    write_stand_in_operations(path / "operations.parquet", content.decode())
    (path / "assignment.parquet").write_bytes(b"assign:" + content)
    (path / "summary.json").write_text(json.dumps(summary(cluster=content.decode())))
    report = {"success": success, "checks": [{"name": "capacity", "success": success}]}
    if fingerprint:
        report["plan_files"] = plan_fingerprint(path)
    (path / "validation.json").write_text(json.dumps(report))
    return path


def snapshot(root):
    """{relative path: bytes} of every file under root."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def published(dest, plan) -> bool:
    """``dest`` holds exactly the files of ``plan``, the plan's report, which names its cluster, and
    (for a plan with operations) the report's table of operations."""
    files = snapshot(dest)
    report = files.pop("report.html").decode()
    table = sorted(k for k in files if k.startswith("operations/"))
    for key in table:
        files.pop(key)
    if (plan / "operations.parquet").exists() and table[:1] != ["operations/index.js"]:
        return False
    cluster = json.loads((plan / "summary.json").read_text())["cluster"]
    return files == snapshot(plan) and f"Segment balancing plan — {cluster}" in report


def test_publish_copies_and_writes_latest(tmp_path):
    plan = make_plan(tmp_path / "plan", b"v1")
    dest = tmp_path / "published" / "run-1"
    assert publish_plan(plan, dest) == dest.resolve()
    assert published(dest, plan)
    assert (dest.parent / "LATEST").read_text() == "run-1\n"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["LATEST", "run-1"]


def test_republish_replaces(tmp_path):
    dest = tmp_path / "pub" / "current"
    publish_plan(make_plan(tmp_path / "a", b"old"), dest)
    (dest / "stale.txt").write_text("only in the old one")
    new = make_plan(tmp_path / "b", b"new")
    publish_plan(new, dest)
    assert published(dest, new)
    publish_plan(new, dest)  # idempotent
    assert published(dest, new)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["LATEST", "current"]


@pytest.mark.parametrize("bad", ["failed", "missing", "changed", "garbled"])
def test_refuses_unvalidated_plan_and_keeps_previous(tmp_path, bad):
    dest = tmp_path / "pub" / "current"
    publish_plan(make_plan(tmp_path / "good", b"good"), dest)
    before, latest = snapshot(dest), (dest.parent / "LATEST").read_bytes()
    plan = make_plan(tmp_path / "bad", b"bad", success=(bad != "failed"))
    if bad == "missing":
        (plan / "validation.json").unlink()
    elif bad == "changed":
        (plan / "operations.parquet").write_bytes(b"edited after validation")
    elif bad == "garbled":
        (plan / "validation.json").write_text("{not json")
    with pytest.raises(PublishError):
        publish_plan(plan, dest)
    assert snapshot(dest) == before
    assert (dest.parent / "LATEST").read_bytes() == latest
    assert sorted(p.name for p in dest.parent.iterdir()) == ["LATEST", "current"]


def test_failure_while_swapping_keeps_previous(tmp_path, monkeypatch):
    dest = tmp_path / "pub" / "current"
    publish_plan(make_plan(tmp_path / "good", b"good"), dest)
    before = snapshot(dest)
    from segment_balancer.common import files

    real_rename, real_renameat2 = os.rename, files._renameat2

    def failing(real):
        def rename(src, dst, *args):
            if str(src).find(".tmp-") >= 0:  # the rename (or swap) of the new copy into place
                raise OSError("disk on fire")
            return real(src, dst, *args)

        return rename

    for exchange in (True, False):  # the swap of renameat2, and where the OS lacks it, two renames
        monkeypatch.setattr(files, "_renameat2", failing(real_renameat2) if exchange else lambda *a: False)
        monkeypatch.setattr(os, "rename", failing(real_rename))
        with pytest.raises(PublishError, match="disk on fire"):
            publish_plan(make_plan(tmp_path / f"new{exchange}", b"new"), dest)
        assert snapshot(dest) == before
        assert sorted(p.name for p in dest.parent.iterdir()) == ["LATEST", "current"]


def test_failure_while_copying_keeps_previous(tmp_path, monkeypatch):
    dest = tmp_path / "pub" / "current"
    publish_plan(make_plan(tmp_path / "good", b"good"), dest)
    before = snapshot(dest)

    def failing_copy(src, dst, **kwargs):
        os.makedirs(dst, exist_ok=True)
        (dst / "operations.parquet").write_bytes(b"partial")
        raise OSError("no space left")

    monkeypatch.setattr(publish.shutil, "copytree", failing_copy)
    with pytest.raises(PublishError, match="no space left"):
        publish_plan(make_plan(tmp_path / "new", b"new"), dest)
    assert snapshot(dest) == before
    assert sorted(p.name for p in dest.parent.iterdir()) == ["LATEST", "current"]


def test_refuses_to_publish_onto_itself(tmp_path):
    plan = make_plan(tmp_path / "plan", b"x")
    with pytest.raises(PublishError):
        publish_plan(plan, plan)
    with pytest.raises(PublishError):
        publish_plan(plan, plan / "inside")


def test_publishes_a_plan_validated_by_gx(tmp_path):
    import importlib.util
    from pathlib import Path

    from segment_balancer.plan.validation import validate_plan

    spec = importlib.util.spec_from_file_location(
        "_validation_fixtures", Path(__file__).with_name("test_validation.py")
    )
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    plan, work = fixtures.write_plan(tmp_path)
    (plan / "summary.json").write_text(json.dumps(summary(cluster="gx")))
    assert validate_plan(plan, work)["success"]
    dest = publish_plan(plan, tmp_path / "out" / "plan-1")
    assert published(dest, plan)


def test_a_plan_whose_report_cannot_be_made_is_not_published(tmp_path):
    dest = tmp_path / "pub" / "current"
    publish_plan(make_plan(tmp_path / "good", b"good"), dest)
    before = snapshot(dest)
    plan = make_plan(tmp_path / "new", b"new")
    (plan / "summary.json").write_text("{}")  # no counts to report
    with pytest.raises(PublishError, match="summary.json"):
        publish_plan(plan, dest)
    assert snapshot(dest) == before
    assert sorted(p.name for p in dest.parent.iterdir()) == ["LATEST", "current"]


@pytest.mark.parametrize("name", [".", "..", ".hidden", "a/..", "a/b"])
def test_refuses_a_destination_that_is_not_a_plan_of_the_plans_root(tmp_path, name):
    """A destination that names the plans root itself, its parent, a hidden or a nested directory
    is refused before anything is written: the plans published there stay as they were."""
    root = tmp_path / "home" / "plans"
    publish_plan(make_plan(tmp_path / "a", b"kept"), root / "kept", plans_root=root)
    (root / "a").mkdir(exist_ok=True)
    before = snapshot(tmp_path / "home")
    with pytest.raises(PublishError, match="right under the plans root"):
        publish_plan(make_plan(tmp_path / "b", b"new"), f"{root}/{name}", plans_root=root)
    assert snapshot(tmp_path / "home") == before


def test_refuses_a_symbolic_link_out_of_the_plans_root(tmp_path):
    root, elsewhere = tmp_path / "plans", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "run").symlink_to(elsewhere)
    with pytest.raises(PublishError, match="right under the plans root"):
        publish_plan(make_plan(tmp_path / "p", b"x"), root / "run", plans_root=root)
    assert list(elsewhere.iterdir()) == []


def test_without_a_plans_root_the_parent_of_the_destination_is_it(tmp_path):
    publish_plan(make_plan(tmp_path / "p", b"x"), tmp_path / "out" / "plan")
    with pytest.raises(PublishError, match="right under the plans root"):
        publish_plan(make_plan(tmp_path / "q", b"y"), tmp_path / "out" / "plan" / "..")
    assert (tmp_path / "out" / "LATEST").read_text() == "plan\n"
