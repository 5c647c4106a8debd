"""The CLI reference, generated from the Typer app of ``toolfactory.cli``.

It walks the command tree that Typer builds (``typer.main.get_command``), so every command,
argument and option is written with its help as ``toolfactory … --help`` shows it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import typer.main

from prose import code, paragraphs, type_text

PROGRAM = "toolfactory"


@dataclass
class Parameter:
    """An argument or option of one command."""

    names: list[str]
    kind: str  # "argument" or "option"
    type: str
    default: Any
    required: bool
    multiple: bool
    help: str

    @property
    def label(self) -> str:
        return ", ".join(code(n) for n in self.names)


@dataclass
class Command:
    """A command (or group) with its full name, e.g. ``toolfactory tools import``."""

    name: str
    help: list[str]
    parameters: list[Parameter]
    is_group: bool

    @property
    def usage(self) -> str:
        words = [self.name]
        if self.is_group:
            return f"{self.name} COMMAND [ARGS]..."
        for p in self.parameters:
            if p.kind == "argument":
                words.append(p.names[0] if p.required else f"[{p.names[0]}]")
        if any(p.kind == "option" for p in self.parameters):
            words.append("[OPTIONS]")
        return " ".join(words)


def _simulator_flags() -> list[Parameter]:
    """The flags `simulator serve` passes on to the simulator's own parser (one per setting)."""
    from toolfactory.simulator.cli import add_settings_arguments

    parser = argparse.ArgumentParser(add_help=False)
    add_settings_arguments(parser)
    out = []
    for action in parser._actions:  # argparse offers no public list of its actions
        kind = "flag" if action.nargs == 0 else (f"one of {', '.join(code(c) for c in action.choices)}"
                                                  if action.choices else type_text(action.type or str))
        out.append(Parameter(list(action.option_strings), "option", kind, action.default, False, False,
                             " ".join((action.help or "").split())))
    return out


# Commands that hand their arguments to another parser: Typer sees none of those flags.
PASSED_THROUGH: dict[str, Callable[[], list[Parameter]]] = {
    f"{PROGRAM} simulator serve": _simulator_flags,
}


def commands() -> Iterator[Command]:
    """Every command of the CLI, depth-first, the program itself first."""
    from toolfactory.cli import app

    yield from _walk(typer.main.get_command(app), PROGRAM)


def _walk(command: Any, name: str) -> Iterator[Command]:
    subcommands = getattr(command, "commands", None) or {}
    params = [_parameter(p) for p in command.params if not getattr(p, "hidden", False)]
    if name in PASSED_THROUGH:
        params += PASSED_THROUGH[name]()
    yield Command(name, paragraphs(command.help), params, bool(subcommands))
    for sub_name, sub in subcommands.items():
        if not getattr(sub, "hidden", False):
            yield from _walk(sub, f"{name} {sub_name}")


def _parameter(param: Any) -> Parameter:
    kind = param.param_type_name
    if kind == "argument":
        names = [(param.metavar or param.name).upper()]
    else:
        names = list(param.opts) + list(param.secondary_opts)
    descriptor = getattr(param, "type_descriptor", None)
    annotation = descriptor.annotation if descriptor is not None else None
    flag = getattr(param, "is_bool_flag", False)
    kind_text = "flag" if flag else (type_text(annotation) if annotation is not None else "")
    return Parameter(names, kind, kind_text, param.default, bool(param.required), bool(param.multiple),
                     " ".join(paragraphs(getattr(param, "help", None))))


def _default(param: Parameter) -> str:
    if param.required:
        return "required"
    if param.default in (None, (), []) or (param.type == "flag" and param.default is False):
        return ""
    return f"default {code(param.default)}"


def page() -> str:
    """The whole Markdown page."""
    import toolfactory.cli as cli_module

    found = list(commands())
    lines = [
        "# CLI reference",
        "",
        "Generated from the command line's own definitions (`toolfactory/cli.py`) each time the site "
        "is built; `toolfactory COMMAND --help` prints the same help.",
        "",
        *[p + "\n" for p in paragraphs(cli_module.main.__doc__)],
        "## Exit status",
        "",
        *[p + "\n" for p in paragraphs(cli_module.__doc__) if p.startswith("Exit status")],
        "## Commands",
        "",
        *[f"- [{code(c.name)}](#{anchor(c.name)}): {c.help[0] if c.help else ''}" for c in found[1:]],
        "",
    ]
    for command in found[1:]:
        lines += [f"## {code(command.name)} {{#{anchor(command.name)}}}", "", "```", command.usage, "```", ""]
        lines += [p + "\n" for p in command.help]
        if command.parameters:
            lines += ["| argument or option | type | default | what it does |", "| --- | --- | --- | --- |"]
            for p in command.parameters:
                kind = p.type.removeprefix("list of ") + ", repeatable" if p.multiple else p.type
                lines.append(f"| {p.label} | {_cell(kind)} | {_cell(_default(p))} | {_cell(p.help)} |")
            lines.append("")
    return "\n".join(lines)


def anchor(name: str) -> str:
    """The page's anchor of a command (`toolfactory-tools-import`)."""
    return name.replace(" ", "-")


def _cell(text: str) -> str:
    # A pipe outside a code span would end the table cell.
    return text.replace("|", "\\|")


def every_command() -> list[tuple[str, list[str]]]:
    """(name, its arguments' and options' names) of every command, for the coverage test."""
    return [(c.name, [n for p in c.parameters for n in p.names]) for c in commands()]
