"""xLAM / APIGen function-calling records, as released in Salesforce's ``xlam-function-calling-60k``::

    {"id": 0, "query": "...", "tools": "[{\"name\", \"description\", \"parameters\": {...}}]",
     "answers": "[{\"name\": ..., \"arguments\": {...}}]"}

``tools`` and ``answers`` are JSON *strings*, as in the release. One request and the calls that
answer it, complete or not at all: only single-turn records (one user turn, else
``not_single_turn``); ``answers`` are all the record's calls, which must be made in its first
assistant turn (one call or parallel calls; :func:`~toolfactory.export.turns.one_step_calls`),
an empty list for a dialogue that makes no call (xLAM's irrelevance examples). A record that
calls again after a response (``calls_in_several_turns``) is skipped, never cut to its first
calls: its later calls depend on responses xLAM cannot hold. Arguments must be JSON objects
(``arguments_not_json``).

``parameters`` is APIGen's flat mapping ``{param: {"type", "description", "default"?}}`` with
Python type names — ``str``, ``int``, ``float``, ``bool``, ``dict``, ``List[int]``,
``Optional[str]``, ``Union[str, int]``, ``Any`` — and ``", optional"`` appended to the type of
a parameter that is not required (a required parameter's default is not written: APIGen reads
any default as "optional"). ``enum`` is kept. Nested object schemas become ``dict``: APIGen's
flat shape has no place for them. ``id`` is the record's number in the export, counted across
its split files in the order written: each id is unique in the export's folder, which
``toolfactory verify`` reads as one dataset (and by which ``PROVENANCE.md`` names each record's
recipe).
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.export.base import JsonlExporter
from toolfactory.export.turns import arguments_object, one_step_calls, single_request
from toolfactory.models import Dialogue, Function, JsonSchema

_PYTHON = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "object": "dict", "null": "None"}


def python_type(schema: JsonSchema) -> str:
    """APIGen's type name of a JSON Schema."""
    kind = schema.get("type")
    if isinstance(kind, list):
        members = [python_type({**schema, "type": k}) for k in kind if k != "null"]
        inner = members[0] if len(members) == 1 else f"Union[{', '.join(members)}]" if members else "None"
        return f"Optional[{inner}]" if "null" in kind and members else inner
    if kind == "array":
        items = schema.get("items")
        return f"List[{python_type(items)}]" if isinstance(items, dict) and items.get("type") else "list"
    return _PYTHON.get(str(kind), "Any") if kind else "Any"


def apigen_parameters(parameters: JsonSchema) -> dict[str, Any]:
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    out: dict[str, Any] = {}
    for name, schema in properties.items():
        schema = schema if isinstance(schema, dict) else {}
        spec: dict[str, Any] = {"description": str(schema.get("description", ""))}
        spec["type"] = python_type(schema) + ("" if name in required else ", optional")
        if "enum" in schema:
            spec["enum"] = schema["enum"]
        if "default" in schema and name not in required:
            spec["default"] = schema["default"]
        out[name] = spec
    return out


def apigen_tool(function: Function) -> dict[str, Any]:
    return {"name": function.name, "description": function.description, "parameters": apigen_parameters(function.parameters)}


class XLAMExporter(JsonlExporter):
    name = "xlam"
    read_as = "xlam"

    def write(self, split: str, dialogue: Dialogue) -> None:
        record = self.convert(dialogue)
        number = sum(file.file.rows for file in self.files.values())
        self.files[split].write({"id": number, **record})
        self.note(str(number), dialogue.recipe)

    def convert(self, dialogue: Dialogue) -> dict[str, Any]:
        query = single_request(dialogue)
        answers = [{"name": c.name, "arguments": arguments_object(c)} for c in one_step_calls(dialogue)]
        return {
            "query": query,
            "tools": json.dumps([apigen_tool(f) for f in dialogue.tools], ensure_ascii=False),
            "answers": json.dumps(answers, ensure_ascii=False),
        }
