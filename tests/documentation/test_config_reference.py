"""The configuration reference covers every field of the config, with its documentation."""

from __future__ import annotations

import typing
from typing import Any, Iterator

from pydantic import BaseModel

from .helpers import generator, section
from toolfactory.config import Config
from toolfactory.config.llm import SettingsOf
from toolfactory.simulator import SimulatorSettings


def _leaves(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    # Walked here from the models alone, not with the generator's own walk.
    for name, info in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        annotation: Any = info.annotation
        args = typing.get_args(annotation)
        settings = [item.model for item in info.metadata if isinstance(item, SettingsOf)]
        if settings:  # a mapping validated by another program's settings model (llm.simulator)
            yield from _leaves(SimulatorSettings, path)
            assert settings == [f"{SimulatorSettings.__module__}:{SimulatorSettings.__name__}"]
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _leaves(annotation, path)
        elif typing.get_origin(annotation) is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
            yield from _leaves(args[1], path + ".<role>")
        elif typing.get_origin(annotation) is list and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            yield from _leaves(args[0], path + "[]")
        else:
            yield path


def test_every_config_field_has_its_heading():
    page = generator("config_reference").page()
    missing = [path for path in _leaves(Config) if f"### `{path}`" not in page]
    assert missing == [] and len(list(_leaves(Config))) > 100


def test_every_config_field_is_documented():
    page = generator("config_reference").page()
    assert "(undocumented)" not in page, [p for p in _leaves(Config) if "(undocumented)" in section(page, f"### `{p}`")]


def test_defaults_are_those_a_run_gets():
    # The simulator's knobs default to the quickstart's, not to the settings class's own values.
    run_default = Config().llm.simulator["latency_ms"]
    assert run_default != SimulatorSettings().latency_ms
    entry = section(generator("config_reference").page(), "### `llm.simulator.latency_ms`")
    assert f"default `{run_default}`" in entry


def test_a_field_shows_its_type_bounds_and_variable():
    entry = section(generator("config_reference").page(), "### `llm.max_concurrency`")
    assert "integer, ≥ 1, ≤ 1024" in entry and "TOOLFACTORY_LLM__MAX_CONCURRENCY" in entry


def test_each_role_shows_its_own_defaults():
    roles = section(generator("config_reference").page(), "## `llm.roles.<role>`")
    judge = next(line for line in roles.splitlines() if line.startswith("| `judge` |"))
    assert f'`max_tokens: {Config().llm.roles["judge"].max_tokens}`' in judge
