"""Configuration shared by every executable tool source (``tools.mcp``, ``tools.environments``)."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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
    deterministic: bool | list[str] | None = None
    """Tools whose result depends only on their arguments and the state: true (all), false
    (none) or a list of tool names. The verifier's replay requires the same result from them.
    Null: the tools that vetting found to answer the same in two fresh sessions (none when the
    source is not vetted)."""
    vet: bool = True
    """Call each tool before the run uses it (`toolfactory tools vet`; the card is kept in the
    storage root, by the source's configuration and version) and admit only the tools that work
    here; the others are rejections (`tool_needs_network`, `tool_needs_credentials`,
    `tool_errors_on_every_probe`). False: every listed tool is admitted."""
    vet_timeout_seconds: float = Field(300.0, gt=0.0, le=3600.0)
    """Vetting the source must take less; else the source is rejected as it would be when it
    cannot start."""
    call_timeout_seconds: float = Field(30.0, gt=0.0, le=3600.0)
    """A call that has not answered by then fails its dialogue (`exec_timeout`)."""
    start_timeout_seconds: float = Field(60.0, gt=0.0, le=3600.0)
    """Starting the source and listing its tools must take less (`exec_start_failed`)."""
    output_cap_bytes: int = Field(65536, ge=256, le=64 * 1024 * 1024)
    """A call's result is cut at this many bytes (marked as cut); a process that writes far more
    than this fails its dialogue (`exec_output_flood`)."""
    max_sessions: int = Field(4, ge=1, le=256)
    """Fresh environments of this source open at once in one shard (a dialogue waits for one
    rather than open more). Warm processes are kept per Ray node (see
    :mod:`toolfactory.executable.node_pool`), so a node keeps at most as many as its shards hold at once."""
    warm_sessions: bool | None = None
    """Keep the source's processes between dialogues and hand each dialogue a fresh environment by
    resetting one (a Python environment's instance made anew, a server's working folder emptied)
    rather than starting a process per dialogue. Null: where vetting found that a reset keeps two
    sessions apart (what one wrote, the next does not see); true or false overrides it."""
    near_miss_types: Literal["coerce", "reject"] = "coerce"
    """A call whose arguments miss their types narrowly ("5" for an integer, "true" for a boolean,
    one value for an array): coerce (run it with the well-typed values, which the dialogue records,
    keeping what the model sent; counted as `arg_coerced_<kind>`) or reject (answer it with the 400
    of a call that does not fit the parameters, without running)."""
    limits: ProcessLimits = Field(default_factory=ProcessLimits)
    """Limits on every process started for this source (see `toolfactory.executable.confine`)."""
    error_keys: list[str] | None = None
    """The source's own error convention: a result that is a JSON object holding one of these keys
    and nothing else, with a value, is an error (BFCL's environments answer `{"error": "…"}` rather
    than raise). Null: `[error]` for a BFCL preset, none otherwise; [] turns it off."""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError("a name of letters, digits, '_', '.' or '-' (at most 64), starting with a letter or digit")
        return value

    def deterministic_tool(self, name: str, vetted: bool | None = None) -> bool:
        """Whether the tool `name` is held to its results: as declared, else as vetting found
        (`vetted`, None when it was not vetted)."""
        if self.deterministic is None:
            return bool(vetted)
        return self.deterministic if isinstance(self.deterministic, bool) else name in self.deterministic

    def answers_error(self, structured: Any) -> bool:
        """Whether a result's machine-readable answer is an error by the source's convention."""
        keys = self.error_keys if self.error_keys is not None else self._default_error_keys()
        return (isinstance(structured, dict) and len(structured) == 1 and next(iter(structured)) in keys
                and bool(next(iter(structured.values()))))

    def _default_error_keys(self) -> list[str]:
        return []

    def admits(self, name: str) -> bool:
        """Whether the tool `name` passes the allow and deny lists."""
        return name not in self.deny and (self.allow is None or name in self.allow)


BFCL_PACKAGE = "bfcl_eval"
BFCL_SOURCES = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
#: BFCL's executable environments: class → (module under :data:`BFCL_SOURCES`, function-doc file).
BFCL_PRESETS: dict[str, tuple[str, str]] = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
BFCL_INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"


class PythonEnvironmentSettings(ExecutableSourceSettings):
    """One Python environment (``tools.environments``)."""

    preset: str | None = None
    """One of BFCL's environments by class name (GorillaFileSystem, MathAPI, MessageAPI,
    TwitterAPI, TicketAPI, TradingBot, TravelAPI, VehicleControlAPI): sets `class_path` and
    `function_docs` from the installed `bfcl-eval` package."""
    class_path: str = ""
    """The class, as ``package.module:ClassName``, importable where the workers run."""
    initial_state: dict[str, Any] = Field(default_factory=dict)
    """The state every session starts from: given to ``_load_scenario(state)`` when the class has
    it (BFCL's environments), else as constructor keyword arguments."""
    function_docs: str | None = None
    """A JSON or JSON-lines file of function docs in BFCL's multi-turn format (name, description,
    parameters, response); unset: each public method's signature and docstring."""

    @model_validator(mode="after")
    def _resolvable(self) -> PythonEnvironmentSettings:
        if self.preset is not None:
            if self.preset not in BFCL_PRESETS:
                raise ValueError(f"preset: unknown BFCL environment {self.preset!r} (one of {', '.join(BFCL_PRESETS)})")
            if importlib.util.find_spec(BFCL_PACKAGE) is None:
                raise ValueError(f"preset: BFCL's environments need the bfcl-eval package ({BFCL_INSTALL})")
        elif not self.class_path:
            raise ValueError("class_path: required (or a preset)")
        module_name, _, class_name = self.resolved_class_path().partition(":")
        if not module_name or not class_name.isidentifier():
            raise ValueError("class_path: expected 'package.module:ClassName'")
        try:
            found = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise ValueError(f"class_path: module {module_name!r} cannot be imported")
        docs = self.resolved_function_docs()
        if docs is not None and not Path(docs).expanduser().is_file():
            raise ValueError(f"function_docs: no such file {docs!r}")
        return self

    def _default_error_keys(self) -> list[str]:
        return ["error"] if self.resolved_class_path().startswith(BFCL_SOURCES + ".") else []

    # A preset is resolved where it is used, not stored resolved: the package's folder on a
    # worker need not be the driver's.
    def resolved_class_path(self) -> str:
        """`class_path`, or the preset's class."""
        if self.class_path or self.preset is None:
            return self.class_path
        return f"{BFCL_SOURCES}.{BFCL_PRESETS[self.preset][0]}:{self.preset}"

    def distribution_version(self) -> str:
        """The installed distribution that holds the class, with its version ("" if unknown)."""
        return _distribution_version(self.resolved_class_path().partition(":")[0].split(".")[0])

    def resolved_function_docs(self) -> str | None:
        """`function_docs`, or the preset's docs in the installed package."""
        if self.function_docs is not None or self.preset is None:
            return self.function_docs
        return str(bfcl_docs_folder() / BFCL_PRESETS[self.preset][1])


def bfcl_docs_folder() -> Path:
    """BFCL's multi-turn function docs in the installed package (found without importing it)."""
    spec = importlib.util.find_spec(BFCL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"bfcl-eval is not installed ({BFCL_INSTALL})")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "multi_turn_func_doc"


@functools.lru_cache(maxsize=256)
def _distribution_version(top: str) -> str:
    from importlib import metadata

    for dist in metadata.packages_distributions().get(top) or []:
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return ""
