"""xLAM / APIGen function-calling records: ``{"query", "tools", "answers"}`` as a JSON list or JSONL.

``tools`` and ``answers`` are JSON text (as released in ``xlam-function-calling-60k``) or lists.
Each record becomes a single-turn Dialogue (``mode="single"``): the user's query, then one
assistant turn with one call per answer (ids ``call_1``, ``call_2``, ... in answer order), no tool
responses and no final answer. A record with no answers (an irrelevance example: no tool fits)
is the user's query alone, ``mode="non_tool"``.

Tools: ``{name, description, parameters}`` (an OpenAI-style ``{"type": "function", "function":
{...}}`` entry is unwrapped). APIGen's ``parameters`` is a flat mapping ``{param: {type,
description, default}}`` with Python type names; it becomes a JSON Schema object:

* ``str``/``int``/``float``/``bool``/``list``/``dict`` (any case) map to string/integer/number/
  boolean/array/object; ``List[X]``/``Set[X]`` to an array of X, ``Tuple[...]`` to an array,
  ``Dict[...]`` to an object, ``Union[A, B]`` to ``type: [a, b]``, ``Optional[X]`` to X or null;
  a type it cannot map (``Any``, ``Callable``, a class name) puts no type constraint, so the
  reader never invents a fault;
* a parameter is required unless its type says ``, optional`` (or ``Optional[...]``) or it has a
  ``default`` (the API fills it in);
* ``description``, ``default`` and ``enum`` are kept.

A ``parameters`` value that already is a JSON Schema object (``type`` a string, or ``properties``
of schemas) is kept, with type names normalised. Call arguments given as an object are dumped to
JSON text; a string is kept as is (for ``call_arguments_not_json`` to judge).

Rules that do not apply to this calls-only shape: see :data:`NOT_APPLICABLE_REASONS`.
"""

from __future__ import annotations

import pickle
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from toolfactory.formats.base import (
    BAD_TOOL,
    CALLS_ONLY,
    MISSING_FIELD,
    RECORD_NOT_OBJECT,
    WRONG_TYPE,
    FormatError,
    Malformed,
    build_dialogue,
    read_json_records,
    json_text,
    parse_json_field,
)
from toolfactory.models import EMPTY_OBJECT_SCHEMA, Dialogue, Function, JsonSchema, Message, ToolCall
from toolfactory.definitions.convert import normalize_schema

NAME = "xlam"
NOT_APPLICABLE_REASONS: dict[str, str] = dict(CALLS_ONLY)
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)

_TYPES = {
    "str": "string", "string": "string", "int": "integer", "integer": "integer", "float": "number",
    "number": "number", "bool": "boolean", "boolean": "boolean", "list": "array", "array": "array",
    "tuple": "array", "set": "array", "dict": "object", "object": "object", "none": "null", "nonetype": "null",
}
_GENERIC = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\[(.*)\]\s*$", re.S)
_OPTIONAL_SUFFIX = re.compile(r",\s*optional\s*$", re.I)
_OPTIONAL_GENERIC = re.compile(r"^\s*optional\s*\[", re.I)


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _type_schema(text: str) -> JsonSchema:
    generic = _GENERIC.match(text)
    if generic is None:
        kind = _TYPES.get(text.strip().lower())
        return {"type": kind} if kind else {}
    head, inner = generic.group(1).lower().rsplit(".", 1)[-1], generic.group(2)
    if head in ("list", "set", "sequence", "iterable"):
        items = _type_schema(inner)
        return {"type": "array", "items": items} if items else {"type": "array"}
    if head == "tuple":
        return {"type": "array"}
    if head in ("dict", "mapping"):
        return {"type": "object"}
    if head in ("union", "optional"):
        members = [_type_schema(part) for part in _split_top(inner)] + ([{"type": "null"}] if head == "optional" else [])
        if any(set(m) != {"type"} for m in members):
            return {}  # a member it cannot map: no constraint
        kinds = list(dict.fromkeys(m["type"] for m in members))
        return {"type": kinds[0] if len(kinds) == 1 else kinds}
    return {}


@lru_cache(maxsize=1024)
def _type_of(text: str) -> tuple[JsonSchema, bool]:
    # Parsed once per distinct type text: a dataset spells its types a few dozen ways, and its
    # parameters are far more (every function of a dataset of new APIs is read afresh).
    optional = bool(_OPTIONAL_SUFFIX.search(text))
    text = _OPTIONAL_SUFFIX.sub("", text)
    if _OPTIONAL_GENERIC.match(text):
        optional = True
    return (_type_schema(text) if text else {}), optional


def _copied(value: Any) -> Any:
    """A copy of a parsed type's schema (each parameter gets its own; the cached one is not shared)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def parameter_schema(spec: dict[str, Any]) -> tuple[JsonSchema, bool]:
    """(JSON Schema, optional) of one APIGen parameter ``{type, description, default}``."""
    parsed, optional = _type_of(str(spec.get("type") or "").strip())
    schema = _copied(parsed)
    if spec.get("description"):
        schema["description"] = str(spec["description"])
    if "enum" in spec and isinstance(spec["enum"], list):
        schema["enum"] = spec["enum"]
    if "default" in spec:
        schema["default"] = spec["default"]
        optional = True
    return schema, optional


def _is_json_schema(params: dict[str, Any]) -> bool:
    if isinstance(params.get("type"), str):
        return True
    props = params.get("properties")
    return isinstance(props, dict) and all(isinstance(v, dict) for v in props.values())


def parameters_of(params: Any, where: str) -> JsonSchema:
    if params is None or params == {}:
        return dict(EMPTY_OBJECT_SCHEMA)
    if not isinstance(params, dict):
        raise Malformed(BAD_TOOL, f"{where}.parameters must be an object, not {type(params).__name__}")
    if _is_json_schema(params):
        return normalize_schema(params)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in params.items():
        if not isinstance(spec, dict):
            raise Malformed(BAD_TOOL, f"{where}.parameters.{name} must be an object, not {type(spec).__name__}")
        schema, optional = parameter_schema(spec)
        properties[name] = schema
        if not optional:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def functions_of(tools: list[Any]) -> list[Function]:
    functions = []
    for i, entry in enumerate(tools):
        spec = entry.get("function", entry) if isinstance(entry, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
            raise Malformed(BAD_TOOL, f"tools[{i}] needs a name")
        try:
            functions.append(_function(spec))
        except Malformed as exc:  # its message names the place within the spec
            raise Malformed(exc.reason, f"tools[{i}]{exc.message}") from None
    return functions


# Converted functions by the pickle of their spec: a parsed JSON value's pickle is an exact key (it
# reads back to that value) and costs a fifth of json.dumps. A plain dict that starts over when
# full (a lookup costs less than an LRU cache's); a dataset's working set of APIs is far below it.
# A function is kept from its second record on (the hashes of those met once are in _SEEN): in a
# dataset where no two records share an API, keeping each one only gave the garbage collector
# more objects to walk.
_FUNCTIONS: dict[bytes, Function] = {}
_SEEN: set[int] = set()
CACHED = 16384
SEEN = 1 << 16


def _function(spec: dict[str, Any]) -> Function:
    # Cached by the spec's content: a dataset's functions recur across its records (xLAM's 60,000
    # records draw on 3,673 APIs), and converting APIGen's parameter types is the reader's main
    # cost. The returned Function is shared by the records that offer it; nothing mutates it.
    key = pickle.dumps(spec)
    found = _FUNCTIONS.get(key)
    if found is None:
        # Converted from `spec` itself: the record it came from is read-only, so the Function may
        # share its leaves (a default, an enum list) instead of a copy read back from the key.
        found = Function(name=spec["name"], description=str(spec.get("description") or ""),
                         parameters=parameters_of(spec.get("parameters"), ""))
        seen = hash(key)
        if seen in _SEEN:
            if len(_FUNCTIONS) >= CACHED:
                _FUNCTIONS.clear()
            _FUNCTIONS[key] = found
        else:
            if len(_SEEN) >= SEEN:
                _SEEN.clear()
            _SEEN.add(seen)
    return found


def clear() -> None:
    """Forget every converted function (benchmarks measure a cold start with it)."""
    _FUNCTIONS.clear()
    _SEEN.clear()


def calls_of(answers: list[Any]) -> list[ToolCall]:
    calls = []
    for i, answer in enumerate(answers):
        if not isinstance(answer, dict):
            raise Malformed(WRONG_TYPE, f"answers[{i}] must be an object, not {type(answer).__name__}")
        name = answer.get("name")
        if not isinstance(name, str) or not name:
            raise Malformed(MISSING_FIELD, f"answers[{i}] has no function name")
        arguments = answer.get("arguments")
        calls.append(ToolCall(id=f"call_{i + 1}", name=name, arguments="" if arguments is None else json_text(arguments)))
    return calls


def to_dialogue(record: Any) -> Dialogue:
    if not isinstance(record, dict):
        raise Malformed(RECORD_NOT_OBJECT, f"a record must be a JSON object, not {type(record).__name__}")
    query = record.get("query")
    if not isinstance(query, str):
        raise Malformed(MISSING_FIELD if query is None else WRONG_TYPE, "'query' must be a string")
    tools = functions_of(parse_json_field(record, "tools", list))
    calls = calls_of(parse_json_field(record, "answers", list))
    messages = [Message(role="user", content=query)]
    if calls:
        messages.append(Message(role="assistant", tool_calls=calls))
    return build_dialogue(NAME, record, tools, messages)


def read(path: str | Path) -> Iterator[Dialogue | FormatError]:
    return read_json_records(path, to_dialogue)

