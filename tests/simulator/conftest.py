"""One real simulator child process shared by the HTTP tests, plus clients to talk to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from toolfactory.simulator import SimulatorProcess, SimulatorSettings, start_simulator


@pytest.fixture(scope="session")
def sim() -> Iterator[SimulatorProcess]:
    with start_simulator(SimulatorSettings()) as process:
        yield process


@pytest.fixture(scope="session")
def client(sim: SimulatorProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)


@pytest.fixture(scope="session")
def admin(sim: SimulatorProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.root_url, timeout=10) as http:
        yield http


@pytest.fixture
def configure(admin: httpx.Client) -> Iterator[Callable[..., dict[str, Any]]]:
    """Change the shared server's settings for one test; defaults and zero counters after."""
    admin.post("/simulator/reset").raise_for_status()

    def apply(**changes: Any) -> dict[str, Any]:
        response = admin.post("/simulator/settings", json=changes)
        response.raise_for_status()
        return dict(response.json())

    yield apply
    admin.post("/simulator/settings", json=SimulatorSettings().model_dump()).raise_for_status()
    admin.post("/simulator/reset").raise_for_status()
