"""The settings preflight chose where they were `auto`, and how a run's config takes them on.

Preflight records, for each role it checked, the mode that works where the setting was `auto`
(``llm.roles.<role>.tool_calling``, ``llm.roles.<role>.structured_output``), the name its token
limit is sent under (``llm.roles.<role>.max_tokens_parameter``), each sampling parameter the
endpoint refused, as ``None`` (``llm.roles.<role>.temperature``, ``top_p``: left out, under
``sampling_parameters: auto``) and the embedding source (``llm.embedding_backend``). The run's manifest keeps them apart from the config the user
gave; :func:`apply_choices` makes the config every shard of the run — and every re-run — uses.
A choice never overrides a setting that is not `auto`: a re-run that sets the embedding backend
explicitly (an operational override) keeps it.
"""

from __future__ import annotations

from typing import Any, Mapping

from toolfactory.config import Config, validate_config

TOOL_CALLING = ("native", "text")
STRUCTURED_OUTPUT = ("json_schema", "json_object", "prompt")


def is_auto(config: Config, field: str) -> bool:
    """Whether the dotted `field` (one preflight chooses) is `auto` in `config`."""
    parts = field.split(".")
    if parts[:2] == ["llm", "roles"] and len(parts) == 4:
        role, setting = config.llm.role(parts[2]), parts[3]
        if setting == "max_tokens_parameter":
            return role.max_tokens_parameter == "auto"
        if setting in ("temperature", "top_p"):
            return role.sampling_parameters == "auto"
        if setting in ("structured_output", "tool_calling"):
            return (getattr(role, setting) or getattr(config.llm, setting)) == "auto"
    if field == "llm.embedding_backend":
        return config.llm.embedding_backend == "auto"
    raise ValueError(f"not a setting preflight chooses: {field}")


def describe_choice(value: Any) -> str:
    """A recorded choice as the check's output and the report show it."""
    return "null (left out: the endpoint's default applies)" if value is None else str(value)


def apply_choices(config: Config, choices: Mapping[str, Any]) -> Config:
    """`config` with each recorded choice in place of its `auto` setting."""
    pending = {field: value for field, value in choices.items() if is_auto(config, field)}
    if not pending:
        return config
    data = config.snapshot()
    for field, value in pending.items():
        node = data
        *parents, leaf = field.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return validate_config(data)
