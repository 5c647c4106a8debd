"""configs/quickstart.yaml documents every field of the config (README: "documents every field"):
each field of the model, walked from `Config` down to the fields of list items, role entries and
process limits, is a key of the file or, where its default is off, a commented line of its section."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any, Iterator

import yaml
from pydantic import BaseModel

from toolfactory.config import Config

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
EACH = "*"  # a step into every entry of a mapping of sections (llm.roles) or of a list (tools.mcp)


def _fields(kind: Any) -> dict[str, Any]:
    """A section's fields and their types: a pydantic model's or a dataclass's; {} for a value."""
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return {name: field.annotation for name, field in kind.model_fields.items()}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return {field.name: hints[field.name] for field in dataclasses.fields(kind)}
    return {}


def _section(annotation: Any) -> tuple[Any, bool] | None:
    """(the section type, whether it is reached through every entry of a list or mapping) of a
    field's type, when the field holds sections; None for a plain value."""
    if _fields(annotation):
        return annotation, False
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        found = [_section(arg) for arg in args]
        return next((item for item in found if item is not None), None)
    if origin in (list, tuple, dict) and args and _fields(args[-1]):
        return args[-1], True
    return None


def field_paths(kind: Any = Config, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, annotation in _fields(kind).items():
        path = (*prefix, name)
        yield path
        inner = _section(annotation)
        if inner is not None:
            yield from field_paths(inner[0], (*path, EACH) if inner[1] else path)


def _as_key(data: Any, path: tuple[str, ...]) -> bool:
    """Whether the parsed file holds `path` as keys (any entry for an EACH step)."""
    if not path:
        return True
    step, rest = path[0], path[1:]
    if step == EACH:
        entries = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
        return any(_as_key(entry, rest) for entry in entries)
    return isinstance(data, dict) and step in data and _as_key(data[step], rest)


def _commented(text: str, path: tuple[str, ...]) -> bool:
    """Whether a comment line of the path's top-level section names the field (`# … field:`)."""
    block = re.search(rf"^{re.escape(path[0])}:.*?(?=^\S|\Z)", text, re.M | re.S)
    leaf = path[-1]
    return block is not None and any(
        re.search(rf"(?<![\w.]){re.escape(leaf)}:", line.split("#", 1)[1])
        for line in block.group(0).splitlines() if "#" in line
    )


def test_the_walk_reaches_the_fields_of_entries_and_limits() -> None:
    paths = {".".join(path) for path in field_paths()}
    assert {"llm.roles.*.usd_per_million_prompt_tokens", "tools.mcp.*.url", "tools.environments.*.limits.memory_mb",
            "tools.files.*.response_examples", "llm.budget.usd", "run.fan_in"} <= paths
    assert len(paths) > 200


def test_every_field_of_the_config_is_in_the_quickstart_file() -> None:
    text = QUICKSTART.read_text()
    data = yaml.safe_load(text)
    missing = [".".join(path) for path in field_paths() if not _as_key(data, path) and not _commented(text, path)]
    assert missing == [], f"configs/quickstart.yaml does not document: {', '.join(missing)}"


def test_a_field_only_named_in_another_section_is_not_documented() -> None:
    text = "run:\n  seed: 0\n\nllm:\n  provider: simulator   # fan_in: wait\n"
    assert _commented(text, ("llm", "fan_in")) and not _commented(text, ("run", "fan_in"))
    assert not _as_key(yaml.safe_load(text), ("run", "fan_in"))
