"""Deterministic embeddings with real-ish semantics: a signed hashed bag of words.

Each lower-case word is hashed (sha256, so the same on every machine and process) to one
bucket and a sign of +-1; a text's vector is the sum over its words, L2-normalised. Texts that
share words point in similar directions, so cosine similarity behaves sensibly for the
diversity and complexity metrics computed downstream, without any model weights. The vector
depends only on the text and the dimension (not on the model name or simulator seed).
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from functools import lru_cache
from typing import Any

from .errors import SimulatorError
from .settings import SimulatorSettings
from .text import estimate_tokens, lower_words

MAX_INPUTS = 2048
MAX_DIMENSIONS = 65536


@lru_cache(maxsize=65536)
def _bucket(word: str, dim: int) -> tuple[int, float]:
    digest = hashlib.sha256(word.encode()).digest()
    index = int.from_bytes(digest[:8], "big") % dim
    sign = 1.0 if digest[8] & 1 else -1.0
    return index, sign


def embed(text: str, dim: int) -> list[float]:
    """The unit-length hashed bag-of-words vector of `text` with `dim` components."""
    vector = [0.0] * dim
    tokens = lower_words(text) or [f"\x00{text}"]  # punctuation-only text still gets a vector
    for token in tokens:
        index, sign = _bucket(token, dim)
        vector[index] += sign
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:  # every word cancelled out: fall back to the whole text's own direction
        index, sign = _bucket(f"\x00{text}", dim)
        vector[index] = sign
        norm = 1.0
    return [x / norm for x in vector]


def encode_base64(vector: list[float]) -> str:
    """The vector as OpenAI's `encoding_format: base64` (little-endian float32) text."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def cosine(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two vectors (0 if either is zero)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _texts(raw: Any) -> list[str]:
    """The request's `input` as texts; token-id arrays become 'tok<id>' words."""

    def bad(message: str) -> SimulatorError:
        return SimulatorError(message, param="input", code="invalid_input")

    if isinstance(raw, str):
        items: list[Any] = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(x, int) for x in raw):
        items = [raw]
    elif isinstance(raw, list) and raw:
        items = raw
    else:
        raise bad("'input' must be a non-empty string or array.")
    if len(items) > MAX_INPUTS:
        raise bad(f"'input' may hold at most {MAX_INPUTS} items.")
    texts: list[str] = []
    for item in items:
        if isinstance(item, str) and item:
            texts.append(item)
        elif (
            isinstance(item, list)
            and item
            and all(isinstance(x, int) and not isinstance(x, bool) for x in item)
        ):
            texts.append(" ".join(f"tok{x}" for x in item))
        else:
            raise bad("Every 'input' item must be a non-empty string or array of token ids.")
    return texts


def create_embeddings(body: dict[str, Any], settings: SimulatorSettings) -> dict[str, Any]:
    """The OpenAI `list` of embeddings answering an /v1/embeddings request body."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise SimulatorError("You must provide a model parameter.", param="model")
    texts = _texts(body.get("input"))
    dim = body.get("dimensions")
    if dim is None:
        dim = settings.embedding_dim
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= MAX_DIMENSIONS:
        raise SimulatorError(
            f"'dimensions' must be an integer in 1..{MAX_DIMENSIONS}.", param="dimensions"
        )
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise SimulatorError(
            "'encoding_format' must be 'float' or 'base64'.", param="encoding_format"
        )
    data = []
    for index, text in enumerate(texts):
        vector = embed(text, dim)
        data.append(
            {
                "object": "embedding",
                "index": index,
                "embedding": encode_base64(vector) if encoding == "base64" else vector,
            }
        )
    tokens = sum(estimate_tokens(text) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
