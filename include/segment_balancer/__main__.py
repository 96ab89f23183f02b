"""``python -m segment_balancer``: see :mod:`segment_balancer.tools.cli`.

A command that validates plans (:data:`~segment_balancer.plan.validation_process.VALIDATING_COMMANDS`)
gets its validation process here, before the CLI's own modules are imported (about a second of
pandas and the planner), so that Great Expectations' import in the child starts that much sooner.
"""

import sys

from segment_balancer.plan.validation_process import VALIDATING_COMMANDS, ValidationProcess

gate = ValidationProcess() if sys.argv[1:2] and sys.argv[1] in VALIDATING_COMMANDS else None
try:
    from segment_balancer.tools.cli import main

    code = main(gate=gate)
finally:
    if gate is not None:
        gate.close()
sys.exit(code)
