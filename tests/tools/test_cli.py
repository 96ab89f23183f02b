"""``python -m segment_balancer`` (segment_balancer.tools.cli): what a user's bad input gives."""

from __future__ import annotations

import json

from druid_sample_plan import SNAPSHOT

from segment_balancer.tools import cli


def test_an_unknown_key_of_the_config_file_is_refused_naming_the_file_before_spark(tmp_path, capsys, monkeypatch):
    """The user's own ``--config`` stays strict: exit 2, one line naming the file, the
    key and the closest known key; no Spark session is started and nothing is written."""
    import segment_balancer.spark.session as session

    monkeypatch.setattr(
        session, "local_session", lambda *a, **k: (_ for _ in ()).throw(AssertionError("Spark started"))
    )
    bad = tmp_path / "overrides.json"
    bad.write_text(json.dumps({"balancingMinCostReductionPct": 5}))
    code = cli.main(["plan", "--snapshot", str(SNAPSHOT), "--out", str(tmp_path / "plan"), "--config", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == (
        f"input refused: --config {bad}: unknown key 'balancingMinCostReductionPct' "
        "(did you mean 'balancingMinCostReductionPercent'?)"
    )
    assert not (tmp_path / "plan").exists()


def test_an_internal_error_is_not_reported_as_the_users_input(tmp_path, capsys, monkeypatch):
    """A broken invariant (the run state raises ``ValueError`` for those) exits 1 as an internal
    error with its traceback; only ``InputError`` is ``input refused`` with exit code 2."""
    from segment_balancer.common.errors import InputError

    def broken(plan):
        raise ValueError("h1 already holds s1")

    monkeypatch.setattr(cli, "print_summary", broken)
    assert cli.main(["summary", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.strip().endswith(
        "internal error: ValueError: h1 already holds s1 (a bug in segment_balancer: the traceback is above)"
    )
    assert "Traceback" in err and "input refused" not in err

    def refused(plan):
        raise InputError(f"{plan}: no summary.json")

    monkeypatch.setattr(cli, "print_summary", refused)
    assert cli.main(["summary", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"input refused: {tmp_path}: no summary.json"


def test_a_directory_that_is_not_there_is_one_line_naming_it(tmp_path, capsys):
    """``summary``, ``report``, ``explain --plan``, ``plan --snapshot``: exit 2, one line naming
    the path and what it should have been; a snapshot given to ``explain --plan`` says so."""
    missing = tmp_path / "nowhere"
    cases = [
        (["summary", str(missing)], f"input refused: {missing}: no such directory (the plan to summarise)"),
        (["report", str(missing)], f"input refused: {missing}: no such directory (the plan or simulation to report)"),
        (
            ["plan", "--snapshot", str(missing), "--out", str(tmp_path / "p")],
            f"input refused: {missing}: no such directory (the snapshot to plan)",
        ),
        (
            ["explain", "--plan", str(SNAPSHOT), "--segment", "x"],
            f"input refused: {SNAPSHOT}: a snapshot, not a plan; explain --snapshot {SNAPSHOT} ranks every server "
            "for a segment",
        ),
    ]
    for argv, line in cases:
        assert cli.main(argv) == 2, argv
        assert capsys.readouterr().err.strip() == line


def test_a_misspelt_option_names_the_closest_with_the_commands_usage(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as stop:
        cli.main(["plan", "--snapshot", str(SNAPSHOT), "--out", str(tmp_path), "--decomission", "h1"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m segment_balancer plan ")
    assert err.strip().endswith("plan: error: unknown option --decomission (did you mean --decommission?)")
    with pytest.raises(SystemExit):
        cli.main(["summary", str(tmp_path), "--frobnicate"])
    assert capsys.readouterr().err.strip().endswith("summary: error: unknown option --frobnicate")


def test_explain_snapshot_prepares_once_then_answers_without_spark(spark, tmp_path, capsys, monkeypatch):
    """The first question about a snapshot prepares it (Spark) into the cache; the second, about
    another segment, starts no Spark and answers from the kept tables, as text by default and the
    same facts as JSON with --json."""
    import segment_balancer.spark.session as session

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = "twitterstream_2013-01-01T00:00:00.000Z_2013-01-02T00:00:00.000Z_2013-01-02T04:13:41.980Z_v9"
    second = "twitterstream_2013-01-03T00:00:00.000Z_2013-01-04T00:00:00.000Z_2013-01-04T04:09:13.590Z_v9"
    assert cli.main(["explain", "--snapshot", str(SNAPSHOT), "--segment", first]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"segment {first}\n") and "tier " in out
    monkeypatch.setattr(
        session, "local_session", lambda *a, **k: (_ for _ in ()).throw(AssertionError("Spark started"))
    )
    assert cli.main(["explain", "--snapshot", str(SNAPSHOT), "--segment", second, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["segment_id"] == second and answer["tiers"]
    assert len(list((tmp_path / "cache" / "segment_balancer" / "explain").iterdir())) == 1


def _marked_processes(mark: str) -> list[int]:
    """The running processes whose environment holds ``mark``."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if mark.encode() in open(f"/proc/{entry}/environ", "rb").read():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_the_command_line_leaves_no_validation_process_running(tmp_path):
    """``python -m segment_balancer plan`` starts its validation process before the CLI's modules
    load (``__main__``); whether the plan is made or the arguments are refused, the child is gone
    when the command returns."""
    import os
    import subprocess
    import sys
    import uuid

    mark = f"SEGMENT_BALANCER_TEST_MARK={uuid.uuid4()}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    refused = subprocess.run(
        [sys.executable, "-m", "segment_balancer", "plan", "--no-such-option"], env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "usage:" in refused.stderr  # argparse refuses the arguments
    assert _marked_processes(mark) == []
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "segment_balancer",
            "plan",
            "--snapshot",
            str(SNAPSHOT),
            "--out",
            str(tmp_path / "plan"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "plan" / "validation.json").is_file()
    assert _marked_processes(mark) == []
