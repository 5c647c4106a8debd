"""The rerun flow: finish a run — its failed, blocked or never-run shards — with its own config.

Committed shards are never rewritten; answers already obtained come from the LLM cache. The
config file given here only locates the storage root; everything else comes from the run's
manifest, except the operational settings given as overrides (endpoint, retries, concurrency,
storage, …: see :mod:`toolfactory.operational`), which are applied and recorded in the manifest.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run

from flows.execute import execute_run, run_state, run_tags
from flows.full_disk import full_disk_state
from flows.preflight import preflight, refused_state
from flows.runtime import llm_endpoint
from toolfactory.config import load_config
from toolfactory.lease import root_lease
from toolfactory.manifest import load_manifest, write_manifest
from toolfactory.operational import check_operational, rerun_config, rerun_record
from toolfactory.outcome import rerun_command
from toolfactory.storage import ObjectStore, disk_full


@flow(name="rerun", flow_run_name="rerun-{run_id}")
def rerun(run_id: str, config_path: str | None = None, overrides: list[str] | None = None) -> dict[str, Any]:
    check_operational(overrides or ())
    locator = load_config(config_path, overrides or ())
    store = ObjectStore.open(locator.storage)
    manifest = load_manifest(store, run_id)
    if overrides:
        config = rerun_config(manifest.config, overrides)
        manifest = manifest.model_copy(update={"config": config.snapshot(), "reruns": [*manifest.reruns, rerun_record(overrides)]})
    config = manifest.run_config()
    labels = [*run_tags(config), "rerun"]
    with get_client(sync_client=True) as client:  # the run's tags on the rerun's own flow run, as on its first
        client.update_flow_run(flow_run.id, tags=sorted({*flow_run.tags, *labels}))
    with llm_endpoint(config) as base_url:
        # The endpoint may have changed since the run began: check it serves the modes the run was
        # made with (never choosing others, which would make the missing shards differently).
        checked = preflight(config, base_url, choose=False)
        if not checked.ok:
            return refused_state(checked)  # type: ignore[return-value]
        with root_lease(store, run_id, config.run.root_in_use == "wait", config.run.root_wait_s, get_run_logger().info):
            if overrides:
                write_manifest(store, manifest)
            with tags(*labels):
                try:
                    return run_state(execute_run(manifest, store, base_url))
                except Exception as exc:
                    if not disk_full(exc):
                        raise
                    return full_disk_state(exc, rerun_command(run_id, store, config.storage.endpoint_url, config.storage.region))
