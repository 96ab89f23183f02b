"""The DAG files import cleanly and follow the house rules (Astro-template style policy tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
HEAD = ["resolve_snapshot", "used_segments", "prepare", "choose_coordinators"]
BRANCHES = {
    "issue7458": [
        "issue7458.stage01_unreplicated",
        "issue7458.stage02_underbroadcast",
        "issue7458.stage03_underreplicated",
        "issue7458.stage04_to_become_underreplicated",
        "issue7458.stage05_decommissioning",
        "issue7458.stage06_first_revisit",
        "issue7458.stage07_balancing",
        "issue7458.stage08_second_revisit",
        "issue7458.stage09_still_loaded_on_decomm",
        "issue7458.stage10_to_be_balanced",
        "issue7458.stage11_repeat_balancing",
        "issue7458.stage12_unload",
        "issue7458.stage13_broadcast_on_decomm",
        "issue7458.assemble",
    ],
    "druid": ["druid.druid_rules", "druid.druid_unload", "druid.druid_balance", "druid.druid_clone", "druid.assemble"],
}
TAIL = ["compare", "validate_plan", "publish_plan", "simulate", "remove_work", "release_spark_session"]
BESIDE_SIMULATE = "advise"
"""The task between ``publish_plan`` and ``remove_work`` beside ``simulate``."""
EXPECTED = [*HEAD, *BRANCHES["issue7458"], *BRANCHES["druid"], *TAIL, BESIDE_SIMULATE]
STAGE0 = HEAD[1:3]


@pytest.fixture(scope="module")
def dagbag():
    # Airflow 3.3 moved DagBag and dropped ``include_examples`` (example DAGs are a separate bundle;
    # AIRFLOW__CORE__LOAD_EXAMPLES=False is set by conftest_airflow anyway).
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


@pytest.fixture(scope="module")
def dag(dagbag):
    return dagbag.dags["segment_balancing"]  # (get_dag would query the metadata DB)


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert dagbag.dag_ids, "no DAG found"


def test_every_dag_has_tags_and_retries(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert dag.tags, f"{dag_id} has no tags"
        for t in dag.tasks:
            assert t.retries >= 1, f"{dag_id}.{t.task_id} has no retries"


def test_tasks_are_wired_in_order(dag):
    """Stage 0, then a branch per coordinator (a task group of its applications and its
    ``assemble``) after the branch task, joined by ``compare``, then the gate and the rest."""
    from segment_balancer_airflow.branches import STAGE_TASK_IDS

    assert sorted(STAGE_TASK_IDS) == sorted([*STAGE0, *BRANCHES["issue7458"], *BRANCHES["druid"]])
    assert sorted(dag.task_ids) == sorted(EXPECTED)
    for chain in ([*HEAD, *branch, *TAIL] for branch in BRANCHES.values()):
        for upstream, downstream in zip(chain, chain[1:]):
            assert upstream in dag.get_task(downstream).upstream_task_ids, f"{upstream} -> {downstream}"
    beside = dag.get_task(BESIDE_SIMULATE)
    assert "publish_plan" in beside.upstream_task_ids and beside.downstream_task_ids == {"remove_work"}
    assert dag.get_task("resolve_snapshot").upstream_task_ids == set()
    assert dag.get_task("release_spark_session").downstream_task_ids == set()
    assert dag.get_task("choose_coordinators").downstream_task_ids == {b[0] for b in BRANCHES.values()}
    assert dag.get_task("compare").upstream_task_ids == {"resolve_snapshot", *(b[-1] for b in BRANCHES.values())}


def test_each_coordinator_is_a_branch_the_other_skipped(dag):
    """The branch task picks the branches (a skipped one shows skipped in the grid); ``compare``
    runs when at least one branch ran and none failed; each branch is the task group named after
    its coordinator."""
    assert dag.get_task("choose_coordinators").task_type in ("_BranchPythonDecoratedOperator", "BranchPythonOperator")
    assert dag.get_task("compare").trigger_rule == "none_failed_min_one_success"
    groups = dag.task_group.children
    for name, tasks in BRANCHES.items():
        assert sorted(groups[name].children) == sorted(tasks)


def test_the_trigger_form_reads_the_coordinator_choices(dag):
    """The ``coordinator`` field shows its choices like ``balancerStrategy``'s, not ``null``."""
    schema = dag.params.get_param("coordinator").schema
    assert schema["enum"] == [None, "issue7458", "druid"]
    assert schema["values_display"] == {
        "null": "(the snapshot's; issue7458 unless it says)",
        "issue7458": "issue7458 (Druid issue #7458)",
        "druid": "druid (Druid's Coordinator)",
    }


def test_the_session_is_released_by_a_teardown(dag):
    """The run's Connect session is released whatever became of the run, and the release does not
    decide the run's state (a teardown), so a failed stage still fails the run."""
    release = dag.get_task("release_spark_session")
    assert release.is_teardown
    assert release.trigger_rule == "all_done_setup_success"
    assert release.upstream_task_ids == {"remove_work"}


def test_work_is_removed_only_once_published(dag):
    """remove_work runs after publish, simulate and advise (each skipped unless its runs param is
    above 0), and not after a failure upstream, which keeps the work directory for diagnosis."""
    remove = dag.get_task("remove_work")
    assert remove.upstream_task_ids == {"resolve_snapshot", "simulate", "advise"}
    assert remove.trigger_rule == "none_failed"
    assert "publish_plan" in dag.get_task("simulate").upstream_task_ids
    assert "publish_plan" in dag.get_task("advise").upstream_task_ids


def test_the_retention_dag_runs_hourly_from_the_start(dagbag):
    retention = dagbag.dags["segment_balancer_retention"]
    assert sorted(retention.task_ids) == ["remove_old_logs", "remove_old_plans", "remove_old_runs"]
    assert retention.is_paused_upon_creation is False and retention.catchup is False
    assert retention.schedule == "@hourly"


@pytest.mark.parametrize("mode", ["connect", "spark-submit"])
def test_stage_operators_hand_groups_along(mode, monkeypatch):
    """Both Spark modes build the same graph; connect runs the applications on the run's session
    (``spark_connect_default``), spark-submit submits ``spark_apps/<name>.py``."""
    from airflow.dag_processing.dagbag import DagBag

    from segment_balancer_airflow.connect import AdviseConnectOperator, SimulateConnectOperator, StageConnectOperator
    from segment_balancer_airflow.operators import AdviseSubmitOperator, SimulateSubmitOperator, StageSubmitOperator

    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__SPARK_MODE", mode)
    dag = DagBag(dag_folder=str(DAGS)).dags["segment_balancing"]
    assert sorted(dag.task_ids) == sorted(EXPECTED)
    stages = [dag.get_task(t) for t in [*STAGE0, *BRANCHES["issue7458"], *BRANCHES["druid"]]]
    kind, simulate_kind = (
        (StageConnectOperator, SimulateConnectOperator)
        if mode == "connect"
        else (StageSubmitOperator, SimulateSubmitOperator)
    )
    assert all(type(op) is kind for op in stages)
    assert type(dag.get_task("simulate")) is simulate_kind
    assert type(dag.get_task("advise")) is (AdviseConnectOperator if mode == "connect" else AdviseSubmitOperator)
    assert [(op.groups_from, op.branch) for op in stages[:2]] == [(None, None), ("used_segments", None)]
    for name, branch in BRANCHES.items():
        ops = [dag.get_task(t) for t in branch]
        assert ops[0].groups_from == "prepare" and {op.branch for op in ops} == {name}
        for previous, op in zip(ops, ops[1:]):
            assert op.groups_from == previous.task_id
    for op in [*stages, dag.get_task("simulate")]:  # the run's paths: resolve_snapshot's XComs, by key
        for field, key in (("snapshot", "snapshot"), ("work", "work"), ("config_file", "config_file")):
            arg = getattr(op, field)
            assert (arg.operator.task_id, arg.key) == ("resolve_snapshot", key), (op.task_id, field)
            assert "resolve_snapshot" in op.upstream_task_ids
    simulate = dag.get_task("simulate")
    assert (simulate.plan.key, simulate.out.key) == ("publish_dir", "simulation_dir")
    advise = dag.get_task("advise")
    assert (advise.snapshot.key, advise.work.key, advise.out.key) == ("snapshot", "advice_work", "advice_dir")
    if mode == "spark-submit":
        assert Path(advise.application) == REPO / "spark_apps" / "advise.py" and Path(advise.application).is_file()
    for op in stages:
        if mode == "connect":
            assert op.conn_id == "spark_connect_default"
        else:
            assert Path(op.application) == REPO / "spark_apps" / f"{op.task_id.split('.')[-1]}.py"
            assert Path(op.application).is_file()


def test_an_unknown_spark_mode_is_refused(monkeypatch):
    from segment_balancer_airflow.connect import spark_mode

    monkeypatch.setenv("AIRFLOW__SEGMENT_BALANCER__SPARK_MODE", "yarn")
    with pytest.raises(ValueError, match="spark_mode = 'yarn'.*connect, spark-submit"):
        spark_mode()


def test_schedule_docs_and_params(dag):
    assert dag.catchup is False
    assert dag.doc_md and "segment_balancing" in dag.doc_md
    params = dag.params
    assert params.get_param("snapshot").schema["type"] == ["null", "string"]
    assert params.get_param("snapshots_root").schema["type"] == "string"
    assert params.get_param("config_overrides").schema["type"] == ["null", "object"]
    assert params["config_overrides"] == {}
    assert params["snapshot"] is None
    # The bundled snapshots are proposed in the trigger form (free text stays possible).
    assert {"druid_sample", "druid38", "generated"} <= set(params.get_param("snapshot").schema["examples"])
    assert "examples" not in params.get_param("cluster").schema  # the bundled root holds no cluster directory
    assert (params["simulate_runs"], params["simulate_loads_per_run"], params["simulate_load_failure_rate"]) == (
        0,
        None,
        0.0,
    )
    assert params["compare_with_druid"] is True and params.get_param("compare_with_druid").schema["type"] == "boolean"


def _dag_hashes(root: Path) -> dict[str, str]:
    """dag_id -> the hash Airflow stores a serialized DAG version under, parsing ``dags/`` with
    ``snapshots_root`` defaulting to ``root``."""
    import os
    from unittest import mock

    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import LazyDeserializedDAG

    with mock.patch.dict(os.environ, {"SEGMENT_BALANCER_SNAPSHOTS": str(root)}):
        bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return {dag_id: LazyDeserializedDAG.from_dag(dag).hash for dag_id, dag in bag.dags.items()}


def test_a_capture_does_not_make_a_new_dag_version(tmp_path):
    """Every capture adds ``<cluster>/<time>/`` under the snapshots root. Were the trigger form's
    proposals to list it, each capture would change the serialized DAG: a new DAG version, a new
    serialized DAG row and a new entry in the scheduler's DAG cache (the scheduler's memory grew
    about 0.9 MiB a capture in the soak of benchmarks/README.md)."""
    from segment_balancer_airflow.params import snapshot_examples

    def snapshot(path: Path) -> None:
        path.mkdir(parents=True)
        (path / "snapshot.json").write_text('{"snapshot_time": "2026-11-26T10:00:00.000Z", "cluster": "prod"}')

    snapshot(tmp_path / "druid_sample")
    snapshot(tmp_path / "prod" / "2026-11-26T10-00-00Z")
    before = _dag_hashes(tmp_path)
    snapshot(tmp_path / "prod" / "2026-11-26T11-00-00Z")
    (tmp_path / "prod" / ".2026-11-26T12-00-00Z.tmp").mkdir()  # a capture being written
    assert _dag_hashes(tmp_path) == before
    assert snapshot_examples(tmp_path) == (["druid_sample"], ["prod"])
    # what the form proposes is still part of the DAG: a new cluster is a new version
    snapshot(tmp_path / "staging" / "2026-11-26T11-00-00Z")
    assert _dag_hashes(tmp_path)["segment_balancing"] != before["segment_balancing"]


def test_the_defaults_are_valid_and_every_empty_field_is_allowed(dag):
    """The UI triggers and backfills with the defaults, and turns an emptied field into null: every
    param but snapshots_root (and the simulation count, defaulting to 0, and compare_with_druid, a
    switch in the form that cannot be emptied) must take null."""
    import copy

    params = copy.deepcopy(dag.params)
    params.validate()
    for key in params:
        if key in ("snapshots_root", "simulate_runs", "advise_runs", "compare_with_druid"):
            continue
        schema = params.get_param(key).schema
        assert "null" in schema["type"], key
        params[key] = None
    params.validate()
    sections = {params.get_param(k).schema.get("section") for k in params}
    assert sections == {
        "Snapshot",
        "Coordinator dynamic config",
        "What-if: cluster edits",
        "What-if simulation",
        "Which config to set",
    }
    assert params.get_param("maxSegmentsInNodeLoadingQueue").schema["minimum"] == 0


def test_simulate_follows_publish_on_the_published_plan(dag):
    from segment_balancer_airflow.connect import SimulateConnectOperator

    op = dag.get_task("simulate")
    assert isinstance(op, SimulateConnectOperator)  # the default spark_mode; spark-submit's: see above
    assert "params.simulate_runs" in op.runs and "params.simulate_loads_per_run" in op.loads_per_run
    assert (op.plan.key, op.out.key, op.work.key) == ("publish_dir", "simulation_dir", "work")


def test_params_are_validated(dag):
    import copy

    from airflow.sdk.exceptions import ParamValidationError

    good = copy.deepcopy(dag.params)
    good.update(
        {
            "snapshot": "druid_sample",
            "config_overrides": {"maxSegmentsInNodeLoadingQueue": 10},
            "simulate_runs": 5,
            "simulate_loads_per_run": 20,
            "simulate_load_failure_rate": 0.1,
        }
    )
    good.validate()
    for key, bad in (
        ("config_overrides", "not an object"),
        ("snapshots_root", ""),
        ("simulate_runs", -1),
        ("simulate_loads_per_run", 0),
        ("simulate_load_failure_rate", 1.5),
        ("maxSegmentsInNodeLoadingQueue", -1),
        ("loadingMinPercent", 101),
        ("numBestServersChoosingFunctionDefaultLogBase", 1),
        ("whatif_remove", "h1:8083"),
        ("whatif_add", [{"tier": "cold", "count": 0, "max_size": 10}]),
    ):
        params = copy.deepcopy(dag.params)
        with pytest.raises(ParamValidationError):
            params[key] = bad
            params.validate()


def test_parsing_imports_nothing_heavy():
    """The DAG file parses without Spark, pandas, GX or the planner's engine: of the package it
    imports only the coordinator registry (``planner.coordinators``: each coordinator's
    applications, its branch of the DAG) with the operation's declaration it names
    (``planner.operations``), the config keys' declarations (``planner.config_keys``, the trigger
    form's typed fields, with the Druid releases they name: ``druid.releases``, standard library
    only) and the bad-input type (``common.errors``, which the retry policy names)."""
    code = (
        "import sys, runpy; runpy.run_path(sys.argv[1]); "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'pandas', 'great_expectations', 'pyroaring') or (m.startswith('segment_balancer.') and m not in "
        "('segment_balancer.planner', 'segment_balancer.planner.config_keys', "
        "'segment_balancer.planner.coordinators', 'segment_balancer.planner.operations', "
        "'segment_balancer.common', 'segment_balancer.common.errors', "
        "'segment_balancer.druid', 'segment_balancer.druid.releases'))); "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(DAGS / "segment_balancing.py")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO / "plugins")},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_segment_balancing_runs_daily_and_on_each_new_capture(dagbag):
    from airflow.timetables.assets import AssetOrTimeSchedule

    from segment_balancer_airflow.assets import SNAPSHOTS

    planning, capture = dagbag.dags["segment_balancing"], dagbag.dags["druid_snapshot_capture"]
    assert isinstance(planning.timetable, AssetOrTimeSchedule)
    assert "0 0 * * *" in planning.timetable.summary or "@daily" in planning.timetable.summary
    assert capture.get_task("capture").outlets == [SNAPSHOTS]
    assert planning.params.get_param("snapshots_root").value == capture.params.get_param("snapshots_root").value
    assert capture.catchup is False and capture.get_task("capture").downstream_task_ids == {"prune"}
    assert capture.params["keep"] >= 1 and capture.params["cluster"]


@pytest.mark.parametrize("now", ["2026-11-27T00:00:01Z", "2026-11-27T01:00:00Z", "2026-11-27T23:59:59Z"])
def test_unpausing_segment_balancing_waits_for_the_next_midnight(dagbag, now, monkeypatch):
    """A DAG never run, unpaused at ``now`` (even just after midnight, within the 10 % that
    ``CronTriggerTimetable`` otherwise runs at once): its first scheduled run is the next midnight
    UTC, so a run triggered with the unpause does not queue behind one of today's."""
    import pendulum
    from airflow.timetables import trigger
    from airflow.timetables.base import TimeRestriction

    monkeypatch.setattr(trigger, "utcnow", lambda: pendulum.parse(now))
    dag = dagbag.dags["segment_balancing"]
    info = dag.timetable.next_dagrun_info(
        last_automated_data_interval=None,
        restriction=TimeRestriction(earliest=dag.start_date, latest=dag.end_date, catchup=dag.catchup),
    )
    assert info.run_after == pendulum.datetime(2026, 11, 28, tz="UTC")


def _next_scheduled_run(dag, reference_run):
    """The scheduler's next run of ``dag`` after ``reference_run``, as Airflow works it out: the DAG
    serialized and read back (the timetable through the plugin registry), then
    ``DagModel.calculate_dagrun_date_fields`` with the reference run the DAG processor picks (the
    latest scheduled or backfill run)."""
    from airflow.models.dag import DagModel
    from airflow.serialization.serialized_objects import LazyDeserializedDAG

    dag_model = DagModel(dag_id=dag.dag_id)
    dag_model.calculate_dagrun_date_fields(LazyDeserializedDAG.from_dag(dag), reference_run=reference_run)
    return dag_model.next_dagrun_create_after


def _daily_run(dag_id, run_type, day, created_at):
    """A run of the daily schedule at midnight UTC of ``day`` (``CronTriggerTimetable``: a zero-length
    data interval at the run's time), created at ``created_at``."""
    import pendulum
    from airflow.models.dagrun import DagRun

    at = pendulum.parse(day)
    run = DagRun(
        dag_id=dag_id,
        run_id=f"{run_type}__{day}",
        run_type=run_type,
        logical_date=at,
        run_after=at,
        data_interval=(at, at),
    )
    run.created_at = pendulum.parse(created_at)
    return run


@pytest.mark.parametrize(
    ("run_type", "day", "created_at", "now", "next_run"),
    [
        # A backfill of last week created at 10:05: the next scheduled run is the next midnight,
        # not today's at once (Airflow picks max(today's midnight, the day after the backfill's last)).
        ("backfill", "2026-11-20T00:00:00Z", "2026-11-27T10:05:00Z", "2026-11-27T10:05:03Z", "2026-11-28"),
        # ... and still when the DAG processor looks again later that day.
        ("backfill", "2026-11-20T00:00:00Z", "2026-11-27T10:05:00Z", "2026-11-27T23:59:59Z", "2026-11-28"),
        # A backfill created yesterday: today's midnight run is the daily run after it, due now.
        ("backfill", "2026-11-20T00:00:00Z", "2026-11-26T10:05:00Z", "2026-11-27T00:00:30Z", "2026-11-27"),
        # A backfill that reran yesterday's scheduled run (its run, created at yesterday's midnight):
        # today's midnight run, as after the scheduled run itself.
        ("backfill", "2026-11-26T00:00:00Z", "2026-11-26T00:00:02Z", "2026-11-27T10:05:00Z", "2026-11-27"),
        # A scheduled run keeps Airflow's catchup=False rule: the latest midnight, here today's, at once.
        ("scheduled", "2026-11-25T00:00:00Z", "2026-11-25T00:00:01Z", "2026-11-27T10:05:00Z", "2026-11-27"),
        ("scheduled", "2026-11-27T00:00:00Z", "2026-11-27T00:00:01Z", "2026-11-27T10:05:00Z", "2026-11-28"),
    ],
)
def test_a_backfill_starts_no_scheduled_run(dagbag, run_type, day, created_at, now, next_run, monkeypatch):
    """A backfill of old days (its runs the latest automated runs of the DAG, which Airflow's DAG
    processor and scheduler take as the reference run) leaves the daily schedule where it was: the
    next scheduled run is the first midnight UTC after the backfill was created, so creating one
    starts exactly the backfill's runs. A scheduled run as the reference is Airflow's own rule."""
    import pendulum
    from airflow.timetables import trigger
    from airflow.utils.types import DagRunType

    monkeypatch.setattr(trigger, "utcnow", lambda: pendulum.parse(now))
    dag = dagbag.dags["segment_balancing"]
    kind = {"backfill": DagRunType.BACKFILL_JOB, "scheduled": DagRunType.SCHEDULED}[run_type]
    reference = _daily_run(dag.dag_id, kind, day, created_at)
    assert _next_scheduled_run(dag, reference) == pendulum.parse(next_run, tz="UTC")
