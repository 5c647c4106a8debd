"""What a finished run tells its operator: whether it is whole, and the command that finishes it.

The same words go to the terminal, to the Prefect state of the run and to its status artifact,
so that an alert on a failed run carries everything needed to act on it.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from toolfactory.config import BudgetConfig
from toolfactory.storage import ObjectStore

if TYPE_CHECKING:  # read by attribute only: the command line imports this module without the stages
    from toolfactory.run.summary import RunSummary

_SHOWN = 8  # failed shards listed by name; the rest are counted
# How DuckDB names the file it could not write (its messages wrap the OSError's in their own).
_DUCKDB_FILE = re.compile(r'(?:write|extend|open|create) file "([^"]+)"')


def run_command(command: str, run_id: str, store: ObjectStore, endpoint_url: str | None = None,
                region: str | None = None) -> str:
    """`toolfactory <command> RUN …` with what locates the run's storage (the rest comes from its
    manifest), so that advice printed on one machine works as given on any other."""
    parts = ["toolfactory", command, run_id, "--set", f"storage.root={store.url}"]
    for field, value in (("endpoint_url", endpoint_url), ("region", region)):
        if value:
            parts += ["--set", f"storage.{field}={value}"]
    return shlex.join(parts)


def rerun_command(run_id: str, store: ObjectStore, endpoint_url: str | None = None, region: str | None = None) -> str:
    """`toolfactory rerun …`, which finishes the run (see :func:`run_command`)."""
    return run_command("rerun", run_id, store, endpoint_url, region)


def damage_advice(run_id: str, store: ObjectStore, endpoint_url: str | None = None, region: str | None = None) -> str:
    """What to do about files of a run damaged since their commit: the commands that list them and
    build them again."""
    return (f"`{run_command('check-run', run_id, store, endpoint_url, region)}` lists them, "
            f"`{rerun_command(run_id, store, endpoint_url, region)}` builds them again")


def unfinished_shards(summary: RunSummary) -> list[str]:
    """`stage/part-NNNNN (status)` for every shard of the run that is not committed."""
    return [
        f"{stage.stage}/part-{failure.shard:05d} ({failure.status})"
        for stage in summary.stages
        for failure in stage.failed_shards
    ]


def failure_message(summary: RunSummary, rerun: str) -> str:
    """One paragraph: why the run failed — an endpoint refusal or a floor not reached (its
    `reason`), shards that did not complete — and how to finish it when a re-run can."""
    shards = unfinished_shards(summary)
    reason = summary.reason
    if reason and not rerun:  # every shard committed: a floor, which a re-run would not change
        return f"run {summary.run_id} failed: {reason}"
    shown = ", ".join(shards[:_SHOWN]) + (f" and {len(shards) - _SHOWN} more" if len(shards) > _SHOWN else "")
    cause = first_error(summary)
    return (
        (f"run {summary.run_id} failed: {reason}. " if reason else f"run {summary.run_id}: ")
        + f"{len(shards)} shard(s) did not complete: {shown or 'none recorded'}. "
        + (f"First error: {cause}. " if cause else "")
        + f"Finish the run with: {rerun}"
    )


def first_error(summary: RunSummary, limit: int = 400) -> str | None:
    """`stage/part-NNNNN: <its error>` for the first shard that failed (not one blocked by it), on
    one line: the cause of a failed night, in the endpoint's own words where it gave some."""
    for stage in summary.stages:
        for failure in stage.failed_shards:
            if failure.status == "failed" and failure.error:
                error = " ".join(failure.error.split())
                error = error if len(error) <= limit else error[: limit - 1] + "…"
                return f"{stage.stage}/part-{failure.shard:05d}: {error}"
    return None


def with_larger_budget(rerun: str, budget: BudgetConfig) -> str:
    """`rerun` with each configured budget doubled (the operator may pick any larger value)."""
    parts = []
    if budget.tokens is not None:
        parts += ["--set", f"llm.budget.tokens={budget.tokens * 2}"]
    if budget.usd is not None:
        parts += ["--set", f"llm.budget.usd={budget.usd * 2:g}"]
    return " ".join([rerun, shlex.join(parts)]) if parts else rerun


def budget_message(summary: RunSummary, reason: str, rerun: str) -> str:
    """One paragraph: the run stopped at its budget, what is not done, and how to finish it."""
    shards = unfinished_shards(summary)
    return (
        f"run {summary.run_id} stopped: {reason}; {len(shards)} shard(s) not done. "
        f"Finish the run with a larger budget: {rerun}"
    )


def unwritten_file(exc: BaseException) -> str | None:
    """The file a full disk refused, as the error or an error under it names it (None: unnamed)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.filename:
            return str(cause.filename)
        found = _DUCKDB_FILE.search(str(cause))
        if found:
            return found[1]
        cause = cause.__cause__ or cause.__context__
    return None


def full_disk_line(exc: BaseException) -> str:
    """`No space left on device (writing <file>)`: a full disk in the system's own words (ENOSPC's,
    which :func:`toolfactory.storage.disk_full` also recognizes in a flow's final message), not in
    those of the library that met it (DuckDB's "CHECKPOINT during DETACH failed", pyarrow's "Error
    writing bytes")."""
    where = unwritten_file(exc)
    return "No space left on device" + (f" (writing {where})" if where else "")
