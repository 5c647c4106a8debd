"""The simulator the executable-tool tests talk to: over HTTP, with no latency and no faults, so
what a test sees comes from the tools that ran."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolfactory.simulator import SimulatorSettings, start_simulator

QUIET = {"latency_ms": 0, "latency_jitter_ms": 0, "rate_malformed_json": 0, "rate_hallucinated_function": 0,
         "rate_missing_required": 0, "rate_wrong_type": 0, "rate_parallel_calls": 0, "rate_follow_up_call": 0,
         "rate_clarify": 0, "rate_decline": 0}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings(**QUIET)) as simulator:
        httpx.post(f"{simulator.root_url}/simulator/settings", json=QUIET).raise_for_status()
        yield simulator
