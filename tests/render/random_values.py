"""Seeded random JSON values, schemas and calls, built from the characters and keywords that
break naive layouts (quotes, markup, fences, line breaks, control characters, reserved names)."""

from __future__ import annotations

import random
from typing import Any

CHARACTERS = ["a", "Z", " ", "\n", "\r", "\t", '"', "'", "\\", "<", ">", "&", "`", "#", "*", "[", "]", "{", "}",
              "(", ")", ":", "=", "é", "🚀", "\x01", "\ufffe", "\u2028", "-", "_", ".", "$", "/", "0"]
KEYWORDS = ["type", "description", "properties", "required", "items", "enum", "default", "minimum", "maximum",
            "anyOf", "oneOf", "additionalProperties", "$ref", "format", "pattern", "const", "keyword", "name",
            "property", "schema", "encoding", "x-y", "xml:lang", "title", "not", "examples", "definitions",
            "patternProperties", "prefixItems", "minLength"]
MAPS = ("properties", "definitions", "patternProperties")
SINGLE = ("items", "not", "additionalProperties")
LISTS = ("anyOf", "oneOf", "prefixItems")


def text(rng: random.Random, longest: int = 8) -> str:
    return "".join(rng.choice(CHARACTERS) for _ in range(rng.randint(0, longest)))


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 7 if depth < 3 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randint(-10**20, 10**20)
    if kind == 3:
        return rng.choice([0.5, -1e-7, 1e300, -0.0, 3.0])
    if kind == 4:
        return text(rng)
    if kind == 5:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice([text(rng, 5), *KEYWORDS]): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(rng.randint(0, 6)):
        key = rng.choice([*KEYWORDS, text(rng, 4)])
        nested = depth < 3
        if key in MAPS and nested:
            out[key] = {text(rng, 5): schema(rng, depth + 1) if rng.random() < 0.8 else value(rng, 2) for _ in range(rng.randint(0, 3))}
        elif key in SINGLE and nested:
            out[key] = schema(rng, depth + 1) if rng.random() < 0.7 else value(rng, 2)
        elif key in LISTS and nested:
            out[key] = [schema(rng, depth + 1) if rng.random() < 0.8 else value(rng, 2) for _ in range(rng.randint(0, 3))]
        elif key == "required" and isinstance(out.get("properties"), dict):
            names = list(out["properties"])
            if rng.random() < 0.5:  # in property order: written as required="true" in XML
                out[key] = [n for n in names if rng.random() < 0.6]
            else:
                rng.shuffle(names)
                out[key] = names[: rng.randint(0, len(names))]
        else:
            out[key] = value(rng, 1)
    return out


def arguments(rng: random.Random) -> dict[str, Any]:
    drawn = value(rng)
    return drawn if isinstance(drawn, dict) else {text(rng, 4): drawn}
