"""Labelled faults for measuring the rule layer: each corruption injects ONE fault into a copy of
a valid dialogue and names the rule code expected to catch it.

``corrupt(dialogue, kind, seed)`` returns a :class:`Corruption` (unpacks as ``(dialogue, code)``
via :meth:`Corruption.pair`), or None when the fault cannot be injected into that dialogue (no
enum parameter for an enum violation, one call only for a duplicated id, ...): an inapplicable
fault is skipped, never faked. Every choice is drawn from ``random.Random`` seeded with
(seed, kind, dialogue id); the global random state is never used.

Argument faults are checked to be single faults when they are made: the changed value is
validated against the property's own schema (jsonschema 2020-12 with its format checker) and is
kept only if it fails exactly the targeted keyword(s), e.g. a wrong type on a property that also
has an ``enum`` would fail both and is not used. Those faults also record the exact path the
verdict must point to (``messages[i].tool_calls[j].arguments/prop/...``).

The product synthesizes preference pairs with them (toolfactory.export.pairs);
``benchmarks.rule_scores`` scores the rules (precision and recall per code) on valid dialogues
plus their corruptions.
"""

from __future__ import annotations

import json
import math
import random
import re
from functools import lru_cache
from typing import Any, Callable, Iterable, NamedTuple

from jsonschema import Draft202012Validator

from toolfactory.models import Dialogue, Function, Message, ToolCall, canonical_json
from toolfactory.stages.dialogues.modes import shown_mode
from toolfactory.definitions.finish import FINISH_GAVE_UP
from toolfactory.stages.verify.rules import RULES
from toolfactory.stages.verify.rules.dialogue import MAX_ANSWER_CHARS
from toolfactory.stages.verify.rules.filters import FINISH, MAX_STEPS
from toolfactory.stages.verify.rules.consistency import declared_format
from toolfactory.stages.verify.rules.registry import Sample
from toolfactory.stages.verify.rules.argument_grounding import EXACT_KEYWORDS, free_text

RANGE_KEYWORDS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
})


class Corruption(NamedTuple):
    dialogue: Dialogue
    code: str  # the rule code expected to fire
    kind: str  # the kind of fault injected
    detail: str  # what was changed
    path: str | None = None  # the exact verdict path, for argument faults

    def pair(self) -> tuple[Dialogue, str]:
        return self.dialogue, self.code


Injector = Callable[[Dialogue, random.Random], "tuple[Dialogue, str] | tuple[Dialogue, str, str] | None"]
KINDS: dict[str, tuple[str, Injector]] = {}



def kind(name: str, code: str) -> Callable[[Injector], Injector]:
    def register(fn: Injector) -> Injector:
        if code not in RULES:
            raise ValueError(f"corruption {name}: unknown rule code {code!r}")
        KINDS[name] = (code, fn)
        return fn

    return register


def corrupt(dialogue: Dialogue, kind_name: str, seed: int = 0) -> Corruption | None:
    """`dialogue` with one fault of `kind_name`, or None if that fault does not apply to it."""
    code, inject = KINDS[kind_name]
    rng = random.Random(f"{seed}/{kind_name}/{dialogue.id}")
    made = inject(_copy(dialogue), rng)
    if made is None:
        return None
    corrupted, detail, *rest = made
    path = rest[0] if rest else None
    corrupted.id = f"{dialogue.id}~{kind_name}"
    return Corruption(corrupted, code, kind_name, detail, path)


def corruptions(dialogue: Dialogue, seed: int = 0, kinds: Iterable[str] | None = None) -> list[Corruption]:
    """One corruption per applicable kind."""
    out = []
    for name in kinds if kinds is not None else KINDS:
        made = corrupt(dialogue, name, seed)
        if made is not None:
            out.append(made)
    return out


# -- helpers ---------------------------------------------------------------------------------

def _copy(dialogue: Dialogue) -> Dialogue:
    messages = [
        m.model_copy(update={"tool_calls": [c.model_copy() for c in m.tool_calls]}) if m.tool_calls else m.model_copy()
        for m in dialogue.messages
    ]
    return dialogue.model_copy(update={"messages": messages, "tools": list(dialogue.tools), "verdicts": []})


def _calls(dialogue: Dialogue) -> list[tuple[int, int, ToolCall]]:
    return [(i, j, c) for i, m in enumerate(dialogue.messages) for j, c in enumerate(m.tool_calls or [])]


def _api_calls(dialogue: Dialogue) -> list[tuple[int, int, ToolCall]]:
    """The calls of real functions: ToolLLM's Finish is left to the search_not_finished kind, since
    breaking its name or arguments also means that it no longer gives the answer."""
    return [(i, j, c) for i, j, c in _calls(dialogue) if c.name != FINISH]


def _functions(dialogue: Dialogue) -> dict[str, Function]:
    return {fn.name: fn for fn in dialogue.tools}


def _response(dialogue: Dialogue, call_id: str) -> int | None:
    return next((i for i, m in enumerate(dialogue.messages) if m.role == "tool" and m.tool_call_id == call_id), None)


def _final(dialogue: Dialogue) -> int | None:
    if not dialogue.messages:
        return None
    last = dialogue.messages[-1]
    if last.role == "assistant" and not last.tool_calls and (last.content or "").strip():
        return len(dialogue.messages) - 1
    return None


def _call_path(i: int, j: int) -> str:
    return f"messages[{i}].tool_calls[{j}]"


@lru_cache(maxsize=2048)
def _plain_validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _failing_keywords(schema: Any, value: Any) -> set[str] | None:
    """The jsonschema keywords `value` fails against `schema` (None if it cannot be evaluated)."""
    try:
        return {str(e.validator) for e in _plain_validator(canonical_json(schema)).iter_errors(value)}
    except Exception:  # noqa: BLE001
        return None


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?。！？])\s*", text.strip()) if s]


# -- function-call executability ---------------------------------------------------------------

@kind("unknown_function", "call_unknown_function")
def _unknown_function(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    calls = _api_calls(d)
    if not calls or not d.tools:
        return None
    i, j, call = rng.choice(calls)
    names = _functions(d)
    new = rng.choice([f"{call.name}_v2", f"get_{call.name}", f"{call.name}s", "search_web", "lookup"])
    while new in names:
        new += "_x"
    old = call.name
    call.name = new
    response = _response(d, call.id)
    if response is not None and d.messages[response].name == old:
        d.messages[response].name = new  # the executor answered the called name
    return d, f"{old} -> {new} at {_call_path(i, j)}", _call_path(i, j) + ".name"


@kind("arguments_not_json", "call_arguments_not_json")
def _arguments_not_json(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    calls = _api_calls(d)
    if not calls:
        return None
    i, j, call = rng.choice(calls)
    text = call.arguments or "{}"
    variants = [text.rstrip()[:-1], "[" + text + "]"]
    if '"' in text:
        variants.append(text.replace('"', "'"))
    call.arguments = rng.choice(variants)
    return d, f"arguments {text[:40]!r} -> {call.arguments[:40]!r}", _call_path(i, j) + ".arguments"


@kind("non_finite_argument", "call_arguments_not_json")
def _non_finite_argument(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    # Python writes NaN / Infinity, which no JSON reader accepts.
    calls = [(i, j, call, values) for i, j, call, _, values in _argument_calls(d) if values]
    if not calls:
        return None
    i, j, call, values = rng.choice(calls)
    key = rng.choice(sorted(values))
    call.arguments = json.dumps({**values, key: rng.choice([math.nan, math.inf, -math.inf])}, ensure_ascii=False)
    return d, f"argument {key!r} -> {call.arguments[:60]!r}", _call_path(i, j) + ".arguments"


@kind("duplicate_argument", "call_duplicate_argument")
def _duplicate_argument(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    # The key again with its own value: the arguments read the same, only the text names it twice.
    calls = [(i, j, call, values) for i, j, call, _, values in _argument_calls(d) if values]
    if not calls:
        return None
    i, j, call, values = rng.choice(calls)
    key = rng.choice(sorted(values))
    text = json.dumps(values, ensure_ascii=False)
    call.arguments = f"{text[:-1]}, {json.dumps(key, ensure_ascii=False)}: {json.dumps(values[key], ensure_ascii=False)}}}"
    return d, f"argument {key!r} named twice", _call_path(i, j) + ".arguments"


def _argument_calls(d: Dialogue) -> list[tuple[int, int, ToolCall, Function, dict[str, Any]]]:
    functions = _functions(d)
    out = []
    for i, j, call in _api_calls(d):
        function = functions.get(call.name)
        try:
            values = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            continue
        if function is not None and isinstance(values, dict):
            out.append((i, j, call, function, values))
    return out


Propose = Callable[[dict[str, Any], Any, random.Random], list[Any]]


def _mutate(d: Dialogue, rng: random.Random, propose: Propose, keywords: frozenset[str], nested: bool = False) -> tuple[Dialogue, str, str] | None:
    """Replace one argument value (top-level, or one level down if `nested`) with a proposal that
    fails exactly keywords within `keywords` against that property's schema."""
    sites: list[tuple[int, int, ToolCall, dict[str, Any], list[Any], str, dict[str, Any]]] = []
    for i, j, call, function, values in _argument_calls(d):
        props = function.parameters.get("properties") or {}
        for name, value in values.items():
            sub = props.get(name)
            if not isinstance(sub, dict):
                continue
            if not nested:
                sites.append((i, j, call, values, [name], name, sub))
                continue
            inner_props = sub.get("properties") if isinstance(value, dict) else None
            if isinstance(inner_props, dict):
                for inner in value:
                    if isinstance(inner_props.get(inner), dict):
                        sites.append((i, j, call, values, [name, inner], inner, inner_props[inner]))
            items = sub.get("items")
            if isinstance(value, list) and isinstance(items, dict) and isinstance(items.get("properties"), dict):
                for k, item in enumerate(value):
                    if isinstance(item, dict):
                        for inner in item:
                            if isinstance(items["properties"].get(inner), dict):
                                sites.append((i, j, call, values, [name, k, inner], inner, items["properties"][inner]))
    rng.shuffle(sites)
    for i, j, call, values, where, _, schema in sites:
        parent: Any = values
        for step in where[:-1]:
            parent = parent[step]
        current = parent[where[-1]]
        for candidate in propose(schema, current, rng):
            failing = _failing_keywords(schema, candidate)
            if failing and failing <= keywords:
                parent[where[-1]] = candidate
                call.arguments = json.dumps(values, ensure_ascii=False)
                path = _call_path(i, j) + ".arguments/" + "/".join(str(p) for p in where)
                return d, f"{'/'.join(map(str, where))}: {current!r} -> {candidate!r}", path
        parent[where[-1]] = current
    return None


def _types(schema: dict[str, Any]) -> list[str]:
    kind_ = schema.get("type")
    return [kind_] if isinstance(kind_, str) else list(kind_) if isinstance(kind_, list) else []


def _wrong_type(schema: dict[str, Any], value: Any, rng: random.Random) -> list[Any]:
    by_type = {
        "string": [42, True, ["x"]],
        "integer": [str(value) if not isinstance(value, bool) else "12", "twelve", 2.5],
        "number": [str(value), "3.5"],
        "boolean": ["true", "yes", 1],
        "array": ["a, b", {"first": value}],
        "object": ["key=value", [value]],
    }
    types = _types(schema)
    out = [candidate for t in types for candidate in by_type.get(t, [])]
    rng.shuffle(out)
    return out


def _bool_for_number(schema: dict[str, Any], value: Any, rng: random.Random) -> list[Any]:
    return [rng.choice([True, False])] if set(_types(schema)) & {"integer", "number"} else []


def _enum_violation(schema: dict[str, Any], value: Any, rng: random.Random) -> list[Any]:
    options = schema.get("enum")
    if not isinstance(options, list) or not options or not all(isinstance(o, str) for o in options):
        return []
    base = rng.choice(options)
    return [f"{base}_other", base.upper() if base.upper() != base else base + "s", "unknown"]


def _pattern_violation(schema: dict[str, Any], value: Any, rng: random.Random) -> list[Any]:
    if not isinstance(schema.get("pattern"), str):
        return []
    length = len(value) if isinstance(value, str) and value else 3
    return ["#" * length, "?" * length, "invalid value", "0"]


def _format_violation(schema: dict[str, Any], value: Any, rng: random.Random) -> list[Any]:
    if not isinstance(schema.get("format"), str):
        return []
    return [rng.choice(["not-a-" + schema["format"], "yesterday", "2024-13-45", "25:61"]), "n/a"]


def _out_of_range(schema: dict[str, Any], value: Any, rng: random.Random) -> list[Any]:
    out: list[Any] = []
    integer = "integer" in _types(schema)
    step = 1 if integer else 0.5
    for key, sign in (("maximum", 1), ("exclusiveMaximum", 0), ("minimum", -1), ("exclusiveMinimum", 0)):
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool):
            if sign:
                candidate = bound + sign * step
            else:
                candidate = bound
            out.append(int(math.floor(candidate)) if integer and float(candidate).is_integer() else candidate)
    if isinstance(schema.get("maxLength"), int):
        out.append("x" * (schema["maxLength"] + 1))
    if isinstance(schema.get("minLength"), int) and schema["minLength"] > 0:
        out.append("x" * (schema["minLength"] - 1))
    if isinstance(schema.get("minItems"), int) and schema["minItems"] > 0 and isinstance(value, list):
        out.append(value[: schema["minItems"] - 1])
    if isinstance(schema.get("maxItems"), int) and isinstance(value, list) and value:
        out.append([value[k % len(value)] for k in range(schema["maxItems"] + 1)])
    rng.shuffle(out)
    return out


def _duplicate_item(schema: dict[str, Any], value: Any, rng: random.Random) -> list[Any]:
    if schema.get("uniqueItems") is True and isinstance(value, list) and value:
        return [value + [rng.choice(value)]]
    return []


@kind("wrong_type", "call_argument_type")
def _wrong_type_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _wrong_type, frozenset({"type"}))


@kind("bool_as_number", "call_argument_type")
def _bool_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _bool_for_number, frozenset({"type"}))


@kind("enum_violation", "call_argument_enum")
def _enum_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _enum_violation, frozenset({"enum"}))


@kind("pattern_violation", "call_argument_pattern")
def _pattern_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _pattern_violation, frozenset({"pattern"}))


@kind("format_violation", "call_argument_format")
def _format_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _format_violation, frozenset({"format"}))


@kind("out_of_range", "call_argument_range")
def _range_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _out_of_range, RANGE_KEYWORDS)


@kind("duplicate_item", "call_argument_invalid")
def _unique_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _duplicate_item, frozenset({"uniqueItems"}))


@kind("nested_wrong_type", "call_argument_type")
def _nested_type_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _wrong_type, frozenset({"type"}), nested=True)


@kind("nested_out_of_range", "call_argument_range")
def _nested_range_kind(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _mutate(d, rng, _out_of_range, RANGE_KEYWORDS, nested=True)


def _drop_required(d: Dialogue, rng: random.Random, nested: bool) -> tuple[Dialogue, str, str] | None:
    sites = []
    for i, j, call, function, values in _argument_calls(d):
        if not nested:
            sites += [(i, j, call, values, [], values, function.parameters, name) for name in function.parameters.get("required") or [] if name in values]
            continue
        for prop, sub in (function.parameters.get("properties") or {}).items():
            value = values.get(prop)
            if isinstance(sub, dict) and isinstance(value, dict):
                sites += [(i, j, call, values, [prop], value, sub, name) for name in sub.get("required") or [] if name in value]
            items = sub.get("items") if isinstance(sub, dict) else None
            if isinstance(value, list) and isinstance(items, dict):
                for k, item in enumerate(value):
                    if isinstance(item, dict):
                        sites += [(i, j, call, values, [prop, k], item, items, name) for name in items.get("required") or [] if name in item]
    rng.shuffle(sites)
    for i, j, call, values, where, holder, schema, name in sites:
        kept = {k: v for k, v in holder.items() if k != name}
        if _failing_keywords(schema, kept) != {"required"}:
            continue
        value = holder.pop(name)
        call.arguments = json.dumps(values, ensure_ascii=False)
        path = _call_path(i, j) + ".arguments/" + "/".join(str(p) for p in [*where, name])
        return d, f"dropped required {name!r} (was {value!r})", path
    return None


@kind("missing_required", "call_missing_required")
def _missing_required(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _drop_required(d, rng, nested=False)


@kind("nested_missing_required", "call_missing_required")
def _nested_missing_required(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _drop_required(d, rng, nested=True)


_CLOSED_OPT_OUTS = ("additionalProperties", "patternProperties", "unevaluatedProperties", "allOf", "anyOf", "oneOf",
                    "$ref", "$dynamicRef", "if", "dependentSchemas")
_HALLUCINATED = ("verbose", "api_key", "callback_url", "debug", "session_id", "lang", "page_token")


@kind("unknown_argument", "call_unknown_argument")
def _unknown_argument(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    sites = [
        (i, j, call, function, values)
        for i, j, call, function, values in _argument_calls(d)
        if isinstance(function.parameters.get("properties"), dict)
        and not any(key in function.parameters for key in _CLOSED_OPT_OUTS)
        and function.parameters.get("maxProperties") is None
    ]
    if not sites:
        return None
    i, j, call, function, values = rng.choice(sites)
    name = rng.choice([n for n in _HALLUCINATED if n not in function.parameters["properties"]])
    values[name] = rng.choice([True, 1, "en"])
    call.arguments = json.dumps(values, ensure_ascii=False)
    return d, f"added undeclared {name!r}", _call_path(i, j) + f".arguments/{name}"


# -- grounding, control tokens, contradiction ---------------------------------------------------

INVENTED = "Quillhaven-7731"  # a value no conversation of the corpus holds
UNRELATED = "zorvath quillhaven brimwick tessaly"  # free text none of whose words it holds


def _replace_string(d: Dialogue, rng: random.Random, value: str, wanted: Callable[[str, str, dict[str, Any]], bool]) -> tuple[Dialogue, str, str] | None:
    """`d` with one top-level string argument that `wanted` accepts (and `value` keeps valid) set to `value`."""
    sites = []
    for i, j, call, function, values in _argument_calls(d):
        properties = function.parameters.get("properties") or {}
        for name, old in values.items():
            schema = properties.get(name)
            if isinstance(old, str) and isinstance(schema, dict) and wanted(name, old, schema) and _failing_keywords(schema, value) == set():
                sites.append((i, j, call, values, name))
    if not sites:
        return None
    i, j, call, values, name = rng.choice(sites)
    values[name] = value
    call.arguments = json.dumps(values, ensure_ascii=False)
    return d, f"{name!r} set to {value!r}, which nobody gave", _call_path(i, j) + f".arguments/{name}"


@kind("invented_value", "arg_value_ungrounded")
def _invented_value(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _replace_string(d, rng, INVENTED, lambda name, old, schema: not free_text(name, INVENTED, schema))


@kind("unrelated_text", "arg_text_ungrounded")
def _unrelated_text(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    return _replace_string(d, rng, UNRELATED, lambda name, old, schema: not any(k in schema for k in EXACT_KEYWORDS))


@kind("control_token_answer", "answer_control_token")
def _control_token_answer(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    index = _final(d)
    if index is None:
        return None
    # The model wrote ToolLLM's Finish argument as its answer.
    d.messages[index].content = "give_answer"
    return d, "final answer replaced by 'give_answer'", f"messages[{index}].content"


@kind("refusal_with_call", "assistant_contradicts_calls")
def _refusal_with_call(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    user = " ".join(m.content or "" for m in d.messages if m.role == "user")
    turns = sorted({i for i, _, _ in _api_calls(d)})
    if not turns or not user.isascii():
        return None  # (an English refusal in another language's conversation would also be mixed language)
    i = rng.choice(turns)
    d.messages[i].content = "I don't have a function for that request."
    return d, f"refusal added to the calling turn messages[{i}]", f"messages[{i}].content"


# -- data sample consistency ---------------------------------------------------------------------

@kind("unanswered_call", "sample_unanswered_call")
def _unanswered(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str] | None:
    calls = [(i, j, c, _response(d, c.id)) for i, j, c in _calls(d)]
    calls = [item for item in calls if item[3] is not None]
    if not calls:
        return None
    i, j, call, response = rng.choice(calls)
    assert response is not None
    if rng.random() < 0.5:
        del d.messages[response]
        return d, f"dropped the response to {_call_path(i, j)}"
    d.messages[response].tool_call_id = f"call_{rng.getrandbits(40):010x}"
    return d, f"response messages[{response}] answers an unknown id"


@kind("response_name_mismatch", "sample_response_name_mismatch")
def _name_mismatch(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    responses = [i for i, m in enumerate(d.messages) if m.role == "tool" and m.name]
    if not responses:
        return None
    index = rng.choice(responses)
    message = d.messages[index]
    others = [fn.name for fn in d.tools if fn.name != message.name]
    new = rng.choice(others) if others and rng.random() < 0.7 else f"{message.name}_result"
    old, message.name = message.name, new
    return d, f"response name {old} -> {new}", f"messages[{index}].name"


@kind("duplicate_call_id", "sample_duplicate_call_id")
def _duplicate_id(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    calls = _calls(d)
    if len(calls) < 2:
        return None
    b = rng.randrange(1, len(calls))
    a = rng.randrange(0, b)
    target, source = calls[b][2], calls[a][2]
    response = _response(d, target.id)
    target.id = source.id
    if response is not None:
        d.messages[response].tool_call_id = source.id
    return d, f"call {_call_path(calls[b][0], calls[b][1])} reuses the id of {_call_path(calls[a][0], calls[a][1])}", _call_path(calls[b][0], calls[b][1]) + ".id"


@kind("role_order", "sample_role_order")
def _role_order(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str] | None:
    messages = d.messages
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    if first_user is None:
        return None
    variants = ["double_user", "assistant_first"]
    if messages[0].role == "system":
        variants.append("late_system")
    call_turns = [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls and i + 1 < len(messages) and messages[i + 1].role == "tool"]
    if call_turns:
        variants.append("tool_after_user")
    variant = rng.choice(variants)
    latin = (messages[first_user].content or "").isascii()
    if variant == "double_user":
        messages.insert(first_user + 1, Message(role="user", content="Also, please be quick about it." if latin else "另外，请尽快处理。"))
    elif variant == "assistant_first":
        messages.insert(first_user, Message(role="assistant", content="Hello! How can I help you today?" if latin else "您好！有什么可以帮您的吗？"))
    elif variant == "late_system":
        system = messages.pop(0)
        messages.insert(first_user, system)  # the user's message moved up by one
    else:
        i = rng.choice(call_turns)
        messages.insert(i + 1, Message(role="user", content="Any news on that?" if latin else "有结果了吗？"))
    return d, variant


# -- dialogue correctness ---------------------------------------------------------------------

@kind("no_final_answer", "dialogue_no_final_answer")
def _no_final_answer(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str] | None:
    index = _final(d)
    if index is None:
        return None
    if rng.random() < 0.5:
        del d.messages[index]
        return d, "dropped the final answer"
    d.messages[index].content = rng.choice(["", " ", "\n"])
    return d, "blank final answer"


@kind("no_function_call", "dialogue_no_function_call")
def _no_function_call(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str] | None:
    if d.mode == "non_tool" or not _calls(d):
        return None
    d.messages = [m for m in d.messages if m.role != "tool" and not m.tool_calls]
    return d, "removed every call and response"


@kind("missing_field", "dialogue_missing_field")
def _missing_field(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    variants: list[tuple[str, int | None]] = [("tools", None)]
    variants += [("blank", i) for i, m in enumerate(d.messages) if m.role in ("tool", "user", "system") and m.content]
    variant, index = rng.choice(variants)
    if variant == "tools":
        d.tools = []
        return d, "empty tool list", "tools"
    assert index is not None
    d.messages[index].content = rng.choice(["", "  "])
    return d, f"blank {d.messages[index].role} message", f"messages[{index}]"


@kind("answer_too_long", "dialogue_answer_too_long")
def _too_long(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    index = _final(d)
    if index is None:
        return None
    text = (d.messages[index].content or "").strip()
    parts = _sentences(text)
    middle = parts[:-1] or parts
    body = list(parts[:-1])
    joiner = " " if text.isascii() else ""
    while len(joiner.join([*body, parts[-1]])) <= MAX_ANSWER_CHARS:
        body.append(rng.choice(middle))
    d.messages[index].content = joiner.join([*body, parts[-1]])
    return d, f"final answer padded to {len(d.messages[index].content or '')} characters", f"messages[{index}].content"


INVALID = ("\x00", "\x07", "\x1b", "\x85", "\ufffd", "\ud83d", "\udc00")


@kind("invalid_characters", "dialogue_invalid_characters")
def _invalid_characters(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    targets = [i for i, m in enumerate(d.messages) if m.role in ("user", "assistant") and m.content and len(m.content.strip()) > 8]
    if not targets:
        return None
    index = rng.choice(targets)
    text = d.messages[index].content or ""
    position = rng.randrange(1, len(text.rstrip()) - 1)
    char = rng.choice(INVALID)
    d.messages[index].content = text[:position] + char + text[position:]
    return d, f"inserted {char!r} at offset {position}", f"messages[{index}].content"


_CJK_PASSAGES = (
    "根据查询结果，这个服务返回的数据已经全部整理好了，",
    "如果您需要更详细的信息，我可以再帮您查询一次，",
    "另外请注意，所有的数值都以服务提供的结果为准。",
)
_LATIN_PASSAGE = (
    "In addition, the service reported every value above directly, and you can ask me to check the "
    "results again at any time if something looks wrong."
)


@kind("mixed_language", "dialogue_mixed_language")
def _mixed_language(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    index = _final(d)
    user = " ".join(m.content or "" for m in d.messages if m.role == "user")
    if index is None or not user.strip():
        return None
    text = (d.messages[index].content or "").strip()
    parts = _sentences(text)
    if len(parts) < 2:
        return None
    if user.isascii():  # a Latin-script conversation: the answer switches to Chinese
        words = len(parts[0].split())
        passage = ""
        while len(passage) < max(12, 2 * words):
            passage += rng.choice(_CJK_PASSAGES)
        d.messages[index].content = parts[0] + " " + passage.rstrip("，") + "。"
        return d, "answer continues in Chinese", f"messages[{index}].content"
    if text.isascii():
        return None
    passage = _LATIN_PASSAGE
    while len(passage.split()) < 2 * len(parts[0]):
        passage += " " + _LATIN_PASSAGE
    d.messages[index].content = parts[0] + passage
    return d, "answer continues in English", f"messages[{index}].content"


_CUT_WORDS = re.compile(r"\b(and|or|but|the|a|an|of|with|from|to|because|than|their|is|are|was|were)\b|[,;:，、；：]")


@kind("truncated_answer", "dialogue_incomplete_answer")
def _truncated(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    index = _final(d)
    if index is None:
        return None
    text = (d.messages[index].content or "").strip()
    cuts = [m.end() for m in _CUT_WORDS.finditer(text) if 0 < m.end() < len(text) - 2]
    spaces = [m.start() for m in re.finditer(r" (?=\w)", text) if m.start() > 3 and text[m.start() - 1].isalnum()]
    variants = ([("dangling", cuts)] if cuts else []) + ([("ellipsis", spaces)] if spaces else [])
    if not variants:
        return None
    variant, positions = rng.choice(variants)
    position = rng.choice(positions)
    d.messages[index].content = text[:position].rstrip() + ("..." if variant == "ellipsis" else "")
    if d.messages[index].content.rstrip(".").rstrip() == "":
        return None
    return d, f"final answer cut at offset {position} ({variant})", f"messages[{index}].content"


# -- filters ---------------------------------------------------------------------------------

@kind("too_many_steps", "filter_too_many_steps")
def _too_many_steps(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str] | None:
    index = _final(d)
    pairs = [(c, _response(d, c.id)) for _, _, c in _calls(d) if c.name != "Finish"]
    pairs = [(c, r) for c, r in pairs if r is not None]
    if index is None or not pairs:
        return None
    total = len(_calls(d))
    extra: list[Message] = []
    used = {c.id for _, _, c in _calls(d)}
    while total <= MAX_STEPS:
        call, response = rng.choice(pairs)
        new_id = f"call_{rng.getrandbits(40):010x}"
        while new_id in used:
            new_id = f"call_{rng.getrandbits(40):010x}"
        used.add(new_id)
        extra.append(Message(role="assistant", tool_calls=[ToolCall(id=new_id, name=call.name, arguments=call.arguments)]))
        extra.append(d.messages[response].model_copy(update={"tool_call_id": new_id}))
        total += 1
    d.messages[index:index] = extra
    return d, f"{total} calls"


@kind("parse_error_response", "filter_parse_error")
def _parse_error(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    responses = [i for i, m in enumerate(d.messages) if m.role == "tool" and m.name != "Finish" and m.content]
    if not responses:
        return None
    index = rng.choice(responses)
    error = rng.choice(["invalid arguments: 'city' is a required property", "arguments are not valid JSON: Expecting value", "unknown function 'lookup'"])
    d.messages[index].content = json.dumps({"status_code": 400, "error": error})
    return d, f"response messages[{index}] replaced by a 400 error", f"messages[{index}].content"


@kind("search_not_finished", "filter_search_not_finished")
def _not_finished(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str] | None:
    finishes = [(i, j, c) for i, j, c in _calls(d) if c.name == "Finish"]
    if not finishes or "Finish" not in _functions(d):
        return None
    i, j, call = finishes[-1]
    response = _response(d, call.id)
    if rng.random() < 0.5:
        call.arguments = json.dumps({"return_type": "give_up_and_restart"})
        if response is not None:
            d.messages[response].content = FINISH_GAVE_UP
        return d, "Finish gives up"
    drop = {i} | ({response} if response is not None else set())
    if len(d.messages[i].tool_calls or []) > 1:
        return None
    d.messages = [m for k, m in enumerate(d.messages) if k not in drop]
    return d, "Finish call removed"


__all__ = ["KINDS", "Corruption", "corrupt", "corruptions"]


# -- API definition clarity ------------------------------------------------------------------


@kind("duplicate_function", "tool_definition_invalid")
def _duplicate_function(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    if not d.tools:
        return None
    i = rng.randrange(len(d.tools))
    d.tools.append(d.tools[i].model_copy(deep=True))  # calls still resolve to the first definition
    return d, f"{d.tools[i].name} defined twice", f"tools[{len(d.tools) - 1}]"


@kind("missing_description", "tool_description_missing")
def _missing_description(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    described = [i for i, fn in enumerate(d.tools) if fn.description.strip()]
    if not described:
        return None
    i = rng.choice(described)
    d.tools[i] = d.tools[i].model_copy(update={"description": ""})  # tools are shared between copies
    return d, f"description of {d.tools[i].name} removed", f"tools[{i}]"


@kind("name_not_openai", "tool_name_not_openai")
def _name_not_openai(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    if not d.tools:
        return None
    i = rng.randrange(len(d.tools))
    old = d.tools[i].name
    new = f"api.{old}"  # a BFCL-style dotted name: valid data, refused by OpenAI's API
    if any(fn.name == new for fn in d.tools):
        return None
    d.tools[i] = d.tools[i].model_copy(update={"name": new})
    for message in d.messages:
        for call in message.tool_calls or []:
            if call.name == old:
                call.name = new
        if message.role == "tool" and message.name == old:
            message.name = new
    return d, f"{old} renamed {new}", f"tools[{i}]"


@kind("call_after_answer", "sample_call_after_answer")
def _call_after_answer(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    if any(fn.name == "Finish" for fn in d.tools):
        return None  # ToolLLM's convention: only Finish ends the task there
    answer = d.messages[-1] if d.messages and d.messages[-1].role == "assistant" and not d.messages[-1].tool_calls else None
    turns = [i for i, m in enumerate(d.messages) if m.role == "assistant" and m.tool_calls and i and d.messages[i - 1].role != "assistant"]
    if answer is None or not (answer.content or "").strip() or not turns:
        return None
    i = rng.choice(turns)
    # The model answered, then called a tool without a new user turn.
    d.messages.insert(i, Message(role="assistant", content=answer.content))
    return d, f"answer inserted before the call turn at messages[{i}]", f"messages[{i + 1}]"


@kind("call_written_as_text", "sample_call_format_mismatch")
def _call_written_as_text(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    calls = _api_calls(d)
    user = next((m.content or "" for m in d.messages if m.role == "user"), "")
    latin_user = sum(ch.isascii() for ch in user) >= 0.8 * max(len(user), 1)
    if not calls or not latin_user or declared_format(Sample(d)) != "openai":
        return None  # (in a CJK conversation the Latin call text would also be mixed language)
    i, _, call = rng.choice(calls)
    # The model also wrote its call as ReAct text next to the native call.
    d.messages[i].content = f"Action: {call.name}\nAction Input: {call.arguments}"
    return d, f"ReAct text call added to messages[{i}]", f"messages[{i}].content"


@kind("target_mode_not_shown", "dialogue_mode_mismatch")
def _target_mode_not_shown(d: Dialogue, rng: random.Random) -> tuple[Dialogue, str, str] | None:
    shown = shown_mode(d)
    if shown == "non_tool":
        return None  # (a tool mode target would also fail dialogue_no_function_call)
    # The generator asked for another tool-using mode than the one the model produced.
    d.mode = shown
    d.target_mode = rng.choice(sorted({"parallel", "dependent", "missing_params", "single"} - {shown}))
    return d, f"target mode {d.target_mode} but the messages show {shown}", "messages"
