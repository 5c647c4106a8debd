"""Starting and stopping simulator child processes."""

from __future__ import annotations

import openai
import pytest

from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.simulator.process import free_port


def ask(base_url: str) -> str:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    reply = client.chat.completions.create(
        model="sim-small", messages=[{"role": "user", "content": "Plan a weekend in Kyoto"}]
    )
    return str(reply.choices[0].message.content)


def test_answers_are_identical_across_processes(sim: object) -> None:
    with start_simulator(SimulatorSettings()) as other:
        assert ask(other.base_url) == ask(sim.base_url)  # type: ignore[attr-defined]


def test_seed_changes_answers(sim: object) -> None:
    with start_simulator(SimulatorSettings(seed=12345)) as other:
        assert ask(other.base_url) != ask(sim.base_url)  # type: ignore[attr-defined]


def test_stop_ends_the_child() -> None:
    process = start_simulator(SimulatorSettings())
    assert process.alive()
    process.stop()
    assert not process.alive()
    process.stop()  # idempotent


def test_explicit_port_is_used() -> None:
    port = free_port()
    with start_simulator(SimulatorSettings(), port=port) as process:
        assert process.base_url == f"http://127.0.0.1:{port}/v1"


def test_dead_child_raises_with_its_output() -> None:
    with start_simulator(SimulatorSettings()) as first:
        with pytest.raises(RuntimeError, match="address already in use"):
            start_simulator(SimulatorSettings(), port=first.port, ready_timeout_s=10)
