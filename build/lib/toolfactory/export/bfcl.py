"""Berkeley Function-Calling Leaderboard (BFCL) style evaluation files: a question file and a
possible-answer file per split, both JSONL, joined by ``id``::

    <split>.jsonl                  {"id", "question": [[{"role": "user", "content": ...}]], "function": [...]}
    possible_answer/<split>.jsonl  {"id", "ground_truth": [{fn_name: {arg: [value, ...]}}, ...]}

as BFCL lays out ``BFCL_v3_<category>.json`` and ``possible_answer/BFCL_v3_<category>.json``.
Single-turn records only (``not_single_turn``); the ground truth is the calls of the first
assistant turn (several for parallel calls), so a record that makes no call is skipped
(``no_calls``): BFCL's irrelevance questions have no possible answer to compare with.

Functions use BFCL's type names (``dict`` for an object, ``float`` for a number; the rest as
in JSON Schema), which the repo's OpenAI tool importer maps back. Each argument's list of
acceptable values is the value the dialogue used; for a parameter the call omits, ``[""]``
("may be omitted", BFCL's convention), preceded by the schema's ``default`` when it has one.
Arguments must be JSON objects (``arguments_not_json``).
"""

from __future__ import annotations

from typing import Any, Sequence

from toolfactory.export.base import NO_CALLS, Exporter, ExportOptions, Skip
from toolfactory.export.output import JsonLines, OutputDir
from toolfactory.export.stats import ExportStats
from toolfactory.export.turns import arguments_object, first_turn_calls, single_request
from toolfactory.models import Dialogue, Function, JsonSchema

_BFCL_TYPES = {"object": "dict", "number": "float"}


def bfcl_schema(schema: Any) -> Any:
    """`schema` with BFCL's type names, recursively."""
    if isinstance(schema, list):
        return [bfcl_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: bfcl_schema(value) for key, value in schema.items()}
    kind = schema.get("type")
    if isinstance(kind, str):
        out["type"] = _BFCL_TYPES.get(kind, kind)
    elif isinstance(kind, list):
        out["type"] = [_BFCL_TYPES.get(k, k) if isinstance(k, str) else k for k in kind]
    return out


def bfcl_function(function: Function) -> dict[str, Any]:
    return {"name": function.name, "description": function.description, "parameters": bfcl_schema(function.parameters)}


def acceptable(arguments: dict[str, Any], parameters: JsonSchema) -> dict[str, list[Any]]:
    """Each argument's acceptable values (see the module doc); ``""`` also for a value that equals
    the parameter's default, since omitting it means the same."""
    properties = parameters.get("properties") or {}
    out: dict[str, list[Any]] = {}
    for name, value in arguments.items():
        schema = properties.get(name) if isinstance(properties.get(name), dict) else {}
        out[name] = [value, ""] if "default" in schema and schema["default"] == value else [value]
    for name, schema in properties.items():
        if name not in out:
            default = schema.get("default") if isinstance(schema, dict) else None
            out[name] = ([default] if default is not None else []) + [""]
    return out


def question_and_answer(dialogue: Dialogue) -> tuple[dict[str, Any], dict[str, Any]]:
    request = single_request(dialogue)
    calls = first_turn_calls(dialogue)
    if not calls:
        raise Skip(NO_CALLS, "no call to compare with")
    schemas = {f.name: f.parameters for f in dialogue.tools}
    truth = [{c.name: acceptable(arguments_object(c), schemas.get(c.name, {}))} for c in calls]
    question = {"id": dialogue.id, "question": [[{"role": "user", "content": request}]],
                "function": [bfcl_function(f) for f in dialogue.tools]}
    return question, {"id": dialogue.id, "ground_truth": truth}


class BFCLExporter(Exporter):
    name = "bfcl"

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        self.questions = {s: JsonLines(out, f"{s}.jsonl") for s in self.splits}
        self.answers = {s: JsonLines(out, f"possible_answer/{s}.jsonl") for s in self.splits}

    def write(self, split: str, dialogue: Dialogue) -> None:
        question, answer = question_and_answer(dialogue)
        self.questions[split].write(question)
        self.answers[split].write(answer)

    def close(self, stats: ExportStats) -> dict[str, int]:
        files = {f"possible_answer/{s}.jsonl": file.commit() for s, file in self.answers.items()}
        return {**{f"{s}.jsonl": file.commit() for s, file in self.questions.items()}, **files}

    def abort(self) -> None:
        for file in [*self.questions.values(), *self.answers.values()]:
            file.discard()
