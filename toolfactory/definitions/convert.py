"""Conversion of raw tool entries of each source format into canonical :class:`Tool` s.

Formats: ``openapi`` (an OpenAPI 3.x document, validated with openapi-spec-validator, ``$ref`` s
resolved, each operation a function, request bodies as parameters), ``catalog`` (toolfactory's
own, the canonical model as YAML/JSON), ``openai``
(`tools` JSON; BFCL-style type names are mapped to JSON Schema), ``toolbench`` (RapidAPI tool
JSON, ToolLLM §2.1, function names ``{api}_for_{tool}``), ``toolalpaca`` (tools with an OpenAPI 3
``Documentation``, ToolAlpaca §3.1). A malformed entry raises :class:`MalformedTool` with a reason.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from pydantic import ValidationError
from referencing.exceptions import Unresolvable

from toolfactory.definitions.pointer import pointer_target
from toolfactory.errors import ToolfactoryError
from toolfactory.models import Function, Tool


# The provenance key of what an OpenAPI tool's document lost, one line per operation or component
# (see _from_openapi).
LEFT_OUT = "left_out"


class MalformedTool(ToolfactoryError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


_TYPE_NAMES = {
    "dict": "object", "object": "object", "float": "number", "double": "number", "number": "number",
    "int": "integer", "integer": "integer", "long": "integer", "str": "string", "string": "string",
    "bool": "boolean", "boolean": "boolean", "list": "array", "array": "array", "tuple": "array",
    "null": "null",
}


def normalize_schema(schema: Any) -> Any:
    """The JSON Schema that function docs in the wild mean, recursively.

    * Python/BFCL type names (``dict``, ``float``, ``tuple``, ``any``, …) map to JSON Schema types;
    * an ``enum`` of scalars on an ``array`` (BFCL: "each item is one of") moves to ``items``: as
      written, JSON Schema would compare the whole list with each scalar and refuse every call;
    * a boolean ``required`` on a property (Swagger 2 / OpenAPI parameter style) moves to the
      parent's ``required`` list, where JSON Schema looks for it.
    """
    if isinstance(schema, list):
        return [normalize_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    # `properties` is a map of schemas, normalized below (once: normalizing it here too would
    # double the work at every level).
    out = {key: value if key == "properties" else normalize_schema(value) for key, value in schema.items()}
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {k: normalize_schema(v) for k, v in properties.items()}
        flagged = [k for k, v in out["properties"].items() if isinstance(v, dict) and isinstance(v.get("required"), bool)]
        if flagged:
            listed = out.get("required") if isinstance(out.get("required"), list) else []
            wanted = [k for k in flagged if out["properties"][k]["required"]]
            out["properties"] = {k: ({key: val for key, val in v.items() if key != "required"} if k in flagged else v)
                                 for k, v in out["properties"].items()}
            out["required"] = [*listed, *(k for k in wanted if k not in listed)]
            if not out["required"]:
                out.pop("required")
    kind = schema.get("type")
    if kind == "any":
        out.pop("type")
    elif isinstance(kind, str) and kind.lower() in _TYPE_NAMES:
        out["type"] = _TYPE_NAMES[kind.lower()]
    enum = out.get("enum")
    if out.get("type") == "array" and isinstance(enum, list) and enum and not any(isinstance(v, list) for v in enum):
        items = dict(out["items"]) if isinstance(out.get("items"), dict) else {}
        items.setdefault("enum", enum)
        out["items"] = items
        out.pop("enum")
    return out


def function_name(text: str, limit: int = 64) -> str:
    """An OpenAI-valid function name (``[A-Za-z0-9_-]``, at most 64 characters, the end kept)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", text.strip()).strip("_")
    return name[-limit:] or "function"


def _from_catalog(raw: Any) -> list[Tool]:
    return [Tool.model_validate({**raw, "source": raw.get("source", "catalog")})]


def _from_openai(raw: Any) -> list[Tool]:
    spec = raw.get("function", raw) if isinstance(raw, dict) else None
    if not isinstance(spec, dict) or "name" not in spec:
        raise MalformedTool("tool_malformed", "an OpenAI tool needs a function with a name")
    fn = Function(
        name=spec["name"],
        description=spec.get("description", ""),
        parameters=normalize_schema(spec.get("parameters") or {"type": "object", "properties": {}}),
    )
    return [Tool(name=spec["name"], description=fn.description, source="openai", functions=[fn])]


_RAPIDAPI_TYPES = {"STRING": "string", "NUMBER": "number", "BOOLEAN": "boolean", "ARRAY": "array",
                   "OBJECT": "object", "ENUM": "string", "DATE (YYYY-MM-DD)": "string", "TIME (24-hour HH:MM)": "string",
                   "GEOPOINT (latitude, longitude)": "string", "CREDENTIALS": "string", "FILE": "string"}


def _rapidapi_parameter(param: dict[str, Any]) -> dict[str, Any]:
    kind = str(param.get("type", "STRING")).upper()
    schema: dict[str, Any] = {"type": _RAPIDAPI_TYPES.get(kind, "string")}
    if kind.startswith("DATE"):
        schema["format"] = "date"
    if param.get("description"):
        schema["description"] = str(param["description"]).strip()
    if param.get("default") not in (None, ""):
        schema["description"] = f"{schema.get('description', '')} (e.g. {param['default']})".strip()
    return schema


# ToolBench response examples name the Python type of each value; "empty list" stands for [].
_EXAMPLE_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
                  "dict": "object", "empty list": "array"}


def example_schema(example: Any) -> dict[str, Any]:
    """The JSON Schema of a ToolBench response example (nested dicts and lists of type names)."""
    if isinstance(example, dict):
        return {"type": "object", "properties": {str(key): example_schema(value) for key, value in example.items()}}
    if isinstance(example, list):
        return {"type": "array", "items": example_schema(example[0])} if example else {"type": "array"}
    if isinstance(example, str) and example in _EXAMPLE_TYPES:
        return {"type": _EXAMPLE_TYPES[example]}
    return {}


def _returns_by_api(examples: Any) -> dict[str, dict[str, Any]]:
    """`returns` schemas from a tool's response examples (see sources.py), by API name as in
    function names, so that an example matches the function made of the same API."""
    out: dict[str, dict[str, Any]] = {}
    for name, example in (examples if isinstance(examples, dict) else {}).items():
        schema = example_schema(example) if example else {}
        if schema:  # an empty or unknown example says nothing: the default `returns` stays
            out[function_name(str(name)).lower()] = schema
    return out


def _toolbench_collections(raw: dict[str, Any]) -> list[str]:
    """The RapidAPI collections a ToolBench entry names (``collection_name``, ``collection`` or
    ``collections``, as crawls that kept them write them); tools without are clustered later."""
    found: list[str] = []
    for key in ("collection_name", "collection", "collections"):
        value = raw.get(key)
        for name in value if isinstance(value, list) else [value]:
            if isinstance(name, str) and name.strip() and name.strip() not in found:
                found.append(name.strip())
    return found


def _from_toolbench(raw: Any) -> list[Tool]:
    tool_name = raw.get("tool_name") or raw.get("name")
    if not tool_name:
        raise MalformedTool("tool_malformed", "a ToolBench tool needs tool_name")
    suffix = "_for_" + function_name(tool_name).lower()
    returns_by_api = _returns_by_api(raw.get("response_examples"))
    functions = []
    from_examples = False
    for api in raw.get("api_list", []):
        returns = returns_by_api.get(function_name(api.get("name", "")).lower())
        from_examples = from_examples or returns is not None
        required = api.get("required_parameters") or []
        optional = api.get("optional_parameters") or []
        properties = {p["name"]: _rapidapi_parameter(p) for p in [*required, *optional] if p.get("name")}
        functions.append(Function(
            name=function_name(function_name(api.get("name", "")).lower() + suffix),
            description=(api.get("description") or "").strip(),
            parameters={"type": "object", "properties": properties, "required": [p["name"] for p in required if p.get("name")]},
            returns=returns or {"type": "object"},
            method=api.get("method"),
            path=api.get("url"),
        ))
    category = raw.get("category_name") or raw.get("category") or "General"
    provenance: dict[str, Any] = {"standardized_name": raw.get("standardized_name", function_name(tool_name).lower())}
    if from_examples:
        provenance["returns_from"] = "response_examples"
    return [Tool(
        name=tool_name,
        description=(raw.get("tool_description") or "").strip(),
        category=category,
        domain_path=[category],
        collections=_toolbench_collections(raw),
        source="toolbench",
        provenance=provenance,
        functions=functions,
    )]


def _resolve_refs(node: Any, document: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
    if isinstance(node, list):
        return [_resolve_refs(item, document, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
        target: Any = document
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _resolve_refs(target, document, seen | {ref})
    return {key: _resolve_refs(value, document, seen) for key, value in node.items()}


def functions_from_openapi(document: dict[str, Any]) -> list[Function]:
    """Every operation of an OpenAPI 3 document as a function; request bodies become parameters."""
    doc = _resolve_refs(document, document)
    functions = []
    for path, operations in (doc.get("paths") or {}).items():
        for method, op in operations.items():
            if method.lower() not in {"get", "post", "put", "patch", "delete"} or not isinstance(op, dict):
                continue
            properties: dict[str, Any] = {}
            required: list[str] = []
            for param in op.get("parameters", []):
                schema = dict(param.get("schema") or {"type": "string"})
                if param.get("description"):
                    schema.setdefault("description", param["description"])
                properties[param["name"]] = schema
                if param.get("required"):
                    required.append(param["name"])
            body = (((op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema")
            if isinstance(body, dict):
                properties.update(body.get("properties") or {})
                required += [r for r in body.get("required", []) if r not in required]
            response = ((op.get("responses") or {}).get("200") or {}).get("content", {})
            returns = (response.get("application/json") or {}).get("schema") or {"type": "object"}
            functions.append(Function(
                name=function_name(op.get("operationId") or f"{method}_{path}"),
                description=(op.get("description") or op.get("summary") or "").strip(),
                parameters={"type": "object", "properties": properties, "required": required},
                returns=returns,
                method=method.upper(),
                path=path,
            ))
    return functions


_HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def _unresolvable(node: Any, document: dict[str, Any], seen: frozenset[str] = frozenset()) -> list[str]:
    """The local `$ref` s under `node`, followed through their targets, that point to nowhere."""
    if isinstance(node, list):
        return [ref for item in node for ref in _unresolvable(item, document, seen)]
    if not isinstance(node, dict):
        return []
    missing: list[str] = []
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and ref not in seen:
        found, target = pointer_target(document, ref)
        missing += _unresolvable(target, document, seen | {ref}) if found else [ref]
    for key, value in node.items():
        if key != "$ref":
            missing += _unresolvable(value, document, seen)
    return list(dict.fromkeys(missing))


def _without_unresolvable(document: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The document without the operations that use a `$ref` to nowhere (a document's other
    operations are still good tools) and without the components that do (none of the operations
    kept uses them, or it would have been taken out too), and one line per part taken out."""
    paths = document.get("paths")
    if not isinstance(paths, dict):
        return document, []
    kept: dict[str, Any] = {}
    skipped: list[str] = []
    for path, item in paths.items():
        if not isinstance(item, dict):
            kept[path] = item
            continue
        shared = _unresolvable({key: value for key, value in item.items() if key not in _HTTP_METHODS}, document)
        operations = {method: op for method, op in item.items() if method in _HTTP_METHODS}
        good = {}
        for method, op in operations.items():
            missing = shared + [ref for ref in _unresolvable(op, document) if ref not in shared]
            if missing:
                skipped.append(f"{method.upper()} {path}: unresolvable reference {', '.join(repr(r) for r in missing)}")
            else:
                good[method] = op
        if good or not operations:
            kept[path] = {key: value for key, value in item.items() if key not in _HTTP_METHODS or key in good}
    components: dict[str, Any] = {}
    given = document.get("components")
    for kind, entries in (given.items() if isinstance(given, dict) else ()):
        if not isinstance(entries, dict):
            components[kind] = entries
            continue
        components[kind] = {}
        for name, entry in entries.items():
            missing = _unresolvable(entry, document)
            if missing:
                skipped.append(f"components/{kind}/{name}: unresolvable reference {', '.join(repr(r) for r in missing)}")
            else:
                components[kind][name] = entry
    if not skipped:
        return document, []
    return {**document, "paths": kept, **({"components": components} if isinstance(given, dict) else {})}, skipped


def _from_openapi(raw: Any) -> list[Tool]:
    if not isinstance(raw, dict):
        raise MalformedTool("tool_openapi_invalid", "an OpenAPI document must be a mapping")
    # Imported for an OpenAPI document only: the validator takes half a second to import, and
    # the dataset readers that convert tool lists with this module never need it.
    from openapi_spec_validator import validate as validate_openapi
    from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

    document, skipped = _without_unresolvable(raw)
    if skipped and not any(isinstance(item, dict) and set(item) & set(_HTTP_METHODS)
                           for item in (document.get("paths") or {}).values()):
        operations = [line for line in skipped if not line.startswith("components/")]
        raise MalformedTool("tool_openapi_invalid", f"no operation left: {'; '.join(operations)}")
    try:
        validate_openapi(document)
    except OpenAPIValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise MalformedTool("tool_openapi_invalid", f"invalid OpenAPI at {where}: {exc.message}") from None
    info = document.get("info", {})
    category = str(info.get("x-category") or "General")
    return [Tool(
        name=str(info.get("title", "")),
        description=str(info.get("description", "")),
        category=category,
        domain_path=[category],
        link=str((document.get("servers") or [{}])[0].get("url", "")),
        source="openapi",
        # Kept with the tool, so that an import or a run can say what of the document it left out.
        provenance={LEFT_OUT: skipped} if skipped else {},
        functions=functions_from_openapi(document),
        openapi=document,
    )]


def _from_toolalpaca(raw: Any) -> list[Tool]:
    try:
        document = json.loads(raw["Documentation"]) if isinstance(raw.get("Documentation"), str) else raw.get("Documentation")
    except json.JSONDecodeError as exc:
        raise MalformedTool("tool_openapi_invalid", f"Documentation is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MalformedTool("tool_openapi_invalid", "Documentation must be an OpenAPI document")
    return [Tool(
        name=raw["Name"],
        description=raw.get("Description", ""),
        introduction=raw.get("Introduction", ""),
        link=raw.get("Link", ""),
        category=raw.get("Category", "General"),
        domain_path=[raw.get("Category", "General")],
        source="toolalpaca",
        functions=functions_from_openapi(document),
        openapi=document,
    )]


CONVERTERS: dict[str, Callable[[Any], list[Tool]]] = {
    "catalog": _from_catalog,
    "openai": _from_openai,
    "toolbench": _from_toolbench,
    "toolalpaca": _from_toolalpaca,
    "openapi": _from_openapi,
}


def convert(fmt: str, raw: Any) -> list[Tool]:
    try:
        return CONVERTERS[fmt](raw)
    except MalformedTool:
        raise
    except Unresolvable as exc:  # a `$ref` to nowhere rejects this tool, never its whole file or shard
        raise MalformedTool("tool_openapi_invalid", f"unresolvable reference {getattr(exc, 'ref', '')!r}") from None
    except (ValidationError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise MalformedTool("tool_malformed", f"{type(exc).__name__}: {exc}") from None
