"""Paths of the fixtures written for the format readers (tests/formats/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def xlam_sample() -> Path:
    return DATA / "xlam_sample.json"


@pytest.fixture(scope="session")
def openai_sample() -> Path:
    return DATA / "openai_sample.jsonl"
