"""ToolBench response examples become the `returns` schemas of the imported functions.

The tool JSONs are written in ToolBench's layout (``tools/<Category>/<tool>.json``) for the tools
of the real ``response_examples`` folder, with the API names the example files use.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from toolfactory.config import SourceFile, ToolsConfig, validate_config
from toolfactory.errors import ConfigError
from toolfactory.models import Tool
from toolfactory.stages.tools.sources import SourceItem, read_sources
from toolfactory.stages.tools.stage import import_items

PYTHON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
EXTRA_API = "Endpoint without example"


def examples_dir(shared_data: Path) -> Path:
    return shared_data / "toolbench" / "response_examples"


def example_files(shared_data: Path) -> list[tuple[Path, list[dict[str, Any]]]]:
    """The real example files that parse and name at least one API with a non-empty schema."""
    out = []
    for path in sorted(examples_dir(shared_data).glob("*/*.json")):
        try:
            apis = json.loads(path.read_text())["api_list"]
        except (ValueError, KeyError):
            continue
        if any(api["schema"] for api in apis):
            out.append((path, apis))
    return out


def tool_json(name: str, api_names: list[str], standardized_name: str | None = None) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "tool_name": name,
        "tool_description": f"The {name} API.",
        "api_list": [
            {"name": api, "url": f"https://example.p.rapidapi.com/{n}", "description": f"Calls {api}.", "method": "GET",
             "required_parameters": [{"name": "q", "type": "STRING", "description": "Query.", "default": ""}],
             "optional_parameters": []}
            for n, api in enumerate(api_names)
        ],
    }
    if standardized_name is not None:
        tool["standardized_name"] = standardized_name
    return tool


def write_tool(root: Path, category: str, stem: str, tool: dict[str, Any]) -> Path:
    path = root / "tools" / category / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tool))
    return path


def files_only(files: list[SourceFile]) -> ToolsConfig:
    """A tools config that reads `files` and none of the built-in sources."""
    return ToolsConfig(files=files, **{name: False for name in ToolsConfig.model_fields if name.startswith("builtin_")})


def import_tools(paths: list[Path], response_examples: Path) -> tuple[list[Tool], Any]:
    items = read_sources(files_only([SourceFile(path=str(p), format="toolbench", response_examples=str(response_examples)) for p in paths]))
    out = import_items(items)
    return out.records, out


def function_for(tool: Tool, api_name: str) -> Any:
    matches = [fn for fn in tool.functions if fn.path and fn.description == f"Calls {api_name}."]
    assert len(matches) == 1, api_name
    return matches[0]


def assert_schema_of(schema: dict[str, Any], example: Any, where: str) -> None:
    """`schema` describes `example` exactly: same keys at every level, leaf types as named."""
    if isinstance(example, dict):
        assert schema["type"] == "object", where
        assert set(schema["properties"]) == set(example), where
        for key, value in example.items():
            assert_schema_of(schema["properties"][key], value, f"{where}.{key}")
    elif isinstance(example, list):
        assert schema["type"] == "array", where
        if example:
            assert_schema_of(schema["items"], example[0], f"{where}[0]")
        else:
            assert "items" not in schema, where
    elif example in PYTHON_TYPES:
        assert schema == {"type": PYTHON_TYPES[example]}, where
    elif example == "empty list":
        assert schema == {"type": "array"}, where
    else:
        assert schema == {}, where


def test_every_real_example_becomes_the_returns_of_its_function(shared_data: Path, tmp_path: Path) -> None:
    files = example_files(shared_data)
    assert len(files) >= 7
    paths = []
    for path, apis in files:
        name = path.stem.replace("_", " ").title()
        paths.append(write_tool(tmp_path, path.parent.name, path.stem,
                                tool_json(name, [api["name"] for api in apis] + [EXTRA_API], standardized_name=path.stem)))
    tools, out = import_tools(paths, examples_dir(shared_data))
    assert out.rejections() == {}
    assert len(tools) == len(files)
    for tool, (path, apis) in zip(tools, files):
        assert tool.category == path.parent.name
        assert tool.provenance["returns_from"] == "response_examples"
        for api in apis:
            fn = function_for(tool, api["name"])
            if api["schema"]:
                assert_schema_of(fn.returns, api["schema"], f"{path.stem}:{api['name']}")
            else:
                assert fn.returns == {"type": "object"}
        assert function_for(tool, EXTRA_API).returns == {"type": "object"}


def test_nested_examples_give_typed_properties(shared_data: Path, tmp_path: Path) -> None:
    paths = [
        write_tool(tmp_path, "Business", "abuse_ip_check", tool_json("Abuse IP Check", ["CHECK Endpoint"], "abuse_ip_check")),
        write_tool(tmp_path, "Gaming", "dice_roll_simulator", tool_json("Dice Roll Simulator", ["Regular dice rolls"], "dice_roll_simulator")),
        write_tool(tmp_path, "Artificial_Intelligence_Machine_Learning", "speech_recognition",
                   tool_json("Speech Recognition", ["languages"], "speech_recognition")),
    ]
    abuse, dice, speech = import_tools(paths, examples_dir(shared_data))[0]
    data = abuse.functions[0].returns["properties"]["data"]
    assert data["type"] == "object"
    assert data["properties"]["isPublic"] == {"type": "boolean"}
    assert data["properties"]["abuseConfidenceScore"] == {"type": "integer"}
    assert data["properties"]["ipAddress"] == {"type": "string"}
    assert dice.functions[0].returns == {"type": "object", "properties": {
        "result": {"type": "array", "items": {"type": "object", "properties": {"roll": {"type": "array"}, "subtotal": {"type": "integer"}}}},
        "total": {"type": "integer"},
    }}
    languages = speech.functions[0].returns["properties"]["languages"]
    assert languages == {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "code": {"type": "string"}}}}
    validator = Draft202012Validator(speech.functions[0].returns)
    assert validator.is_valid({"languages": [{"name": "English", "code": "en"}]})
    assert not validator.is_valid({"languages": [{"name": "English", "code": 7}]})


def test_a_tool_without_an_example_file_keeps_the_default_returns(shared_data: Path, tmp_path: Path) -> None:
    paths = [
        write_tool(tmp_path, "Commerce", "no_such_tool", tool_json("No Such Tool", ["Hot Products"], "no_such_tool")),
        write_tool(tmp_path, "Advertising", "putreq", tool_json("PUTREQ", ["getPetById"], "putreq")),  # its api_list is empty
        write_tool(tmp_path, "Logistics", "privatepublicapi", tool_json("PrivatePublicAPI", ["getPetById"], "privatepublicapi")),
    ]
    tools, out = import_tools(paths, examples_dir(shared_data))
    assert out.rejections() == {}
    assert [t.name for t in tools] == ["No Such Tool", "PUTREQ", "PrivatePublicAPI"]  # the last: wrong category folder
    for tool in tools:
        assert [fn.returns for fn in tool.functions] == [{"type": "object"}]
        assert "returns_from" not in tool.provenance


def test_without_the_option_no_examples_are_read(shared_data: Path, tmp_path: Path) -> None:
    path = write_tool(tmp_path, "Business", "abuse_ip_check", tool_json("Abuse IP Check", ["CHECK Endpoint"], "abuse_ip_check"))
    items = read_sources(files_only([SourceFile(path=str(path), format="toolbench")]))
    assert "response_examples" not in items[0].raw
    assert import_items(items).records[0].functions[0].returns == {"type": "object"}


def test_a_malformed_example_file_does_not_stop_the_import(shared_data: Path, tmp_path: Path) -> None:
    real = examples_dir(shared_data)
    assert (real / "Business" / "acrosuite_oauther.json").read_text() == ""  # malformed in the released data
    folder = tmp_path / "response_examples"
    (folder / "Business").mkdir(parents=True)
    (folder / "Gaming").mkdir()
    for name in ("Business/abuse_ip_check.json", "Business/acrosuite_oauther.json"):
        (folder / name).write_text((real / name).read_text())
    (folder / "Business" / "broken.json").write_text('{"api_list": [{"name": "a", "schema": ')
    (folder / "Business" / "not_a_list.json").write_text('{"api_list": "oops"}')
    dice = json.loads((real / "Gaming" / "dice_roll_simulator.json").read_text())
    dice["api_list"].insert(0, {"schema": {"total": "int"}})  # an entry without a name is skipped
    dice["api_list"].insert(0, "Regular dice rolls")
    (folder / "Gaming" / "dice_roll_simulator.json").write_text(json.dumps(dice))
    paths = [
        write_tool(tmp_path, "Business", "acrosuite_oauther", tool_json("AcroSuite OAuther", ["OAuth Token"], "acrosuite_oauther")),
        write_tool(tmp_path, "Business", "broken", tool_json("Broken", ["a"], "broken")),
        write_tool(tmp_path, "Business", "not_a_list", tool_json("Not A List", ["a"], "not_a_list")),
        write_tool(tmp_path, "Business", "abuse_ip_check", tool_json("Abuse IP Check", ["CHECK Endpoint"], "abuse_ip_check")),
        write_tool(tmp_path, "Gaming", "dice_roll_simulator", tool_json("Dice Roll Simulator", ["Regular dice rolls", "Custom dice rolls"], "dice_roll_simulator")),
    ]
    tools, out = import_tools(paths, folder)
    assert out.rejections() == {}
    by_name = {t.name: t for t in tools}
    assert len(by_name) == 5
    for name in ("AcroSuite OAuther", "Broken", "Not A List"):
        assert by_name[name].functions[0].returns == {"type": "object"}
        assert "returns_from" not in by_name[name].provenance
    assert by_name["Abuse IP Check"].functions[0].returns["properties"]["data"]["properties"]["isTor"] == {"type": "boolean"}
    for fn, api in zip(by_name["Dice Roll Simulator"].functions, dice["api_list"][2:]):
        assert_schema_of(fn.returns, api["schema"], api["name"])


def test_query_file_tools_match_by_standardized_tool_name_and_category(shared_data: Path, tmp_path: Path) -> None:
    # Query files carry no standardized_name: ToolBench's standardization of the tool name and
    # of the category name locate the example file.
    g1 = json.loads((shared_data / "toolbench/instruction/G1_query.json").read_text())
    template = g1[0]["api_list"][0]
    queries = [{"query": "Which matches were played?", "query_id": 1, "api_list": [
        {**template, "category_name": "Gaming", "tool_name": "CSGO Matches and Tournaments", "api_name": "Played",
         "api_description": "Played matches."},
        {**template, "category_name": "Artificial Intelligence/Machine Learning", "tool_name": "Speech-Recognition", "api_name": "languages",
         "api_description": "Supported languages."},
    ]}]
    path = tmp_path / "G1_query.json"
    path.write_text(json.dumps(queries))
    tools, out = import_tools([path], examples_dir(shared_data))
    assert out.rejections() == {}
    csgo, speech = tools
    played = json.loads((examples_dir(shared_data) / "Gaming/csgo_matches_and_tournaments.json").read_text())["api_list"][0]
    assert_schema_of(csgo.functions[0].returns, played["schema"], "Played")
    assert csgo.functions[0].returns["properties"]["data"]["items"]["properties"]["team_won"]["properties"]["title"] == {"type": "string"}
    assert speech.functions[0].returns["properties"]["languages"]["type"] == "array"


def test_items_carry_the_examples_so_shards_need_no_files(shared_data: Path, tmp_path: Path) -> None:
    folder = tmp_path / "response_examples"
    shutil.copytree(examples_dir(shared_data) / "Gaming", folder / "Gaming", copy_function=shutil.copyfile)
    path = write_tool(tmp_path, "Gaming", "csgo_matches_and_tournaments",
                      tool_json("CSGO Matches", ["Played", "Upcoming"], "csgo_matches_and_tournaments"))
    items = read_sources(files_only([SourceFile(path=str(path), format="toolbench", response_examples=str(folder))]))
    stored = [json.loads(item.model_dump_json()) for item in items]
    (folder / "Gaming").chmod(0o755)
    shutil.rmtree(folder)
    tools = import_items([SourceItem.model_validate(data) for data in stored]).records
    assert set(stored[0]["raw"]["response_examples"]) == {"Played", "Upcoming"}
    assert tools[0].functions[1].returns["properties"]["meta"] == {"type": "object", "properties": {"total": {"type": "string"}}}


def test_response_examples_for_another_format_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tools\.files\.0: .*response_examples .*'toolbench' only, not 'openai'"):
        validate_config({"tools": {"files": [{"path": "tools.json", "format": "openai", "response_examples": "examples"}]}})
    config = validate_config({"tools": {"files": [{"path": "t.json", "format": "toolbench", "response_examples": "examples"}]}})
    assert config.tools.files[0].response_examples == "examples"


def test_a_missing_examples_folder_is_a_config_error(shared_data: Path, tmp_path: Path) -> None:
    path = write_tool(tmp_path, "Business", "abuse_ip_check", tool_json("Abuse IP Check", ["CHECK Endpoint"], "abuse_ip_check"))
    with pytest.raises(ConfigError, match="tools.files.response_examples: no such folder"):
        import_tools([path], tmp_path / "nowhere")


def test_float_and_unknown_type_names(tmp_path: Path) -> None:
    folder = tmp_path / "response_examples"
    (folder / "Finance").mkdir(parents=True)
    (folder / "Finance" / "rates.json").write_text(json.dumps({"api_list": [
        {"name": "Rate", "schema": {"value": "float", "note": "NoneType", "history": ["float"], "tags": []}},
        {"name": "Nothing", "schema": "NoneType"},
        {"name": "Empty", "schema": {}},
    ]}))
    path = write_tool(tmp_path, "Finance", "rates", tool_json("Rates", ["Rate", "Nothing", "Empty"], "rates"))
    tools, out = import_tools([path], folder)
    assert out.rejections() == {}
    rate, nothing, empty = tools[0].functions
    assert rate.returns == {"type": "object", "properties": {
        "value": {"type": "number"}, "note": {}, "history": {"type": "array", "items": {"type": "number"}}, "tags": {"type": "array"},
    }}
    assert nothing.returns == empty.returns == {"type": "object"}
    assert tools[0].provenance["returns_from"] == "response_examples"
