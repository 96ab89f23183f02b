"""resolve_snapshot (first task of segment_balancing), called directly on tmp directories."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from segment_balancer_airflow.refusal import InputRefused

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def resolve():
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"]
    return dag.get_task("resolve_snapshot").python_callable


SAMPLE = REPO / "include/segment_balancer/snapshots/druid_sample"


def sample_at(directory: Path, when: str, cluster: str = "druid") -> Path:
    """A copy of the bundled druid_sample snapshot at ``directory``, taken at ``when`` of ``cluster``."""
    shutil.copytree(SAMPLE, directory)
    (directory / "snapshot.json").write_text(json.dumps({"snapshot_time": when, "cluster": cluster}))
    return directory


@pytest.fixture
def root(tmp_path):
    for name, when in (("old", "2024-01-01T00:00:00Z"), ("new", "2024-06-01T00:00:00Z")):
        sample_at(tmp_path / "snaps" / name, when)
    return tmp_path / "snaps"


def _call(
    resolve,
    root,
    monkeypatch,
    tmp_path,
    snapshot=None,
    overrides=None,
    logical_date=None,
    run_after=datetime(2030, 1, 1, tzinfo=UTC),
    run_id="manual__2024-07-01T00:00:00+00:00",
    **params,
):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("SEGMENT_BALANCER_HOME", str(tmp_path / "home"))
    defaults = dict(DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"].params.dump())
    params = {**defaults, "snapshot": snapshot, "snapshots_root": str(root), "config_overrides": overrides, **params}
    return resolve(
        params=params,
        run_id=run_id,
        logical_date=logical_date,
        dag_run=SimpleNamespace(run_after=run_after, dag_id="segment_balancing"),
    )


def test_by_date_then_run_after(resolve, root, monkeypatch, tmp_path):
    by_logical = _call(resolve, root, monkeypatch, tmp_path, logical_date=datetime(2024, 3, 1, tzinfo=UTC))
    assert Path(by_logical["snapshot"]).name == "old"
    manual = _call(resolve, root, monkeypatch, tmp_path)  # no logical_date: run_after (2030)
    assert Path(manual["snapshot"]).name == "new"


def test_param_wins_and_names_resolve_under_the_root(resolve, root, monkeypatch, tmp_path):
    assert Path(_call(resolve, root, monkeypatch, tmp_path, snapshot="old")["snapshot"]).name == "old"
    assert _call(resolve, root, monkeypatch, tmp_path, snapshot=str(root / "new"))["snapshot"] == str(root / "new")
    with pytest.raises(InputRefused, match="not a snapshot directory"):
        _call(resolve, root, monkeypatch, tmp_path, snapshot="missing")


def test_fresh_work_dir_config_and_paths(resolve, root, monkeypatch, tmp_path):
    first = _call(resolve, root, monkeypatch, tmp_path, overrides={"maxSegmentsInNodeLoadingQueue": 7})
    home = tmp_path / "home"
    # Airflow's own run id has ':' and '+': a readable prefix, '~' and 12 hex digits of its SHA-256
    safe = "manual__2024-07-01T00_00_00_00_00~" + hashlib.sha256(b"manual__2024-07-01T00:00:00+00:00").hexdigest()[:12]
    assert first["work"] == str(home / "runs" / safe / "work")
    assert first["plan_dir"] == str(home / "runs" / safe / "work" / "plan")
    assert first["publish_dir"] == str(home / "plans" / safe)
    assert json.loads(Path(first["config_file"]).read_text()) == {"maxSegmentsInNodeLoadingQueue": 7}
    (Path(first["work"]) / "leftover").write_text("x")
    again = _call(resolve, root, monkeypatch, tmp_path)  # re-running the run starts clean
    assert again["work"] == first["work"] and not (Path(again["work"]) / "leftover").exists()
    assert json.loads(Path(again["config_file"]).read_text()) == {}
    assert again["simulation_dir"] == str(home / "plans" / safe / "simulation")


def test_compare_with_druid_asks_the_run_for_both_coordinators(resolve, root, monkeypatch, tmp_path):
    """The param ``compare_with_druid`` (on by default) leaves the request ``compare_coordinators``
    reads in the work directory; off, none."""
    from segment_balancer.spark.workdir import compare_requested

    assert compare_requested(Path(_call(resolve, root, monkeypatch, tmp_path)["work"]))
    off = _call(resolve, root, monkeypatch, tmp_path, compare_with_druid=False)
    assert not compare_requested(Path(off["work"]))


def test_an_unknown_key_of_config_overrides_is_refused_naming_the_param(resolve, root, monkeypatch, tmp_path):
    """The user's own override stays strict: the error names the param, the key and the
    closest known key, before any work directory is made."""
    with pytest.raises(InputRefused) as info:
        _call(resolve, root, monkeypatch, tmp_path, snapshot="old", overrides={"maxSegmentsInNodeLoadQueue": 7})
    assert info.value.message == (
        "param config_overrides: unknown key 'maxSegmentsInNodeLoadQueue' "
        "(did you mean 'maxSegmentsInNodeLoadingQueue'?)"
    )
    assert not (tmp_path / "home" / "runs").exists()


def test_typed_config_fields_win_over_config_overrides(resolve, root, monkeypatch, tmp_path):
    run = _call(
        resolve,
        root,
        monkeypatch,
        tmp_path,
        overrides={"maxSegmentsInNodeLoadingQueue": 7, "balancingMinPercent": 5},
        maxSegmentsInNodeLoadingQueue=100,
        balancerRandomSeed=3,
        decommissioningNodes=None,
        balancingMinCostReductionPercent=2.5,
    )
    assert json.loads(Path(run["config_file"]).read_text()) == {
        "maxSegmentsInNodeLoadingQueue": 100,
        "balancingMinPercent": 5,
        "balancerRandomSeed": 3,
        "balancingMinCostReductionPercent": 2.5,
    }


def test_cluster_param_and_captures_two_levels_down(resolve, monkeypatch, tmp_path):
    for cluster, stamp, when in (
        ("prod", "2024-05-01T00-00-00Z", "2024-05-01T00:00:00Z"),
        ("test", "2024-06-01T00-00-00Z", "2024-06-01T00:00:00Z"),
    ):
        sample_at(tmp_path / "captures" / cluster / stamp, when, cluster)
    root = tmp_path / "captures"
    assert Path(_call(resolve, root, monkeypatch, tmp_path)["snapshot"]).parent.name == "test"
    assert Path(_call(resolve, root, monkeypatch, tmp_path, cluster="prod")["snapshot"]).parent.name == "prod"


def test_what_if_edits_give_an_edited_copy_and_unknown_servers_fail_first(resolve, monkeypatch, tmp_path):
    from whatif_cluster import write_cluster

    snap = write_cluster(tmp_path / "snaps" / "w")
    run = _call(
        resolve,
        tmp_path / "snaps",
        monkeypatch,
        tmp_path,
        snapshot="w",
        whatif_decommission=["a:8083"],
        whatif_remove=["b:8083"],
        whatif_add=[{"tier": "cold", "count": 1, "max_size": 1000}],
    )
    assert run["snapshot"] == str(Path(run["work"]) / "snapshot-whatif")
    servers = {s["server"]: s["server_type"] for s in json.loads((Path(run["snapshot"]) / "servers.json").read_text())}
    assert servers["b:8083"] != "historical" and servers["whatif-cold-1:8083"] == "historical"
    assert json.loads(Path(run["config_file"]).read_text()) == {"decommissioningNodes": ["a:8083"]}
    record = json.loads((Path(run["work"]) / "whatif.json").read_text())
    assert record["snapshot"] == str(snap.resolve()) and record["added"] == ["whatif-cold-1:8083"]
    with pytest.raises(InputRefused, match="'nope:8083' is no historical"):
        _call(resolve, tmp_path / "snaps", monkeypatch, tmp_path, snapshot="w", whatif_remove=["nope:8083"])


def test_the_avg_shedder_fields_go_into_the_config(resolve, root, monkeypatch, tmp_path):
    run = _call(
        resolve,
        root,
        monkeypatch,
        tmp_path,
        balancerStrategy="avgShedder",
        avgShedderLowThresholdPercent=10,
        avgShedderHighThresholdPercent=30.5,
        avgShedderHitCountLowThreshold=4,
        avgShedderHitCountHighThreshold=1,
    )
    assert json.loads(Path(run["config_file"]).read_text()) == {
        "balancerStrategy": "avgShedder",
        "avgShedderLowThresholdPercent": 10,
        "avgShedderHighThresholdPercent": 30.5,
        "avgShedderHitCountLowThreshold": 4,
        "avgShedderHitCountHighThreshold": 1,
    }


def _published(plans: Path, name: str, cluster: str, when: str, whatif: bool = False, state: bool = True) -> Path:
    """A published plan as far as history reads it (summary, validation, balancer state)."""
    from plan_summaries import summary, whatif_record

    plan = plans / name
    plan.mkdir(parents=True)
    edits = whatif_record(decommission=("a:8083",)) if whatif else None
    (plan / "summary.json").write_text(json.dumps(summary(cluster, when, whatif=edits)))
    (plan / "validation.json").write_text(json.dumps({"success": True}))
    if state:
        (plan / "balancer_state.json").write_text(json.dumps({"from": name}))
    return plan


def test_a_run_is_handed_the_state_of_the_plan_of_the_snapshot_before_its_own(resolve, root, monkeypatch, tmp_path):
    """The previous published plan of the cluster, of an older snapshot, not a what-if;
    the plan of the same snapshot (a re-plan) or of a newer one (a backfill behind the schedule)
    is not followed."""
    plans = tmp_path / "home" / "plans"
    _published(plans, "before", "druid", "2024-05-01T00:00:00.000Z")
    _published(plans, "older", "druid", "2024-04-01T00:00:00.000Z")
    _published(plans, "whatif", "druid", "2024-05-15T00:00:00.000Z", whatif=True)
    _published(plans, "other-cluster", "test", "2024-05-20T00:00:00.000Z")
    _published(plans, "same-snapshot", "druid", "2024-06-01T00:00:00.000Z")
    _published(plans, "newer", "druid", "2024-07-01T00:00:00.000Z")
    run = _call(resolve, root, monkeypatch, tmp_path, snapshot="new")  # taken 2024-06-01
    assert run["balancer_state"] == str(plans / "before" / "balancer_state.json")
    assert json.loads((Path(run["work"]) / "balancer_state.previous.json").read_text()) == {"from": "before"}
    backfill = _call(resolve, root, monkeypatch, tmp_path, snapshot="old", run_id="backfill__2024-01-02")  # 2024-01-01
    assert backfill["balancer_state"] == "" and not (Path(backfill["work"]) / "balancer_state.previous.json").exists()


def test_a_plan_without_a_state_hands_none(resolve, root, monkeypatch, tmp_path):
    _published(tmp_path / "home" / "plans", "before", "druid", "2024-05-01T00:00:00.000Z", state=False)
    assert _call(resolve, root, monkeypatch, tmp_path, snapshot="new")["balancer_state"] == ""


ODD_RUN_IDS = [
    ".",
    "..",
    "...",
    "a/../b",
    "a..b",
    ".hidden",
    "x" * 250,
    "été ☃",
    "manual__2024-07-01T00:00:00+00:00",
    "manual__2024-07-01T00_00_00_00_00",
    "backfill_1",
]


def _validated_plan(path: Path, cluster: str) -> Path:
    from plan_summaries import summary, write_stand_in_operations

    from segment_balancer.plan.publish import plan_fingerprint

    path.mkdir(parents=True)
    write_stand_in_operations(path / "operations.parquet", "ops")
    (path / "summary.json").write_text(json.dumps(summary(cluster=cluster)))
    (path / "validation.json").write_text(
        json.dumps({"success": True, "checks": [], "plan_files": plan_fingerprint(path)})
    )
    return path


def test_no_run_id_names_anything_but_its_own_directories(resolve, root, monkeypatch, tmp_path):
    """Run ids the trigger form and the REST API accept (``.`` and ``..`` by Airflow's default
    ``allowed_run_id_pattern``) and worse: each run works and publishes in a directory of its own,
    right under ``runs/`` and ``plans/``, none shared, and what was there before stays."""
    home = tmp_path / "home"
    _published(home / "plans", "history", "druid", "2024-05-01T00:00:00.000Z")
    (home / "work").mkdir()
    (home / "work" / "keep").write_text("x")
    before = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    runs = {run_id: _call(resolve, root, monkeypatch, tmp_path, run_id=run_id) for run_id in ODD_RUN_IDS}
    names = set()
    for run_id, run in runs.items():
        work, publish = Path(run["work"]), Path(run["publish_dir"])
        assert work.parent.parent == (home / "runs").resolve() and work.name == "work", run_id
        assert publish.parent == (home / "plans").resolve() and work.parent.name == publish.name, run_id
        assert not publish.name.startswith(".") and ".." not in publish.name and len(publish.name) <= 93, run_id
        assert Path(run["simulation_dir"]) == publish / "simulation"
        # the run directory says whose it is, for retention to find its XComs
        assert json.loads((work.parent / "run.json").read_text()) == {"dag_id": "segment_balancing", "run_id": run_id}
        names.add(publish.name)
    assert len(names) == len(ODD_RUN_IDS)
    assert runs["backfill_1"]["publish_dir"].endswith("/plans/backfill_1")  # a plain run id is its own name
    after = sorted(str(p.relative_to(home)) for p in home.rglob("*") if not str(p.relative_to(home)).startswith("runs"))
    assert after == [p for p in before if not p.startswith("runs")]


@pytest.mark.parametrize("run_id", [".", ".."])
def test_the_publish_task_keeps_the_plans_history(resolve, root, monkeypatch, tmp_path, run_id):
    """The DAG's own resolve_snapshot and publish_plan with run id ``.`` and ``..``: the plan goes to
    its own directory and every earlier plan stays; a publish_dir pointing at the plans root or its
    parent (a run dict from elsewhere) is refused by the task and removes nothing."""
    from airflow.dag_processing.dagbag import DagBag

    from segment_balancer.plan.publish import PublishError
    from segment_balancer_airflow.assets import PLANS

    publish = DagBag(dag_folder=str(REPO / "dags")).dags["segment_balancing"].get_task("publish_plan").python_callable
    home = tmp_path / "home"
    _published(home / "plans", "history", "druid", "2024-05-01T00:00:00.000Z")
    run = _call(resolve, root, monkeypatch, tmp_path, run_id=run_id)
    _validated_plan(Path(run["plan_dir"]), "druid")
    events = {PLANS: SimpleNamespace(extra=None)}
    assert publish(run=run, outlet_events=events) == run["publish_dir"]
    plans = home / "plans"
    assert sorted(p.name for p in plans.iterdir()) == sorted(["LATEST", "history", Path(run["publish_dir"]).name])
    assert (plans / "history" / "summary.json").is_file() and events[PLANS].extra["cluster"] == "druid"
    for escaping in (str(plans.resolve()), str(plans.resolve() / ".."), str(plans.resolve() / ".")):
        with pytest.raises(PublishError, match="right under the plans root"):
            publish(run={**run, "publish_dir": escaping}, outlet_events=events)
    assert (plans / "history" / "summary.json").is_file() and (home / "runs").is_dir()
