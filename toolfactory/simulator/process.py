"""Run the simulator in a child process, for tests, benchmarks and local demos.

The launcher is the product's own (:mod:`toolfactory.llm.simulator_process`: the way a run starts
its `llm.provider: simulator` endpoint); this module lets callers hand it a
:class:`SimulatorSettings` (validated here, at once) as well as a plain mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfactory.llm.simulator_process import (
    SimulatorNotStarted,
    SimulatorProcess,
    SimulatorSettingsRefused,
    free_port,
)
from toolfactory.llm.simulator_process import start_simulator as _start

from .settings import SimulatorSettings


def start_simulator(
    settings: SimulatorSettings | Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    ready_timeout_s: float = 180,
) -> SimulatorProcess:
    """Start a simulator child process and wait until it answers GET /v1/models (see
    :func:`toolfactory.llm.simulator_process.start_simulator`)."""
    if isinstance(settings, SimulatorSettings):
        settings = settings.model_dump(mode="json", exclude_defaults=True)
    return _start(settings or {}, host=host, port=port, ready_timeout_s=ready_timeout_s)


__all__ = ["SimulatorNotStarted", "SimulatorProcess", "SimulatorSettingsRefused", "free_port", "start_simulator"]
