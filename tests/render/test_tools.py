"""Tool descriptions: every parsable format gives back exactly the functions it was given, on
hand-written hard cases and on the papers' released tools; malformed text is a ToolFormatError."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolfactory.catalog import load_seed_catalog
from toolfactory.formats.toolbench import load as load_toolbench
from toolfactory.models import Function
from toolfactory.render import PARSABLE_TOOL_FORMATS, TOOL_FORMATS, RenderError, ToolFormatError, parse_tools, render_tools
from toolfactory.definitions.convert import convert

from .cases import FUNCTIONS, TRIP


def dumped(functions: list[Function]) -> list[dict[str, Any]]:
    return [f.model_dump() for f in functions]


@pytest.fixture(scope="module")
def real_tool_sets(shared_data: Path) -> dict[str, list[Function]]:
    """Function lists of the released data: one per ToolAlpaca tool, per ToolBench answer, and the seed catalog."""
    sets: dict[str, list[Function]] = {}
    for raw in json.loads((shared_data / "toolalpaca/eval_simulated.json").read_text()):
        sets[f"toolalpaca/{raw['Name']}"] = [f for tool in convert("toolalpaca", raw) for f in tool.functions]
    for name, _, tools in load_toolbench(shared_data):
        sets[f"toolbench/{name}"] = tools
    catalog = load_seed_catalog()
    sets["catalog"] = [f for tool in catalog for f in tool.functions]
    assert len(sets["catalog"]) >= 36 and len(sets) == 10 + 5 + 1
    return sets


@pytest.mark.parametrize("fmt", PARSABLE_TOOL_FORMATS)
def test_hard_cases_round_trip(fmt: str) -> None:
    text = render_tools(FUNCTIONS, fmt)
    assert dumped(parse_tools(text, fmt)) == dumped(FUNCTIONS)


@pytest.mark.parametrize("fmt", PARSABLE_TOOL_FORMATS)
def test_each_hard_case_round_trips_alone(fmt: str) -> None:
    for fn in FUNCTIONS:
        assert parse_tools(render_tools([fn], fmt), fmt) == [fn], fn.name


@pytest.mark.parametrize("fmt", PARSABLE_TOOL_FORMATS)
def test_no_functions(fmt: str) -> None:
    assert parse_tools(render_tools([], fmt), fmt) == []


@pytest.mark.parametrize("fmt", PARSABLE_TOOL_FORMATS)
def test_released_tools_round_trip(fmt: str, real_tool_sets: dict[str, list[Function]]) -> None:
    for name, functions in real_tool_sets.items():
        assert functions, name
        assert dumped(parse_tools(render_tools(functions, fmt), fmt)) == dumped(functions), name


def test_json_and_yaml_are_the_plain_function_lists() -> None:
    fields = json.loads(render_tools([TRIP, FUNCTIONS[1]], "json"))
    assert fields[0] == {"name": TRIP.name, "description": TRIP.description, "parameters": TRIP.parameters,
                         "returns": TRIP.returns, "method": "POST", "path": TRIP.path}
    assert fields[1] == {"name": "ping", "description": "", "parameters": {"type": "object", "properties": {}}}
    assert yaml.safe_load(render_tools([TRIP, FUNCTIONS[1]], "yaml")) == fields


def test_xml_uses_schema_shaped_elements() -> None:
    root = ET.fromstring(render_tools([TRIP], "xml"))
    function = root.find("function")
    assert function is not None and function.attrib == {"name": "book_trip", "method": "POST", "path": "/v1/trips/{id}`"}
    traveller = function.find("parameters/properties/property[@name='traveller']")
    assert traveller is not None and traveller.get("type") == "object"
    # required in property order becomes required="true"; out of order it stays an explicit list.
    assert [p.get("name") for p in traveller.findall("properties/property[@required='true']")] == ["name", "age"]
    assert json.loads(function.findtext("parameters/required") or "") == ["legs", "traveller"]
    age = traveller.find("properties/property[@name='age']")
    assert age is not None and age.attrib == {"name": "age", "type": "integer", "minimum": "0", "exclusiveMaximum": "130", "required": "true"}
    leg = function.find("parameters/properties/property[@name='legs']/items/properties/property[@name='class']")
    assert leg is not None and json.loads(leg.findtext("enum") or "") == ["economy", "business", None]
    budget = function.find("parameters/properties/property[@name='budget']")
    assert budget is not None and budget.get("minimum") == "0.5" and budget.findtext("default") == "1500.0"
    assert function.find("parameters/keyword[@name='$defs']") is not None  # "$defs" is no XML name


def test_markdown_is_headings_descriptions_and_json_blocks() -> None:
    weather = Function(name="get_weather", description="Weather for a city.",
                       parameters={"type": "object", "properties": {"city": {"type": "string"}}}, method="GET", path="/weather")
    assert render_tools([weather, FUNCTIONS[1]], "markdown") == (
        "## get_weather\n\nWeather for a city.\n\n**Endpoint**: `GET /weather`\n\n"
        '**Parameters**\n```json\n{\n  "type": "object",\n  "properties": {\n    "city": {\n      "type": "string"\n    }\n  }\n}\n```\n\n'
        '## ping\n\n**Parameters**\n```json\n{\n  "type": "object",\n  "properties": {}\n}\n```'
    )


def test_markdown_quotes_text_that_would_read_as_structure() -> None:
    text = render_tools(FUNCTIONS[2:5], "markdown")
    assert '## get item\n\n"\\"Quoted\\" start\\n**Parameters**\\nnot a parameters block"\n' in text
    assert '## doc_like\n\n"Reads like sections:\\n\\n**Parameters**\\n```json' in text
    assert '## "  spaced  "\n' in text
    assert '**Endpoint**: {"method": "GET"}' in text and '**Endpoint**: {"path": "/only/path"}' in text


def test_natural_language_names_every_parameter_and_its_constraints() -> None:
    text = render_tools([TRIP], "natural")
    assert text.startswith("book_trip: Book a trip.")
    for phrase in (
        '\n- "traveller" (required) is an object. Who travels. It has these fields:\n',
        '\n  - "age" (required) is an integer, at least 0, less than 130.\n',
        '\n    - "zip" (optional) is a string, matching the pattern ^[0-9]{5}$.\n',
        '\n- "legs" (required) is a list of objects, at least 1 item(s), with these fields:\n',
        '\n  - "class" (optional) is a string, one of "economy", "business" or null.\n',
        '\n- "budget" (optional) is a number, from 0.5 to 1000000.0, 1500.0 by default.\n',
        '\n- "notes" (optional) is a string or null, null by default. Free text. Windows line ending.\n',
        '\n- "seat" (optional) is either a string or an integer.\n',
        "\nIt returns a list of objects with these fields:\n- \"id\" is a string.",
    ):
        assert phrase in text, phrase


def test_natural_language_is_render_only() -> None:
    with pytest.raises(ToolFormatError, match="render-only"):
        parse_tools(render_tools(FUNCTIONS, "natural"), "natural")


def test_natural_language_covers_the_released_tools(real_tool_sets: dict[str, list[Function]]) -> None:
    for name, functions in real_tool_sets.items():
        text = render_tools(functions, "natural")
        for fn in functions:
            assert f"{fn.name}:" in text, (name, fn.name)
            for parameter in fn.parameters.get("properties", {}):
                assert f'"{parameter}"' in text, (name, fn.name, parameter)


@pytest.mark.parametrize(("fmt", "text", "reason"), [
    ("json", '[{"name": "f", "parameters": ', "not JSON"),
    ("json", '{"name": "f"}', "expected a list of functions"),
    ("json", '[{"description": "no name"}]', "needs a string 'name'"),
    ("json", '[{"name": "f", "parameters": []}]', "parameters"),
    ("json", '[{"name": "f", "colour": "red"}]', "colour"),
    ("yaml", "- name: f\n  parameters: {type: object\n", "not YAML"),
    ("yaml", "- name: f\n  parameters: {default: 2024-01-01}\n", "not a JSON value"),
    ("xml", "<tools><function name='f'>", "not well-formed XML"),
    ("xml", "<functions/>", "root element must be <tools>"),
    ("xml", "<tools><function name='f'><parameters minimum='low'/></function></tools>", "minimum"),
    ("xml", "<tools><function name='f'><colour/></function></tools>", "unexpected element <colour>"),
    ("xml", "<tools><function name='f'><parameters><enum>[1, </enum></parameters></function></tools>", "not JSON"),
    ("xml", "<tools><function name='f'><parameters><properties><property type='string'/></properties></parameters></function></tools>",
     "without a name"),
    ("markdown", "# f\n", "expected a '## <function name>' heading"),
    ("markdown", "## f\n\nNo parameters here.", "no **Parameters** block"),
    ("markdown", "## f\n\n**Parameters**\n```json\n{}\n", "no closing"),
    ("markdown", "## f\n\n**Parameters**\n```json\n{}\n```\ntrailing", "expected a blank line"),
])
def test_malformed_descriptions_say_why(fmt: str, text: str, reason: str) -> None:
    with pytest.raises(ToolFormatError) as caught:
        parse_tools(text, fmt)
    assert reason in str(caught.value) and str(caught.value).startswith(f"{fmt}: ")


@pytest.mark.parametrize("fmt", PARSABLE_TOOL_FORMATS)
def test_damaged_descriptions_raise_only_tool_format_errors(fmt: str) -> None:
    """Cut or scrambled renderings either still parse or raise ToolFormatError, never another error."""
    text = render_tools(FUNCTIONS[:3], fmt)
    rng = random.Random(7)
    damaged = [text[:cut] for cut in range(0, len(text), 23)]
    for _ in range(150):
        at = rng.randrange(len(text))
        damaged.append(text[:at] + rng.choice(['"', "<", ">", "`", "\n", "{", "]", ":", "-", "#", ""]) + text[at + rng.randint(0, 3):])
    for broken in damaged:
        try:
            parse_tools(broken, fmt)
        except ToolFormatError:
            pass


def test_every_function_field_is_described() -> None:
    # The layouts name each field; a new Function field must be taught to them, or it is lost.
    assert set(Function.model_fields) == {"name", "description", "parameters", "returns", "method", "path"}


def test_unknown_format_names_are_programming_errors() -> None:
    with pytest.raises(ValueError, match="formats: json, yaml, xml, markdown, natural") as caught:
        render_tools(FUNCTIONS, "toml")
    assert not isinstance(caught.value, RenderError)
    assert set(TOOL_FORMATS) == {*PARSABLE_TOOL_FORMATS, "natural"}
