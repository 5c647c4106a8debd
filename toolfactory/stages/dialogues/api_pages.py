"""Responses of a real API's size from the simulated tool executor (ToolLLM §2.3, appendix A.2).

ToolLLM's solution paths called real RapidAPI endpoints, whose list responses are full pages of
results (tens of items, many fields each); that is why A.2 compresses responses longer than
1,024 tokens. An LLM playing the API, left to itself, answers with a few items. For the toolllm
recipe the executor is therefore asked for full pages: each outermost list of the `returns`
schema gets ``minItems`` (within its own ``maxItems``) and the keys leading to it become required,
constraints every structured-output mode passes on to the model. The function's stored `returns` schema is unchanged.
"""

from __future__ import annotations

from typing import Any

from toolfactory.models import Function
from toolfactory.stages.dialogues.compression import JsonSchema, documented


def full_page(schema: JsonSchema, items: int) -> JsonSchema:
    """`schema` whose outermost arrays ask for at least `items` items (no change for `items` 0)."""
    if items <= 0:
        return schema
    paged = _paged(schema, schema, items, 0)
    for key in ("$defs", "definitions"):
        if key in schema and key not in paged:
            paged[key] = schema[key]
    return paged


def _paged(schema: Any, root: JsonSchema, items: int, depth: int) -> JsonSchema:
    node = documented(schema, root)
    if depth > 4 or not node:
        return node
    if node.get("type") == "array" or isinstance(node.get("items"), dict):
        maximum = node.get("maxItems")
        wanted = min(items, int(maximum)) if isinstance(maximum, int) else items
        return {**node, "minItems": max(int(node.get("minItems", 0)), wanted)}  # inner lists stay as they are
    properties = node.get("properties")
    if isinstance(properties, dict):
        paged = {name: _paged(sub, root, items, depth + 1) for name, sub in properties.items()}
        # A page is part of every answer: the keys that lead to a list become required.
        leading = [name for name in paged if paged[name] != documented(properties[name], root)]
        required = list(dict.fromkeys([*(node.get("required") or []), *leading]))
        return {**node, "properties": paged, **({"required": required} if required else {})}
    return node


def for_executor(function: Function, items: int) -> Function:
    """`function` as the executor is shown it: its `returns` asking for full pages."""
    if items <= 0:
        return function
    return function.model_copy(update={"returns": full_page(function.returns, items)})
