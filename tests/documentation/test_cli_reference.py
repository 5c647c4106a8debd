"""The CLI reference covers every command of the Typer app and every argument and option."""

from __future__ import annotations

from typing import Any, Iterator

import typer.main

from .helpers import generator, section
from toolfactory.cli import app
from toolfactory.simulator import SimulatorSettings


def _commands(command: Any, name: str) -> Iterator[tuple[str, Any]]:
    yield name, command
    for sub_name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, f"{name} {sub_name}")


def test_every_command_has_its_section():
    page = generator("cli_reference").page()
    names = [name for name, _ in _commands(typer.main.get_command(app), "toolfactory")][1:]
    assert [n for n in names if f"## `{n}`" not in page] == [] and "toolfactory tools import" in names


def test_every_option_is_listed_under_its_command():
    page = generator("cli_reference").page()
    missing = []
    for name, command in list(_commands(typer.main.get_command(app), "toolfactory"))[1:]:
        text = section(page, f"## `{name}`")
        for param in command.params:
            names = [param.name.upper()] if param.param_type_name == "argument" else param.opts
            missing += [f"{name} {n}" for n in names if f"`{n}`" not in text]
    assert missing == []


def test_simulator_serve_lists_the_simulator_flags():
    # Typer hands these flags on to the simulator's own parser: they come from its settings.
    text = section(generator("cli_reference").page(), "## `toolfactory simulator serve`")
    flags = ["--" + name.replace("_", "-") for name in SimulatorSettings.model_fields]
    assert [f for f in flags if f"`{f}`" not in text] == []


def test_the_exit_status_comes_from_the_cli():
    import toolfactory.cli as cli

    text = section(generator("cli_reference").page(), "## Exit status")
    sentence = next(p for p in cli.__doc__.split("\n\n") if p.startswith("Exit status"))
    assert " ".join(sentence.split()) in text
