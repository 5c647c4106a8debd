"""Calls: every format gives back the names and argument values it was given, on hand-written hard
cases and on the papers' released calls; malformed text is a CallFormatError with a reason."""

from __future__ import annotations

import ast
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from toolfactory.formats.toolbench import from_train_messages, load as load_toolbench
from toolfactory.models import ToolCall
from toolfactory.render import (
    CALL_FORMATS,
    TEXT_CALL_FORMATS,
    CallFormatError,
    ParsedCall,
    RenderError,
    parse_calls,
    parse_turn,
    render_calls,
    render_turn,
)

from .cases import CALL_TURNS, call


def expected(calls: list[ToolCall]) -> list[tuple[str, Any]]:
    """What any format must give back: the names and the arguments as JSON values."""
    return [(c.name, json.loads(c.arguments or "{}")) for c in calls]


def got(parsed: list[ParsedCall]) -> list[tuple[str, Any]]:
    return [(p.name, p.arguments) for p in parsed]


@pytest.fixture(scope="module")
def golden_steps(shared_data: Path) -> list[ToolCall]:
    """Every step of ToolAlpaca's golden answers, as the file has it."""
    tools = json.loads((shared_data / "toolalpaca/eval_simulated.json").read_text())
    steps = [call(step["Action"], step["Action_Input"], f"call_{n}")
             for tool in tools for answer in tool["Golden_Answers"] for n, step in enumerate(answer)]
    assert len(steps) == 154
    return steps


@pytest.fixture(scope="module")
def toolbench_turns(shared_data: Path) -> list[list[ToolCall]]:
    """The calls of every assistant turn of ToolBench's released winning paths."""
    turns = []
    for name, answer, tools in load_toolbench(shared_data):
        d = from_train_messages(answer, tools, name)
        turns += [m.tool_calls for m in (d.messages if d else []) if m.tool_calls]
    assert len(turns) >= 10
    return turns


def is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", CALL_FORMATS)
@pytest.mark.parametrize("case", CALL_TURNS)
def test_hard_cases_round_trip(fmt: str, case: str) -> None:
    calls = CALL_TURNS[case]
    assert got(parse_calls(render_calls(calls, fmt), fmt)) == expected(calls)


@pytest.mark.parametrize("fmt", TEXT_CALL_FORMATS)
@pytest.mark.parametrize("content", [None, "Let me check.", "Two lines,\nthen calls.\n", "[a list in the text](link)\n[1, 2]", " "])
def test_turn_text_and_calls_round_trip(fmt: str, content: str | None) -> None:
    for case, calls in CALL_TURNS.items():
        text = render_turn(content, calls, fmt)
        assert parse_turn(text, fmt) == (content, [ParsedCall(*pair) for pair in expected(calls)]), case


@pytest.mark.parametrize("fmt", TEXT_CALL_FORMATS)
def test_a_turn_without_calls_is_all_text(fmt: str) -> None:
    answer = "It is sunny.\n[see the forecast](https://example.com)\n{\"temp\": 21}"
    assert render_turn(answer, [], fmt) == answer
    assert parse_turn(answer, fmt) == (answer, [])


@pytest.mark.parametrize("fmt", CALL_FORMATS)
def test_released_toolalpaca_calls_round_trip_or_say_why(fmt: str, golden_steps: list[ToolCall]) -> None:
    round_trips = refused = 0
    for step in golden_steps:
        writable = is_json_object(step.arguments) and (fmt != "python" or step.name.isidentifier())
        if fmt == "openai":  # structured calls carry any argument text; reading it back needs JSON
            rendered = render_calls([step], fmt)
            assert rendered[0]["function"]["arguments"] == step.arguments
            if not writable:
                with pytest.raises(CallFormatError, match="arguments is not JSON"):
                    parse_calls(rendered, fmt)
                refused += 1
                continue
        elif not writable:
            with pytest.raises(CallFormatError, match="not JSON|not a Python identifier"):
                render_calls([step], fmt)
            refused += 1
            continue
        assert got(parse_calls(render_calls([step], fmt), fmt)) == expected([step])
        round_trips += 1
    # 32 golden inputs are templates such as {"animeId": ${animeId from searchAnime}}; python also
    # cannot name ToolAlpaca's "[Optional]updateUserProfile".
    assert (round_trips, refused) == ((121, 33) if fmt == "python" else (122, 32))


@pytest.mark.parametrize("fmt", CALL_FORMATS)
def test_released_toolbench_calls_round_trip(fmt: str, toolbench_turns: list[list[ToolCall]]) -> None:
    for calls in toolbench_turns:
        assert got(parse_calls(render_calls(calls, fmt), fmt)) == expected(calls)
    everything = [c for calls in toolbench_turns for c in calls]  # all of them as one parallel turn
    assert got(parse_calls(render_calls(everything, fmt), fmt)) == expected(everything)


# -- what each format looks like -------------------------------------------------------------

PAIR = [call("get_weather", {"city": "Paris", "days": 3}, "call_1"), call("f2", {"a": 1}, "call_2")]


def test_python_is_toolace_call_syntax() -> None:
    text = render_calls(PAIR, "python")
    assert text == '[get_weather(city="Paris", days=3), f2(a=1)]'
    assert render_calls(CALL_TURNS["numbers"], "python") == (
        "[calc(int=-42, big=12345678901234567890, float=3.14, exp=1e-07, neg_zero=-0.0, true=True, false=False, "
        "null=None, list=[1, 2.5, -3])]"
    )
    # Arguments that are not identifiers go through one ** mapping, which keeps their order.
    assert render_calls(CALL_TURNS["keyword names"], "python") == (
        '[convert(**{"from": "EUR", "to": "USD", "class": "A", "my-key": 1, "": "empty key"})]'
    )
    tree = ast.parse(render_calls(CALL_TURNS["strings"], "python"), mode="eval")
    assert isinstance(tree.body, ast.List) and isinstance(tree.body.elts[0], ast.Call)


def test_json_react_xml_and_openai_layouts() -> None:
    assert render_calls(PAIR, "json") == '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, {"name": "f2", "arguments": {"a": 1}}]'
    assert render_calls(PAIR, "react") == (
        'Action: get_weather\nAction Input: {"city": "Paris", "days": 3}\nAction: f2\nAction Input: {"a": 1}'
    )
    assert render_turn("I need the forecast.", PAIR[:1], "react") == (
        'Thought: I need the forecast.\nAction: get_weather\nAction Input: {"city": "Paris", "days": 3}'
    )
    xml = render_calls(PAIR[:1], "xml")
    assert xml == '<tool_call>\n  <name>get_weather</name>\n  <arguments>{"city": "Paris", "days": 3}</arguments>\n</tool_call>'
    assert ET.fromstring(render_calls(CALL_TURNS["strings"], "xml")).findtext("name") == "say"
    assert render_calls(PAIR, "openai") == [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}},
        {"id": "call_2", "type": "function", "function": {"name": "f2", "arguments": '{"a": 1}'}},
    ]


# -- what cannot be written or read ----------------------------------------------------------


@pytest.mark.parametrize(("fmt", "calls", "reason"), [
    ("python", [call("get weather", {})], "not a Python identifier"),
    ("python", [call("f", '{"x": 1e400}')], "not a finite number"),
    ("react", [call("two\nlines", {})], "must be one line"),
    ("xml", [call("bell\x07", {})], "XML text cannot hold"),
    ("json", [call("f", "[1, 2]")], "must be a JSON object, not an array"),
    ("json", [call("f", '{"a": ${a from g}}')], "is not JSON"),
])
def test_calls_a_format_cannot_write_say_why(fmt: str, calls: list[ToolCall], reason: str) -> None:
    with pytest.raises(CallFormatError, match=reason.replace("(", r"\(")):
        render_calls(calls, fmt)


@pytest.mark.parametrize(("fmt", "content", "reason"), [
    ("react", "I will call it.\nAction: other", "line starting with 'Action'"),
    ("react", "Fine.\nObservation: none", "line starting with 'Observation'"),
    ("xml", "Calling <tool_call> now", "contains <tool_call>"),
])
def test_turn_text_that_would_read_as_a_call_is_refused(fmt: str, content: str, reason: str) -> None:
    with pytest.raises(CallFormatError, match=reason):
        render_turn(content, PAIR, fmt)


MALFORMED = [
    ("openai", {"id": "x"}, "must be a list"),
    ("openai", [{"id": "x", "type": "function"}], "needs a 'function' object"),
    ("openai", [{"function": {"arguments": "{}"}}], "non-empty string 'name'"),
    ("openai", [{"function": {"name": "f", "arguments": "{'a': 1}"}}], "arguments is not JSON"),
    ("openai", [{"function": {"name": "f", "arguments": 3}}], "must be a JSON string"),
    ("openai", "[{]", "tool_calls text is not JSON"),
    ("json", '[{"name": "f", "arguments": {"a": 1}]', "not JSON"),
    ("json", '[{"name": "f"}]', "has no 'arguments'"),
    ("json", '[{"name": "f", "argument": {}}]', "unexpected key(s) 'argument'"),
    ("json", '[{"name": "", "arguments": {}}]', "non-empty string 'name'"),
    ("json", '[{"name": "f", "arguments": "a=1"}]', "arguments must be an object, not a string"),
    ("json", '[["f", {}]]', "call 0 must be an object"),
    ("json", '[{"name": "f", "arguments": {"x": NaN}}]', "NaN is not a JSON number"),
    ("python", "[f(a=1)", "not a Python call list"),
    ("python", "[f(1)]", "positional argument (1)"),
    ("python", "[f(a=x)]", "argument 'a' is not a literal value: x"),
    ("python", "[f(a=1 + len(b))]", "not a literal value"),
    ("python", "[f(a=(1, 2))]", "tuple at the top is not a JSON value (use a list)"),
    ("python", "[f(a={1, 2})]", "set at the top is not a JSON value"),
    ("python", "[f(a={1: 2})]", "key 1 at the top is not a string"),
    ("python", "[f(a=1, **{'a': 2})]", "argument 'a' is given twice"),
    ("python", "[f(**['a'])]", "** must be followed by a dict"),
    ("python", "[f(a=1), 'g']", "item 1 is not a call"),
    ("python", "[f()(a=1)]", "callee must be a function name"),
    ("python", "{'name': 'f'}", "expected a list of calls"),
    ("python", "[f(a=\x00)]", "not a Python call list"),
    ("react", "Action: f", "has no 'Action Input:' line"),
    ("react", "Action:\nAction Input: {}", "without a function name"),
    ("react", "Action: f\nAction Input: {\"a\": }", "Action Input is not JSON"),
    ("react", "Action: f\nAction Input: [1]", "must be a JSON object, not an array"),
    ("react", "Action: f\nAction Input: {}\nObservation: 42", "results come in tool messages"),
    ("react", "I would call f with a=1.", "expected 'Action: <name>'"),
    ("react", "Thought: thinking only", "a Thought without an 'Action:' line"),
    ("react", "Action Input: {}", "line 1: expected 'Action:', found 'Action Input:'"),
    ("xml", "<tool_call><name>f</name><arguments>{}</arguments>", "an unclosed <tool_call>"),
    ("xml", "<tool_call><name>f</name><arguments>{}</argument></tool_call>", "not well-formed XML"),
    ("xml", "<tool_call><arguments>{}</arguments></tool_call>", "has no <name>"),
    ("xml", "<tool_call><name>f</name></tool_call>", "no <arguments>"),
    ("xml", "<tool_call><name>f</name><arguments>{a: 1}</arguments></tool_call>", "<arguments> is not JSON"),
    ("xml", "<tool_call><name>f</name><args>{}</args></tool_call>", "found <name>, <args>"),
    ("xml", "<tool_call><name>f</name><arguments>{}</arguments></tool_call> and more", "text after the calls"),
    ("xml", "calling: <tool_call><name>f</name><arguments>{}</arguments></tool_call>", "text before the first <tool_call>: 'calling:'"),
]


@pytest.mark.parametrize(("fmt", "text", "reason"), MALFORMED)
def test_malformed_calls_say_why(fmt: str, text: Any, reason: str) -> None:
    with pytest.raises(CallFormatError) as caught:
        parse_calls(text, fmt)
    assert reason in str(caught.value) and caught.value.format == fmt


def test_malformed_calls_cover_every_format() -> None:
    assert {fmt for fmt, _, _ in MALFORMED} == set(CALL_FORMATS)


@pytest.mark.parametrize("fmt", TEXT_CALL_FORMATS)
def test_damaged_model_output_raises_only_call_format_errors(fmt: str) -> None:
    """Cut or scrambled renderings either parse or raise CallFormatError, never another error."""
    calls = [c for case in ("nested", "strings", "keyword names") for c in CALL_TURNS[case]]
    text = render_turn("Thinking it over.", calls, fmt)
    rng = random.Random(11)
    damaged = [text[:cut] for cut in range(0, len(text), 7)]
    for _ in range(300):
        at = rng.randrange(len(text))
        noise = rng.choice(['"', "'", "(", ")", "[", "]", "{", "}", "<", ">", "\n", ":", "=", "**", "\\", "Action: ", ""])
        damaged.append(text[:at] + noise + text[at + rng.randint(0, 3):])
    for broken in damaged:
        for parse in (lambda t: parse_calls(t, fmt), lambda t: parse_turn(t, fmt)):
            try:
                parse(broken)
            except CallFormatError:
                pass


def test_a_call_format_error_is_a_render_error_and_unknown_names_are_not() -> None:
    assert issubclass(CallFormatError, RenderError) and issubclass(RenderError, ValueError)
    with pytest.raises(ValueError, match="formats: openai, json, python, react, xml") as caught:
        render_calls(PAIR, "yaml")
    assert not isinstance(caught.value, RenderError)
    with pytest.raises(ValueError, match="structured tool_calls, not text"):
        render_turn("x", PAIR, "openai")
