"""Seeded random functions and calls: whatever a format agrees to write, it reads back unchanged."""

from __future__ import annotations

import json
import random

import pytest

from toolfactory.models import Function, ToolCall
from toolfactory.render import (
    CALL_FORMATS,
    PARSABLE_TOOL_FORMATS,
    TEXT_CALL_FORMATS,
    CallFormatError,
    ParsedCall,
    parse_calls,
    parse_tools,
    parse_turn,
    render_calls,
    render_tools,
    render_turn,
)

from . import random_values as rv

ROUNDS = 300


@pytest.mark.parametrize("fmt", PARSABLE_TOOL_FORMATS)
def test_random_functions_round_trip(fmt: str) -> None:
    rng = random.Random(f"tools-{fmt}")
    for _ in range(ROUNDS):
        fn = Function(
            name=rv.text(rng, 10) or "f",
            description=rv.text(rng, 30),
            parameters=rv.schema(rng),
            returns=rv.schema(rng) if rng.random() < 0.5 else {"type": "object"},
            method=rng.choice([None, "GET", rv.text(rng, 5)]),
            path=rng.choice([None, "/x/{id}", rv.text(rng, 8)]),
        )
        assert parse_tools(render_tools([fn, fn], fmt), fmt) == [fn, fn], fn


@pytest.mark.parametrize("fmt", CALL_FORMATS)
def test_random_calls_round_trip_or_are_refused_for_a_stated_reason(fmt: str) -> None:
    rng = random.Random(f"calls-{fmt}")
    written = 0
    for _ in range(ROUNDS):
        values = rv.arguments(rng)
        name = rng.choice(["f", "math.sqrt", rv.text(rng, 6) or "g"])
        calls = [ToolCall(id=f"c{i}", name=name, arguments=json.dumps(values)) for i in range(2)]
        try:
            rendered = render_calls(calls, fmt)
        except CallFormatError as exc:
            # Only names are ever refused: every JSON object argument can be written in every format.
            assert "name" in exc.reason, exc
            continue
        assert parse_calls(rendered, fmt) == [ParsedCall(name, values)] * 2
        written += 1
        if fmt in TEXT_CALL_FORMATS:
            content = rng.choice([None, rv.text(rng, 20)])
            try:
                turn = render_turn(content, calls, fmt)
            except CallFormatError as exc:
                assert "would read back as" in exc.reason, exc
                continue
            assert parse_turn(turn, fmt) == (content or None, [ParsedCall(name, values)] * 2)
    assert written >= ROUNDS // 4
