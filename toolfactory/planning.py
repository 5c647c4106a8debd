"""Planning a run: its id, its input shards and every stage's shards, from (config, seed).

The tools stage's inputs are the raw entries of the tool sources, shuffled with the run seed,
cut to `tools.max_tools` and stored with the run in shards of `tools.tools_per_shard`; every later
stage plans its shards from the stage before it.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from datetime import datetime, timezone

from toolfactory.config import Config
from toolfactory.errors import ConfigError
from toolfactory.models import canonical_json
from toolfactory.shards import ShardPaths, commit_shard, encode_records
from toolfactory.stages import STAGES, ShardSpec
from toolfactory.stages.tools.sources import read_sources
from toolfactory.storage import ObjectStore

SOURCES = "sources"


def new_run_id(config: Config) -> str:
    """Time, then a hash of the config, then a few random characters: sortable and unique."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    digest = hashlib.sha256(canonical_json(config.snapshot()).encode()).hexdigest()[:6]
    return f"{stamp}-{digest}{secrets.token_hex(2)}"


def plan_run(config: Config, run_id: str, store: ObjectStore) -> dict[str, list[ShardSpec]]:
    items = read_sources(config.tools)
    random.Random(config.run.seed).shuffle(items)
    if config.tools.max_tools is not None:
        items = items[: config.tools.max_tools]
    size = config.tools.tools_per_shard
    inputs: list[ShardSpec] = []
    for index, start in enumerate(range(0, len(items), size)):
        paths = ShardPaths(run_id, SOURCES, index)
        rows, unstorable = encode_records(items[start : start + size], SOURCES)
        if unstorable:
            bad = next(item for item in items if item.id == unstorable[0].id)
            raise ConfigError(f"tools.files: an entry of {bad.origin} holds text that cannot be stored ({unstorable[0].detail})")
        commit_shard(store, paths, rows, [], {"items": len(rows)})
        inputs.append(ShardSpec(SOURCES, index, (paths.main,)))
    plan: dict[str, list[ShardSpec]] = {}
    upstream = inputs
    for stage in STAGES:
        upstream = plan[stage.name] = stage.plan(config, run_id, upstream)
    return plan
