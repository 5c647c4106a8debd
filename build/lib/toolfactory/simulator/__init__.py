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

from .app import create_app, serve
from .cli import main, settings_from_cli_args
from .process import SimulatorProcess, start_simulator
from .schema_instance import instance_for
from .settings import SimulatorSettings

__all__ = [
    "SimulatorProcess",
    "SimulatorSettings",
    "create_app",
    "instance_for",
    "main",
    "serve",
    "settings_from_cli_args",
    "start_simulator",
]
