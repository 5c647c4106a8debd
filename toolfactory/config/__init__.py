"""The one configuration of a run: a YAML file validated by pydantic.

Values resolve, lowest precedence first, from the YAML file, then environment variables
``TOOLFACTORY_<SECTION>__<FIELD>`` (``__`` separates nesting levels, as pydantic-settings does),
then ``--set section.field=value`` arguments on the command line. Values given as text are parsed
as YAML scalars, so ``--set llm.max_concurrency=8`` yields an integer.

Secrets are never part of the configuration: it names where a key comes from (an environment
variable or a Prefect Secret block), and the key is read only where a request is made.

Each section is a module of this package (`llm`, `storage` with `stats`, `tools`, `tasks`,
`dialogues`, `verify`, `curate`, `export`, `run` with `orchestration`); this module assembles
them into :class:`Config` and loads it. The package sits below every other layer of toolfactory,
so any of them can read its settings.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from toolfactory.config.curate import BenchmarkFile, CurateConfig, DecontaminateConfig
from toolfactory.config.dialogues import DialoguesConfig
from toolfactory.config.export import ExportConfig
from toolfactory.config.llm import (
    QUICKSTART_SIMULATOR,
    ROLE_DEFAULTS,
    ROLES,
    BudgetConfig,
    LLMConfig,
    RateLimitConfig,
    RoleConfig,
    local_embeddings_installed,
    unpriced,
)
from toolfactory.config.run import OrchestrationConfig, RunConfig
from toolfactory.config.section import Section
from toolfactory.config.storage import StatsConfig, StorageConfig
from toolfactory.config.tasks import (
    ApiFilterConfig,
    BlueprintsConfig,
    ComplexityGuideConfig,
    TasksConfig,
)
from toolfactory.config.tools import (
    PoolConfig,
    SourceFile,
    SynthesisConfig,
    ToolsConfig,
    executable_source_lists,
)
from toolfactory.config.verify import VerifyConfig
from toolfactory.errors import ConfigError

ENV_PREFIX = "TOOLFACTORY_"


class Config(Section):
    """A whole toolfactory run."""

    run: RunConfig = Field(default_factory=RunConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    stats: StatsConfig = Field(default_factory=StatsConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    orchestration: OrchestrationConfig = Field(default_factory=OrchestrationConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    dialogues: DialoguesConfig = Field(default_factory=DialoguesConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    curate: CurateConfig = Field(default_factory=CurateConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)

    @model_validator(mode="after")
    def _target_priced(self) -> Config:
        guided = self.tasks.complexity.enabled and self.tasks.complexity.target_model
        target = self.llm.roles.get("target")
        if self.llm.budget.usd is not None and guided and target is not None and unpriced(target):
            raise ValueError("llm.budget.usd needs a price for every role; set llm.roles.target.usd_per_million_prompt_tokens "
                             "and usd_per_million_completion_tokens (tasks.complexity.target_model calls it)")
        return self

    @model_validator(mode="after")
    def _blueprint_sources(self) -> Config:
        if self.tasks.blueprints.enabled and not (self.tools.environments or self.tools.mcp):
            raise ValueError("tasks.blueprints.enabled needs an executable tool source to run the ground-truth calls on; "
                             "configure tools.environments or tools.mcp, or turn blueprints off")
        return self

    @model_validator(mode="after")
    def _target_role(self) -> Config:
        # One setting names the target model; the gateway reaches it as the `target` role.
        target = self.tasks.complexity.target_model
        if target is not None and self.llm.roles["target"].model != target:
            self.llm.roles["target"] = self.llm.roles["target"].model_copy(update={"model": target})
        return self

    def stats_path(self) -> str:
        """The stats cache of this storage root (see :class:`StatsConfig`)."""
        if self.stats.path:
            return self.stats.path
        if self.storage.is_s3:
            # One cache per root: the same bucket name behind another endpoint is another root.
            endpoint = self.storage.endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or ""
            root = f"{endpoint} {self.storage.root.rstrip('/')}"
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            return str(cache / "toolfactory" / "stats" / f"{hashlib.sha256(root.encode()).hexdigest()[:16]}.duckdb")
        return str(Path(self.storage.root) / "stats.duckdb")

    def snapshot(self) -> dict[str, Any]:
        """The config as stored in a manifest; secrets never appear in it (see module doc)."""
        return self.model_dump(mode="json")


# --- loading -----------------------------------------------------------------------------


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load, merge and validate a config; raise :class:`ConfigError` naming every bad field."""
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_yaml(Path(path))
    env = os.environ if environ is None else environ
    for key, value in sorted(env.items()):
        if key.startswith(ENV_PREFIX) and "__" in key:
            dotted = key[len(ENV_PREFIX) :].lower().replace("__", ".")
            _set_path(data, dotted, _parse_scalar(value))
    apply_overrides(data, overrides)
    return validate_config(data)


def override_key(item: str) -> str:
    """The dotted field of a `section.field=value` override."""
    dotted, sep, _ = item.partition("=")
    if not sep or not dotted.strip():
        raise ConfigError(f"invalid override {item!r}: expected section.field=value")
    return dotted.strip()


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Set each `section.field=value` in the raw config `data` (values parsed as YAML scalars)."""
    for item in overrides:
        _set_path(data, override_key(item), _parse_scalar(item.partition("=")[2]))
    return data


def validate_config(data: Mapping[str, Any]) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise ConfigError(f"config file {path} is a folder, not a file")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start} is 0x{exc.object[exc.start]:02x}): "
                          "is it a YAML file?") from None
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(loaded).__name__}")
    return loaded


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: where (line and column, from 1), what is wrong and, when the
    parser says so, what it was reading (PyYAML's own text spreads this over lines with a caret)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        context = ""
        if exc.context and exc.problem:
            started = exc.context_mark
            at = f" at line {started.line + 1}, column {started.column + 1}" if started is not None and started != mark else ""
            context = f" ({exc.context}{at})"
        return f"{where}{what}{context}"
    if isinstance(exc, yaml.reader.ReaderError):
        return f"character {exc.position + 1}: {exc.reason} (#x{exc.character:04x})" if isinstance(exc.character, int) \
            else f"character {exc.position + 1}: {exc.reason}"
    return " ".join(str(exc).split())


def _parse_scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {dotted}: {part} is not a section")
        node = child
    node[leaf] = value


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"]) or "config"
        if error["type"] == "extra_forbidden":
            allowed = _allowed_fields(error["loc"][:-1])
            lines.append(f"{loc}: unknown field (allowed: {', '.join(allowed)})")
        else:
            got = error.get("input")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"{loc}: {error['msg']}{shown}")
    return "invalid config: " + "; ".join(lines)


def _allowed_fields(loc: Sequence[Any]) -> list[str]:
    model: Any = Config
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            break
        annotation = field.annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        if model is None:
            return []
    return sorted(getattr(model, "model_fields", {}))


__all__ = [
    "ENV_PREFIX",
    "QUICKSTART_SIMULATOR",
    "ROLES",
    "ROLE_DEFAULTS",
    "ApiFilterConfig",
    "BenchmarkFile",
    "BlueprintsConfig",
    "BudgetConfig",
    "ComplexityGuideConfig",
    "Config",
    "CurateConfig",
    "DecontaminateConfig",
    "DialoguesConfig",
    "ExportConfig",
    "LLMConfig",
    "OrchestrationConfig",
    "PoolConfig",
    "RateLimitConfig",
    "RoleConfig",
    "RunConfig",
    "Section",
    "SourceFile",
    "StatsConfig",
    "StorageConfig",
    "SynthesisConfig",
    "TasksConfig",
    "ToolsConfig",
    "VerifyConfig",
    "apply_overrides",
    "executable_source_lists",
    "load_config",
    "local_embeddings_installed",
    "override_key",
    "validate_config",
    "yaml_problem",
]
