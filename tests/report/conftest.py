"""The small real run of :mod:`.helpers`, and reports built from it once per module."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolfactory.report import build_report
from toolfactory.storage import ObjectStore

from .helpers import EARLIER, RUN, DialogueOptions, Page, open_store, parse, write_dialogues, write_run_files, write_stats

ACCEPTED_SHARDS = (7, 7)  # the verify stage's items_out per shard in `write_stats`


@dataclass
class Built:
    store: ObjectStore
    stats_path: Path
    records: list[dict[str, Any]]
    result: dict[str, Any]
    html: str
    page: Page


def _built(store: ObjectStore, stats_path: Path, records: list[dict[str, Any]]) -> Built:
    result = build_report(store, stats_path, RUN)
    html = store.read_bytes(result["index"]).decode("utf-8")
    return Built(store, stats_path, records, result, html, parse(html))


@pytest.fixture(scope="session")
def stats_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's stats database, written once (each StatsDB write opens the file)."""
    path = tmp_path_factory.mktemp("stats") / "stats.duckdb"
    write_stats(path)
    return path


@pytest.fixture
def stats_path(tmp_path: Path, stats_file: Path) -> Path:
    return Path(shutil.copy(stats_file, tmp_path / "stats.duckdb"))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The report of the run with every optional field present: a manifest, exports, rejected
    records with their verdicts, and an earlier run in the same storage root."""
    folder = tmp_path_factory.mktemp("report")
    store = open_store(folder / "store")
    stats = folder / "stats.duckdb"
    write_stats(stats, EARLIER, storage=store.url, started_at="2026-11-21T03:00:00")
    write_stats(stats, storage=store.url)
    records = write_dialogues(store, ACCEPTED_SHARDS)
    write_run_files(store)
    return _built(store, stats, records)


@dataclass
class Rebuilt:
    first: Built
    second: Built  # after the shards were rewritten without complexity, cluster and target mode


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory, stats_file: Path) -> Rebuilt:
    store = open_store(tmp_path_factory.mktemp("rebuilt") / "store")
    first = _built(store, stats_file, write_dialogues(store, ACCEPTED_SHARDS))
    bare = DialogueOptions(complexity=False, cluster=False, target_mode=False)
    return Rebuilt(first, _built(store, stats_file, write_dialogues(store, ACCEPTED_SHARDS, bare)))
