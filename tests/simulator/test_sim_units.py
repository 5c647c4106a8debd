"""Pure-function pieces of the simulator: faults, seeding, embeddings, text, CLI."""

from __future__ import annotations

import json
import random

import pytest

from toolfactory.simulator import SimulatorSettings, settings_from_cli_args
from toolfactory.simulator.cli import settings_to_cli_args
from toolfactory.simulator.embeddings import cosine, embed
from toolfactory.simulator.faults import (
    TransportFault,
    hallucinated_name,
    latency_seconds,
    malform_json,
    transport_fault,
    wrong_type,
)
from toolfactory.simulator.seeding import request_hash
from toolfactory.simulator.text import identifier_words, topical_answer

PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "metric": {"type": "boolean"},
        "tags": {"type": "array"},
    },
    "required": ["city"],
}


def test_request_hash_ignores_key_order_but_not_content() -> None:
    assert request_hash({"a": 1, "b": [1, 2]}) == request_hash({"b": [1, 2], "a": 1})
    assert request_hash({"a": 1}) != request_hash({"a": 2})
    assert request_hash({"a": 1}, seed=0) != request_hash({"a": 1}, seed=1)


@pytest.mark.parametrize("text", ['{"a": 1, "b": [1, 2]}', "{}", '"word"', "[1, 2, 3]", "3"])
def test_malform_json_always_breaks_json(text: str) -> None:
    for seed in range(25):
        with pytest.raises(ValueError):
            json.loads(malform_json(text, random.Random(seed)))


def test_hallucinated_name_is_never_offered() -> None:
    offered = ["get_weather", "get_weather_v2", "get_paris", "fetch_weather"]
    for seed in range(25):
        name = hallucinated_name("get_weather", offered, ["Paris", "weather"], random.Random(seed))
        assert name not in offered and name


def test_wrong_type_changes_the_json_type() -> None:
    for seed in range(25):
        arguments = {"city": "Oslo", "days": 3, "metric": True, "tags": ["x"]}
        assert wrong_type(arguments, PARAMETERS, random.Random(seed))
        changed = [
            k
            for k, v in arguments.items()
            if type(v) is not type({"city": "", "days": 0, "metric": True, "tags": []}[k])
        ]
        assert len(changed) == 1


def test_transport_fault_bands_follow_rates() -> None:
    settings = SimulatorSettings(rate_429=0.2, rate_500=0.3, rate_timeout=0.1)
    faults = [transport_fault(settings, f"h{i}", 0) for i in range(4000)]
    share = {kind: faults.count(kind) / len(faults) for kind in [*TransportFault, None]}
    assert share[TransportFault.RATE_LIMIT] == pytest.approx(0.2, abs=0.03)
    assert share[TransportFault.SERVER_ERROR] == pytest.approx(0.3, abs=0.03)
    assert share[TransportFault.TIMEOUT] == pytest.approx(0.1, abs=0.03)
    assert share[None] == pytest.approx(0.4, abs=0.03)


def test_transport_fault_depends_on_attempt() -> None:
    settings = SimulatorSettings(rate_500=0.5)
    outcomes = {transport_fault(settings, "same-request", attempt) for attempt in range(20)}
    assert outcomes == {TransportFault.SERVER_ERROR, None}


def test_latency_stays_within_jitter() -> None:
    settings = SimulatorSettings(latency_ms=100, latency_jitter_ms=20)
    delays = [latency_seconds(settings, "r", attempt) for attempt in range(50)]
    assert all(0.08 <= delay <= 0.12 for delay in delays)
    assert len(set(delays)) > 1


def test_embedding_of_identical_texts_is_identical_and_unit() -> None:
    vector = embed("Hello hello world", 32)
    assert vector == embed("hello HELLO world", 32)
    assert sum(x * x for x in vector) == pytest.approx(1.0)
    assert cosine(vector, embed("world hello", 32)) > cosine(vector, embed("goodbye moon", 32))


def test_identifier_words_split_snake_and_camel_case() -> None:
    assert identifier_words("getWeather_forecastV2") == ["get", "weather", "forecast", "v2"]


def test_topical_answer_uses_prompt_words() -> None:
    answer = topical_answer("Compare electric bikes and scooters for commuting", random.Random(0))
    assert "electric" in answer.lower() or "bikes" in answer.lower()


def test_cli_args_round_trip_settings() -> None:
    settings = SimulatorSettings(latency_ms=12.5, rate_429=0.1, embedding_dim=8, seed=3)
    parsed, host, port = settings_from_cli_args(
        ["serve", "--host", "0.0.0.0", "--port", "9001", *settings_to_cli_args(settings)]
    )
    assert parsed == settings and host == "0.0.0.0" and port == 9001


def test_cli_has_one_flag_per_setting() -> None:
    every = SimulatorSettings(
        **{
            name: True if field.annotation is bool else 2 if field.annotation is int else 0.5
            for name, field in SimulatorSettings.model_fields.items()
            if name not in ("profile", "refused_schema_keywords", "choices")
        },
        profile="reasoning",
        refused_schema_keywords="contains,minItems",
        choices="first",
    )
    assert settings_from_cli_args(settings_to_cli_args(every))[0] == every


def test_cli_rejects_out_of_range_rate() -> None:
    with pytest.raises(SystemExit):
        settings_from_cli_args(["--rate-500", "1.5"])


def test_settings_forbid_unknown_fields() -> None:
    with pytest.raises(ValueError):
        SimulatorSettings(rate_502=0.1)  # type: ignore[call-arg]


def test_a_refused_schema_keyword_is_a_400_wherever_it_is_used() -> None:
    from toolfactory.simulator.profiles import refused_parameter

    settings = SimulatorSettings(refused_schema_keywords="contains, minItems")
    nested = {"type": "object", "properties": {"minItems": {"type": "array", "items": {"type": "string", "minItems": 1}}}}
    body = {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": nested}}}
    refused = refused_parameter(body, settings)
    assert refused is not None and refused.status == 400 and "'minItems'" in refused.message
    # A field merely named like the keyword is not the keyword; without a schema nothing is refused.
    named_only = {"type": "object", "properties": {"minItems": {"type": "integer"}}}
    assert refused_parameter({"response_format": {"type": "json_schema", "json_schema": {"schema": named_only}}}, settings) is None
    assert refused_parameter({"response_format": {"type": "json_object"}}, settings) is None
