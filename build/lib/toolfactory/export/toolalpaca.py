"""ToolAlpaca tool entries (ToolAlpaca §3), one per record, in ``<split>.json`` (a JSON list).

ToolAlpaca's data is organised by tool: an entry holds the tool's documentation in several
forms and its instances. An export is streamed, so each record becomes its own entry, with the
keys (and types) of ToolAlpaca's released ``eval_simulated.json`` plus the training
``Instances`` that ToolAlpaca's ``build_dataset.py`` turns into training text:

* ``Name`` (the record's source tools, joined with `` / ``; the record id when it has none),
  ``Category``, ``Description``/``Link``/``Introduction`` (empty: records do not keep them);
* ``Documentation``: an OpenAPI 3.0 document (JSON text) with one operation per function —
  ``operationId`` the function name, its method and path when it has them (else ``POST
  /<name>``); path-template parameters ``in: path``, the others query parameters for GET/DELETE
  and a JSON request body otherwise; the ``returns`` schema as the 200 response. It is what
  :mod:`toolfactory.formats.toolalpaca` reads the functions back from;
* ``Functions``, ``NLDocumentation``, ``Function_Description`` (with ToolAlpaca's
  ``components`` key, empty), ``Function_Projection`` ({name: [path, method]}): the textual
  forms ToolAlpaca's agent prompt is made of;
* ``Instructions``: the user request; ``Golden_Answers``: its steps ``{Action, Action_Input}``
  (every call, parallel calls one step each, in order; arguments as generated);
* ``Instances``: ``{input, output, intermediate_steps}`` with steps
  ``[[Action, Action_Input, log], observation]`` (LangChain's agent-action triple; ``log`` is
  `` <thought>\\nAction: …\\nAction Input: …``) and the final answer as ``output``.

ToolAlpaca instances answer one request: multi-turn records are skipped (``not_single_turn``),
and records without calls (``no_calls``), which ToolAlpaca's ``build_dataset.py`` drops.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.export.base import NO_CALLS, JsonlExporter, Skip
from toolfactory.export.output import JsonList
from toolfactory.export.turns import all_calls, final_answer, responses, single_request
from toolfactory.models import Dialogue, Function, JsonSchema

_METHODS = {"get", "post", "put", "patch", "delete"}
_QUERY_METHODS = {"get", "delete"}


def _route(function: Function, taken: set[tuple[str, str]]) -> tuple[str, str]:
    method = (function.method or "post").lower()
    method = method if method in _METHODS else "post"
    path = function.path if function.path and function.path.startswith("/") else f"/{function.name}"
    if (path, method) in taken:  # two functions on one route: the second gets its own
        path = f"/{function.name}"
    taken.add((path, method))
    return path, method


def operation(function: Function, path: str, method: str) -> dict[str, Any]:
    properties: dict[str, JsonSchema] = function.parameters.get("properties") or {}
    required = list(function.parameters.get("required") or [])
    op: dict[str, Any] = {
        "operationId": function.name,
        "description": function.description,
        "responses": {"200": {"description": "Successful response.", "content": {"application/json": {"schema": function.returns}}}},
    }
    in_path = [n for n in properties if "{" + n + "}" in path]
    in_query = [n for n in properties if n not in in_path] if method in _QUERY_METHODS else []
    parameters = [{"name": n, "in": "path", "required": True, "schema": properties[n]} for n in in_path]
    parameters += [{"name": n, "in": "query", "required": n in required, "schema": properties[n]} for n in in_query]
    if parameters:
        op["parameters"] = parameters
    body = {n: s for n, s in properties.items() if n not in in_path and n not in in_query}
    if body:
        schema = {"type": "object", "properties": body, "required": [n for n in required if n in body]}
        op["requestBody"] = {"required": bool(schema["required"]), "content": {"application/json": {"schema": schema}}}
    return op


def openapi_document(title: str, functions: list[Function]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The OpenAPI document of `functions`, and ToolAlpaca's Function_Projection."""
    paths: dict[str, dict[str, Any]] = {}
    projection: dict[str, list[str]] = {}
    taken: set[tuple[str, str]] = set()
    for function in functions:
        path, method = _route(function, taken)
        paths.setdefault(path, {})[method] = operation(function, path, method)
        projection[function.name] = [path, method]
    document = {"openapi": "3.0.0", "info": {"title": title, "version": "1.0.0", "description": ""}, "paths": paths}
    return document, projection


def structure(schema: Any) -> str:
    """ToolAlpaca's one-line shape of a response: ``Object{a, b: Array[string]}``."""
    if not isinstance(schema, dict):
        return "string"
    kind = schema.get("type")
    if kind == "array":
        return f"Array[{structure(schema.get('items'))}]"
    if kind == "object" or "properties" in schema:
        fields = [k if (v or {}).get("type") not in ("object", "array") else f"{k}: {structure(v)}"
                  for k, v in (schema.get("properties") or {}).items()]
        return "Object{" + ", ".join(fields) + "}" if fields else "Object"
    return str(kind or "string")


def parameters_text(function: Function) -> str:
    required = set(function.parameters.get("required") or [])
    described = {}
    for name, schema in (function.parameters.get("properties") or {}).items():
        schema = schema if isinstance(schema, dict) else {}
        kind = str(schema.get("type") or "any").capitalize()
        described[name] = f"{'Required' if name in required else 'Optional'}. {kind}. {schema.get('description', '')}".strip()
    return json.dumps(described, ensure_ascii=False)


def function_description(function: Function) -> str:
    return (f"{function.description}\nParameters: {parameters_text(function)}\nOutput: Successful response.\n"
            f" - Format: application/json\n - Structure: {structure(function.returns)}")


def steps(dialogue: Dialogue) -> tuple[list[dict[str, str]], list[list[Any]]]:
    """(Golden_Answers steps, Instances intermediate_steps) of every call, in order."""
    answers = responses(dialogue)
    golden: list[dict[str, str]] = []
    intermediate: list[list[Any]] = []
    for message in dialogue.messages:
        for k, call in enumerate(message.tool_calls or []):
            golden.append({"Action": call.name, "Action_Input": call.arguments})
            thought = (message.content or "") if k == 0 else ""
            log = f" {thought}\nAction: {call.name}\nAction Input: {call.arguments}"
            response = answers.get(call.id)
            intermediate.append([[call.name, call.arguments, log], response.content or "" if response else ""])
    return golden, intermediate


def tool_entry(dialogue: Dialogue) -> dict[str, Any]:
    request = single_request(dialogue)
    if not all_calls(dialogue):
        raise Skip(NO_CALLS, "ToolAlpaca's instances are made of calls")
    name = " / ".join(t.name for t in dialogue.source_tools) or dialogue.id
    document, projection = openapi_document(name, dialogue.tools)
    descriptions = {f.name: function_description(f) for f in dialogue.tools}
    golden, intermediate = steps(dialogue)
    return {
        "Name": name,
        "Description": "",
        "Link": "",
        "Category": dialogue.source_tools[0].category if dialogue.source_tools else "General",
        "Introduction": "",
        "Functions": "\n\n".join(f"{i}. Name: {f.name}\nDescription: {f.description}\nInput: {parameters_text(f)}\n"
                                 f"Output: Successful response." for i, f in enumerate(dialogue.tools, start=1)),
        "Documentation": json.dumps(document, ensure_ascii=False),
        "NLDocumentation": "\n".join(f"{n}: {text}" for n, text in descriptions.items()),
        "Function_Description": {**descriptions, "components": ""},
        "Function_Projection": projection,
        "Instructions": [request],
        "Golden_Answers": [golden],
        "Instances": [{"input": request, "output": final_answer(dialogue) or "", "intermediate_steps": intermediate}],
    }


class ToolAlpacaExporter(JsonlExporter):
    name = "toolalpaca"
    suffix = ".json"
    writer = JsonList

    def convert(self, dialogue: Dialogue) -> dict[str, Any]:
        return tool_entry(dialogue)
