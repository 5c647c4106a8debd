"""The preflight task: the first thing a run does once its endpoint is up (toolfactory.preflight).

Its table goes to the run's log and to a Prefect artifact. A need the endpoint cannot serve ends
the run before any stage starts: the flow returns :func:`refused_state`, a `Failed` state whose
message is the one message naming the field to change and whose result is the
:class:`PreflightFailed` the CLI reports (exit 2) — returned, not raised, so that the log shows
that message and no traceback. The task is never retried: the same requests would get the same
answers.
"""

from __future__ import annotations

import asyncio

from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.states import Failed, State

from toolfactory.config import Config
from toolfactory.errors import PreflightFailed
from toolfactory.llm import resolve_endpoint
from toolfactory.preflight import Preflight, check_endpoint


@task(name="preflight", retries=0, persist_result=False)
def preflight(config: Config, base_url: str | None, choose: bool = True) -> Preflight:
    report = asyncio.run(check_endpoint(config, resolve_endpoint(config.llm, base_url), choose=choose))
    logger = get_run_logger()
    logger.info("%s", report.table())
    for line in report.choice_lines():
        logger.info("preflight chose %s", line)
    create_markdown_artifact(
        f"# Preflight: {'ok' if report.ok else 'failed'}\n\n```\n{report.table()}\n```\n"
        + (f"\n**{report.problems[0]}**\n" if report.problems else ""),
        key="toolfactory-preflight",
        description="What the endpoint serves for each role, and the modes chosen",
    )
    if report.problems:
        logger.error("preflight: %s", report.problems[0])
    return report


def refused_state(report: Preflight) -> State[Any]:
    """The final state of a run that preflight stopped."""
    return Failed(message=report.problems[0], data=PreflightFailed(report.problems[0], report.table()))
