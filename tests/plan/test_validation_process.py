"""``segment_balancer.plan.validation_process``: the gate in a process of its own answers as
``validate_run`` would in this one (its report, or its error with the report), many plans in a row,
and nothing of it outlives ``close``."""

from __future__ import annotations

import json
import os
import signal
import time

import pandas as pd
import pytest
from test_validation import CHECKS, assignment, write_plan

from segment_balancer.plan.validation import PlanValidationError
from segment_balancer.plan.validation_process import ValidationProcess, ValidationProcessError


def test_the_process_validates_plans_in_a_row_and_ends_on_close(tmp_path):
    good, good_work = write_plan(tmp_path / "good")
    bad, bad_work = write_plan(tmp_path / "bad", assign=pd.concat([assignment()] * 2, ignore_index=True))
    with ValidationProcess() as gate:
        report = gate.validate(good, good_work)
        assert report["success"] is True and [c["name"] for c in report["checks"]] == CHECKS
        assert json.loads((good / "validation.json").read_text())["validated_at"] == report["validated_at"]
        with pytest.raises(PlanValidationError) as err:  # a failed check: the error and its report
            gate.validate(bad, bad_work)
        assert "assignment_unique" in str(err.value) and err.value.report["success"] is False
        assert json.loads((bad / "validation.json").read_text())["success"] is False
        with pytest.raises(FileNotFoundError) as missing:  # a plan not there: the child's own error
            gate.validate(tmp_path / "nowhere", good_work)
        assert any("in the validation process" in note for note in missing.value.__notes__)
        assert gate.validate(good, good_work)["success"] is True  # still answering
        assert gate.running
    assert not gate.running  # ended with the block


def test_a_child_that_is_gone_is_named_not_waited_for(tmp_path):
    plan, work = write_plan(tmp_path)
    gate = ValidationProcess()
    try:
        os.kill(gate.pid, signal.SIGKILL)
        while gate.running:
            time.sleep(0.05)
        with pytest.raises(ValidationProcessError, match=r"ended without answering \(exit code -9\)"):
            gate.validate(plan, work)
    finally:
        gate.close()


def test_a_deferred_module_loads_on_first_use_and_gx_imports_without_it():
    """``DEFERRED_MODULES`` in a fresh interpreter, as the child sets them: GX imports without
    running ``scipy.stats``' code (what the deferral saves), and the module works when used."""
    import subprocess
    import sys

    code = """
import sys
from segment_balancer.plan import validation_process as vp
for name in vp.UNUSED_BACKENDS:
    sys.modules.setdefault(name, None)
for name in vp.DEFERRED_MODULES:
    vp.defer(name)
import great_expectations
assert "scipy.stats._stats_py" not in sys.modules, "GX ran scipy.stats at import"
from scipy import stats
assert stats.norm.cdf(0.0) == 0.5
assert "scipy.stats._stats_py" in sys.modules
vp.defer("scipy.stats")  # imported already: left as it is
vp.defer("no_such_module_here")  # not installed: nothing bound
assert "no_such_module_here" not in sys.modules
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
