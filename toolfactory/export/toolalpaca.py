"""ToolAlpaca tool entries (ToolAlpaca §3): one entry per tool, in ``<split>.json`` (a JSON list).

ToolAlpaca's data is organised by tool: an entry holds the tool's documentation in several
forms and its instances. Records are gathered by their source tools (the pool tools their
functions come from; a multi-tool record's entry is that set of tools), so every tool of a split
is one entry whose ``Instructions``, ``Golden_Answers`` and ``Instances`` list the records made
with it. Entries are written when the export closes: a split's entries are held in memory until
then, as ToolAlpaca's loader holds the whole file. The keys (and types) are those of
ToolAlpaca's released ``eval_simulated.json``, plus the training ``Instances`` that ToolAlpaca's
``build_dataset.py`` turns into training text:

* ``Name``, ``Description``, ``Introduction``, ``Link``, ``Category``: the tool's, from the
  run's tool pool (``runs/<run>/pool``; joined with `` / `` and newlines for a multi-tool
  entry). A record whose tools the run does not keep (imported dialogues) has the names its
  ``source_tools`` give and empty texts, or, with no source tools at all, its own entry named
  after the record id;
* ``Documentation``: an OpenAPI 3.0 document (JSON text) with one operation per function of the
  entry (the union of its records' functions, by name) — ``operationId`` the function name, its
  method and path when it has them (else ``POST /<name>``); path-template parameters
  ``in: path``, the others query parameters for GET/DELETE and a JSON request body otherwise;
  the ``returns`` schema as the 200 response. It is what :mod:`toolfactory.formats.toolalpaca`
  reads the functions back from;
* ``Functions``, ``NLDocumentation``, ``Function_Description`` (with ToolAlpaca's
  ``components`` key, empty), ``Function_Projection`` ({name: [path, method]}): the textual
  forms ToolAlpaca's agent prompt is made of;
* ``Instructions``: the user requests; ``Golden_Answers``: their steps ``{Action, Action_Input}``
  (every call, parallel calls one step each, in order; arguments as generated);
* ``Instances``: ``{input, output, intermediate_steps}`` with steps
  ``[[Action, Action_Input, log], observation]`` (LangChain's agent-action triple; ``log`` is
  `` <thought>\\nAction: …\\nAction Input: …``) and the final answer as ``output``.

A question the assistant asked for a missing value (a turn the simulation recorded in
``generation.clarification_turns``) and the user's answer are ToolAlpaca's ``getDetails`` step:
``{"Action": "getDetails", "Action_Input": "{\"Question\": …}"}`` with the user's answer as its
observation, as in the released golden answers. ToolAlpaca instances answer one request: other
multi-turn records are skipped (``not_single_turn``), and records without calls (``no_calls``),
which ToolAlpaca's ``build_dataset.py`` drops.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from toolfactory.export.base import NO_CALLS, Exporter, ExportOptions, Skip
from toolfactory.export.output import JsonList, OutputDir
from toolfactory.export.stats import ExportStats
from toolfactory.export.turns import FINISH, all_calls, final_answer, responses, single_request
from toolfactory.stages.verify.export_policy import FINISH_OFFERED
from toolfactory.models import Dialogue, Function, JsonSchema, Tool

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


ASK_USER = "getDetails"


def clarifications(dialogue: Dialogue) -> set[int]:
    """Indexes of the assistant questions for a missing value that the next message answers."""
    asked = {int(i) for i in dialogue.generation.get("clarification_turns") or () if isinstance(i, int)}
    messages = dialogue.messages
    return {i for i in asked if i + 1 < len(messages) and messages[i].role == "assistant" and not messages[i].tool_calls
            and messages[i + 1].role == "user"}


def request_of(dialogue: Dialogue) -> str:
    """The request of a record that answers one: its first user turn, the others being answers to
    the assistant's questions (getDetails); else :class:`Skip` (``not_single_turn``)."""
    answers = {i + 1 for i in clarifications(dialogue)}
    users = [i for i, m in enumerate(dialogue.messages) if m.role == "user"]
    if not users or any(i not in answers for i in users[1:]):
        return single_request(dialogue)
    return dialogue.messages[users[0]].content or ""


def steps(dialogue: Dialogue) -> tuple[list[dict[str, str]], list[list[Any]]]:
    """(Golden_Answers steps, Instances intermediate_steps) of every call and getDetails question, in order."""
    answers = responses(dialogue)
    golden: list[dict[str, str]] = []
    intermediate: list[list[Any]] = []
    asked = clarifications(dialogue)
    for index, message in enumerate(dialogue.messages):
        if index in asked:
            question = json.dumps({"Question": message.content or ""}, ensure_ascii=False)
            golden.append({"Action": ASK_USER, "Action_Input": question})
            log = f" {message.reasoning or ''}\nAction: {ASK_USER}\nAction Input: {question}"
            intermediate.append([[ASK_USER, question, log], dialogue.messages[index + 1].content or ""])
            continue
        for k, call in enumerate(message.tool_calls or []):
            golden.append({"Action": call.name, "Action_Input": call.arguments})
            thought = (message.content or "") if k == 0 else ""
            log = f" {thought}\nAction: {call.name}\nAction Input: {call.arguments}"
            response = answers.get(call.id)
            intermediate.append([[call.name, call.arguments, log], response.content or "" if response else ""])
    return golden, intermediate


def _joined(values: list[str], separator: str) -> str:
    return separator.join(v for v in values if v)


class _Entry:
    """One tool's entry being gathered: its identity, its functions and its records' parts."""

    def __init__(self, dialogue: Dialogue, tools: Mapping[str, Tool]) -> None:
        known = [tools[ref.id] for ref in dialogue.source_tools if ref.id in tools]
        self.name = " / ".join(t.name for t in dialogue.source_tools) or dialogue.id
        self.description = _joined([t.description for t in known], "\n")
        self.introduction = _joined([t.introduction for t in known], "\n")
        self.link = _joined([t.link for t in known], " ")
        self.category = dialogue.source_tools[0].category if dialogue.source_tools else "General"
        self.functions: dict[str, Function] = {}
        self.recipes: list[tuple[str, bool]] = []  # (recipe, whether it offers Finish) of each record, in order
        self.instructions: list[str] = []
        self.golden: list[list[dict[str, str]]] = []
        self.instances: list[dict[str, Any]] = []

    def add(self, dialogue: Dialogue, request: str) -> None:
        for function in dialogue.tools:
            self.functions.setdefault(function.name, function)
        golden, intermediate = steps(dialogue)
        self.recipes.append((dialogue.recipe, any(f.name == FINISH for f in dialogue.tools)))
        self.instructions.append(request)
        self.golden.append(golden)
        self.instances.append({"input": request, "output": final_answer(dialogue) or "", "intermediate_steps": intermediate})

    def to_json(self) -> dict[str, Any]:
        functions = list(self.functions.values())
        document, projection = openapi_document(self.name, functions)
        descriptions = {f.name: function_description(f) for f in functions}
        return {
            "Name": self.name,
            "Description": self.description,
            "Link": self.link,
            "Category": self.category,
            "Introduction": self.introduction,
            "Functions": "\n\n".join(f"{i}. Name: {f.name}\nDescription: {f.description}\nInput: {parameters_text(f)}\n"
                                     f"Output: Successful response." for i, f in enumerate(functions, start=1)),
            "Documentation": json.dumps(document, ensure_ascii=False),
            "NLDocumentation": "\n".join(f"{n}: {text}" for n, text in descriptions.items()),
            "Function_Description": {**descriptions, "components": ""},
            "Function_Projection": projection,
            "Instructions": self.instructions,
            "Golden_Answers": self.golden,
            "Instances": self.instances,
        }


def entry_key(dialogue: Dialogue) -> tuple[str, ...]:
    """The tools an entry is made of: the record's source tools, or the record alone."""
    return tuple(sorted(ref.id for ref in dialogue.source_tools)) or (f"record:{dialogue.id}",)


class ToolAlpacaExporter(Exporter):
    name = "toolalpaca"
    needs_tools = True
    read_as = "toolalpaca"  # a record is read as `<Name>/<k>`: its entry and its golden answer

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        self.entries: dict[str, dict[tuple[str, ...], _Entry]] = {s: {} for s in self.splits}

    def write(self, split: str, dialogue: Dialogue) -> None:
        request = request_of(dialogue)
        if not all_calls(dialogue):
            raise Skip(NO_CALLS, "ToolAlpaca's instances are made of calls")
        entries = self.entries[split]
        key = entry_key(dialogue)
        if key not in entries:
            entries[key] = _Entry(dialogue, self.tools)
        entries[key].add(dialogue, request)

    def close(self, stats: ExportStats) -> dict[str, int]:
        files = {}
        for split, entries in self.entries.items():
            file = JsonList(self.out, f"{split}.json")
            for entry in entries.values():
                file.write(entry.to_json())
                # An entry documents every function of its tool: ToolLLM's Finish, offered to a record
                # that did not have it, leaves filter_search_not_finished nothing to judge it by.
                for k, (recipe, finish) in enumerate(entry.recipes):
                    self.note(f"{entry.name}/{k}", recipe, FINISH_OFFERED if FINISH in entry.functions and not finish else None)
            files[f"{split}.json"] = file.commit()
        return files

    def abort(self) -> None:
        self.entries = {s: {} for s in self.splits}
