"""Embeddings of many texts through the gateway: de-duplicated, batched, unit length.

A run's records repeat the same function descriptions thousands of times, so each distinct text
is embedded once; batches keep every request well under the 2048 inputs OpenAI accepts and are
sent concurrently (the gateway bounds the concurrency and retries).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Iterable

import numpy as np

if TYPE_CHECKING:
    from toolfactory.llm import LLMGateway

EMBEDDING_BATCH = 128


async def embed_texts(
    gateway: LLMGateway, texts: Iterable[str], *, model: str, batch_size: int = EMBEDDING_BATCH
) -> dict[str, np.ndarray]:
    """Unit-length embedding of every distinct non-empty text (endpoints refuse empty inputs).

    A zero vector stays zero, so that it scores 0 against everything instead of NaN."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    distinct = list(dict.fromkeys(text for text in texts if text))
    batches = [distinct[start : start + batch_size] for start in range(0, len(distinct), batch_size)]
    answers = await asyncio.gather(*(gateway.embed(batch, model=model) for batch in batches))
    vectors = [vector for answer in answers for vector in answer]
    if len(vectors) != len(distinct):
        raise ValueError(f"the embedding endpoint returned {len(vectors)} vectors for {len(distinct)} texts")
    if not vectors:
        return {}
    matrix = np.asarray(vectors, dtype=float)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0.0, 1.0, norms)
    return dict(zip(distinct, matrix, strict=True))
