"""Fields as the designer model writes them, and the JSON Schema they stand for.

Generated APIs (documentation from introductions, self-evolving synthesis) describe parameters
and returned values as lists of typed fields rather than as free JSON Schema: a list of fixed-key
objects is what structured-output decoders (OpenAI strict mode, vLLM/SGLang guided decoding)
support, and it leaves no room for schemas that do not parse. A field has a name, a type, a
description, whether it is required, and per type: `enum` and `format` (strings), `minimum` /
`maximum` (numbers), `items_type` (arrays) and nested `properties` (objects, arrays of objects).
As in JSON Schema itself, a keyword that does not apply to the field's type has no effect.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

TYPES = ("string", "integer", "number", "boolean", "array", "object")
FORMATS = ("date", "date-time", "time", "email", "uri")
MAX_DEPTH = 4  # nesting deeper than this is cut (and reported) rather than stored

FIELD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,39}$"},
        "type": {"enum": list(TYPES)},
        "description": {"type": "string", "minLength": 3},
        "required": {"type": "boolean"},
        "enum": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 8, "uniqueItems": True},
        "format": {"enum": list(FORMATS)},
        "minimum": {"type": "number"},
        "maximum": {"type": "number"},
        "items_type": {"enum": [t for t in TYPES if t != "array"]},
        "properties": {"type": "array", "items": {"$ref": "#/$defs/field"}, "minItems": 1, "maxItems": 6},
    },
    "required": ["name", "type", "description", "required"],
}


def fields_schema(min_items: int = 0, max_items: int = 8) -> dict[str, Any]:
    """The answer schema of a field list (refers to ``#/$defs/field``, see :func:`with_field_defs`)."""
    return {"type": "array", "items": {"$ref": "#/$defs/field"}, "minItems": min_items, "maxItems": max_items}


def with_field_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the field definition its field lists refer to."""
    return {**schema, "$defs": {"field": FIELD_SCHEMA}}


def object_schema(fields: list[dict[str, Any]], where: str, problems: list[tuple[str, str]], depth: int = 0) -> dict[str, Any]:
    """The JSON Schema object of `fields`; problems (duplicate names, bounds) are appended."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in fields:
        name = field["name"]
        if name in properties:
            problems.append(("tool_duplicate_parameter", f"{where}: field {name!r} is defined twice"))
            continue
        properties[name] = field_schema(field, f"{where}.{name}", problems, depth)
        if field.get("required"):
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def field_schema(field: dict[str, Any], where: str, problems: list[tuple[str, str]], depth: int = 0) -> dict[str, Any]:
    kind = field["type"]
    schema: dict[str, Any] = {"type": kind, "description": field["description"]}
    if kind == "string":
        if field.get("enum"):
            schema["enum"] = list(field["enum"])
        if field.get("format"):
            schema["format"] = field["format"]
    elif kind in ("integer", "number"):
        low, high = field.get("minimum"), field.get("maximum")
        if low is not None and high is not None and low > high:
            problems.append(("tool_invalid_schema", f"{where}: minimum {low} is above maximum {high}"))
        for key, bound in (("minimum", low), ("maximum", high)):
            if bound is not None:
                schema[key] = int(bound) if kind == "integer" and float(bound).is_integer() else bound
    elif kind == "object":
        nested = field.get("properties") or []
        if depth >= MAX_DEPTH:
            problems.append(("tool_schema_too_deep", f"{where}: nested deeper than {MAX_DEPTH} levels"))
        elif nested:
            schema.update(object_schema(nested, where, problems, depth + 1))
    elif kind == "array":
        items_type = field.get("items_type") or "string"
        if items_type == "object" and field.get("properties") and depth < MAX_DEPTH:
            schema["items"] = object_schema(field["properties"], f"{where}[]", problems, depth + 1)
        else:
            schema["items"] = {"type": items_type}
    return schema


# --- measuring schemas (pool statistics, type balance) -----------------------------------


def parameter_types(schema: dict[str, Any]) -> Counter[str]:
    """Types of every parameter of an object schema, nested ones included."""
    counts: Counter[str] = Counter()
    for prop in (schema.get("properties") or {}).values():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        counts[kind if isinstance(kind, str) else "other"] += 1
        if isinstance(prop.get("properties"), dict):
            counts.update(parameter_types(prop))
        items = prop.get("items")
        if isinstance(items, dict) and isinstance(items.get("properties"), dict):
            counts.update(parameter_types(items))
    return counts


def nesting_depth(schema: Any) -> int:
    """Levels of objects inside the parameters object: 1 for flat parameters, 0 for none."""
    if not isinstance(schema, dict):
        return 0
    children = [p for p in (schema.get("properties") or {}).values() if isinstance(p, dict)]
    items = schema.get("items")
    if isinstance(items, dict):
        children.append(items)
    inner = max((nesting_depth(child) for child in children), default=0)
    return (1 if schema.get("properties") else 0) + inner
