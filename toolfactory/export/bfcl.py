"""Berkeley Function-Calling Leaderboard (BFCL) evaluation files, laid out as BFCL (v4, the
``bfcl-eval`` package) lays out its own: one question file and one possible-answer file per test
category, JSON lines joined by ``id``::

    <split>/BFCL_v4_<category>.json                  {"id": "<category>_<n>", "question": [[{"role": "user", "content": ...}]], "function": [...]}
    <split>/possible_answer/BFCL_v4_<category>.json  {"id": "<category>_<n>", "ground_truth": [{fn_name: {arg: [value, ...]}}, ...]}
    <split>/record_ids.jsonl                         {"id": "<category>_<n>", "record_id": ...}

BFCL finds a file's category in its name (``BFCL_v4_(\\w+?)\\.json``) and an entry's category in
its id (``id.rsplit("_", 1)[0]``), so ids are ``<category>_<n>``, numbered from 0 in each file.
``record_ids.jsonl`` maps them back to the records (BFCL reads ``*.json`` only).

The category is BFCL's non-live AST category of the record's shape: ``simple_python`` (one
function offered, one call; BFCL names its simple category after the language, and ours are JSON
calls, which it checks as Python), ``multiple`` (several offered, one call), ``parallel`` (one
offered, several calls), ``parallel_multiple`` (several offered, several calls), and
``irrelevance`` for a dialogue that makes no call because no offered function fits (mode
``non_tool``): BFCL checks that the model calls nothing, so it has no possible answer.
Single-turn records only (``not_single_turn``); every call must be made in the first assistant
turn (``calls_in_several_turns`` otherwise: a call that needs an earlier response has no BFCL
single-turn category); any other record without calls (a clarifying question) is skipped
(``no_calls``).

Functions use BFCL's type names (``dict`` for an object, ``float`` for a number; the rest as
in JSON Schema), which the repo's OpenAI tool importer maps back, and always carry ``required``
(BFCL's checker reads it). A possible answer lists acceptable values wherever BFCL's AST checker
looks for a list of them (:func:`acceptable`); the values are the ones the dialogue used.
Arguments must be JSON objects (``arguments_not_json``).

A dialogue over BFCL's own executable environments (sources with a ``preset``) goes, whatever
its number of turns, to BFCL's multi-turn category instead, ``multi_turn_base``, with its
environments' initial configuration and the calls that ran as the ground truth of each turn
(:mod:`toolfactory.export.bfcl_multi_turn`).
"""

from __future__ import annotations

from typing import Any, Sequence

from toolfactory.export.base import NO_CALLS, Exporter, ExportOptions, Skip
from toolfactory.export.bfcl_multi_turn import MULTI_TURN, multi_turn
from toolfactory.export.output import JsonLines, OutputDir
from toolfactory.export.stats import ExportStats
from toolfactory.export.turns import arguments_object, one_step_calls, single_request
from toolfactory.models import Dialogue, Function, JsonSchema, ToolCall

VERSION_PREFIX = "BFCL_v4"  # bfcl-eval's constants.category_mapping.VERSION_PREFIX
SIMPLE = "simple_python"
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
    parameters = bfcl_schema(function.parameters)
    if isinstance(parameters, dict) and "required" not in parameters:
        parameters = {**parameters, "required": []}  # BFCL's checker reads it on every function
    return {"name": function.name, "description": function.description, "parameters": parameters}


def _is(schema: Any, kind: str) -> bool:
    """Whether `schema` declares the JSON Schema type `kind` (or BFCL's name for it)."""
    declared = schema.get("type") if isinstance(schema, dict) else None
    return isinstance(declared, str) and _BFCL_TYPES.get(declared, declared) == _BFCL_TYPES.get(kind, kind)


def _properties(schema: Any) -> dict[str, Any]:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return properties if isinstance(properties, dict) else {}


def _given(value: Any, schema: Any, inner: bool) -> list[Any]:
    """The acceptable values of a property the call gives: its value, and ``""`` besides when
    that is the default (omitting it means the same). Written as it is when `inner`."""
    shown = value if inner else _nested(value, schema)
    return [shown, ""] if isinstance(schema, dict) and "default" in schema and schema["default"] == value else [shown]


def _left_out(schema: Any, inner: bool) -> list[Any]:
    """The acceptable values of a property the call leaves out: ``""`` ("may be omitted", BFCL's
    convention), preceded by the default when there is one, since giving it means the same."""
    default = schema.get("default") if isinstance(schema, dict) else None
    if default is None:
        return [""]
    return [default if inner else _nested(default, schema), ""]


def _keyed(arguments: dict[str, Any], schema: Any, inner: bool) -> dict[str, list[Any]]:
    """Each key of an object with its acceptable values, every property of `schema` the object
    leaves out included. Values are written as they are when `inner`."""
    properties = _properties(schema)
    out = {name: _given(value, properties.get(name), inner) for name, value in arguments.items()}
    for name, child in properties.items():
        if name not in out:
            out[name] = _left_out(child, inner)
    return out


def _nested(value: Any, schema: Any) -> Any:
    """A parameter's value as one choice of BFCL's list. BFCL's checker compares an object
    parameter key by key, each key against a list of choices, and an array of objects item by
    item, each item the same way; a value nested deeper it compares whole (its ``dict_checker``
    reads one level, as BFCL's own answers are written), so it stays as it is."""
    if isinstance(value, dict) and _is(schema, "object"):
        return _keyed(value, schema, inner=True)
    items = schema.get("items") if isinstance(schema, dict) else None
    if isinstance(value, list) and _is(schema, "array") and _is(items, "object") and all(isinstance(v, dict) for v in value):
        return [_keyed(v, items, inner=True) for v in value]
    return value


def acceptable(arguments: dict[str, Any], parameters: JsonSchema) -> dict[str, list[Any]]:
    """A call's possible answer: each parameter's list of acceptable values (for an object
    parameter, an object of such lists; see :func:`_nested`), every parameter the call omits
    included as ``[default, ""]`` or ``[""]``."""
    return _keyed(arguments, parameters, inner=False)


def category(dialogue: Dialogue, calls: list[ToolCall]) -> str:
    """BFCL's single-turn category of the record (see the module doc), or :class:`Skip`."""
    if not calls:
        if dialogue.mode == "non_tool":
            return IRRELEVANCE
        raise Skip(NO_CALLS, f"a {dialogue.mode} dialogue without calls has no BFCL category")
    several_offered = len(dialogue.tools) > 1
    if len(calls) == 1:
        return "multiple" if several_offered else SIMPLE
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
    needs_tools = True  # which functions come from BFCL's executable environments
    needs_sources = True  # their classes and initial states

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
        functions = [bfcl_function(f) for f in dialogue.tools]
        entry = multi_turn(dialogue, self.tools, self.sources, functions)
        if entry is not None:
            kind, (question, answer) = MULTI_TURN, entry
        else:
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
