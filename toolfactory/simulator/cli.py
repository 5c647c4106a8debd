"""Command line: `python -m toolfactory.simulator serve --port P [--rate-429 0.1 ...]`.

There is one flag per :class:`SimulatorSettings` field, generated from the pydantic model
(name, type, description, default) so the CLI can never drift from the settings. A program that
starts the simulator with settings of its own config passes them whole as `--settings-json`
(flags given as well win), and names where its config holds them with `--settings-name`: a
refused value then exits with status 2 and `error: invalid config: <name>.<field>: …`, the field
as its user wrote it. The project's `toolfactory simulator` command runs this program, and names
itself in its help and errors with the leading `--prog NAME` (and ends the help of `serve` with
`--epilog TEXT`).
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from collections.abc import Sequence
from typing import Any, Literal, get_args, get_origin

from pydantic import ValidationError

from .settings import SettingsRefused, SimulatorSettings, settings_from_mapping

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
    _add_settings_json(parser)
    return parser


def _add_settings_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--settings-json", default=None, metavar="JSON",
                        help="Settings as one JSON object (a run config's llm.simulator); flags given as well win.")
    parser.add_argument("--settings-name", default="", metavar="NAME",
                        help="Where the caller's config holds --settings-json (e.g. llm.simulator): a refused "
                             "value is named NAME.FIELD.")


def _given_settings(namespace: argparse.Namespace) -> dict[str, Any]:
    """The --settings-json object, validated on its own so that a refused value is named as its
    config names it; exits with status 2 and one line otherwise."""
    text = getattr(namespace, "settings_json", None)
    if text is None:
        return {}
    name = namespace.settings_name
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        _refuse(f"invalid config: {name or 'settings'}: not a JSON object ({exc.msg})")
    if not isinstance(values, dict):
        _refuse(f"invalid config: {name or 'settings'}: must be a mapping, not {type(values).__name__}")
    try:
        settings_from_mapping(values, name)
    except SettingsRefused as exc:
        _refuse(str(exc))
    return values


def _refuse(message: str) -> typing.NoReturn:
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    raise SystemExit(2)


def _settings_from_namespace(
    namespace: argparse.Namespace, parser: argparse.ArgumentParser
) -> SimulatorSettings:
    values = _given_settings(namespace)
    values.update({
        name: getattr(namespace, name)
        for name in SimulatorSettings.model_fields
        if getattr(namespace, name, None) is not None
    })
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


def _leading_options(args: list[str], prog: str, epilog: str | None) -> tuple[list[str], str, str | None]:
    """`--prog NAME` and `--epilog TEXT` given before the command (see the module doc)."""
    while len(args) >= 2 and args[0] in ("--prog", "--epilog"):
        if args[0] == "--prog":
            prog = args[1]
        else:
            epilog = args[1]
        args = args[2:]
    return args, prog, epilog


def main(argv: Sequence[str] | None = None, prog: str = PROG, epilog: str | None = None) -> None:
    """Entry point: `serve [flags]` runs the simulator in the foreground. `prog` is the command
    that runs it, as its help and errors name it (`toolfactory simulator` from the project's
    CLI, which passes it as a leading `--prog`); `epilog` ends the help of `serve`."""
    args, prog, epilog = _leading_options(list(sys.argv[1:] if argv is None else argv), prog, epilog)
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
    _add_settings_json(serve_parser)
    check_parser = commands.add_parser(
        "check",
        help="Check settings and exit: status 0, or 2 and one line naming the refused field.",
        description="Check the simulator's settings without serving (a run checks its config this way "
                    "before it starts anything).",
    )
    _add_settings_json(check_parser)
    namespace = parser.parse_args(args)
    if namespace.command == "check":
        _settings_from_namespace(namespace, check_parser)
        return
    settings = _settings_from_namespace(namespace, serve_parser)

    from .app import serve  # the server (Starlette, the chat model) only once the settings are good

    serve(settings, host=namespace.host, port=namespace.port)
