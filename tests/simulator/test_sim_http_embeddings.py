"""Embeddings over real HTTP: shape, normalisation, determinism, word-overlap semantics."""

from __future__ import annotations

import math

import openai
import pytest

from toolfactory.simulator.embeddings import cosine


def vectors(client: openai.OpenAI, texts: list[str], **kwargs: object) -> list[list[float]]:
    reply = client.embeddings.create(model="sim-embedding", input=texts, **kwargs)
    return [item.embedding for item in sorted(reply.data, key=lambda item: item.index)]


def test_one_vector_per_input_of_configured_dimension(client: openai.OpenAI) -> None:
    reply = client.embeddings.create(model="sim-embedding", input=["alpha", "beta", "gamma"])
    assert [item.index for item in reply.data] == [0, 1, 2]
    assert all(len(item.embedding) == 64 for item in reply.data)
    assert reply.model == "sim-embedding"
    assert reply.usage.prompt_tokens == reply.usage.total_tokens > 0


def test_single_string_input(client: openai.OpenAI) -> None:
    reply = client.embeddings.create(model="sim-embedding", input="just one text")
    assert len(reply.data) == 1


def test_vectors_are_unit_length(client: openai.OpenAI) -> None:
    for vector in vectors(client, ["the quick brown fox", "!!!", "a b c d e f g"]):
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)


def test_float_and_base64_encodings_agree(client: openai.OpenAI) -> None:
    as_base64 = vectors(client, ["solar panels on a roof"])[0]  # the client's default
    as_float = vectors(client, ["solar panels on a roof"], encoding_format="float")[0]
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(as_base64, as_float, strict=True))


def test_embeddings_are_deterministic(client: openai.OpenAI) -> None:
    assert vectors(client, ["reset my password"]) == vectors(client, ["reset my password"])


def test_dimensions_parameter_is_honoured(client: openai.OpenAI) -> None:
    assert len(vectors(client, ["short vector"], dimensions=16)[0]) == 16


def test_shared_words_mean_higher_cosine(client: openai.OpenAI) -> None:
    base, near, far = vectors(
        client,
        [
            "book a cheap flight to paris",
            "find a cheap flight to paris tomorrow",
            "recipe for chocolate chip cookies",
        ],
    )
    assert cosine(base, near) > 0.5
    assert cosine(base, near) > cosine(base, far) + 0.3


def test_empty_input_is_a_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="sim-embedding", input=[])
