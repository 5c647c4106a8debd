"""The simulator as a real HTTP server, started once for the curation tests."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from toolfactory.simulator import SimulatorSettings, start_simulator


@pytest.fixture(scope="package")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator
