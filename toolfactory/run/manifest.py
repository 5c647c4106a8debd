"""The manifest of a run: its config (no secrets), versions and shard plan.

Written once when the run is created; a re-run reads it back and so works with the run's own
config and exactly the same shards. The modes preflight chose for `auto` settings are kept
beside the config (``preflight.choices``) and applied by :meth:`Manifest.run_config`, so every
shard and every re-run uses them.
"""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import BaseModel

from toolfactory.config import Config, validate_config
from toolfactory.errors import RunNotFound
from toolfactory.llm.identity import EndpointIdentity, public_url
from toolfactory.preflight.choices import apply_choices
from toolfactory.stages import ShardSpec
from toolfactory.storage import ObjectStore

_VERSIONED = ("toolfactory", "prefect", "prefect-ray", "ray", "openai", "pyarrow", "duckdb", "pydantic")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


class Manifest(BaseModel):
    run_id: str
    created_at: str
    config: dict[str, Any]
    versions: dict[str, str]
    plan: dict[str, list[dict[str, Any]]]
    reruns: list[dict[str, Any]] = []  # re-runs that changed operational settings: {at, overrides}
    preflight: dict[str, Any] = {}  # the endpoint checked, its probes and the modes chosen for `auto`
    # fan-in shards committed without some of their inputs (run.fan_in: proceed): {stage, shard, missing, at}
    partial: list[dict[str, Any]] = []

    @property
    def path(self) -> str:
        return manifest_path(self.run_id)

    def run_config(self) -> Config:
        """The run's config, with the modes preflight chose in place of its `auto` settings."""
        return apply_choices(validate_config(self.config), self.preflight.get("choices", {}))

    def endpoint(self) -> EndpointIdentity:
        """Who answered the run's requests, as the endpoint said at preflight (see
        :mod:`toolfactory.llm.identity`); for a run recorded before that, what its config says."""
        recorded = self.preflight.get("identity")
        if recorded:
            identity = EndpointIdentity.from_dict(recorded)
        else:
            llm = self.config.get("llm") or {}
            identity = EndpointIdentity(public_url(str(llm.get("base_url") or "")), unlisted="not recorded with this run",
                                        assumed_simulator=llm.get("provider", "simulator") == "simulator")
        for rerun in self.reruns:  # a re-run at another endpoint made part of the data
            if rerun.get("identity"):
                identity = identity.merged(EndpointIdentity.from_dict(rerun["identity"]))
        return identity

    def shard_plan(self) -> dict[str, list[ShardSpec]]:
        return {stage: [ShardSpec.from_dict(s) for s in specs] for stage, specs in self.plan.items()}

    @classmethod
    def create(cls, run_id: str, config: Config, plan: dict[str, list[ShardSpec]],
               preflight: dict[str, Any] | None = None) -> Manifest:
        return cls(
            run_id=run_id,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            config=config.snapshot(),
            versions=versions(),
            plan={stage: [spec.to_dict() for spec in specs] for stage, specs in plan.items()},
            preflight=preflight or {},
        )


def manifest_path(run_id: str) -> str:
    return f"runs/{run_id}/manifest.json"


def write_manifest(store: ObjectStore, manifest: Manifest) -> None:
    store.write_bytes(manifest.path, manifest.model_dump_json(indent=2).encode())


def load_manifest(store: ObjectStore, run_id: str) -> Manifest:
    data = store.read_bytes_or_none(manifest_path(run_id))
    if data is None:
        raise RunNotFound(run_id, store.url)
    return Manifest.model_validate(json.loads(data))
