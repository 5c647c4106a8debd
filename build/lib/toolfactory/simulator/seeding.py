"""Determinism: every random choice comes from a hash of the request, never global state.

The same request body (and the same simulator seed) therefore yields the same answer on any
machine, in any process, in any order - which is what makes the simulator usable as a test
double and makes generated data reproducible.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, the basis of every request hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_hash(body: Any, seed: int = 0) -> str:
    """Hex sha256 of the simulator seed and the canonical JSON of a request body."""
    return hashlib.sha256(f"{seed}\x1f{canonical_json(body)}".encode()).hexdigest()


def sub_hash(base: str, *salts: object) -> str:
    """A hash derived from `base` and any salts (e.g. a purpose name and an attempt number)."""
    text = "\x1f".join([base, *(str(salt) for salt in salts)])
    return hashlib.sha256(text.encode()).hexdigest()


def derive_rng(base: str, *salts: object) -> random.Random:
    """An independent `random.Random` for one purpose of one request."""
    return random.Random(int(sub_hash(base, *salts)[:32], 16))


def unit_draw(base: str, *salts: object) -> float:
    """A uniform number in [0, 1) fixed by `base` and the salts."""
    return int(sub_hash(base, *salts)[:13], 16) / float(16**13)
