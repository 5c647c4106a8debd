"""Tool-response compression before the assistant sees a response (ToolLLM appendix A.2).

ToolLLM had ChatGPT decide once per API which keys of its responses matter; at inference, a
response longer than 1,024 tokens loses the other keys, and if it is still too long only its
first 1,024 tokens are kept. Our functions carry a `returns` schema, which plays the part of that
per-API decision: the keys it documents are the ones that matter, and a key it does not declare
is the kind of noise ToolLLM removed. Responses within the budget are passed on untouched.

Tokens are estimated as ``ceil(characters / 4)`` (:data:`CHARS_PER_TOKEN`), OpenAI's rule of thumb
for English text, instead of a real tokenizer: tiktoken downloads its vocabulary on first use,
which is impossible offline, and a count that depends on the machine would make the cut (and so
the records) differ between machines. The cut to the budget is therefore at ``4 × budget``
characters.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from toolfactory.definitions.pointer import pointer_target

JsonSchema = dict[str, Any]

CHARS_PER_TOKEN = 4
DEFAULT_BUDGET_TOKENS = 1024
_MAX_REF_DEPTH = 32  # recursive `$ref`s are followed this deep at most

_MISSING = object()


@dataclass(frozen=True)
class Compression:
    """A response as the assistant will see it, and what compression did to it."""

    text: str
    original_tokens: int
    kept_tokens: int
    pruned: bool  # keys the `returns` schema does not document were removed
    truncated: bool  # the text was cut to the budget

    @property
    def compressed(self) -> bool:
        return self.pruned or self.truncated

    def metadata(self) -> dict[str, Any]:
        """A JSON-ready note for the record (only worth storing when `compressed`)."""
        return {
            "original_tokens": self.original_tokens,
            "kept_tokens": self.kept_tokens,
            "pruned": self.pruned,
            "truncated": self.truncated,
        }


def estimate_tokens(text: str) -> int:
    """Approximate token count: one token per four characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def compress_response(
    response: Any, returns: JsonSchema, *, budget_tokens: int = DEFAULT_BUDGET_TOKENS, within: str | None = None
) -> Compression:
    """`response` (JSON text or a JSON value) cut down to `budget_tokens`, as A.2 does.

    `within` names the key of an envelope object that holds the API's response (the dialogues
    stage sends ``{"status_code": 200, "response": ...}``): only that value is pruned by
    `returns`, the envelope's other keys are kept, and the budget applies to the whole text.
    """
    if budget_tokens < 1:
        raise ValueError(f"budget_tokens must be at least 1, got {budget_tokens}")
    text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    original = estimate_tokens(text)
    if original <= budget_tokens:
        return Compression(text, original, original, pruned=False, truncated=False)
    value = _parse(text) if isinstance(response, str) else response
    pruned = False
    if value is not _MISSING:
        if within is not None and isinstance(value, dict) and within in value:
            kept = {**value, within: keep_documented(value[within], returns)}
        else:
            kept = keep_documented(value, returns)
        if kept != value:
            text, pruned = json.dumps(kept, ensure_ascii=False), True
    truncated = estimate_tokens(text) > budget_tokens
    if truncated:
        text = text[: budget_tokens * CHARS_PER_TOKEN]
    return Compression(text, original, estimate_tokens(text), pruned=pruned, truncated=truncated)


def keep_documented(value: Any, schema: Any, root: Any = None) -> Any:
    """`value` with only the object keys `schema` documents, recursively (arrays included).

    An object schema without `properties` documents no particular key, so such objects are kept
    whole (a map whose `additionalProperties` is a schema keeps its keys and prunes its values).
    """
    root = schema if root is None else root
    documented = _documented(schema, root, 0)
    if isinstance(value, dict):
        properties = documented.get("properties")
        extra = documented.get("additionalProperties")
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(properties, dict) and key in properties:
                kept[key] = keep_documented(item, properties[key], root)
            elif isinstance(extra, dict):
                kept[key] = keep_documented(item, extra, root)
            elif not properties:
                kept[key] = item
        return kept
    if isinstance(value, list):
        prefix = documented.get("prefixItems") if isinstance(documented.get("prefixItems"), list) else []
        items = documented.get("items", {})
        return [
            keep_documented(item, prefix[i] if i < len(prefix) else items, root) for i, item in enumerate(value)
        ]
    return value


def documented(schema: Any, root: Any = None) -> JsonSchema:
    """`schema` with its local `$ref`s (against `root`) followed and its `allOf`/`anyOf`/`oneOf`
    properties merged: what it documents, as pruning reads it."""
    return _documented(schema, schema if root is None else root, 0)


def _documented(schema: Any, root: Any, depth: int) -> JsonSchema:
    """`schema` with local `$ref`s followed and the properties of `allOf`/`anyOf`/`oneOf`
    branches merged: a key any branch documents is documented."""
    if not isinstance(schema, dict) or depth > _MAX_REF_DEPTH:
        return {}
    if isinstance(schema.get("$ref"), str):
        schema = {**_pointer(root, schema["$ref"]), **{k: v for k, v in schema.items() if k != "$ref"}}
        return _documented(schema, root, depth + 1)
    merged = dict(schema)
    properties = dict(schema.get("properties") or {})
    for key in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            resolved = _documented(branch, root, depth + 1)
            for name, sub in (resolved.get("properties") or {}).items():
                properties[name] = {"anyOf": [properties[name], sub]} if name in properties else sub
            for inherited in ("items", "prefixItems", "additionalProperties"):
                if inherited in resolved and inherited not in merged:
                    merged[inherited] = resolved[inherited]
    if properties:
        merged["properties"] = properties
    return merged


def _pointer(root: Any, ref: str) -> JsonSchema:
    """The schema a local JSON pointer (``#/$defs/Item``) names, or {} if it names none."""
    found, node = pointer_target(root, ref)
    return node if found and isinstance(node, dict) else {}


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return _MISSING
