"""Generate a plausible JSON value that validates against a JSON Schema.

This is how the simulator answers `response_format: json_schema` requests and fills in
tool-call arguments. Values are meant to look real (a `city` gets a city, an `age` an age, free
text reuses the prompt's words) and must validate, so generation is followed by a check with
`jsonschema` (format checker on); a failing candidate is regenerated with fresh draws.

Supported: `type` (also lists), objects (`properties`, `required`, `additionalProperties`,
`patternProperties`, `minProperties`/`maxProperties`, `dependentRequired`), arrays (`items`,
`prefixItems` and tuple-form `items`, `minItems`/`maxItems`, `uniqueItems`, `contains`),
`enum`, `const`, `default`, `examples`, string `format`s (date, date-time, time, email, uri,
uuid, hostname, ipv4, ipv6, duration, ...), `pattern` (see :mod:`.patterns`),
`minLength`/`maxLength`, numeric bounds (`minimum`, `maximum`, both `exclusive*` styles),
`multipleOf`, `anyOf`/`oneOf` (one branch), `allOf` (merged), `if`/`then`/`else`, local `$ref`
(`#/$defs/..`, `#/definitions/..`, any local JSON pointer, recursion bounded by depth).

Not generated for (only caught by the final validation and retry): `not`, `propertyNames`,
`dependentSchemas`, `unevaluated*`, `minContains`/`maxContains`, look-around regexes, and
contradictory schemas. After `max_attempts` failing candidates the last one is returned as is.
"""

from __future__ import annotations

import copy
import math
import random
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]
from jsonschema.protocols import Validator  # type: ignore[import-untyped,unused-ignore]
from jsonschema.validators import validator_for  # type: ignore[import-untyped,unused-ignore]

from . import lexicon
from .documented import documented_examples, documented_format, wants_bare_name
from .patterns import matching_string
from .seeding import canonical_json
from .text import identifier_words

JsonSchema = dict[str, Any]

SOFT_DEPTH = 4  # past this nesting depth only required properties and minItems (one item for a required list) are generated
HARD_DEPTH = 12  # past this depth generation gives up (returns null) to stop runaway recursion
NODE_BUDGET = 4000  # at most this many schema nodes are expanded per candidate
OPTIONAL_PROBABILITY = 0.5  # chance that an optional property is included


class _Missing:
    """Marks "no value can exist here" (a `false` schema)."""


MISSING = _Missing()

_TYPE_CHECK: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}

_FORMATS: dict[str, Callable[[random.Random, Sequence[str]], str]] = {
    "date": lambda rng, ctx: lexicon.date(rng),
    "date-time": lambda rng, ctx: lexicon.date_time(rng),
    "time": lambda rng, ctx: lexicon.time_of_day(rng),
    "email": lambda rng, ctx: lexicon.email(rng),
    "idn-email": lambda rng, ctx: lexicon.email(rng),
    "uri": lambda rng, ctx: lexicon.url(rng, ctx),
    "url": lambda rng, ctx: lexicon.url(rng, ctx),
    "iri": lambda rng, ctx: lexicon.url(rng, ctx),
    "uri-reference": lambda rng, ctx: lexicon.url(rng, ctx),
    "iri-reference": lambda rng, ctx: lexicon.url(rng, ctx),
    "uri-template": lambda rng, ctx: "https://www.example.com/items/{id}",
    "uuid": lambda rng, ctx: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "hostname": lambda rng, ctx: f"api.{rng.choice(lexicon.DOMAINS)}",
    "idn-hostname": lambda rng, ctx: f"api.{rng.choice(lexicon.DOMAINS)}",
    "ipv4": lambda rng, ctx: f"192.0.2.{rng.randint(1, 254)}",
    "ipv6": lambda rng, ctx: f"2001:db8::{rng.randint(1, 0xFFFF):x}",
    "duration": lambda rng, ctx: f"P{rng.randint(1, 30)}D",
    "json-pointer": lambda rng, ctx: f"/items/{rng.randint(0, 9)}",
    "relative-json-pointer": lambda rng, ctx: f"{rng.randint(0, 3)}/name",
    "regex": lambda rng, ctx: "^[a-z]+$",
    "byte": lambda rng, ctx: "aGVsbG8gd29ybGQ=",
    "password": lambda rng, ctx: f"S3cure-{rng.randint(1000, 9999)}!",
}

_FALLBACK_WORDS = ("example", "sample", "standard", "default", "overview", "details")

_MIN_KEYS = ("minimum", "minLength", "minItems", "minProperties", "minContains")
_MAX_KEYS = ("maximum", "maxLength", "maxItems", "maxProperties", "maxContains")


def instance_for(
    schema: JsonSchema | bool,
    rng: random.Random,
    context_words: Sequence[str] = (),
    *,
    max_attempts: int = 25,
    true_rate: float = 0.5,
    optional_rate: float = OPTIONAL_PROBABILITY,
) -> Any:
    """A value valid against `schema`, drawn with `rng`, worded from `context_words`.

    `context_words` are words of the prompt; free-text strings reuse them so answers read as
    on-topic. The result is checked with `jsonschema` (format checker included) and
    regenerated up to `max_attempts` times; see the module docstring for what is supported.
    `optional_rate` is the chance that an optional property (above :data:`SOFT_DEPTH`) is given.
    """
    validator = _validator(schema)
    words = [word for word in context_words if word]
    candidate: Any = None
    for _ in range(max(1, max_attempts)):
        candidate = _Generator(schema, rng, words, true_rate, optional_rate).value(schema, [], 0)
        if candidate is MISSING:
            candidate = None
        if validator is None or _is_valid(validator, candidate):
            return candidate
    return candidate


def is_valid_instance(schema: JsonSchema | bool, instance: Any) -> bool:
    """Whether `instance` validates against `schema` (format checker on); True if unknowable."""
    validator = _validator(schema)
    return validator is None or _is_valid(validator, instance)


_VALIDATORS: OrderedDict[str, Validator | None] = OrderedDict()
_VALIDATOR_CACHE_SIZE = 512


def _validator(schema: JsonSchema | bool) -> Validator | None:
    """A cached jsonschema validator for `schema`, or None if one cannot be built."""
    if not isinstance(schema, (dict, bool)):
        return None
    key = canonical_json(schema)
    if key in _VALIDATORS:
        _VALIDATORS.move_to_end(key)
        return _VALIDATORS[key]
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        built: Validator | None = cls(schema, format_checker=cls.FORMAT_CHECKER)
    except Exception:
        built = None
    _VALIDATORS[key] = built
    if len(_VALIDATORS) > _VALIDATOR_CACHE_SIZE:
        _VALIDATORS.popitem(last=False)
    return built


def _is_valid(validator: Validator, instance: Any) -> bool:
    try:
        return bool(validator.is_valid(instance))
    except Exception:
        return True


def json_type(value: Any) -> str:
    """The JSON Schema type name of a Python JSON value ('integer' for whole ints)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def matches_type(value: Any, type_name: str) -> bool:
    """Whether `value` is of JSON Schema type `type_name`."""
    check = _TYPE_CHECK.get(type_name)
    return check(value) if check else True


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("ses") or word.endswith("xes"):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def merge_schemas(first: JsonSchema, second: JsonSchema) -> JsonSchema:
    """A schema approximating `allOf: [first, second]` for generation purposes."""
    out = dict(first)
    for key, value in second.items():
        if key not in out:
            out[key] = value
            continue
        current = out[key]
        if key == "properties" and isinstance(current, dict) and isinstance(value, dict):
            props = dict(current)
            for name, sub in value.items():
                props[name] = {"allOf": [props[name], sub]} if name in props else sub
            out[key] = props
        elif key == "required" and isinstance(current, list) and isinstance(value, list):
            out[key] = list(dict.fromkeys([*current, *value]))
        elif key == "type":
            mine, theirs = set(_as_list(current)), set(_as_list(value))
            both = mine & theirs
            if ("integer" in mine and "number" in theirs) or (
                "number" in mine and "integer" in theirs
            ):
                both.add("integer")
            out[key] = sorted(both) if both else value
        elif key in _MIN_KEYS and _numeric(current) and _numeric(value):
            out[key] = max(current, value)
        elif key in _MAX_KEYS and _numeric(current) and _numeric(value):
            out[key] = min(current, value)
        elif key in ("exclusiveMinimum",) and _numeric(current) and _numeric(value):
            out[key] = max(current, value)
        elif key in ("exclusiveMaximum",) and _numeric(current) and _numeric(value):
            out[key] = min(current, value)
        elif key == "enum" and isinstance(current, list) and isinstance(value, list):
            out[key] = [item for item in current if item in value] or value
        elif key in ("anyOf", "oneOf") and isinstance(current, list) and isinstance(value, list):
            out[key] = [
                merge_schemas(a, b) if isinstance(a, dict) and isinstance(b, dict) else a
                for a in current
                for b in value
            ][:16]
        elif key in ("items", "additionalProperties", "contains"):
            if current is False or value is False:
                out[key] = False
            elif isinstance(current, dict) and isinstance(value, dict):
                out[key] = {"allOf": [current, value]}
        elif key == "allOf" and isinstance(current, list) and isinstance(value, list):
            out[key] = [*current, *value]
    return out


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Generator:
    """One candidate's worth of choices over one root schema."""

    def __init__(self, root: Any, rng: random.Random, context: list[str], true_rate: float = 0.5,
                 optional_rate: float = OPTIONAL_PROBABILITY) -> None:
        self.root = root
        self.rng = rng
        self.true_rate = true_rate
        self.optional_rate = optional_rate
        self.context = context
        self.budget = NODE_BUDGET
        self.used: set[str] = set()  # lower-case words already placed in some value
        self.draft3 = isinstance(root, dict) and "draft-03" in str(root.get("$schema", ""))

    # -- schema resolution -------------------------------------------------------------

    def pointer(self, ref: str) -> Any:
        """The schema at a local `$ref` (a JSON pointer into the root), or {} if absent."""
        if not ref.startswith("#"):
            return {}
        node: Any = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return {}
        return node

    def resolve(self, schema: Any) -> Any:
        """`schema` with `$ref` followed and `allOf` merged away (bool schemas pass through)."""
        for _ in range(32):
            if schema is True:
                return {}
            if not isinstance(schema, dict):
                return schema
            if isinstance(schema.get("$ref"), str):
                target = self.pointer(schema["$ref"])
                siblings = {k: v for k, v in schema.items() if k != "$ref"}
                if target is False:
                    return False
                target = {} if target is True or not isinstance(target, dict) else target
                schema = merge_schemas(target, siblings) if siblings else target
                continue
            if isinstance(schema.get("allOf"), list):
                merged: Any = {k: v for k, v in schema.items() if k != "allOf"}
                for sub in schema["allOf"]:
                    resolved = self.resolve(sub)
                    if resolved is False:
                        return False
                    merged = merge_schemas(merged, resolved)
                schema = merged
                continue
            return schema
        return schema

    # -- dispatch ----------------------------------------------------------------------

    def value(self, schema: Any, name: list[str], depth: int, required: bool = False) -> Any:
        """A value for `schema`; `name` are the words of the property it is for, which its
        object requires when `required`."""
        self.budget -= 1
        if self.budget < 0 or depth > HARD_DEPTH:
            return None
        schema = self.resolve(schema)
        if schema is False:
            return MISSING
        if not isinstance(schema, dict):
            return self.free_text(name)
        rng = self.rng
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return copy.deepcopy(rng.choice(self.typed_enum(schema)))
        for key in ("oneOf", "anyOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                base = {k: v for k, v in schema.items() if k != key}
                if depth >= SOFT_DEPTH:
                    flat = [o for o in options if not (isinstance(o, dict) and "$ref" in o)]
                    options = flat or options
                branch = self.resolve(rng.choice(options))
                if branch is False:
                    return MISSING
                return self.value(merge_schemas(base, branch), name, depth, required)
        if "if" in schema:
            base = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
            condition = self.resolve(schema["if"])
            if rng.random() < 0.5 and isinstance(condition, dict):
                merged = merge_schemas(base, condition)
                then = self.resolve(schema.get("then", {}))
                merged = merge_schemas(merged, then) if isinstance(then, dict) else merged
            else:
                other = self.resolve(schema.get("else", {}))
                merged = merge_schemas(base, other) if isinstance(other, dict) else base
            return self.value(merged, name, depth, required)
        if "default" in schema and rng.random() < 0.25:
            return copy.deepcopy(schema["default"])
        examples = schema.get("examples")
        if isinstance(examples, list) and examples and rng.random() < 0.25:
            return copy.deepcopy(rng.choice(examples))
        kind = self.pick_type(schema)
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, name, depth, required)
        if kind == "integer":
            return self.number(schema, name, integer=True)
        if kind == "number":
            return self.number(schema, name, integer=False)
        if kind == "boolean":
            return rng.random() < self.true_rate
        if kind == "null":
            return None
        return self.string(schema, name)

    def typed_enum(self, schema: JsonSchema) -> list[Any]:
        types = schema.get("type")
        if types is None:
            return list(schema["enum"])
        allowed = _as_list(types)
        typed = [v for v in schema["enum"] if any(matches_type(v, t) for t in allowed)]
        return typed or list(schema["enum"])

    def pick_type(self, schema: JsonSchema) -> str:
        declared = schema.get("type")
        if isinstance(declared, str):
            return declared
        if isinstance(declared, list) and declared:
            concrete = [t for t in declared if t != "null" and isinstance(t, str)]
            if concrete and (len(concrete) == len(declared) or self.rng.random() < 0.85):
                return self.rng.choice(concrete)
            return "null" if "null" in declared else self.rng.choice(declared)
        if any(
            k in schema
            for k in (
                "properties",
                "required",
                "additionalProperties",
                "patternProperties",
                "minProperties",
                "maxProperties",
            )
        ):
            return "object"
        if any(
            k in schema
            for k in ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains")
        ):
            return "array"
        if any(
            k in schema
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
        ):
            return "number"
        return "string"

    # -- objects -----------------------------------------------------------------------

    def object(self, schema: JsonSchema, depth: int) -> dict[str, Any]:
        rng = self.rng
        props: dict[str, Any] = schema.get("properties") or {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        extra_schema = schema.get("additionalProperties", True)
        soft = depth >= SOFT_DEPTH
        chance = 0.0 if soft else self.optional_rate
        keys = [k for k in props if k in required or rng.random() < chance]
        keys += [r for r in required if r not in props]
        dependent = schema.get("dependentRequired") or {}
        for key in list(keys):
            for needed in dependent.get(key, []) if isinstance(dependent, dict) else []:
                if needed not in keys:
                    keys.append(needed)
        minimum = schema.get("minProperties", 0)
        maximum = schema.get("maxProperties")
        optional_left = [k for k in props if k not in keys]
        rng.shuffle(optional_left)
        while len(keys) < minimum and optional_left:
            keys.append(optional_left.pop())
        keys = [k for k in props if k in keys] + [k for k in keys if k not in props]
        if isinstance(maximum, int):
            while len(keys) > maximum:
                droppable = [k for k in keys if k not in required]
                if not droppable:
                    break
                keys.remove(rng.choice(droppable))
        result: dict[str, Any] = {}
        person = lexicon.describes_person([w for k in props for w in identifier_words(k)])
        for key in keys:
            sub = props.get(key, extra_schema if isinstance(extra_schema, dict) else {})
            words = identifier_words(key)
            if words == ["name"] and not person:
                words = [lexicon.NAMED_THING]
            value = self.value(sub, words, depth + 1, key in required)
            if value is not MISSING:
                result[key] = value
        pattern_props = schema.get("patternProperties") or {}
        open_map = not props and extra_schema is not False
        wanted_extra = 0 if soft else rng.randint(1, 2)
        if pattern_props and not props and isinstance(pattern_props, dict):
            for pattern, sub in list(pattern_props.items())[:wanted_extra]:
                key = matching_string(pattern, rng) or ""
                if key and key not in result:
                    value = self.value(sub, identifier_words(key), depth + 1)
                    if value is not MISSING:
                        result[key] = value
        elif open_map and isinstance(extra_schema, dict) and extra_schema:
            for key in self.map_keys(wanted_extra, result):
                value = self.value(extra_schema, identifier_words(key), depth + 1)
                if value is not MISSING:
                    result[key] = value
        while len(result) < minimum and extra_schema is not False and not pattern_props:
            sub = extra_schema if isinstance(extra_schema, dict) else {}
            key = self.map_keys(1, result)[0]
            value = self.value(sub, identifier_words(key), depth + 1)
            result[key] = None if value is MISSING else value
        return result

    def map_keys(self, count: int, taken: dict[str, Any]) -> list[str]:
        pool = [w.lower() for w in self.context if w.isalpha()] or list(_FALLBACK_WORDS)
        keys: list[str] = []
        serial = len(taken)
        while len(keys) < count:
            key = self.rng.choice(pool)
            while key in taken or key in keys:
                serial += 1
                key = f"{key.split('_')[0]}_{serial}"
            keys.append(key)
        return keys

    # -- arrays ------------------------------------------------------------------------

    def array(self, schema: JsonSchema, name: list[str], depth: int, required: bool = False) -> list[Any]:
        rng = self.rng
        items = schema.get("items", {})
        prefix = schema.get("prefixItems")
        if isinstance(items, list):  # draft 4-2019 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        prefix = prefix if isinstance(prefix, list) else []
        minimum = max(0, int(schema.get("minItems", 0)))
        maximum = schema.get("maxItems")
        if depth >= SOFT_DEPTH:
            # A required list holds something, however deep: the entities a call creates, nested
            # in a designer's answer under its tasks, turns and calls, are not an empty list.
            count = max(minimum, 1) if required and depth < HARD_DEPTH - 2 and maximum != 0 else minimum
        else:
            low = max(minimum, 1)
            high = low + 2 if maximum is None else min(int(maximum), low + 2)
            count = rng.randint(low, high) if high >= low else int(maximum or 0)
        if items is False:
            count = min(count, len(prefix))
        item_name = [_singular(word) for word in name]
        unique = bool(schema.get("uniqueItems"))
        seen: set[str] = set()
        result: list[Any] = []
        for index in range(count):
            sub = prefix[index] if index < len(prefix) else items
            tries = 8 if unique else 3  # without uniqueItems, duplicates are merely avoided
            for attempt in range(tries):
                value = self.value(sub, item_name, depth + 1)
                if value is MISSING:
                    break
                key = canonical_json(value)
                if key not in seen or (not unique and attempt == tries - 1):
                    seen.add(key)
                    result.append(value)
                    break
        contains = schema.get("contains")
        if isinstance(contains, dict) and contains:
            # The contained item must also be a valid item: draw it from both schemas.
            base = self.resolve(items) if isinstance(items, dict) else {}
            value = self.value(merge_schemas(base, contains) if isinstance(base, dict) else contains, item_name, depth + 1)
            if value is not MISSING:
                if result and (maximum is not None and len(result) >= maximum):
                    result[-1] = value
                else:
                    result.append(value)
        return result

    # -- scalars -----------------------------------------------------------------------

    def free_text(self, name: list[str]) -> str:
        """Realistic text for a property: by its name if known, else from the prompt's words.

        Words already used for another value are avoided, so "from Paris to Berlin" fills
        `origin` and `destination` with different cities.
        """
        rng = self.rng
        context = [w for w in self.context if w.lower() not in self.used] or self.context
        maker = lexicon.string_hint(name)
        if maker is not None:
            text = maker(rng, context)
        else:
            pool = [w for w in context if w.isalpha() and len(w) > 2]
            if pool and rng.random() < 0.5:
                text = rng.choice(pool)
            else:
                pool += list(_FALLBACK_WORDS[: max(0, 4 - len(pool))])
                text = lexicon.phrase(pool, rng, size=rng.randint(2, 3))
        self.used.update(word.lower() for word in text.split())
        return text

    def string(self, schema: JsonSchema, name: list[str]) -> str:
        rng = self.rng
        min_len = int(schema.get("minLength", 0) or 0)
        max_len = schema.get("maxLength")
        max_len = int(max_len) if isinstance(max_len, (int, float)) else None
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            found = matching_string(pattern, rng, min_length=min_len, max_length=max_len)
            if found is not None:
                return found
        fmt = schema.get("format")
        if fmt == "time" and self.draft3:  # draft 3's time is HH:MM:SS without an offset
            text = lexicon.clock_time(rng) + ":00"
        elif isinstance(fmt, str) and fmt in _FORMATS:
            text = _FORMATS[fmt](rng, self.context)
        else:
            text = self.documented(schema, name) or self.free_text(name)
            if wants_bare_name(schema):
                text = text.rstrip("/").rsplit("/", 1)[-1] or text
        return self.fit_length(text, min_len, max_len)

    def documented(self, schema: JsonSchema, name: list[str]) -> str | None:
        """A value of the form the description documents (:mod:`.documented`), or None.

        A format the description spells out ("HH:MM") wins over the property's name; a quoted
        example ("e.g. 'America/New_York'") fills only a property the lexicon knows nothing
        about, which would otherwise get the prompt's words: a `city` keeps drawing from the
        known cities, so the documentation's one example does not become every call's city.
        """
        maker = documented_format(schema)
        if maker is not None:
            return maker(self.rng)
        if lexicon.string_hint(name) is not None:
            return None
        fitting = [value for value in documented_examples(schema) if _is_valid_string(schema, value)]
        return self.rng.choice(fitting) if fitting else None

    def fit_length(self, text: str, min_len: int, max_len: int | None) -> str:
        pool = [w for w in self.context if w.isalpha()] or list(_FALLBACK_WORDS)
        while len(text) < min_len:
            text = f"{text} {self.rng.choice(pool)}".strip()
        if max_len is not None and len(text) > max_len:
            text = text[:max_len].rstrip()
            text = text + "x" * (min_len - len(text))
        return text

    def number(self, schema: JsonSchema, name: list[str], *, integer: bool) -> int | float:
        rng = self.rng
        low, low_excl = _bound(schema, "minimum", "exclusiveMinimum")
        high, high_excl = _bound(schema, "maximum", "exclusiveMaximum")
        if integer:
            if low is not None:
                low = (
                    math.floor(low) + 1 if low_excl and float(low).is_integer() else math.ceil(low)
                )
                low_excl = False
            if high is not None:
                high = (
                    math.ceil(high) - 1
                    if high_excl and float(high).is_integer()
                    else math.floor(high)
                )
                high_excl = False
        hint = lexicon.number_hint(name) or ((0, 100) if integer else (0, 1000))
        lo, hi = _pick_range(low, high, hint)

        def inside(value: float) -> bool:
            if low is not None and (value < low or (low_excl and value == low)):
                return False
            if high is not None and (value > high or (high_excl and value == high)):
                return False
            return True

        raw_step = schema.get("multipleOf")
        numeric = isinstance(raw_step, (int, float)) and not isinstance(raw_step, bool)
        step: float = raw_step if numeric and isinstance(raw_step, (int, float)) else 0
        if step > 0:
            wide_lo = low if low is not None else lo - 20 * step
            wide_hi = high if high is not None else max(hi, wide_lo) + 20 * step
            for range_lo, range_hi in ((lo, hi), (wide_lo, wide_hi)):
                found = _multiple_in(step, range_lo, range_hi, integer, inside, rng)
                if found is not None:
                    return found
        if integer:
            return rng.randint(math.ceil(lo), max(math.ceil(lo), math.floor(hi)))
        for value in (round(rng.uniform(lo, hi), 2), round(rng.uniform(lo, hi), 6), (lo + hi) / 2):
            if inside(value):
                return value
        return float(lo)


def _is_valid_string(schema: JsonSchema, value: str) -> bool:
    """Whether `value` fits the string keywords of `schema` (its length, pattern and format)."""
    kept = {key: schema[key] for key in ("type", "minLength", "maxLength", "pattern", "format") if key in schema}
    return is_valid_instance(kept, value)


def _bound(schema: JsonSchema, inclusive: str, exclusive: str) -> tuple[float | None, bool]:
    """A numeric bound and whether it is exclusive, from either JSON Schema dialect."""
    value = schema.get(inclusive)
    value = value if _numeric(value) else None
    flag = schema.get(exclusive)
    if isinstance(flag, bool):  # draft 4: exclusiveMinimum is a flag on minimum
        return value, flag and value is not None
    if _numeric(flag):
        if value is None or (flag >= value if exclusive == "exclusiveMinimum" else flag <= value):
            return flag, True
    return value, False


def _pick_range(
    low: float | None, high: float | None, hint: tuple[float, float]
) -> tuple[float, float]:
    """The realistic `hint` range narrowed to the schema bounds (or the bounds if disjoint)."""
    width = hint[1] - hint[0]
    lo = hint[0] if low is None else max(low, hint[0])
    hi = hint[1] if high is None else min(high, hint[1])
    if lo <= hi:
        return lo, hi
    if low is not None and high is not None:
        return low, high
    if low is not None:
        return low, low + width
    assert high is not None
    return high - width, high


def _is_multiple(value: float, step: float) -> bool:
    """The exact check jsonschema applies for `multipleOf`."""
    if isinstance(step, float):
        try:
            quotient = value / step
            return int(quotient) == quotient
        except (OverflowError, ValueError):
            return False
    return value % step == 0


def _multiple_in(
    step: float,
    lo: float,
    hi: float,
    integer: bool,
    inside: Callable[[float], bool],
    rng: random.Random,
) -> int | float | None:
    """A multiple of `step` inside the bounds (and in [lo, hi] if possible), or None."""
    k_low, k_high = math.ceil(lo / step), math.floor(hi / step)
    if k_low > k_high:
        return None
    picks = [rng.randint(k_low, k_high) for _ in range(24)]
    picks += list(range(k_low, min(k_high, k_low + 50) + 1))
    for k in picks:
        value: int | float = k * step
        if isinstance(step, float):
            value = round(value, 12)
        if integer:
            if not float(value).is_integer():
                continue
            value = int(value)
        if inside(value) and _is_multiple(value, step):
            return value
    return None
