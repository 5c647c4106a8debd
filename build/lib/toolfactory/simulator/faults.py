"""Injected failures: what goes wrong, when, and how a correct answer gets damaged.

Two families, decided differently on purpose:

* transport faults (429, 500, hang) model an unreliable service. They are drawn from the
  request hash *and the attempt number* (how often the server has seen that exact body), so a
  client that retries can get through, while a fixed sequence of requests still replays the
  same way;
* content faults (malformed JSON, hallucinated function, missing required argument, wrong
  argument type) model an imperfect model. They are drawn from the request hash alone, so the
  same request always gets the same (possibly broken) answer, like a model at temperature 0.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .schema_instance import is_valid_instance, json_type, matches_type
from .seeding import derive_rng, unit_draw
from .settings import SimulatorSettings
from .text import identifier_words


class TransportFault(StrEnum):
    """A failure of the request as a whole."""

    RATE_LIMIT = "429"
    SERVER_ERROR = "500"
    TIMEOUT = "timeout"


def transport_fault(
    settings: SimulatorSettings, request_hash: str, attempt: int
) -> TransportFault | None:
    """The fault (if any) for the `attempt`-th sighting (0-based) of this request.

    One uniform draw is split into consecutive bands of width rate_429, rate_500 and
    rate_timeout, so each rate is the fraction of attempts with that fault (while the rates
    sum to at most 1; beyond that the later bands are squeezed).
    """
    draw = unit_draw(request_hash, "transport", attempt)
    edge = 0.0
    for fault, rate in (
        (TransportFault.RATE_LIMIT, settings.rate_429),
        (TransportFault.SERVER_ERROR, settings.rate_500),
        (TransportFault.TIMEOUT, settings.rate_timeout),
    ):
        edge += rate
        if rate > 0 and draw < edge:
            return fault
    return None


def latency_seconds(settings: SimulatorSettings, request_hash: str, attempt: int) -> float:
    """Added latency for this attempt: mean +- uniform jitter, never negative."""
    if settings.latency_ms <= 0 and settings.latency_jitter_ms <= 0:
        return 0.0
    jitter = (2 * unit_draw(request_hash, "latency", attempt) - 1) * settings.latency_jitter_ms
    return max(0.0, settings.latency_ms + jitter) / 1000.0


@dataclass(frozen=True)
class ContentFaults:
    """Which content faults hit one choice of one request."""

    malformed_json: bool = False
    hallucinated_function: bool = False
    missing_required: bool = False
    wrong_type: bool = False


def content_faults(settings: SimulatorSettings, request_hash: str, choice: int) -> ContentFaults:
    """Content faults for choice `choice` of a request, fixed by the request hash alone."""

    def hit(kind: str, rate: float) -> bool:
        return rate > 0 and unit_draw(request_hash, "content", kind, choice) < rate

    return ContentFaults(
        malformed_json=hit("malformed_json", settings.rate_malformed_json),
        hallucinated_function=hit("hallucinated", settings.rate_hallucinated_function),
        missing_required=hit("missing_required", settings.rate_missing_required),
        wrong_type=hit("wrong_type", settings.rate_wrong_type),
    )


def fault_rng(request_hash: str, kind: str, choice: int) -> random.Random:
    """The random source used to shape one content fault."""
    return derive_rng(request_hash, "fault-shape", kind, choice)


def malform_json(text: str, rng: random.Random) -> str:
    """`text` (valid JSON) damaged so that `json.loads` fails, in a model-like way."""
    candidates = []
    stripped = text.rstrip()
    if len(stripped) > 2:
        cut = rng.randint(max(1, len(stripped) // 2), len(stripped) - 1)
        candidates.append(stripped[:cut])  # truncated mid-way, as if max_tokens hit
    candidates.append(stripped[:-1])  # lost the closing brace / bracket / quote
    if stripped.endswith("}") and len(stripped) > 2:
        candidates.append(stripped[:-1] + ",}")  # trailing comma
    if '"' in stripped:
        candidates.append(stripped.replace('"', "'"))  # Python-style quotes
    rng.shuffle(candidates)
    for candidate in [*candidates, stripped + "}", "{" + stripped]:
        try:
            json.loads(candidate)
        except ValueError:
            return candidate
    return text + " ```"  # unreachable for valid JSON input, kept as a safe fallback


def hallucinated_name(
    real_name: str, available: list[str], context_words: list[str], rng: random.Random
) -> str:
    """A plausible function name that is not among `available`."""
    stems = [w.lower() for w in context_words if w.isalpha() and len(w) > 2]
    head = identifier_words(real_name)
    options = [f"{real_name}_v2", f"{real_name}s", f"fetch_{'_'.join(head[1:]) or real_name}"]
    options += [f"get_{word}" for word in stems[:4]]
    options += [f"search_{word}" for word in stems[:2]]
    rng.shuffle(options)
    taken = set(available)
    for option in options:
        if option not in taken:
            return option
    serial = 2
    while f"{real_name}_v{serial}" in taken:
        serial += 1
    return f"{real_name}_v{serial}"


def drop_required(
    arguments: dict[str, Any], parameters: dict[str, Any], rng: random.Random
) -> bool:
    """Remove one required argument in place; False if the function requires none."""
    required = [key for key in parameters.get("required", []) if key in arguments]
    if not required:
        return False
    del arguments[rng.choice(required)]
    return True


def _allowed_types(schema: Any) -> set[str] | None:
    """The JSON types a property schema allows, if they can be told without resolution."""
    if not isinstance(schema, dict):
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared, "number"} if declared == "integer" else {declared}
    if isinstance(declared, list):
        return set(declared) | ({"number"} if "integer" in declared else set())
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(values, list) and values:
        return {json_type(v) for v in values} | (
            {"number"} if any(json_type(v) == "integer" for v in values) else set()
        )
    return None


def _wrong_value(value: Any, allowed: set[str] | None, rng: random.Random) -> Any:
    """A stand-in for `value` whose JSON type the property does not allow."""
    if isinstance(value, bool):
        options: list[Any] = [str(value).lower(), int(value)]
    elif isinstance(value, (int, float)):
        options = [str(value), [value]]
    elif isinstance(value, str):
        options = [len(value) or 42, rng.random() < 0.5, [value]]
    elif isinstance(value, list):
        options = [", ".join(map(str, value)) or "none", len(value)]
    elif isinstance(value, dict):
        options = [json.dumps(value), [value]]
    else:  # None
        options = ["null", 0]
    if allowed is None:
        return options[0]
    for option in options:
        if not any(matches_type(option, kind) for kind in allowed):
            return option
    for option in ("text", 7, True, None, [], {}):
        if not any(matches_type(option, kind) for kind in allowed):
            return option
    return options[0]


def wrong_type(arguments: dict[str, Any], parameters: dict[str, Any], rng: random.Random) -> bool:
    """Give one argument a value of a JSON type its schema rejects, in place.

    Prefers properties with a declared type; returns False if no change made the arguments
    invalid against `parameters`.
    """
    props = parameters.get("properties") or {}
    keys = list(arguments)
    rng.shuffle(keys)
    keys.sort(key=lambda key: _allowed_types(props.get(key)) is None)
    for key in keys:
        original = arguments[key]
        arguments[key] = _wrong_value(original, _allowed_types(props.get(key)), rng)
        if not is_valid_instance(parameters, arguments):
            return True
        arguments[key] = original
    return False
