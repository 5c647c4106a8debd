"""Planning a run: its id, its input shards and every stage's shards, from (config, seed).

The tools stage's inputs are the raw entries of the tool sources, shuffled with the run seed,
cut to `tools.max_tools` and stored with the run in shards of `tools.tools_per_shard`; the
synthesis documents are stored with it too. Every stage plans its shards from the plans before
it and from the pool files that exist now (see :mod:`toolfactory.run.pool`), so the plan, kept in
the manifest, fixes what a re-run reads.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from datetime import datetime, timezone

from pathlib import Path
from typing import Any

from toolfactory.config import Config
from toolfactory.errors import ConfigError
from toolfactory.models import Record, canonical_json, stable_id
from toolfactory.run.pool import DIALOGUES, TOOLS, TREE, pool_files
from toolfactory.storage.shards import ShardPaths, commit_shard, encode_records
from toolfactory.stages import STAGE_NAMES, STAGES, Planning, ShardSpec
from toolfactory.stages.tools.sources import read_sources
from toolfactory.storage import ObjectStore

SOURCES = "sources"
DOCUMENTS = "documents"


class Document(Record):
    """A paragraph of a file the context tree is extracted from (speciation)."""

    id: str
    origin: str
    text: str


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
    plans: dict[str, list[ShardSpec]] = {SOURCES: [], DOCUMENTS: []}
    for index, start in enumerate(range(0, len(items), size)):
        plans[SOURCES].append(_store_inputs(store, run_id, SOURCES, index, items[start : start + size]))
    documents = read_documents(config.tools.synthesis.documents) if config.tools.synthesis.count else []
    if documents:
        plans[DOCUMENTS].append(_store_inputs(store, run_id, DOCUMENTS, 0, documents))
    planning = Planning(config, run_id, plans, *(pool_files(store, kind) for kind in (TOOLS, TREE, DIALOGUES)))
    for stage in STAGES:
        plans[stage.name] = stage.plan(planning)
    return {name: plans[name] for name in STAGE_NAMES}


def _store_inputs(store: ObjectStore, run_id: str, kind: str, index: int, items: list[Any]) -> ShardSpec:
    paths = ShardPaths(run_id, kind, index)
    rows, unstorable = encode_records(items, kind)
    if unstorable:
        bad = next(item for item in items if item.id == unstorable[0].id)
        raise ConfigError(f"tools: an input from {getattr(bad, 'origin', kind)} holds text that cannot be stored ({unstorable[0].detail})")
    commit_shard(store, paths, rows, [], {"items": len(rows)})
    return ShardSpec(kind, index, (paths.main,))


def read_documents(paths: list[str]) -> list[Document]:
    """The paragraphs of the synthesis documents, each one document of speciation."""
    documents = []
    for name in paths:
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"tools.synthesis.documents: no such file {name!r}")
        for k, paragraph in enumerate(p.strip() for p in path.read_text(errors="replace").split("\n\n")):
            if paragraph:
                documents.append(Document(id=stable_id("document", path.name, str(k)), origin=path.name, text=paragraph))
    return documents
