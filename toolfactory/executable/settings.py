"""Configuration shared by every executable tool source (``tools.mcp``, ``tools.environments``)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolfactory.executable.confine import ProcessLimits

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ExecutableSourceSettings(BaseModel):
    """What every executable source (an MCP server, a Python environment) is configured with."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)

    name: str
    """The source's name: unique among the executable sources; tools keep it as their source."""
    allow: list[str] | None = None
    """Import only these tool names (null: all)."""
    deny: list[str] = Field(default_factory=list)
    """Never import these tool names."""
    deterministic: bool | list[str] = False
    """Tools whose result depends only on their arguments and the state: true (all), false
    (none) or a list of tool names. The verifier's replay requires the same result from them."""
    call_timeout_seconds: float = Field(30.0, gt=0.0, le=3600.0)
    """A call that has not answered by then fails its dialogue (`exec_timeout`)."""
    start_timeout_seconds: float = Field(60.0, gt=0.0, le=3600.0)
    """Starting the source and listing its tools must take less (`exec_start_failed`)."""
    output_cap_bytes: int = Field(65536, ge=256, le=64 * 1024 * 1024)
    """A call's result is cut at this many bytes (marked as cut); a process that writes far more
    than this fails its dialogue (`exec_output_flood`)."""
    max_sessions: int = Field(4, ge=1, le=256)
    """Fresh environments of this source open at once in one worker process."""
    limits: ProcessLimits = Field(default_factory=ProcessLimits)
    """Limits on every process started for this source (see `toolfactory.executable.confine`)."""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError("a name of letters, digits, '_', '.' or '-' (at most 64), starting with a letter or digit")
        return value

    def deterministic_tool(self, name: str) -> bool:
        """Whether the tool `name` is declared deterministic."""
        return self.deterministic if isinstance(self.deterministic, bool) else name in self.deterministic

    def admits(self, name: str) -> bool:
        """Whether the tool `name` passes the allow and deny lists."""
        return name not in self.deny and (self.allow is None or name in self.allow)
