"""The rerun flow: finish a run — its failed, blocked or never-run shards — with its own config.

Committed shards are never rewritten; answers already obtained come from the LLM cache. The
config given here only locates the storage root; everything else comes from the run's manifest.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, tags

from flows.execute import execute_run, run_state, run_tags
from toolfactory.config import load_config
from toolfactory.manifest import load_manifest
from toolfactory.storage import ObjectStore


@flow(name="rerun", flow_run_name="rerun-{run_id}")
def rerun(run_id: str, config_path: str | None = None, overrides: list[str] | None = None) -> dict[str, Any]:
    locator = load_config(config_path, overrides or ())
    store = ObjectStore.open(locator.storage)
    manifest = load_manifest(store, run_id)
    with tags(*run_tags(manifest.run_config()), "rerun"):
        return run_state(execute_run(manifest, store))
