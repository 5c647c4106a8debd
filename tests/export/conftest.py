"""Fixtures of the export tests: a run of the valid corpus, and one of the papers' real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfactory.models import Dialogue
from toolfactory.storage import ObjectStore

from .helpers import corpus, open_store, real_toolalpaca, real_toolbench, write_run


@pytest.fixture(scope="module")
def dialogues() -> list[Dialogue]:
    """70 valid dialogues: every shape of the corpus ten times, with source tools and models."""
    return corpus(70, seed=3)


@pytest.fixture
def run_store(tmp_path: Path, dialogues: list[Dialogue]) -> ObjectStore:
    store = open_store(tmp_path / "store")
    write_run(store, dialogues)
    return store


@pytest.fixture(scope="session")
def real_dialogues(shared_data: Path) -> list[Dialogue]:
    """ToolBench's released answers and ToolAlpaca's simulated evaluation set, through the repo's readers."""
    return [*real_toolbench(shared_data), *real_toolalpaca(shared_data)]


@pytest.fixture
def real_store(tmp_path: Path, real_dialogues: list[Dialogue]) -> ObjectStore:
    store = open_store(tmp_path / "real-store")
    write_run(store, real_dialogues)
    return store
