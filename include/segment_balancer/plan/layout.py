"""Names of the advice's files in a directory, declared once: an advice directory (``tools.advise``)
and a published plan's advice (the DAG's ``advise`` task). Imports nothing."""

ADVICE_FILE = "advice.json"
"""The advice of a directory (``tools.advise``)."""
ADVICE_DIR = "advice"
"""A published plan's advice, in its directory (a DAG run's ``advise_runs``)."""
