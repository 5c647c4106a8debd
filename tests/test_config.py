from __future__ import annotations

from pathlib import Path

import pytest

from toolfactory.config import Config, load_config
from toolfactory.errors import ConfigError
from toolfactory.simulator import SimulatorSettings

REPO = Path(__file__).resolve().parents[1]


def test_quickstart_file_is_valid_and_documents_every_section() -> None:
    config = load_config(REPO / "configs" / "quickstart.yaml", environ={})
    assert config.llm.provider == "simulator"
    assert set(config.llm.roles) == {"user", "assistant", "tool", "judge", "designer", "target"}
    text = (REPO / "configs" / "quickstart.yaml").read_text()
    for section in Config.model_fields:
        assert f"\n{section}:" in text


def test_quickstart_file_equals_the_embedded_defaults_but_for_its_executable_sources() -> None:
    # The demo adds tool sources that really run and the instructions they anchor; nothing else.
    quickstart = load_config(REPO / "configs" / "quickstart.yaml", environ={})
    defaults = load_config(None, environ={})
    assert defaults.tools.mcp == [] and defaults.tools.environments == []
    assert quickstart.tools.mcp and len(quickstart.tools.environments) >= 2
    assert quickstart.tasks.instructions_per_executable_tool and defaults.tasks.instructions_per_executable_tool is None
    tools = quickstart.tools.model_copy(update={"mcp": [], "environments": []})
    tasks = quickstart.tasks.model_copy(update={"instructions_per_tool": defaults.tasks.instructions_per_tool,
                                                "instructions_per_executable_tool": None})
    # The simulator's knobs are a mapping its own settings resolve: the file writes every one out.
    assert SimulatorSettings(**quickstart.llm.simulator) == SimulatorSettings(**defaults.llm.simulator)
    llm = quickstart.llm.model_copy(update={"simulator": defaults.llm.simulator})
    assert quickstart.model_copy(update={"tools": tools, "tasks": tasks, "llm": llm}) == defaults


def test_quickstart_runs_a_published_mcp_server_installed_with_the_factory() -> None:
    # `make demo` must show tools that really run, from a package of the registries, offline.
    import tomllib

    (source,) = load_config(REPO / "configs" / "quickstart.yaml", environ={}).tools.mcp
    assert (source.name, source.command, source.transport) == ("time", "mcp-server-time", "stdio")
    assert source.limits.network is False
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("mcp-server-time") for d in dependencies)  # not an extra: the demo needs it


def test_defaults_need_no_file() -> None:
    config = load_config(None, environ={})
    assert config.storage.root == "./toolfactory-data"
    assert config.stats_path().endswith("stats.duckdb")


def test_unknown_provider_names_field_and_allowed_values() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["llm.provider=gpt"], environ={})
    message = str(err.value)
    assert "llm.provider" in message
    assert "'simulator'" in message and "'openai-compatible'" in message
    assert "'gpt'" in message


def test_unknown_field_lists_allowed_fields() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["llm.max_concurency=3"], environ={})
    assert "llm.max_concurency: unknown field" in str(err.value)
    assert "max_concurrency" in str(err.value)


def test_out_of_range_value_names_the_bound() -> None:
    with pytest.raises(ConfigError, match=r"run.tolerate_transient_failures: .*less than or equal to 1"):
        load_config(None, ["run.tolerate_transient_failures=3"], environ={})


def test_openai_compatible_needs_base_url() -> None:
    with pytest.raises(ConfigError, match="base_url is required"):
        load_config(None, ["llm.provider=openai-compatible"], environ={})


def test_environment_overrides_file_and_command_line_overrides_environment(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("llm:\n  max_concurrency: 4\ntools:\n  tools_per_shard: 3\n")
    env = {"TOOLFACTORY_LLM__MAX_CONCURRENCY": "8", "TOOLFACTORY_TOOLS__TOOLS_PER_SHARD": "5"}
    config = load_config(path, ["tools.tools_per_shard=7"], environ=env)
    assert config.llm.max_concurrency == 8
    assert config.tools.tools_per_shard == 7


def test_overriding_one_simulator_knob_keeps_the_quickstart_others() -> None:
    config = load_config(None, ["llm.simulator.latency_ms=0"], environ={})
    default = load_config(None, environ={})
    assert config.llm.simulator["latency_ms"] == 0
    assert {**config.llm.simulator, "latency_ms": default.llm.simulator["latency_ms"]} == default.llm.simulator


def test_overriding_one_role_keeps_the_others() -> None:
    config = load_config(None, ["llm.roles.judge.model=big-judge"], environ={})
    assert config.llm.roles["judge"].model == "big-judge"
    assert config.llm.roles["judge"].max_tokens == load_config(None, environ={}).llm.roles["judge"].max_tokens
    assert config.llm.roles["user"].model == "sim-small"


def test_invalid_yaml_and_missing_file_are_config_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("llm: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml", environ={})


def test_snapshot_holds_no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-should-never-be-stored-0123456789")
    config = load_config(None, ["llm.provider=openai-compatible", "llm.base_url=http://x/v1"], environ={})
    assert "sk-live" not in str(config.snapshot())
    assert config.snapshot()["llm"]["api_key_env"] == "OPENAI_API_KEY"


def test_a_null_seed_is_derived_from_the_run_id_and_kept() -> None:
    run = load_config(None, ["run.seed=null"], environ={}).run
    assert run.seed is None
    first, again, other = run.with_seed_for("20261122-a"), run.with_seed_for("20261122-a"), run.with_seed_for("20261123-b")
    assert isinstance(first.seed, int) and first.seed == again.seed != other.seed
    assert load_config(None, ["run.seed=5"], environ={}).run.with_seed_for("x").seed == 5
