"""A seeded corpus of xLAM-sized records for the verifier's speed figures.

Shaped like ``xlam-function-calling-60k``: each record offers 1 to 5 APIs (about 3 on average)
drawn from a pool of distinct APIs (the release draws 60,000 records from 3,673), each API with a
sentence of description and 1 to 5 parameters in APIGen's flat ``{param: {type, description,
default}}`` form with Python type names; ``answers`` holds 1 to 3 calls to offered APIs with
argument values drawn per record, so no two records are the same and only the APIs recur, as in
the release. ``tools`` and ``answers`` are JSON text, as released. A record is about 1.85 KB.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

VERBS = ["get", "search", "list", "fetch", "calculate", "convert", "lookup", "estimate", "validate", "find"]
NOUNS = ["weather", "stock_quote", "exchange_rate", "movie", "recipe", "flight", "hotel", "book", "song", "news",
         "holiday", "zip_code", "ip_address", "vehicle", "player_stats", "crypto_price", "air_quality", "timezone",
         "translation", "nutrition"]
PARAMS: list[tuple[str, str, Any]] = [  # (name, APIGen type, how a value is drawn)
    ("city", "str", lambda r: r.choice(["Lyon", "Oslo", "Lima", "Kyoto", "Austin", "Nairobi"])),
    ("symbol", "str", lambda r: r.choice(["AAPL", "MSFT", "TSLA", "NVDA", "IBM"])),
    ("query", "str", lambda r: f"term {r.randint(1, 10_000)}"),
    ("limit", "int, optional", lambda r: r.randint(1, 100)),
    ("page", "int, optional", lambda r: r.randint(1, 20)),
    ("year", "int", lambda r: r.randint(1950, 2026)),
    ("amount", "float", lambda r: round(r.uniform(1, 5_000), 2)),
    ("include_details", "bool, optional", lambda r: r.random() < 0.5),
    ("tags", "List[str]", lambda r: r.sample(["a", "b", "c", "d", "e"], r.randint(1, 3))),
    ("ids", "List[int]", lambda r: [r.randint(1, 999) for _ in range(r.randint(1, 4))]),
    ("language", "str, optional", lambda r: r.choice(["en", "fr", "es", "de"])),
    ("date", "str", lambda r: f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"),
    ("max_results", "Optional[int]", lambda r: r.randint(1, 50)),
]
DEFAULTS = {"int, optional": 10, "bool, optional": False, "str, optional": "en", "Optional[int]": None}


def api_spec(n: int, rng: random.Random, own_parameters: bool = False) -> dict[str, Any]:
    """API number `n`; with `own_parameters` its parameter descriptions name it (a schema of its own)."""
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    params = rng.sample(PARAMS, rng.randint(1, 5))
    suffix = f" (API {n})" if own_parameters else ""
    return {
        "name": f"{verb}_{noun}_v{n}",
        "description": f"{verb.capitalize()} {noun.replace('_', ' ')} data from the provider's catalogue, "
                       f"with optional paging and filters (API {n}).",
        "parameters": {
            name: {"description": f"The {name.replace('_', ' ')} to use, e.g. one the user named.{suffix}", "type": kind,
                   **({"default": DEFAULTS[kind]} if kind in DEFAULTS else {})}
            for name, kind, _ in params
        },
    }


def api_pool(size: int, rng: random.Random) -> list[dict[str, Any]]:
    return [api_spec(n, rng) for n in range(size)]


def records(n: int, seed: int = 0, apis: int | None = 1000) -> list[dict[str, Any]]:
    """`n` records offering APIs drawn from a pool of `apis`; None: every API offered is a new one."""
    rng = random.Random(seed)
    pool = api_pool(apis, rng) if apis is not None else []
    draw = {name: value for name, _, value in PARAMS}
    out = []
    fresh = 0
    for i in range(n):
        size = rng.choice([1, 2, 2, 3, 3, 3, 4, 4, 5])
        if apis is not None:
            offered = rng.sample(pool, size)
        else:
            offered = [api_spec(fresh + k, rng, own_parameters=True) for k in range(size)]
            fresh += size
        calls = []
        for api in rng.sample(offered, min(len(offered), rng.choice([1, 1, 2, 2, 3]))):
            arguments = {name: draw[name](rng) for name, spec in api["parameters"].items()
                         if "default" not in spec or rng.random() < 0.4}
            calls.append({"name": api["name"], "arguments": arguments})
        query = (f"Request {i}: please " + " and then ".join(
            f"{c['name'].split('_')[0]} {', '.join(f'{k} {v}' for k, v in c['arguments'].items())}" for c in calls) + ".")
        out.append({"id": i, "query": query, "tools": json.dumps(offered), "answers": json.dumps(calls)})
    return out


def write(path: Path, n: int, seed: int = 0, apis: int | None = 1000) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records(n, seed, apis)), encoding="utf-8")
    return path
