"""A run that ends `Failed` on purpose is not an engine crash.

A flow run that a worker executes ends in Prefect's engine, which asks the final state for its
result; for a failed state that raises the state's exception, and the engine logs it at ERROR with
a traceback ("Engine execution exited with unexpected exception") before the process exits. For
a run whose flow returned `Failed` itself, with the message an operator acts on (missing shards,
the first error, the re-run command; or preflight's advice), that traceback is noise that hides
the message. This filter drops exactly those records: a real crash (any other exception) keeps
its traceback.
"""

from __future__ import annotations

import logging

from toolfactory.errors import PreflightFailed, RunFailed

# The loggers the engine reports an exception of the flow run on (the flow run's logger, and the
# engine's own when the process exits).
_ENGINE_LOGGERS = ("prefect.flow_runs", "prefect.engine")
_REPORTED = (RunFailed, PreflightFailed)


class ReportedFailure(logging.Filter):
    """Drops an engine record whose exception is a failure the flow reported in its state."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _REPORTED)


def install() -> None:
    """Add the filter once to each engine logger (idempotent: the flows import this module)."""
    for name in _ENGINE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ReportedFailure) for f in logger.filters):
            logger.addFilter(ReportedFailure())
