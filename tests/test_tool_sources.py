from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from toolfactory.config import SourceFile, ToolsConfig
from toolfactory.errors import ConfigError
from toolfactory.models import Function, Tool
from toolfactory.definitions.validity import definition_problems
from toolfactory.definitions.convert import MalformedTool, convert, normalize_schema
from toolfactory.stages.tools.sources import read_sources
from toolfactory.stages.tools.stage import ToolsStage, import_items
from toolfactory.stages import ShardSpec


def test_builtin_catalog_items_convert_to_valid_tools() -> None:
    items = read_sources(ToolsConfig(builtin_introductions=False))
    tools = [tool for item in items for tool in convert(item.format, item.raw)]
    assert len(tools) == len(items) >= 30
    assert all(definition_problems(tool) == [] for tool in tools)


def test_toolbench_query_file_gives_tools_with_rapidapi_types(shared_data: Path) -> None:
    items = read_sources(ToolsConfig(builtin_catalog=False, builtin_introductions=False, files=[SourceFile(path=str(shared_data / "toolbench/instruction/G1_query.json"), format="toolbench")]))
    tools = [tool for item in items for tool in convert(item.format, item.raw)]
    queries = json.loads((shared_data / "toolbench/instruction/G1_query.json").read_text())
    assert {t.name for t in tools} == {api["tool_name"] for q in queries for api in q["api_list"]}
    for tool in tools:
        assert tool.source == "toolbench"
        for fn in tool.functions:
            assert fn.name.endswith(tool.functions[0].name.split("_for_")[-1])
            assert len(fn.name) <= 64
            for schema in fn.parameters["properties"].values():
                assert schema["type"] in {"string", "number", "boolean", "array", "object"}


def test_toolalpaca_openapi_documents_become_functions(shared_data: Path) -> None:
    path = shared_data / "toolalpaca/eval_simulated.json"
    items = read_sources(ToolsConfig(builtin_catalog=False, builtin_introductions=False, files=[SourceFile(path=str(path), format="toolalpaca")]))
    raw = json.loads(path.read_text())
    tools = [tool for item in items for tool in convert(item.format, item.raw)]
    assert len(tools) == len(raw) == 10
    axolotl = next(t for t in tools if t.name == "Axolotl")
    search = axolotl.function("searchAxolotlImages")
    assert search is not None and search.parameters["properties"]["color"]["enum"] == ["wild", "leucistic", "albino"]
    assert axolotl.openapi is not None
    for tool, entry in zip(tools, raw):
        assert {f.name for f in tool.functions} == set(entry["Function_Description"]) - {"components"}


def test_bfcl_type_names_map_to_json_schema() -> None:
    schema = normalize_schema({"type": "dict", "properties": {"a": {"type": "float"}, "b": {"type": "tuple", "items": {"type": "any"}}}})
    assert schema == {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "array", "items": {}}}}


def test_missing_source_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        read_sources(ToolsConfig(files=[SourceFile(path=str(tmp_path / "none.json"), format="openai")]))


def test_malformed_entries_are_rejected_with_reasons_and_the_rest_kept(tmp_path: Path) -> None:
    entries = [
        {"type": "function", "function": {"name": "ok_fn", "description": "Fine.", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
        {"type": "function", "function": {"description": "no name"}},
        {"type": "function", "function": {"name": "bad_schema", "description": "x", "parameters": {"type": "object", "properties": {"q": {"type": "strin"}}}}},
        {"type": "function", "function": {"name": "undeclared", "description": "x", "parameters": {"type": "object", "properties": {}, "required": ["q"]}}},
        {"type": "function", "function": {"name": "nodesc", "parameters": {"type": "object", "properties": {}}}},
    ]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(entries))
    items = read_sources(ToolsConfig(builtin_catalog=False, builtin_introductions=False, files=[SourceFile(path=str(path), format="openai")]))
    out = asyncio.run(ToolsStage().run(ShardSpec("tools", 0, ()), [i.model_dump() for i in items], ctx=None))  # type: ignore[arg-type]
    assert [t.name for t in out.records] == ["ok_fn"]
    assert out.rejections() == {"tool_malformed": 1, "tool_invalid_schema": 1, "tool_required_undeclared": 1, "tool_missing_description": 1}


def test_duplicate_function_names_are_a_definition_problem() -> None:
    fn = Function(name="f", description="d")
    assert [code for code, _ in definition_problems(Tool(name="t", functions=[fn, fn]))] == ["tool_duplicate_function"]


def test_convert_raises_reason_for_bad_openai_entry() -> None:
    with pytest.raises(MalformedTool) as err:
        convert("openai", {"type": "function"})
    assert err.value.reason == "tool_malformed"


PETSHELTER = Path(__file__).parent / "data" / "petshelter_openapi.yaml"


def test_openapi_document_becomes_a_tool_with_refs_resolved_and_bodies_as_parameters() -> None:
    [item] = read_sources(ToolsConfig(builtin_catalog=False, builtin_introductions=False, files=[SourceFile(path=str(PETSHELTER), format="openapi")]))
    [tool] = convert(item.format, item.raw)
    assert (tool.name, tool.category, tool.source, tool.link) == ("PetShelter", "Animals", "openapi", "https://api.example-pets.dev/v1")
    search, adopt = tool.functions
    assert (search.name, search.method, search.path) == ("searchPets", "GET", "/pets")
    assert search.parameters["required"] == ["species"] and search.parameters["properties"]["limit"]["maximum"] == 50
    assert search.returns["items"]["properties"]["pet_id"] == {"type": "string"}  # $ref resolved
    assert adopt.parameters["required"] == ["pet_id", "email"]
    assert adopt.parameters["properties"]["home"]["properties"]["garden"]["type"] == "boolean"
    assert definition_problems(tool) == []


def test_an_invalid_openapi_document_is_rejected_with_where_it_is_wrong() -> None:
    broken = {"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {"responses": "nope"}}}}
    with pytest.raises(MalformedTool) as err:
        convert("openapi", broken)
    assert err.value.reason == "tool_openapi_invalid"
    assert "paths/~1a/get/responses" in str(err.value) or "/a" in str(err.value)


def test_tools_import_cli_writes_a_catalog_that_imports_back_unchanged(tmp_path: Path, shared_data: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "alpaca.json"
    cli = str(Path(sys.executable).with_name("toolfactory"))
    result = subprocess.run(
        [cli, "tools", "import", str(shared_data / "toolalpaca/eval_simulated.json"), "--format", "toolalpaca", "--out", str(out)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "10 tools (54 functions) imported, 0 rejected" in result.stdout
    def imported(path: Path, fmt: str) -> list[dict[str, object]]:
        items = read_sources(ToolsConfig(builtin_catalog=False, builtin_introductions=False, files=[SourceFile(path=str(path), format=fmt)]))  # type: ignore[arg-type]
        return [t.model_dump() for t in import_items(items).records]

    assert imported(out, "catalog") == imported(shared_data / "toolalpaca/eval_simulated.json", "toolalpaca")


def test_public_apis_entries_become_introduction_items(shared_data: Path) -> None:
    path = shared_data / "toolalpaca" / "public_apis.json"
    items = read_sources(ToolsConfig(builtin_catalog=False, builtin_introductions=False, files=[SourceFile(path=str(path), format="introductions")]))
    entries = json.loads(path.read_text())["entries"]
    assert len(items) == len(entries) == 1425 and {i.format for i in items} == {"introductions"}
    from toolfactory.stages.tools.introductions import entry_of

    first = entry_of(items[0].raw)
    assert first == {"name": entries[0]["API"], "link": entries[0]["Link"], "introduction": entries[0]["Description"], "category": entries[0]["Category"]}
    builtin = read_sources(ToolsConfig(builtin_catalog=False))
    assert len(builtin) == 8 and all(entry_of(i.raw)["introduction"] for i in builtin)
