"""Reading tool sources into raw items, the input of the tools stage.

The driver splits each source file into raw items (one per tool) and stores them with the run;
conversion and checking happen in the tools stage's shards, so a malformed entry becomes a
counted rejection there instead of aborting the run, and a re-run needs no access to the files.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from toolfactory import fast_yaml
from toolfactory.catalog import introductions_path, seed_catalog_path
from toolfactory.config import SourceFile, ToolsConfig, yaml_problem
from toolfactory.errors import ConfigError
from toolfactory.models import Record, canonical_json, stable_id


class SourceItem(Record):
    id: str
    format: str
    origin: str
    raw: Any


def _load(path: Path) -> Any:
    if path.suffix in (".yaml", ".yml"):
        return fast_yaml.load_file(path)
    return json.loads(path.read_text())


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
            # ToolBench drew each G3 (intra-collection) query's tools from one RapidAPI collection.
            return _toolbench_tools_from_queries(data, intra_collection=path.name.upper().startswith("G3"))
        data.setdefault("category_name", path.parent.name)
        return [data]
    if fmt == "toolalpaca":
        return list(data if isinstance(data, list) else [data])
    if fmt == "openapi":
        return [data]
    if fmt == "introductions":  # ToolAlpaca's public_apis.json keeps them under `entries`
        entries = data["entries"] if isinstance(data, dict) else data
        return list(entries)
    raise ConfigError(f"tools.files.format: unknown format {fmt!r}")


def _toolbench_tools_from_queries(queries: list[dict[str, Any]], *, intra_collection: bool = False) -> list[dict[str, Any]]:
    """The tools of a query file with every API its queries list. With `intra_collection` (a G3
    file) the tools of one query share a collection, named after the first query that groups them."""
    tools: dict[str, dict[str, Any]] = {}
    apis: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    groups: dict[frozenset[str], str] = {}
    for query in queries:
        names = frozenset(api.get("tool_name", "") for api in query.get("api_list", []))
        if intra_collection and len(names) > 1 and names not in groups:
            groups[names] = f"ToolBench G3 query {query.get('query_id', len(groups))}"
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
    collections = {name: [c for members, c in groups.items() if name in members] for name in tools}
    return [{**tool, "api_list": list(apis[name].values()), **({"collections": collections[name]} if collections[name] else {})}
            for name, tool in tools.items()]


def _with_response_examples(tools: list[Any], folder: Path) -> list[Any]:
    """ToolBench tools, each with the example responses of its APIs as ``response_examples``.

    ToolBench keeps them apart from the tools (``response_examples/<Category>/<tool>.json``); they
    are copied into the raw item so that a shard converts it without the files. An example is a
    hint: a tool whose file is missing, unreadable or malformed is imported without one.
    """
    files: dict[Path, dict[str, Any]] = {}
    out: list[Any] = []
    for tool in tools:
        examples = _toolbench_examples(tool, folder, files) if isinstance(tool, dict) else {}
        out.append({**tool, "response_examples": examples} if examples else tool)
    return out


def _toolbench_examples(tool: dict[str, Any], folder: Path, files: dict[Path, dict[str, Any]]) -> dict[str, Any]:
    category = str(tool.get("category_name") or tool.get("category") or "")
    stems = [str(tool.get("standardized_name") or ""), _toolbench_standardize(str(tool.get("tool_name") or tool.get("name") or ""))]
    for directory in dict.fromkeys([category, _toolbench_category(category)]):
        for stem in dict.fromkeys(stems):
            if _is_plain_name(directory) and _is_plain_name(stem):
                path = folder / directory / f"{stem}.json"
                if path not in files:
                    files[path] = _read_examples(path)
                if files[path]:
                    return files[path]
    return {}


def _read_examples(path: Path) -> dict[str, Any]:
    """``{api name: schema}`` of one example file; empty when it is missing or malformed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    apis = data.get("api_list") if isinstance(data, dict) else None
    if not isinstance(apis, list):
        return {}
    return {api["name"]: api["schema"] for api in apis
            if isinstance(api, dict) and isinstance(api.get("name"), str) and "schema" in api}


def _toolbench_standardize(name: str) -> str:
    # ToolBench's `standardize` (toolbench/utils.py), which names its tool and example files.
    text = re.sub(r"_+", "_", re.sub(r"[^\u4e00-\u9fa5A-Za-z0-9_]", "_", name)).lower().strip("_")
    return f"get_{text}" if text[:1].isdigit() else text


def _toolbench_category(category: str) -> str:
    # ToolBench's `standardize_category`: "Artificial Intelligence/Machine Learning" -> folder name.
    return re.sub(r"[ ,/]", "_", category).replace("__", "_")


def _is_plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and Path(name).name == name and "\\" not in name


def check_files(config: ToolsConfig) -> None:
    """Raise :class:`ConfigError` naming the first source or document file that does not exist."""
    for field, paths in (("tools.files", [f.path for f in config.files]), ("tools.synthesis.documents", config.synthesis.documents)):
        for name in paths:
            if not Path(name).expanduser().is_file():
                raise ConfigError(f"{field}: no such file {name!r}")


def read_sources(config: ToolsConfig) -> list[SourceItem]:
    builtin: dict[str, SourceFile] = {}
    if config.builtin_catalog:
        builtin["builtin:seed_tools.yaml"] = SourceFile(path=str(seed_catalog_path()), format="catalog")
    if config.builtin_introductions:
        builtin["builtin:introductions.yaml"] = SourceFile(path=str(introductions_path()), format="introductions")
    origins = {id(source): origin for origin, source in builtin.items()}
    files: list[SourceFile] = [*builtin.values(), *config.files]
    items: list[SourceItem] = []
    for source in files:
        path = Path(source.path).expanduser()
        if not path.is_file():
            raise ConfigError(f"tools.files: no such file {source.path!r}")
        try:
            entries = split_source(path, source.format)
        except yaml.YAMLError as exc:
            raise ConfigError(f"tools.files: {source.path} is not valid YAML: {yaml_problem(exc)}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"tools.files: {source.path} is not a {source.format} file ({exc})") from None
        if source.response_examples is not None:  # toolbench only (see SourceFile)
            examples = Path(source.response_examples).expanduser()
            if not examples.is_dir():
                raise ConfigError(f"tools.files.response_examples: no such folder {source.response_examples!r}")
            entries = _with_response_examples(entries, examples)
        origin = origins.get(id(source), path.name)
        for position, raw in enumerate(entries):
            item_id = stable_id(source.format, origin, str(position), canonical_json(raw))
            items.append(SourceItem(id=item_id, format=source.format, origin=origin, raw=raw))
    return items
