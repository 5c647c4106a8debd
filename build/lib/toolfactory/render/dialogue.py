"""A whole dialogue rendered for training in a (tool-description format, call format) pair, and
read back (ToolACE §2.2.2).

The rendered system prompt is the dialogue's own system text (if any), then the call-format
statement, then the functions in the description format::

    <the dialogue's system message, if it had one>

    Function call format: python
    <how to write calls in that format, and how results come back>

    You can use the following functions. They are described in YAML:

    <render_tools(dialogue.tools, "yaml")>

The statement comes before the functions so that its ``Function call format: <name>`` line is
the first declaration in the prompt: the verifier rule ``sample_call_format_mismatch`` reads the
first one, and a tool description could, in principle, contain that phrase.

Turns, per call format (an assistant turn with calls; a tool result, always role ``tool``):

* ``openai``: both unchanged, structured ``tool_calls`` with their ids and ``tool_call_id``;
* ``json``: the turn's text, a line break, ``[{"name": …, "arguments": {…}}]``; the result as is;
* ``python``: the turn's text, a line break, ``[f(a=1)]``; the result as is;
* ``react``: ``Thought: <text>`` then Action / Action Input pairs; ``Observation: <result>``;
* ``xml``: the turn's text, a line break, ``<tool_call>`` elements;
  ``<tool_response>\n<result>\n</tool_response>``.

Tool results keep the ``tool`` role in every format (as ToolACE's data and Hermes-style chat
templates have them) and their function ``name``; text formats drop the call ids (the text has
none), so :func:`parse_dialogue` pairs each result with the earliest open call of the same name
(else the earliest open call) and numbers calls ``call_1``, ``call_2``, ... across the dialogue.
``reasoning`` is kept as the message field in every format: call formats say how calls are
written, not where hidden reasoning goes. An empty text counts as no text.

The verifier judges canonical dialogues, before rendering: the rules that look at native calls
(``sample_unanswered_call``, ``sample_role_order``, ``dialogue_no_function_call``) reject a text
format's rendering, whose calls are text. ``sample_call_format_mismatch`` is the rule made for it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

from toolfactory.models import Dialogue, Function, Message
from toolfactory.render.calls import CALL_FORMATS, TEXT_CALL_FORMATS, openai_tool_calls, parse_turn, render_turn
from toolfactory.render.errors import CallFormatError, unknown_format
from toolfactory.render.tools import PARSABLE_TOOL_FORMATS, TOOL_FORMATS, parse_tools, render_tools

_EXAMPLE_ARGUMENTS = '{"city": "Paris", "days": 3}'
CALL_FORMAT_STATEMENTS: dict[str, str] = {
    "openai": (
        "Function call format: openai\n"
        "Call functions through the native function-calling interface (tool_calls); several calls may be made at once. "
        "Each result comes back in a tool message."
    ),
    "json": (
        "Function call format: json\n"
        "To call functions, end your reply with one line holding a JSON list of calls, each an object with the "
        f'function "name" and its "arguments" object, e.g. [{{"name": "get_weather", "arguments": {_EXAMPLE_ARGUMENTS}}}]. '
        "Each result comes back in a tool message."
    ),
    "python": (
        "Function call format: python\n"
        "To call functions, end your reply with one line holding a Python list of calls with keyword arguments, "
        'e.g. [get_weather(city="Paris", days=3), get_time(zone="CET")]. Argument values are Python literals '
        "(strings, numbers, True, False, None, lists and dicts). Each result comes back in a tool message."
    ),
    "react": (
        "Function call format: react\n"
        "To call a function, write your reasoning after \"Thought:\", then the function name after \"Action:\" and its "
        "arguments as a JSON object after \"Action Input:\", each on its own line, e.g.\n"
        "Thought: I need the forecast for Paris.\n"
        "Action: get_weather\n"
        f"Action Input: {_EXAMPLE_ARGUMENTS}\n"
        "Write one Action and Action Input pair per call. Each result comes back as \"Observation: <result>\"."
    ),
    "xml": (
        "Function call format: xml\n"
        "To call functions, end your reply with one element per call: "
        f"<tool_call><name>get_weather</name><arguments>{_EXAMPLE_ARGUMENTS}</arguments></tool_call>, "
        "the arguments being a JSON object. Each result comes back as <tool_response>result</tool_response>."
    ),
}
TOOL_FORMAT_LABELS: dict[str, str] = {
    "json": "JSON", "yaml": "YAML", "xml": "XML", "markdown": "Markdown", "natural": "natural language",
}
RESULT_WRAPPERS: dict[str, tuple[str, str]] = {
    "json": ("", ""),
    "python": ("", ""),
    "react": ("Observation: ", ""),
    "xml": ("<tool_response>\n", "\n</tool_response>"),
}


def call_format_statement(call_format: str) -> str:
    """The system-prompt text that declares `call_format` (its first line is the declaration
    ``Function call format: <name>`` the verifier reads)."""
    try:
        return CALL_FORMAT_STATEMENTS[call_format]
    except KeyError:
        raise unknown_format("call", call_format, CALL_FORMATS) from None


def _tools_intro(tool_format: str) -> str:
    if tool_format not in TOOL_FORMAT_LABELS:
        raise unknown_format("tool", tool_format, TOOL_FORMATS)
    return f"You can use the following functions. They are described in {TOOL_FORMAT_LABELS[tool_format]}:"


def system_prompt(functions: Sequence[Function], tool_format: str, call_format: str, preamble: str | None = None) -> str:
    """The system prompt that states the call format and the functions (after `preamble`)."""
    parts = [preamble] if preamble else []
    parts += [call_format_statement(call_format), _tools_intro(tool_format), render_tools(functions, tool_format)]
    return "\n\n".join(parts)


@dataclass(frozen=True)
class SystemPrompt:
    """A rendered system prompt taken apart: the original system text and, when the description
    format is parsable, the functions."""

    preamble: str | None
    functions: list[Function] | None


def parse_system_prompt(text: str, tool_format: str, call_format: str) -> SystemPrompt:
    statement = f"{call_format_statement(call_format)}\n\n{_tools_intro(tool_format)}\n\n"
    # The last occurrence: a preamble may itself be an older rendered prompt.
    at = text.rfind(statement)
    if at < 0:
        raise CallFormatError(call_format, f"the system prompt does not state the {call_format} call format with {tool_format} tools")
    if at and not text[:at].endswith("\n\n"):
        raise CallFormatError(call_format, "the system prompt's statement must follow a blank line")
    preamble = text[: at - 2] if at else None
    described = text[at + len(statement):]
    functions = parse_tools(described, tool_format) if tool_format in PARSABLE_TOOL_FORMATS else None
    return SystemPrompt(preamble or None, functions)


def _wrap_result(content: str | None, call_format: str) -> str:
    before, after = RESULT_WRAPPERS[call_format]
    return f"{before}{content or ''}{after}"


def _unwrap_result(content: str | None, call_format: str, index: int) -> str:
    before, after = RESULT_WRAPPERS[call_format]
    text = content or ""
    if not (text.startswith(before) and text.endswith(after) and len(text) >= len(before) + len(after)):
        shown = f"{before.strip()}…{after.strip()}"
        raise CallFormatError(call_format, f"messages[{index}]: a tool result must be written as {shown}")
    return text[len(before): len(text) - len(after)]


def render_dialogue(dialogue: Dialogue, tool_format: str, call_format: str) -> list[Message]:
    """The dialogue's messages as a model is trained on them in this format pair.

    Raises :class:`CallFormatError` when a call cannot be written in `call_format` (arguments
    that are no JSON object, a name python cannot write, a turn text that would read as a call)."""
    has_system = bool(dialogue.messages) and dialogue.messages[0].role == "system"
    preamble = dialogue.messages[0].content if has_system else None
    out = [Message(role="system", content=system_prompt(dialogue.tools, tool_format, call_format, preamble))]
    for i, message in enumerate(dialogue.messages[1 if has_system else 0:], start=1 if has_system else 0):
        if call_format == "openai" or message.role in ("user", "system"):
            out.append(message)
        elif message.role == "assistant":
            try:
                text = render_turn(message.content, message.tool_calls or [], call_format)
            except CallFormatError as exc:
                raise CallFormatError(call_format, f"messages[{i}]: {exc.reason}") from None
            out.append(message if not message.tool_calls else Message(role="assistant", content=text, reasoning=message.reasoning, masked=message.masked))
        else:
            out.append(Message(role="tool", name=message.name, content=_wrap_result(message.content, call_format)))
    return out


def chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as OpenAI chat dicts (what a fine-tuning JSONL line holds), reasoning under
    ``reasoning_content``: the wire form of :func:`render_dialogue`'s output."""
    out = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.reasoning is not None:
            item["reasoning_content"] = message.reasoning
        if message.tool_calls:
            item["tool_calls"] = openai_tool_calls(message.tool_calls)
        if message.tool_call_id is not None:
            item["tool_call_id"] = message.tool_call_id
        if message.name is not None and message.role == "tool":
            item["name"] = message.name
        out.append(item)
    return out


@dataclass(frozen=True)
class ParsedDialogue:
    """Canonical messages read back from a rendering, and the functions its system prompt lists
    (None for natural-language descriptions, which are not parsed)."""

    messages: list[Message]
    functions: list[Function] | None


def parse_dialogue(messages: Sequence[Message], tool_format: str, call_format: str) -> ParsedDialogue:
    """The canonical dialogue messages of a :func:`render_dialogue` output (see the module doc
    for ids and pairing); raises :class:`CallFormatError` with the offending message's index."""
    if not messages or messages[0].role != "system":
        raise CallFormatError(call_format, "a rendered dialogue starts with its system prompt")
    system = parse_system_prompt(messages[0].content or "", tool_format, call_format)
    out = [Message(role="system", content=system.preamble)] if system.preamble is not None else []
    if call_format == "openai":
        return ParsedDialogue(out + list(messages[1:]), system.functions)
    if call_format not in TEXT_CALL_FORMATS:
        raise unknown_format("call", call_format, CALL_FORMATS)
    serial = 0
    open_calls: deque[tuple[str, str]] = deque()  # (id, name), oldest first
    for i, message in enumerate(messages[1:], start=1):
        if message.role == "assistant" and not message.tool_calls:
            try:
                content, calls = parse_turn(message.content or "", call_format)
            except CallFormatError as exc:
                raise CallFormatError(call_format, f"messages[{i}]: {exc.reason}") from None
            tool_calls = []
            for call in calls:
                serial += 1
                tool_calls.append(call.to_tool_call(f"call_{serial}"))
                open_calls.append((f"call_{serial}", call.name))
            out.append(Message(role="assistant", content=content, reasoning=message.reasoning, tool_calls=tool_calls or None))
        elif message.role == "tool":
            match = next((entry for entry in open_calls if entry[1] == message.name), open_calls[0] if open_calls else None)
            if match is not None:
                open_calls.remove(match)
            out.append(Message(role="tool", name=message.name, tool_call_id=match[0] if match else None,
                               content=_unwrap_result(message.content, call_format, i)))
        elif message.role == "assistant":
            raise CallFormatError(call_format, f"messages[{i}]: native tool_calls in a dialogue rendered with {call_format} calls")
        else:
            out.append(message)
    return ParsedDialogue(out, system.functions)
