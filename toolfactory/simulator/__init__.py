"""An offline, deterministic, OpenAI-compatible LLM simulator with injectable faults.

It stands in for a real model endpoint in tests, benchmarks and demos: chat completions
(plain text, JSON-schema answers, tool calls, answers to tool results), embeddings, and
configurable latency, transport faults (429/500/hangs), content faults (broken JSON,
hallucinated functions, missing or mistyped arguments) and tool-use behaviours (parallel calls,
follow-up calls whose arguments come from earlier results, clarifying questions, declines).
The same request always gets the same answer, so pipelines built on it are reproducible
without network access or model weights.

Typical use::

    with start_simulator(SimulatorSettings(rate_429=0.1)) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="sk-test")
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app, serve
    from .cli import main, settings_from_cli_args
    from .process import SimulatorNotStarted, SimulatorProcess, SimulatorSettingsRefused, free_port, start_simulator
    from .schema_instance import instance_for
    from .settings import SimulatorSettings

# Imported when first asked for: the server (Starlette, the chat model) is needed only by what
# serves a simulator, and the launcher only by what starts one.
_MODULES = {
    "SimulatorNotStarted": ".process", "SimulatorProcess": ".process", "SimulatorSettingsRefused": ".process", "free_port": ".process", "SimulatorSettings": ".settings", "create_app": ".app", "instance_for": ".schema_instance",
    "main": ".cli", "serve": ".app", "settings_from_cli_args": ".cli", "start_simulator": ".process",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(import_module(_MODULES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SimulatorNotStarted",
    "SimulatorProcess",
    "SimulatorSettings",
    "SimulatorSettingsRefused",
    "create_app",
    "free_port",
    "instance_for",
    "main",
    "serve",
    "settings_from_cli_args",
    "start_simulator",
]
