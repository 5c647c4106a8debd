"""How one MCP server is configured as a tool source (an entry of ``tools.mcp``)."""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from toolfactory.errors import ConfigError
from toolfactory.executable.mcp.presets import PRESETS, McpPreset, find_executable
from toolfactory.executable.settings import ExecutableSourceSettings

#: ``${NAME}`` in an ``env`` value: taken from the factory's environment when a server starts.
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: Stands for the session's own temporary working folder in ``args``, ``env`` and ``cwd``.
WORKDIR = "TOOLFACTORY_WORKDIR"
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class McpSourceSettings(ExecutableSourceSettings):
    """An MCP server started over stdio (``command``) or reached over streamable HTTP (``url``)."""

    preset: str | None = None
    """A published server of the catalog by name (`memory`, `filesystem`, `git`, …; see
    `toolfactory.executable.mcp.presets`): fills in `command`, `args`, `env`, `url`, `deny` and the
    state settings that the entry does not set itself."""
    command: str | None = None
    """Executable that starts the server over stdio (under the source's `limits`)."""
    args: list[str] = Field(default_factory=list)
    """Its arguments; `${TOOLFACTORY_WORKDIR}` stands for the session's own working folder."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables of the server. A value may hold `${VAR}`, taken from the
    factory's environment when the server starts: secrets stay out of the configuration, and
    are never logged or stored."""
    cwd: str | None = None
    """The server's working folder (default: the session's own temporary folder)."""
    url: str | None = None
    """Endpoint of a server reached over streamable HTTP (started by someone else: its state is
    not reset between sessions)."""
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    """HTTP header name → name of the environment variable holding its value (e.g. a token)."""
    state_tool: str | None = None
    """A read-only tool of the server whose result is the session's state (e.g. `read_graph`)."""
    state_files: bool = False
    """Include the session's working folder in its state: relative path → SHA-256 of content."""

    @model_validator(mode="before")
    @classmethod
    def _from_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("preset") is None:
            return data
        found = PRESETS.get(data["preset"])
        if found is None:
            raise ConfigError(f"tools.mcp[{data.get('name', '?')}].preset: unknown preset {data['preset']!r} "
                              f"(one of {', '.join(sorted(PRESETS))})")
        # The program by name: a session looks for it where it starts (transport.server_command),
        # and says how to install it when it is absent (see resolved_args).
        given = {key for key, value in data.items() if value is not None}
        # A launcher (`sh -c`) finds its program on PATH only: it is given the program's path.
        filled = found.fields((find_executable(found.executable) or found.executable) if found.launcher else found.executable)
        if "url" in given and found.transport == "stdio":
            return data  # the entry points at a server of its own; the preset adds nothing
        return {**{key: value for key, value in filled.items() if key not in given}, **data}

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("an http:// or https:// URL")
        return value

    @field_validator("headers_from_env")
    @classmethod
    def _header_names(cls, value: dict[str, str]) -> dict[str, str]:
        for header, variable in value.items():
            if not HEADER_NAME.match(header):
                raise ValueError(f"{header!r} is not an HTTP header name")
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", variable):
                raise ValueError(f"{header}: {variable!r} is not an environment variable name")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpSourceSettings:
        where = f"tools.mcp[{self.name}]"
        if (self.command is None) == (self.url is None):
            raise ConfigError(f"{where}: set exactly one of `command` (stdio) or `url` (streamable HTTP)")
        if self.url is not None:
            for field in ("args", "env", "cwd"):
                if getattr(self, field):
                    raise ConfigError(f"{where}.{field}: only for a server started over stdio (`command`)")
            if self.state_files:
                raise ConfigError(f"{where}.state_files: an HTTP server's files are not ours to read")
        elif self.headers_from_env:
            raise ConfigError(f"{where}.headers_from_env: only for a server reached over HTTP (`url`)")
        for field, value in [*((f"args[{i}]", a) for i, a in enumerate(self.args)), ("cwd", self.cwd or "")]:
            names = {m.group(1) for m in ENV_REFERENCE.finditer(value)} - {WORKDIR}
            if names:
                raise ConfigError(f"{where}.{field}: only ${{{WORKDIR}}} may be used here (put ${{{min(names)}}} in env)")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def resolved_env(self, workdir: str) -> dict[str, str]:
        """`env` with every `${VAR}` taken from the environment (``TOOLFACTORY_WORKDIR``: `workdir`).
        Raises :class:`ConfigError` naming the variable (never its value) when one is unset."""
        return {key: self._expand(value, f"env.{key}", workdir) for key, value in self.env.items()}

    def preset_entry(self) -> McpPreset | None:
        """The catalog's entry of `preset` (None without one)."""
        return None if self.preset is None else PRESETS[self.preset]

    def check_installed(self) -> None:
        """Raise a :class:`ConfigError` naming the preset and its install command when the
        preset's program, which this entry starts, is on neither PATH nor `build/mcp-servers`."""
        preset = self.preset_entry()
        if preset is None or self.command is None:
            return
        starts_it = os.path.basename(self.command) == preset.executable or (preset.launcher and self.command == preset.launcher[0])
        if starts_it and find_executable(preset.executable) is None:
            raise ConfigError(f"tools.mcp[{self.name}].preset: {self.preset} needs {preset.executable}, found neither on "
                              f"PATH nor in build/mcp-servers/node_modules/.bin: install it with `{preset.install}`")

    def resolved_args(self, workdir: str) -> list[str]:
        """`args` with `${TOOLFACTORY_WORKDIR}` replaced; no other variable: a command line is
        visible to every user of the machine, so secrets go through `env`. Called as a session
        starts: a preset's program that is not installed is a :class:`ConfigError` then."""
        self.check_installed()
        return [self._expand(arg, f"args[{i}]", workdir, secrets=False) for i, arg in enumerate(self.args)]

    def resolved_cwd(self, workdir: str) -> str:
        return workdir if self.cwd is None else self._expand(self.cwd, "cwd", workdir, secrets=False)

    def resolved_headers(self) -> dict[str, str]:
        """The HTTP headers, their values read from the environment now."""
        headers: dict[str, str] = {}
        for header, variable in self.headers_from_env.items():
            value = os.environ.get(variable)
            if value is None:
                raise ConfigError(f"tools.mcp[{self.name}].headers_from_env.{header}: environment variable {variable} is not set")
            headers[header] = value
        return headers

    def secret_values(self) -> list[str]:
        """Every value taken from the environment (to blank out of anything we show)."""
        names = {m.group(1) for value in self.env.values() for m in ENV_REFERENCE.finditer(value)}
        names |= set(self.headers_from_env.values())
        return [os.environ[n] for n in sorted(names - {WORKDIR}) if os.environ.get(n)]

    def _expand(self, value: str, field: str, workdir: str, *, secrets: bool = True) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name == WORKDIR:
                return workdir
            if not secrets:
                raise ConfigError(f"tools.mcp[{self.name}].{field}: only ${{{WORKDIR}}} may be used here (put ${{{name}}} in env)")
            found = os.environ.get(name)
            if found is None:
                raise ConfigError(f"tools.mcp[{self.name}].{field}: environment variable {name} is not set")
            return found

        return ENV_REFERENCE.sub(one, value)

    def public(self) -> dict[str, Any]:
        """The settings as configured (references, not their values): safe to store."""
        return self.model_dump(mode="json")
