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


def test_settings_the_simulator_refuses_are_a_config_error_naming_the_field() -> None:
    # The product passes llm.simulator through unread; the simulator process validates it and the
    # launcher turns its refusal into the message a wrong config field gets.
    from toolfactory.errors import ConfigError
    from toolfactory.llm.simulator_process import start_simulator as launch

    with pytest.raises(ConfigError) as refused:
        launch({"latency_ms": -1, "rate_429": 0.5}, settings_name="llm.simulator", ready_timeout_s=120)
    assert str(refused.value) == "invalid config: llm.simulator.latency_ms: Input should be greater than or equal to 0 (got -1)"
    with pytest.raises(ConfigError, match=r"llm\.simulator\.latncy_ms: unknown field \(allowed: .*latency_ms"):
        launch({"latncy_ms": 1}, settings_name="llm.simulator", ready_timeout_s=120)


def test_a_run_refuses_wrong_simulator_settings_before_it_starts_anything(tmp_path) -> None:
    # `toolfactory run` has the simulator check llm.simulator in a short child process among its
    # first checks: the message names the field, and no Prefect server, simulator or run starts.
    import subprocess
    import sys
    from pathlib import Path

    config = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
    root = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "toolfactory.cli", "run", "--config", str(config),
         "--set", "llm.simulator.latency_ms=-1", "--set", f"storage.root={root}"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "invalid config: llm.simulator.latency_ms: Input should be greater than or equal to 0 (got -1)" in done.stderr
    assert "run " not in done.stdout  # the line a started run prints first
    assert not list(root.glob("runs/*")) and not list(root.glob("*/manifest.json"))
