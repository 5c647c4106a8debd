"""Command line: `python -m toolfactory.simulator serve --port P [--rate-429 0.1 ...]`.

There is one flag per :class:`SimulatorSettings` field, generated from the pydantic model
(name, type, description, default) so the CLI can never drift from the settings. The project
CLI wraps this through :func:`main` / :func:`settings_from_cli_args`.
"""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Sequence
from typing import Any, Literal, get_args, get_origin

from pydantic import ValidationError

from .app import serve
from .settings import SimulatorSettings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8800
PROG = "python -m toolfactory.simulator"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr, as every error of toolfactory's."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"error: {self.prog}: {' '.join(message.split())} (see {self.prog} --help)\n")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --host, --port and one flag per settings field to `parser`."""
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"Interface to bind (default {DEFAULT_HOST})."
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"Port to bind (default {DEFAULT_PORT})."
    )
    for name, field in SimulatorSettings.model_fields.items():
        kind: Any = field.annotation if field.annotation in (int, float, str) else str
        help_text = f"{field.description} (default {field.default!r})"
        if field.annotation is bool:
            parser.add_argument(
                _flag(name),
                dest=name,
                default=None,
                help=help_text,
                action=argparse.BooleanOptionalAction,
            )
        elif get_origin(field.annotation) is Literal:
            parser.add_argument(
                _flag(name), dest=name, default=None, help=help_text, choices=get_args(field.annotation)
            )
        else:
            parser.add_argument(
                _flag(name),
                dest=name,
                type=kind,
                default=None,
                help=help_text,
                metavar=kind.__name__.upper(),
            )


def _serve_parser(prog: str = f"{PROG} serve") -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog, description="Run the offline OpenAI-compatible LLM simulator."
    )
    add_settings_arguments(parser)
    return parser


def _settings_from_namespace(
    namespace: argparse.Namespace, parser: argparse.ArgumentParser
) -> SimulatorSettings:
    values = {
        name: getattr(namespace, name)
        for name in SimulatorSettings.model_fields
        if getattr(namespace, name, None) is not None
    }
    try:
        return SimulatorSettings(**values)
    except ValidationError as exc:
        parser.error("; ".join(f"{_flag(str(error['loc'][0])) if error['loc'] else 'settings'}: {error['msg']} "
                               f"(got {error.get('input')!r})" for error in exc.errors()))
        raise  # unreachable: parser.error exits


def settings_from_cli_args(argv: Sequence[str]) -> tuple[SimulatorSettings, str, int]:
    """(settings, host, port) from `serve` arguments; a leading 'serve' is accepted.

    Exits with status 2 and a usage message on invalid arguments, like any argparse CLI.
    """
    args = list(argv)
    if args and args[0] == "serve":
        args = args[1:]
    parser = _serve_parser()
    namespace = parser.parse_args(args)
    return _settings_from_namespace(namespace, parser), namespace.host, namespace.port


def settings_to_cli_args(settings: SimulatorSettings) -> list[str]:
    """Flags that reproduce `settings` (only fields that differ from the defaults)."""
    args: list[str] = []
    defaults = SimulatorSettings()
    for name in SimulatorSettings.model_fields:
        value = getattr(settings, name)
        if value == getattr(defaults, name):
            continue
        if isinstance(value, bool):
            args.append(_flag(name) if value else "--no-" + name.replace("_", "-"))
        else:
            args += [_flag(name), value if isinstance(value, str) else repr(value)]
    return args


def main(argv: Sequence[str] | None = None, prog: str = PROG, epilog: str | None = None) -> None:
    """Entry point: `serve [flags]` runs the simulator in the foreground. `prog` is the command
    that runs it, as its help and errors name it (`toolfactory simulator` from the project's
    CLI); `epilog` ends the help of `serve` (what that command adds to the flags)."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = _Parser(
        prog=prog, description="Offline OpenAI-compatible LLM simulator."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    serve_parser = commands.add_parser(
        "serve",
        help="Run the simulator HTTP server (blocking).",
        description="Run the offline OpenAI-compatible LLM simulator.",
        epilog=epilog,
    )
    add_settings_arguments(serve_parser)
    namespace = parser.parse_args(args)
    settings = _settings_from_namespace(namespace, serve_parser)

    serve(settings, host=namespace.host, port=namespace.port)
