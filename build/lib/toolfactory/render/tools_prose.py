"""Tool descriptions in natural language, the way a person documents an API (render-only)::

    get_forecast: Get a daily weather forecast. It is served at GET /v1/forecast.
    It takes 2 parameters:
    - "location" (required) is a string. City name.
    - "days" (optional) is an integer, from 1 to 16, 7 by default. Number of forecast days.
    It returns an object with these fields:
    - "daily" is a list of objects with these fields:
      - "date" is a string in date format.

Nested objects and lists of objects are described field by field, one indentation level deeper.
Constraints a reader needs (enum values, bounds, defaults, formats, patterns) are spelt out;
keywords without a sentence of their own are left out, which is why prose is never parsed back.
"""

from __future__ import annotations

import json
from typing import Any

ARTICLE = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
           "array": "a list", "object": "an object", "null": "null"}
PLURAL = {"string": "strings", "integer": "integers", "number": "numbers", "boolean": "booleans",
          "array": "lists", "object": "objects", "null": "nulls"}


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _either(values: list[str], word: str = "or") -> str:
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} {word} {values[-1]}"


def _kind(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        return _either([ARTICLE.get(str(k), str(k)) for k in kind])
    if kind == "array" and isinstance(schema.get("items"), dict) and isinstance(schema["items"].get("type"), str):
        item = schema["items"]["type"]
        return f"a list of {PLURAL.get(item, item)}"
    if isinstance(kind, str):
        return ARTICLE.get(kind, kind)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alternatives, list) and alternatives and all(isinstance(a, dict) for a in alternatives):
        return "either " + _either([_kind(a) for a in alternatives])
    if isinstance(schema.get("$ref"), str):
        return f"a value as defined at {schema['$ref']}"
    return "a value"


def _range(low: Any, high: Any, unit: str = "") -> str | None:
    if low is not None and high is not None:
        return f"from {low} to {high}{unit}"
    if low is not None:
        return f"at least {low}{unit}"
    if high is not None:
        return f"at most {high}{unit}"
    return None


def _sentence_text(text: Any) -> str:
    """A description as one line of prose (line breaks would break the list layout)."""
    return " ".join(str(text or "").split())


def _constraints(schema: dict[str, Any]) -> list[str]:
    out = []
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        out.append("one of " + _either([_value(v) for v in schema["enum"]]))
    if "const" in schema:
        out.append(f"always {_value(schema['const'])}")
    for phrase in (
        _range(schema.get("minimum"), schema.get("maximum")),
        _range(schema.get("minLength"), schema.get("maxLength"), " characters long"),
        _range(schema.get("minItems"), schema.get("maxItems"), " item(s)"),
    ):
        if phrase:
            out.append(phrase)
    if schema.get("exclusiveMinimum") is not None and not isinstance(schema["exclusiveMinimum"], bool):
        out.append(f"greater than {schema['exclusiveMinimum']}")
    if schema.get("exclusiveMaximum") is not None and not isinstance(schema["exclusiveMaximum"], bool):
        out.append(f"less than {schema['exclusiveMaximum']}")
    if isinstance(schema.get("pattern"), str):
        out.append(f"matching the pattern {schema['pattern']}")
    if "default" in schema:
        out.append(f"{_value(schema['default'])} by default")
    items = schema.get("items")
    if isinstance(items, dict):
        each = _constraints(items)
        if each:
            out.append("each " + ", ".join(each))
    return out


def _fields_of(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The properties a reader should see under this schema (an object's, or its items')."""
    if isinstance(schema.get("properties"), dict) and schema["properties"]:
        return dict(schema["properties"])
    items = schema.get("items")
    if isinstance(items, dict) and isinstance(items.get("properties"), dict) and items["properties"]:
        return dict(items["properties"])
    return None


def _describe(name: str, schema: Any, required: bool | None, depth: int) -> list[str]:
    indent = "  " * depth
    if not isinstance(schema, dict):
        return [f'{indent}- "{name}" can be any value.']
    status = "" if required is None else (" (required)" if required else " (optional)")
    sentence = f'{indent}- "{name}"{status} is {_kind(schema)}'
    if isinstance(schema.get("format"), str):
        sentence += f" in {schema['format']} format"
    constraints = _constraints(schema)
    if constraints:
        sentence += ", " + ", ".join(constraints)
    fields = _fields_of(schema)
    description = _sentence_text(schema.get("description"))
    if fields:
        sentence += (", with these fields:" if constraints else " with these fields:") if not description else f". {description} It has these fields:"
        inner = schema if "properties" in schema else schema["items"]
        return [sentence, *_fields(inner, fields, depth + 1, required is not None)]
    return [sentence + "." + (f" {description}" if description else "")]


def _fields(schema: dict[str, Any], fields: dict[str, Any], depth: int, mark_required: bool) -> list[str]:
    """One line per field; required/optional is said for parameters, whose callers need it."""
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    lines: list[str] = []
    for name, sub in fields.items():
        lines.extend(_describe(name, sub, (name in required) if mark_required else None, depth))
    return lines


def _function(fields: dict[str, Any]) -> str:
    description = _sentence_text(fields["description"])
    head = f"{fields['name']}: {description}" if description else f"{fields['name']}:"
    endpoint = " ".join(v for v in (fields.get("method"), fields.get("path")) if v)
    if endpoint:
        head += f" It is served at {endpoint}."
    lines = [head]
    parameters = fields["parameters"]
    properties = parameters.get("properties") if isinstance(parameters.get("properties"), dict) else {}
    if not properties:
        lines.append("It takes no parameters.")
    else:
        count = "1 parameter" if len(properties) == 1 else f"{len(properties)} parameters"
        lines.append(f"It takes {count}:")
        lines.extend(_fields(parameters, properties, 0, True))
    returns = fields.get("returns")
    if returns is not None:
        shown = _fields_of(returns)
        if shown:
            lines.append(f"It returns {_kind(returns)} with these fields:")
            lines.extend(_fields(returns if "properties" in returns else returns["items"], shown, 0, False))
        else:
            lines.append(f"It returns {_kind(returns)}.")
    return "\n".join(lines)


def render(functions: list[dict[str, Any]]) -> str:
    intro = "There are no functions." if not functions else None
    return intro or "\n\n".join(_function(fields) for fields in functions)
