"""Data checks of the shipped seed tool catalog (toolfactory/catalog/seed_tools.yaml)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from urllib.parse import urlparse

import jsonschema
import yaml
from jsonschema import Draft202012Validator

from toolfactory.catalog import load_seed_catalog, seed_catalog_path
from toolfactory.models import Tool

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
DISCOVERY_PREFIXES = ("list_", "search_", "find_")


def _subschemas(schema):
    """Every schema nested in `schema` (itself included)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for child in (schema.get("properties") or {}).values():
        yield from _subschemas(child)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            yield from _subschemas(schema[key])
    for key in ("prefixItems", "anyOf", "oneOf", "allOf"):
        for child in schema.get(key) or []:
            yield from _subschemas(child)


def _property_names(schema) -> set[str]:
    return {name for sub in _subschemas(schema) for name in (sub.get("properties") or {})}


def _types(schema) -> set[str]:
    declared = schema.get("type")
    return set(declared) if isinstance(declared, list) else {declared} if declared else set()


def _tools() -> list[Tool]:
    return load_seed_catalog()


def test_catalog_file_is_shipped_and_versioned():
    path = seed_catalog_path()
    assert path.name == "seed_tools.yaml"
    assert path.is_file()
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert raw["version"] == 1
    assert isinstance(raw["tools"], list)


def test_catalog_loads_into_tools():
    tools = _tools()
    assert all(isinstance(tool, Tool) for tool in tools)
    assert len(tools) == 36
    assert all(tool.source == "catalog" for tool in tools)


def test_twelve_categories_of_three_tools():
    counts = Counter(tool.category for tool in _tools())
    assert len(counts) == 12
    assert set(counts.values()) == {3}


def test_tool_ids_and_names_unique():
    tools = _tools()
    ids = [tool.id for tool in tools]
    names = [tool.name for tool in tools]
    assert all(ids)
    assert len(set(ids)) == len(ids)
    assert len(set(names)) == len(names)


def test_tool_metadata_complete():
    for tool in _tools():
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", tool.name), tool.name
        assert 20 <= len(tool.description) <= 200, tool.name
        assert 100 <= len(tool.introduction) <= 600, tool.name
        assert 1 <= len(tool.collections) <= 2, tool.name
        assert len(tool.domain_path) == 3 and tool.domain_path[0] == tool.category, tool.name
        url = urlparse(tool.link)
        assert url.scheme == "https", tool.name
        host = url.hostname or ""
        assert host.startswith("api.example-") or host.endswith(".example"), tool.link


def test_links_unique():
    links = [tool.link for tool in _tools()]
    assert len(set(links)) == len(links)


def test_collections_are_shared_across_categories():
    categories = defaultdict(set)
    for tool in _tools():
        for collection in tool.collections:
            categories[collection].add(tool.category)
    assert len(categories) >= 5
    for collection, cats in categories.items():
        assert len(cats) >= 2, collection


def test_functions_per_tool_and_unique_names():
    for tool in _tools():
        names = [function.name for function in tool.functions]
        assert 2 <= len(names) <= 4, tool.name
        assert len(set(names)) == len(names), tool.name
        assert all(SNAKE_CASE.match(name) for name in names), names
        for function in tool.functions:
            assert function.description, (tool.name, function.name)
            assert function.method in {"GET", "POST", "PUT", "PATCH", "DELETE"}
            assert function.path and function.path.startswith("/"), (tool.name, function.name)


def test_path_templates_name_parameters():
    for tool in _tools():
        for function in tool.functions:
            for placeholder in re.findall(r"{([^}]+)}", function.path or ""):
                assert placeholder in function.parameters["properties"], (tool.name, function.name)


def test_schemas_are_valid_draft_2020_12():
    for tool in _tools():
        for function in tool.functions:
            for schema in (function.parameters, function.returns):
                Draft202012Validator.check_schema(schema)
                assert schema["type"] == "object", (tool.name, function.name)
                assert schema.get("properties"), (tool.name, function.name)


def test_required_properties_are_declared():
    for tool in _tools():
        for function in tool.functions:
            assert "required" in function.parameters, (tool.name, function.name)
            for schema in (function.parameters, function.returns):
                for sub in _subschemas(schema):
                    declared = set(sub.get("properties") or {})
                    missing = set(sub.get("required") or []) - declared
                    assert not missing, (tool.name, function.name, missing)


def test_top_level_parameters_are_described():
    for tool in _tools():
        for function in tool.functions:
            for name, prop in function.parameters["properties"].items():
                assert prop.get("description"), (tool.name, function.name, name)
                assert "type" in prop, (tool.name, function.name, name)


def test_defaults_satisfy_their_schema():
    checker = Draft202012Validator.FORMAT_CHECKER
    for tool in _tools():
        for function in tool.functions:
            for sub in _subschemas(function.parameters):
                if "default" in sub:
                    schema = {key: value for key, value in sub.items() if key != "default"}
                    jsonschema.validate(sub["default"], schema, format_checker=checker)


def test_opaque_ids_have_a_discovery_function():
    """ToolAlpaca rule: an id a user cannot know must be obtainable from the same tool."""
    for tool in _tools():
        discovery = [f for f in tool.functions if f.name.startswith(DISCOVERY_PREFIXES)]
        for function in tool.functions:
            for name in _property_names(function.parameters):
                if not name.endswith(("_id", "_ids")):
                    continue
                id_name = name[:-1] if name.endswith("_ids") else name
                assert discovery, f"{tool.name}.{function.name} takes {name} but has no list/search"
                # A role-prefixed id (from_station_id) is produced as the plain one (station_id).
                producers = [
                    other.name
                    for other in tool.functions
                    if other is not function
                    and any(
                        key.endswith("_id") and (id_name == key or id_name.endswith("_" + key))
                        for key in _property_names(other.returns)
                    )
                ]
                assert producers, f"{tool.name}.{function.name}: no function returns {id_name}"


def test_catalog_covers_the_schema_features():
    """The catalog must exercise the kinds of arguments generation and verification handle."""
    features: Counter[str] = Counter()
    for tool in _tools():
        for function in tool.functions:
            for prop in function.parameters["properties"].values():
                types = _types(prop)
                features.update(f"type:{t}" for t in types)
                if "enum" in prop:
                    features["enum"] += 1
                if "pattern" in prop:
                    features["pattern"] += 1
                if "format" in prop:
                    features[f"format:{prop['format']}"] += 1
                if "default" in prop:
                    features["default"] += 1
                if "integer" in types and {"minimum", "maximum"} <= prop.keys():
                    features["bounded_integer"] += 1
                if "object" in types:
                    features["nested_object"] += 1
                if "array" in types:
                    item_types = _types(prop.get("items") or {})
                    features.update(f"array_of:{t}" for t in item_types)
    for feature in (
        "type:string", "type:integer", "type:number", "type:boolean", "enum", "pattern",
        "format:date", "format:email", "format:date-time", "default", "bounded_integer",
        "nested_object", "array_of:string", "array_of:object",
    ):
        assert features[feature] >= 2, (feature, features)
    assert features["enum"] >= 20
    assert features["nested_object"] >= 5
