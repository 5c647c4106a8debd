"""The generate flow: plan a new run from a config and run all its stages (the nightly job)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run

from flows.execute import final_state, run_tags
from flows.preflight import preflight, refused_state
from flows.runtime import llm_endpoint, startup_failure
from toolfactory.config import Config, load_config
from toolfactory.errors import ConfigError, StartupFailed
from toolfactory.run.integrity import pool_advice, pool_damage
from toolfactory.run.lease import root_lease
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.run.planning import new_run_id, plan_run
from toolfactory.storage import ObjectStore


_UNNAMED = "generate-new"


def _name() -> str:
    """The flow run's name, `generate-<run id>`: the run id is chosen here when no one gave it
    (a deployment's run), because Prefect names the run's loggers with this name before the flow
    starts; the flow takes the id back from the name."""
    parameters = flow_run.parameters
    if parameters.get("run_id"):
        return f"generate-{parameters['run_id']}"
    try:
        config = load_config(parameters.get("config_path"), parameters.get("overrides") or ())
    except ConfigError:
        return _UNNAMED  # the flow raises it with its message
    return f"generate-{config.run.run_id or new_run_id(config)}"


def _named_run_id() -> str | None:
    name = flow_run.name
    return name.removeprefix("generate-") if name and name.startswith("generate-") and name != _UNNAMED else None


@flow(name="generate", flow_run_name=_name)
def generate(config_path: str | None = None, overrides: list[str] | None = None, run_id: str | None = None) -> dict[str, Any]:
    """Generate a dataset: preflight, then domains → tools → pool → tasks → dialogues → verify →
    curate, one task per (stage, shard)."""
    config = load_config(config_path, overrides or ())
    store = ObjectStore.open(config.storage)
    run_id = run_id or config.run.run_id or _named_run_id() or new_run_id(config)
    config = config.model_copy(update={"run": config.run.with_seed_for(run_id)})
    labels = run_tags(config)
    with get_client(sync_client=True) as client:  # the generated id and the tags show in the UI
        client.update_flow_run(flow_run.id, name=f"generate-{run_id}", tags=sorted({*flow_run.tags, *labels}))
    try:
        with llm_endpoint(config) as base_url:
            # Before the run takes the root or plans anything: an endpoint that cannot serve the run
            # stops it here, with the field to change.
            checked = preflight(config, base_url)
            if not checked.ok:
                return refused_state(checked)  # type: ignore[return-value]
            # One run at a time on a root, from planning (which reads the pool) to the end (which adds to it).
            with root_lease(store, run_id, config.run.root_in_use == "wait", config.run.root_wait_s, get_run_logger().info):
                _report_pool_damage(store, config)
                manifest = Manifest.create(run_id, config, plan_run(config, run_id, store), checked.record())
                write_manifest(store, manifest)
                with tags(*labels):
                    return final_state(manifest, store, base_url)
    except StartupFailed as exc:
        return startup_failure(exc)  # type: ignore[no-any-return]


def _report_pool_damage(store: ObjectStore, config: Config) -> None:
    """Name each damaged pool file, which planning leaves out (toolfactory.run.pool.pool_files)."""
    for damage in pool_damage(store):
        advice = pool_advice(store, damage.path, config.storage.endpoint_url, config.storage.region)
        get_run_logger().warning("pool_file_damaged: %s; this run plans without it; %s", damage.line(store), advice)
