"""Bad input refused by a task: one clear line in the task's log, no traceback, no retry.

A snapshot, config override or what-if edit that is wrong stays wrong on a retry, and a Python
traceback sends the user into the code instead of into the file. A task that finds bad input
(``common.errors.InputError``: ``SnapshotError``, ``WhatIfError``, no snapshot to plan on …)
raises :class:`InputRefused` instead:

- it is a ``SystemExit``, which the Airflow 3 task runner logs as one ``Task exited`` line carrying
  the message (``exit_code='input refused: servers.json row 3: max_size must be >= 0, got -5'``),
  not as ``Task failed with exception`` with a traceback;
- :data:`RETRY_POLICY` (the DAG's ``default_args``) fails the task at once on it, whatever its
  ``retries``, with the reason shown beside the attempt.

A run that would not fit on the disk (``disk.NotEnoughRoom``, found by ``resolve_snapshot`` before
anything is written) is refused the same way, as :class:`NoRoom`. Anything else a task raises (a
Spark server gone, a disk filled by something else meanwhile) keeps Airflow's usual handling: the
traceback, and the retries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

from segment_balancer.common.errors import INPUT_REFUSED, InputError
from segment_balancer_airflow.disk import NotEnoughRoom

log = logging.getLogger(__name__)

#: The prefix of every refusal's message.
PREFIX = INPUT_REFUSED


class InputRefused(SystemExit):
    """Bad input found by a task; ``code`` (what the task runner logs) is the one-line message:
    :data:`PREFIX`, then the file, the row or key, the offending value and what was expected."""

    def __init__(self, message: str) -> None:
        super().__init__(PREFIX + message)
        self.message = message


class NoRoom(SystemExit):
    """A run refused before it starts for want of disk space; ``code`` is ``no room: `` and the one
    line of ``disk.NotEnoughRoom``."""

    def __init__(self, message: str) -> None:
        super().__init__("no room: " + message)
        self.message = message


#: Fail at once, with no retry, on :class:`InputRefused` and :class:`NoRoom`; the usual retries for anything else.
RETRY_POLICY = ExceptionRetryPolicy(
    rules=[
        RetryRule(
            exception=f"{__name__}.InputRefused",
            action=RetryAction.FAIL,
            reason="bad input: a retry would be refused the same way; mend the input and trigger again",
        ),
        RetryRule(
            exception=f"{__name__}.NoRoom",
            action=RetryAction.FAIL,
            reason="not enough free disk for the run: free some and trigger again",
        ),
    ]
)


@contextmanager
def refusing_bad_input() -> Iterator[None]:
    """Turn bad input raised inside the block into :class:`InputRefused`, and ``disk.NotEnoughRoom``
    into :class:`NoRoom` (each logged as an error first)."""
    try:
        yield
    except NotEnoughRoom as exc:
        log.error("no room: %s", exc)
        raise NoRoom(str(exc)) from None
    except InputError as exc:
        message = str(exc)
        log.error("%s%s", PREFIX, message)
        raise InputRefused(message) from None
