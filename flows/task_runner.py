"""The stage flow's task runner: prefect-ray's, with each Ray worker keeping the Prefect settings
and client it builds for a driver's API instead of building them again for every task.

For every task it runs, prefect-ray's worker side parses the driver's Prefect settings again (from
the serialized settings and the worker's environment, through pydantic-settings) and builds two new
Prefect clients, one for the task's context and one for its engine, each with an SSL context of its
own and a request that checks the server's version. That is most of the Ray workers' CPU in a run
of small shards (measured: `python -m benchmarks.task_runner`). Here a worker builds the settings
and one client once per driver settings, and lends both to each task it runs, the way Prefect's own
`SettingsContext` and `SyncClientContext` lend them to the code inside them. What a task sees is
what it saw before: the driver's settings, and a client for the API they name, whatever the
worker's environment says.

It overrides prefect-ray's `_run_prefect_task`, the function a worker runs for each task, and sets
Prefect's context variables itself: `tests/test_task_runner.py` fails if an upgrade of either
makes the worker build a client per task again or lend one driver's settings to another's tasks.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.context import SettingsContext, SyncClientContext
from prefect_ray import RayTaskRunner


@dataclass(frozen=True)
class _Kept:
    settings: SettingsContext | None  # None: the driver sent none; the worker's own apply
    client: SyncPrefectClient  # started, and left open for the tasks to come


# What this worker process keeps, by the serialized settings it was built from; the oldest is
# dropped past a few (a worker of a shared cluster may serve drivers of several APIs).
_KEPT: OrderedDict[str, _Kept] = OrderedDict()
_KEEP = 4


class KeptContextRayTaskRunner(RayTaskRunner):
    """A `RayTaskRunner` whose workers keep the Prefect settings and client of a driver's API."""

    @staticmethod
    def _run_prefect_task(*upstream: Any, context: dict[str, Any], **kwargs: Any) -> Any:
        with lent_context(context.get("settings_context") or {}):
            # The settings are current already: without them here, the engine does not parse them again.
            context = {key: value for key, value in context.items() if key != "settings_context"}
            return RayTaskRunner._run_prefect_task(*upstream, context=context, **kwargs)


@contextmanager
def lent_context(settings: dict[str, Any]) -> Iterator[None]:
    """Inside the block, the settings of `settings` (a serialized `SettingsContext`) are the
    current ones and this process's client for their API is the current sync client; both built
    on first use and kept for the next block."""
    kept = _kept(settings)
    tokens = [SyncClientContext.__var__.set(SyncClientContext.model_construct(client=kept.client))]
    if kept.settings is not None:
        tokens.append(SettingsContext.__var__.set(kept.settings))
    try:
        yield
    finally:
        for token in reversed(tokens):
            token.var.reset(token)


def _kept(settings: dict[str, Any]) -> _Kept:
    key = json.dumps(settings, sort_keys=True, default=str)
    kept = _KEPT.get(key)
    if kept is not None:
        _KEPT.move_to_end(key)
        return kept
    context = SettingsContext(**settings) if settings else None
    previous = SettingsContext.__var__.set(context) if context is not None else None
    try:
        client = get_client(sync_client=True)
        client.__enter__()
        try:
            if context is None or context.settings.client.server_version_check_enabled:
                client.raise_for_api_version_mismatch_once()
        except BaseException:
            client.__exit__(None, None, None)
            raise
    finally:
        if previous is not None:
            SettingsContext.__var__.reset(previous)
    kept = _KEPT[key] = _Kept(context, client)
    while len(_KEPT) > _KEEP:
        _, oldest = _KEPT.popitem(last=False)
        oldest.client.__exit__(None, None, None)
    return kept
