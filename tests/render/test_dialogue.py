"""Whole dialogues: every (description format, call format) pair reads back to the canonical
dialogue, and the system prompt declares the call format the way the verifier's rule reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.formats import toolalpaca
from toolfactory.formats.openai import messages_of
from toolfactory.formats.toolbench import from_train_messages, load as load_toolbench
from toolfactory.models import Dialogue, Function, Message
from toolfactory.render import (
    CALL_FORMATS,
    PARSABLE_TOOL_FORMATS,
    TEXT_CALL_FORMATS,
    TOOL_FORMATS,
    CallFormatError,
    call_format_statement,
    chat_messages,
    parse_calls,
    parse_dialogue,
    parse_system_prompt,
    render_dialogue,
    render_tools,
    system_prompt,
)
from toolfactory.stages.verify.rules import RULES, Sample, check
from toolfactory.stages.verify.rules.consistency import declared_format

from . import cases

RULE = RULES["sample_call_format_mismatch"]


@pytest.fixture(scope="module")
def toolbench_dialogues(shared_data: Path) -> list[Dialogue]:
    dialogues = [d for name, answer, tools in load_toolbench(shared_data) if (d := from_train_messages(answer, tools, name))]
    assert len(dialogues) == 4
    return dialogues


@pytest.fixture(scope="module")
def dialogues(toolbench_dialogues: list[Dialogue]) -> list[Dialogue]:
    return [cases.dialogue(), *toolbench_dialogues]


def canonical(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages with call ids renumbered in order of appearance and arguments parsed: what a
    rendering must preserve (text formats carry no ids; an empty text is no text)."""
    ids: dict[str, str] = {}
    out = []
    for m in messages:
        calls = None
        if m.tool_calls:
            calls = []
            for c in m.tool_calls:
                ids[c.id] = f"call_{len(ids) + 1}"
                calls.append((ids[c.id], c.name, _arguments(c.arguments)))
        out.append({"role": m.role, "content": m.content or None, "reasoning": m.reasoning, "calls": calls,
                    "tool_call_id": ids.get(m.tool_call_id or ""), "name": m.name})
    return out


def _arguments(text: str) -> Any:
    """Parsed arguments; text that is not JSON (openai carries it as is) stays text."""
    try:
        return json.loads(text or "{}")
    except json.JSONDecodeError:
        return ("not JSON", text)


def as_dialogue(messages: list[Message], tools: list[Function]) -> Dialogue:
    return Dialogue(id="rendered", task_id="t", tools=tools, messages=messages)


@pytest.mark.parametrize("call_format", CALL_FORMATS)
@pytest.mark.parametrize("tool_format", TOOL_FORMATS)
def test_dialogues_round_trip(tool_format: str, call_format: str, dialogues: list[Dialogue]) -> None:
    for d in dialogues:
        back = parse_dialogue(render_dialogue(d, tool_format, call_format), tool_format, call_format)
        assert canonical(back.messages) == canonical(d.messages), d.id
        assert back.functions == (d.tools if tool_format in PARSABLE_TOOL_FORMATS else None)


@pytest.mark.parametrize("call_format", TEXT_CALL_FORMATS)
def test_text_formats_write_calls_and_results_as_text(call_format: str) -> None:
    d = cases.dialogue()
    rendered = render_dialogue(d, "json", call_format)
    assert len(rendered) == len(d.messages)
    assert all(not m.tool_calls and not m.tool_call_id for m in rendered)
    turn = rendered[2]
    assert turn.reasoning == "Two independent lookups." and turn.content is not None
    assert turn.content.startswith("Thought: I will look both up.\nThen answer.\n" if call_format == "react" else "I will look both up.\nThen answer.\n")
    calls_text = turn.content.split("\n", 2)[-1]
    assert [c.name for c in parse_calls(calls_text, call_format)] == ["get_weather", "get_time"]
    results = [m.content for m in rendered if m.role == "tool"]
    if call_format == "react":
        assert results[0] == 'Observation: {"time": "10:00"}'
    elif call_format == "xml":
        assert results[0] == '<tool_response>\n{"time": "10:00"}\n</tool_response>'
    else:
        assert results[0] == '{"time": "10:00"}'
    assert [m.name for m in rendered if m.role == "tool"] == ["get_time", "get_weather", "get_weather"]


@pytest.mark.parametrize("call_format", CALL_FORMATS)
def test_chat_messages_are_what_the_openai_reader_reads(call_format: str) -> None:
    rendered = render_dialogue(cases.dialogue(), "xml", call_format)
    wire = chat_messages(rendered)
    assert json.loads(json.dumps(wire)) == wire
    assert messages_of({"messages": wire}) == rendered


def test_openai_keeps_structured_calls_and_results() -> None:
    d = cases.dialogue()
    rendered = render_dialogue(d, "yaml", "openai")
    assert rendered[1:] == d.messages[1:]
    assert rendered[0].content == system_prompt(d.tools, "yaml", "openai", preamble=d.messages[0].content)


@pytest.mark.parametrize("call_format", CALL_FORMATS)
@pytest.mark.parametrize("tool_format", TOOL_FORMATS)
def test_system_prompt_states_the_call_format_then_the_tools(tool_format: str, call_format: str) -> None:
    d = cases.dialogue()
    text = render_dialogue(d, tool_format, call_format)[0].content or ""
    assert text.startswith("You are a travel assistant.\n\nBe brief.\n\nFunction call format: " + call_format + "\n")
    assert declared_format(Sample(as_dialogue([Message(role="system", content=text)], d.tools))) == call_format
    assert "functions. They are described in" in text
    parsed = parse_system_prompt(text, tool_format, call_format)
    assert parsed.preamble == "You are a travel assistant.\n\nBe brief."
    assert text.endswith(":\n\n" + render_tools(d.tools, tool_format))
    assert parsed.functions == (d.tools if tool_format in PARSABLE_TOOL_FORMATS else None)


def test_a_preamble_that_is_itself_a_rendered_prompt_reads_back() -> None:
    d = cases.dialogue()
    once = render_dialogue(d, "markdown", "openai")
    twice = render_dialogue(d.model_copy(update={"messages": once}), "xml", "python")
    assert parse_system_prompt(twice[0].content or "", "xml", "python").preamble == once[0].content
    # Calls already written as text are text: rendering them again would read back as calls.
    with pytest.raises(CallFormatError, match=r"messages\[2\]: the turn's text would read back as a call to 'get_weather'"):
        render_dialogue(d.model_copy(update={"messages": render_dialogue(d, "json", "python")}), "json", "python")


@pytest.mark.parametrize(("call_format", "answer"), [
    ("python", "Done. To repeat it, run:\n[get_weather(city=\"Rome\")]"),
    ("json", 'Done:\n[{"name": "get_weather", "arguments": {}}]'),
    ("react", "Done.\nAction: get_weather\nAction Input: {}"),
    ("react", "Done.\nAction: a step I took"),
    ("xml", "Done: <tool_call>"),
])
def test_an_answer_that_would_read_as_a_call_is_refused(call_format: str, answer: str) -> None:
    d = cases.dialogue()
    d.messages[-1] = Message(role="assistant", content=answer)
    with pytest.raises(CallFormatError, match=r"messages\[9\]: the turn's text would read back as a"):
        render_dialogue(d, "json", call_format)


@pytest.mark.parametrize("call_format", CALL_FORMATS)
def test_rendered_dialogues_pass_the_call_format_rule(call_format: str, dialogues: list[Dialogue]) -> None:
    for d in dialogues:
        for tool_format in ("json", "natural"):
            rendered = as_dialogue(render_dialogue(d, tool_format, call_format), d.tools)
            assert RULE(rendered) == [], (d.id, tool_format)


@pytest.mark.parametrize(("declared", "written"), [(fmt, "openai") for fmt in TEXT_CALL_FORMATS] + [("openai", fmt) for fmt in TEXT_CALL_FORMATS])
def test_calls_written_in_another_format_fail_the_rule(declared: str, written: str, dialogues: list[Dialogue]) -> None:
    for d in dialogues:
        system = render_dialogue(d, "json", declared)[0]
        body = render_dialogue(d, "json", written)[1:]
        offset = 1 - (d.messages[0].role == "system")  # the rendering adds a system message when there was none
        calling = [i + offset for i, m in enumerate(d.messages) if m.role == "assistant" and m.tool_calls]
        field = "tool_calls" if written == "openai" else "content"
        verdicts = RULE(as_dialogue([system, *body], d.tools))
        assert [v.path for v in verdicts] == [f"messages[{i}].{field}" for i in calling], d.id
        assert calling


def test_the_openai_rendering_of_released_paths_still_passes_every_rule(toolbench_dialogues: list[Dialogue]) -> None:
    for d in toolbench_dialogues:
        for tool_format in TOOL_FORMATS:
            assert check(as_dialogue(render_dialogue(d, tool_format, "openai"), d.tools)) == [], (d.id, tool_format)


def test_each_statement_opens_with_its_declaration() -> None:
    for fmt in CALL_FORMATS:
        assert call_format_statement(fmt).split("\n", 1)[0] == f"Function call format: {fmt}"


@pytest.mark.parametrize("call_format", CALL_FORMATS)
def test_released_toolalpaca_dialogues_render_or_name_the_bad_message(call_format: str, shared_data: Path) -> None:
    rendered = refused = 0
    for d in toolalpaca.read(shared_data / "toolalpaca/eval_simulated.json"):
        assert isinstance(d, Dialogue)
        bad = next((i for i, m in enumerate(d.messages) for c in m.tool_calls or []
                    if not (call_format == "openai" or _json_object(c.arguments) and (call_format != "python" or c.name.isidentifier()))), None)
        if bad is not None:
            with pytest.raises(CallFormatError, match=rf"messages\[{bad}\]: call 0"):
                render_dialogue(d, "yaml", call_format)
            refused += 1
            continue
        back = parse_dialogue(render_dialogue(d, "yaml", call_format), "yaml", call_format)
        assert canonical(back.messages) == canonical(d.messages), d.id
        rendered += 1
    # 30 golden answers hold a templated (non-JSON) input; python cannot name "[Optional]updateUserProfile".
    assert (rendered, refused) == {"openai": (100, 0), "python": (69, 31)}.get(call_format, (70, 30))


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


@pytest.mark.parametrize(("call_format", "broken", "reason"), [
    ("react", Message(role="tool", name="get_weather", content="sunny"), r"messages\[3\]: a tool result must be written as Observation:"),
    ("xml", Message(role="tool", name="get_weather", content="<tool_response>sunny"), r"messages\[3\]: a tool result must be written as <tool_response>"),
    ("python", Message(role="assistant", content="x", tool_calls=cases.CALL_TURNS["simple"]), r"messages\[3\]: native tool_calls"),
    ("xml", Message(role="assistant", content="<tool_call><name>f</name></tool_call>"), r"messages\[3\]: call 0 \(f\): no <arguments>"),
])
def test_damaged_renderings_name_the_message(call_format: str, broken: Message, reason: str) -> None:
    d = cases.dialogue()
    rendered = render_dialogue(d, "json", call_format)
    rendered[3] = broken
    with pytest.raises(CallFormatError, match=reason):
        parse_dialogue(rendered, "json", call_format)


def test_a_rendering_without_its_statement_is_refused() -> None:
    d = cases.dialogue()
    rendered = render_dialogue(d, "json", "python")
    with pytest.raises(CallFormatError, match="does not state the react call format with json tools"):
        parse_dialogue(rendered, "json", "react")
