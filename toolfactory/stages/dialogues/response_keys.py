"""Which keys of an API's responses matter: the per-API compression strategy of ToolLLM appendix A.2.

ToolLLM showed ChatGPT each API's documentation (tool name and description, API name and
description, parameters, a response example) with three in-context examples of an expert's
compression (a raw response and the keys worth keeping), and so obtained once per API the keys
its long responses keep. This module does the same through the `designer` role: the response
example is the function's `returns` schema (what ToolBench's own response examples are: the
shape of a response, with type names for values), and the answer is a list of key paths chosen
from those the schema documents (``results[].title``), so it can name no key that does not exist.
The request depends only on the function, so the gateway's cache makes it once per API.

:func:`restrict` turns the chosen paths into a `returns` schema that documents only them (and
their ancestors); :func:`toolfactory.stages.dialogues.compression.compress_response` then prunes
a long response by it, then cuts it to the budget, as A.2 does.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.errors import LLMFailure
from toolfactory.llm import LLMGateway
from toolfactory.models import Function, Tool
from toolfactory.stages.dialogues.compression import JsonSchema, documented

MAX_PATHS = 80  # key paths offered to the model; deeper or further ones are kept whole with their parent
MAX_DEPTH = 4

PROMPT = """\
An API's responses are too long for a language model's context. Decide which keys of its
responses are important for answering users' requests with this API, and which are noise that
can be removed (internal ids, tracking data, links to images, formatting, repeated metadata).
Keep every key that carries the information the API exists to provide.

Examples:
{examples}

The API:
Tool: {tool}
Tool description: {tool_description}
API: {name}
API description: {description}
Parameters: {parameters}
Response example: {example}
Keys you may keep: {paths}"""

# Three in-context examples, as in A.2: a raw response and the keys an expert keeps.
EXAMPLES = [
    ({"status": "ok", "request_id": "f2a9c", "data": [{"id": 9931, "title": "Inception", "year": 2010, "rating": 8.8,
                                                      "poster_url": "https://img.example.com/p/9931.jpg", "tracking": {"src": "search"}}]},
     ["data[].title", "data[].year", "data[].rating"]),
    ({"meta": {"page": 1, "per_page": 20, "cache": "HIT"}, "city": "Lisbon", "current": {"temp_c": 21.5, "condition": "Sunny",
                                                                                          "icon": "//cdn.example.com/113.png", "wind_kph": 11.2}},
     ["city", "current.temp_c", "current.condition", "current.wind_kph"]),
    ({"success": True, "result": {"from": "EUR", "to": "JPY", "amount": 100, "value": 16234.5,
                                  "timestamp": 1700000000, "provider_debug": "node-7"}},
     ["result.from", "result.to", "result.amount", "result.value"]),
]


def key_paths(schema: JsonSchema, root: JsonSchema | None = None, prefix: str = "", depth: int = 0) -> list[str]:
    """The key paths a `returns` schema documents: ``a``, ``a.b``, ``items[].name``, in schema order."""
    root = schema if root is None else root
    node = documented(schema, root)
    paths: list[str] = []
    if depth > MAX_DEPTH:
        return paths
    properties = node.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            path = f"{prefix}.{name}" if prefix else str(name)
            paths.append(path)
            paths += key_paths(sub, root, path, depth + 1)
    elif node.get("type") == "array" or "items" in node:
        items = node.get("items")
        if isinstance(items, dict):
            paths += key_paths(items, root, f"{prefix}[]", depth + 1)
    return paths


def restrict(schema: JsonSchema, keep: list[str] | set[str]) -> JsonSchema:
    """`schema` documenting only the paths in `keep`, their ancestors and everything below them.

    The root's `$defs` / `definitions` are carried over, so a kept subtree's `$ref`s still resolve.
    """
    wanted = set(keep)
    restricted = _restrict(schema, schema, wanted, "")
    for key in ("$defs", "definitions"):
        if key in schema:
            restricted[key] = schema[key]
    return restricted


def _restrict(schema: Any, root: JsonSchema, keep: set[str], prefix: str) -> JsonSchema:
    node = documented(schema, root)
    properties = node.get("properties")
    if isinstance(properties, dict):
        kept: dict[str, Any] = {}
        for name, sub in properties.items():
            path = f"{prefix}.{name}" if prefix else str(name)
            if path in keep:
                kept[name] = sub
            elif any(k.startswith(path + ".") or k.startswith(path + "[]") for k in keep):
                kept[name] = _restrict(sub, root, keep, path)
        return {"type": "object", "properties": kept}
    items = node.get("items")
    if isinstance(items, dict):
        return {"type": "array", "items": _restrict(items, root, keep, f"{prefix}[]")}
    return node


def _example_text(response: Any, keep: list[str]) -> str:
    return f"Response: {json.dumps(response)}\nKeys to keep: {json.dumps(keep)}"


async def important_keys(function: Function, tool: Tool | None, gateway: LLMGateway) -> list[str] | None:
    """The key paths of `function`'s responses worth keeping, chosen by the `designer` model; None
    when its `returns` schema documents no key (nothing to choose) or no valid answer came."""
    paths = key_paths(function.returns)[:MAX_PATHS]
    if not paths:
        return None
    prompt = PROMPT.format(
        examples="\n\n".join(_example_text(response, keep) for response, keep in EXAMPLES),
        tool=tool.name if tool else "", tool_description=tool.description if tool else "",
        name=function.name, description=function.description,
        parameters=json.dumps(function.parameters, ensure_ascii=False),
        example=json.dumps(function.returns, ensure_ascii=False)[:4000], paths=json.dumps(paths),
    )
    schema = {
        "type": "object",
        "properties": {"keep": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": paths}}},
        "required": ["keep"],
    }
    try:
        answer = await gateway.structured("designer", [{"role": "user", "content": prompt}], schema, name="response_keys")
    except LLMFailure as exc:
        if exc.transient:
            raise
        return None
    return [str(path) for path in answer["keep"]]
