"""Berkeley Function-Calling Leaderboard (BFCL) evaluation files, laid out as BFCL lays out its
own: one question file and one possible-answer file per test category, JSON lines joined by
``id``::

    <split>/BFCL_v3_<category>.json                  {"id": "<category>_<n>", "question": [[{"role": "user", "content": ...}]], "function": [...]}
    <split>/possible_answer/BFCL_v3_<category>.json  {"id": "<category>_<n>", "ground_truth": [{fn_name: {arg: [value, ...]}}, ...]}
    <split>/record_ids.jsonl                         {"id": "<category>_<n>", "record_id": ...}

BFCL finds a file's category in its name (``BFCL_v3_(\\w+?)\\.json``) and an entry's category in
its id (``id.rsplit("_", 1)[0]``), so ids are ``<category>_<n>``, numbered from 0 in each file.
``record_ids.jsonl`` maps them back to the records (BFCL reads ``*.json`` only).

The category is BFCL's AST category of the record's shape: ``simple`` (one function offered, one
call), ``multiple`` (several offered, one call), ``parallel`` (one offered, several calls),
``parallel_multiple`` (several offered, several calls), and ``irrelevance`` for a dialogue that
makes no call because no offered function fits (mode ``non_tool``): BFCL checks that the model
calls nothing, so it has no possible answer. Single-turn records only (``not_single_turn``);
every call must be made in the first assistant turn (``calls_in_several_turns`` otherwise: a
call that needs an earlier response has no BFCL single-turn category); any other record without
calls (a clarifying question) is skipped (``no_calls``).

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
from toolfactory.export.turns import arguments_object, one_step_calls, single_request
from toolfactory.models import Dialogue, Function, JsonSchema, ToolCall

VERSION_PREFIX = "BFCL_v3"
IRRELEVANCE = "irrelevance"
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


def category(dialogue: Dialogue, calls: list[ToolCall]) -> str:
    """BFCL's single-turn category of the record (see the module doc), or :class:`Skip`."""
    if not calls:
        if dialogue.mode == "non_tool":
            return IRRELEVANCE
        raise Skip(NO_CALLS, f"a {dialogue.mode} dialogue without calls has no BFCL category")
    several_offered = len(dialogue.tools) > 1
    if len(calls) == 1:
        return "multiple" if several_offered else "simple"
    return "parallel_multiple" if several_offered else "parallel"


def question_and_answer(dialogue: Dialogue) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """(category, question, possible answer or None for irrelevance), ids not yet given."""
    request = single_request(dialogue)
    calls = one_step_calls(dialogue)
    kind = category(dialogue, calls)
    schemas = {f.name: f.parameters for f in dialogue.tools}
    truth = [{c.name: acceptable(arguments_object(c), schemas.get(c.name, {}))} for c in calls]
    question = {"question": [[{"role": "user", "content": request}]], "function": [bfcl_function(f) for f in dialogue.tools]}
    return kind, question, ({"ground_truth": truth} if kind != IRRELEVANCE else None)


def file_name(kind: str) -> str:
    return f"{VERSION_PREFIX}_{kind}.json"


class BFCLExporter(Exporter):
    name = "bfcl"

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        for split in self.splits:  # the split folders are the export's: files of an earlier export's categories go
            out.clear(split)
        self.files: dict[str, JsonLines] = {}  # opened as categories appear, by path
        self.ids = {s: JsonLines(out, f"{s}/record_ids.jsonl") for s in self.splits}

    def _file(self, name: str) -> JsonLines:
        if name not in self.files:
            self.files[name] = JsonLines(self.out, name)
        return self.files[name]

    def write(self, split: str, dialogue: Dialogue) -> None:
        kind, question, answer = question_and_answer(dialogue)
        questions = self._file(f"{split}/{file_name(kind)}")
        entry_id = f"{kind}_{questions.file.rows}"
        questions.write({"id": entry_id, **question})
        if answer is not None:
            self._file(f"{split}/possible_answer/{file_name(kind)}").write({"id": entry_id, **answer})
        self.ids[split].write({"id": entry_id, "record_id": dialogue.id})

    def close(self, stats: ExportStats) -> dict[str, int]:
        files = {name: file.commit() for name, file in sorted(self.files.items())}
        return {**files, **{f"{s}/record_ids.jsonl": file.commit() for s, file in self.ids.items()}}

    def abort(self) -> None:
        for file in [*self.files.values(), *self.ids.values()]:
            file.discard()
        for split in self.splits:
            self.out.clear(split)
