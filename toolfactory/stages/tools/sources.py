"""Reading tool sources into raw items, the input of the tools stage.

The driver splits each source file into raw items (one per tool) and stores them with the run;
conversion and checking happen in the tools stage's shards, so a malformed entry becomes a
counted rejection there instead of aborting the run, and a re-run needs no access to the files.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from toolfactory.catalog import seed_catalog_path
from toolfactory.config import SourceFile, ToolsConfig
from toolfactory.errors import ConfigError
from toolfactory.models import Record, canonical_json, stable_id


class SourceItem(Record):
    id: str
    format: str
    origin: str
    raw: Any


def _load(path: Path) -> Any:
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        return yaml.safe_load(text)
    return json.loads(text)


def split_source(path: Path, fmt: str) -> list[Any]:
    """The raw tool entries of one file, in file order."""
    data = _load(path)
    if fmt == "catalog":
        return list(data["tools"] if isinstance(data, dict) else data)
    if fmt == "openai":
        entries = data["tools"] if isinstance(data, dict) and "tools" in data else data
        return list(entries if isinstance(entries, list) else [entries])
    if fmt == "toolbench":
        if isinstance(data, list):  # a query file: tools are spread over its api_lists
            return _toolbench_tools_from_queries(data)
        data.setdefault("category_name", path.parent.name)
        return [data]
    if fmt == "toolalpaca":
        return list(data if isinstance(data, list) else [data])
    if fmt == "openapi":
        return [data]
    raise ConfigError(f"tools.files.format: unknown format {fmt!r}")


def _toolbench_tools_from_queries(queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    apis: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for query in queries:
        for api in query.get("api_list", []):
            name = api.get("tool_name", "")
            tools.setdefault(name, {"tool_name": name, "tool_description": "", "category_name": api.get("category_name", "")})
            apis[name][api.get("api_name", "")] = {
                "name": api.get("api_name", ""),
                "description": api.get("api_description", ""),
                "method": api.get("method", "GET"),
                "required_parameters": api.get("required_parameters", []),
                "optional_parameters": api.get("optional_parameters", []),
            }
    return [{**tool, "api_list": list(apis[name].values())} for name, tool in tools.items()]


def read_sources(config: ToolsConfig) -> list[SourceItem]:
    files: list[SourceFile] = list(config.files)
    if config.builtin_catalog:
        files.insert(0, SourceFile(path=str(seed_catalog_path()), format="catalog"))
    items: list[SourceItem] = []
    for source in files:
        path = Path(source.path).expanduser()
        if not path.is_file():
            raise ConfigError(f"tools.files: no such file {source.path!r}")
        try:
            entries = split_source(path, source.format)
        except (ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
            raise ConfigError(f"tools.files: {source.path} is not a {source.format} file ({exc})") from None
        origin = "builtin:seed_tools.yaml" if source.format == "catalog" and config.builtin_catalog and path == seed_catalog_path() else path.name
        for position, raw in enumerate(entries):
            item_id = stable_id(source.format, origin, str(position), canonical_json(raw))
            items.append(SourceItem(id=item_id, format=source.format, origin=origin, raw=raw))
    return items
