"""The rerun flow: finish a run — its failed, blocked or never-run shards — with its own config.

Committed shards are never rewritten, unless a file of theirs is damaged (missing, truncated or,
with `checksums`, changed): then they are built again with every shard that read them
(:mod:`toolfactory.run.integrity`). Answers already obtained come from the LLM cache. The
config file given here only locates the storage root; everything else comes from the run's
manifest, except the operational settings given as overrides (endpoint, retries, concurrency,
storage, …: see :mod:`toolfactory.run.operational`), which are applied and recorded in the manifest.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run

from flows.execute import final_state, run_tags
from flows.preflight import preflight, refused_state
from flows.runtime import llm_endpoint, startup_failure
from toolfactory.config import load_config
from toolfactory.errors import StartupFailed
from toolfactory.run.lease import root_lease
from toolfactory.llm.identity import EndpointIdentity
from toolfactory.run.manifest import Manifest, load_manifest, write_manifest
from toolfactory.run.operational import check_operational, rerun_config, rerun_record
from toolfactory.storage import ObjectStore


@flow(name="rerun", flow_run_name="rerun-{run_id}")
def rerun(run_id: str, config_path: str | None = None, overrides: list[str] | None = None,
          checksums: bool = False) -> dict[str, Any]:
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
    try:
        with llm_endpoint(config) as base_url:
            # The endpoint may have changed since the run began: check it serves the modes the run was
            # made with (never choosing others, which would make the missing shards differently).
            checked = preflight(config, base_url, choose=False)
            if not checked.ok:
                return refused_state(checked)  # type: ignore[return-value]
            manifest, changed = _with_endpoint(manifest, checked.identity, recorded=bool(overrides))
            with root_lease(store, run_id, config.run.root_in_use == "wait", config.run.root_wait_s, get_run_logger().info):
                if overrides or changed:
                    write_manifest(store, manifest)
                with tags(*labels):
                    return final_state(manifest, store, base_url, checksums)
    except StartupFailed as exc:
        return startup_failure(exc)  # type: ignore[no-any-return]


def _with_endpoint(manifest: Manifest, identity: EndpointIdentity | None, recorded: bool) -> tuple[Manifest, bool]:
    """The manifest with this re-run's endpoint recorded when it is not the one the run's data is
    labelled with already (provenance: toolfactory/llm/identity.py), in this re-run's record
    (`recorded`: it has one already, for its overrides); whether it changed."""
    if identity is None or identity.covered_by(manifest.endpoint()):
        return manifest, False
    reruns = list(manifest.reruns) if recorded else [*manifest.reruns, rerun_record([])]
    reruns[-1] = {**reruns[-1], "identity": identity.to_dict()}
    return manifest.model_copy(update={"reruns": reruns}), True
