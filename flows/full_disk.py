"""A full disk ends a flow `Failed` with one line, not with a traceback per flow.

Storage and the stats database may share a disk that fills during a run: every write then fails
alike, and the tracebacks of each flow that hit it say nothing more than the first line does.
What matters to the operator is that the run stopped, which file could not be written, and how to
finish the run once there is room: not the words of the library that hit the disk (DuckDB's
"CHECKPOINT during DETACH failed", pyarrow's "Error writing bytes").
"""

from __future__ import annotations

from typing import Any

from prefect.states import Failed

from toolfactory.run.outcome import full_disk_line


def full_disk_state(exc: BaseException, rerun: str | None = None) -> Any:
    """The `Failed` state of a flow stopped by a full disk (with the command that finishes the run)."""
    then = f"; free some, then finish the run with: {rerun}" if rerun else ""
    return Failed(message=f"stopped: {full_disk_line(exc)}{then}")
