"""Tool calls of one assistant turn in five formats (ToolACE §2.2.2, format generalization).

* ``openai``: OpenAI's structured ``tool_calls``, ``[{"id", "type": "function", "function":
  {"name", "arguments": "<JSON text>"}}]`` (not text; the ids are kept);
* ``json``: ``[{"name": "get_weather", "arguments": {"city": "Paris"}}]``;
* ``python``: ``[get_weather(city="Paris", days=3)]`` (ToolACE's data), read with :mod:`ast`;
* ``react``: ``Action: get_weather`` / ``Action Input: {"city": "Paris"}`` (ToolAlpaca, ToolLLaMA);
* ``xml``: ``<tool_call><name>get_weather</name><arguments>{…}</arguments></tool_call>``.

:func:`render_calls` takes canonical :class:`~toolfactory.models.ToolCall` objects;
:func:`parse_calls` returns :class:`~toolfactory.render.parsed.ParsedCall` (name and arguments
as a dict), because text formats carry no ids. :func:`render_turn` / :func:`parse_turn` add the
turn's own text (for react the Thought). Anything that cannot be written or read raises
:class:`~toolfactory.render.errors.CallFormatError` with the reason. The text formats need
arguments that are a JSON object; ``openai`` passes the argument text through untouched (an
unparseable argument string is evidence for the verifier) and checks it only when parsing.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any, Literal, Mapping, Sequence, overload

from toolfactory.models import ToolCall
from toolfactory.render import calls_json, calls_python, calls_react, calls_xml
from toolfactory.render.errors import CallFormatError, unknown_format
from toolfactory.render.parsed import ParsedCall, json_kind, json_object, json_value

CallFormat = Literal["openai", "json", "python", "react", "xml"]
TextCallFormat = Literal["json", "python", "react", "xml"]

_TEXT: dict[str, ModuleType] = {m.NAME: m for m in (calls_json, calls_python, calls_react, calls_xml)}
TEXT_CALL_FORMATS: tuple[str, ...] = tuple(_TEXT)
CALL_FORMATS: tuple[str, ...] = ("openai", *TEXT_CALL_FORMATS)

OpenAIToolCalls = list[dict[str, Any]]


def _text_format(fmt: str) -> ModuleType:
    try:
        return _TEXT[fmt]
    except KeyError:
        if fmt == "openai":
            raise ValueError("openai calls are structured tool_calls, not text: there is no turn text to render or parse") from None
        raise unknown_format("call", fmt, CALL_FORMATS) from None


def parsed(calls: Sequence[ToolCall], fmt: str = "canonical") -> list[ParsedCall]:
    """Canonical calls as name + parsed arguments (what a parse of any rendering must give back)."""
    return [ParsedCall.of(call, fmt, i) for i, call in enumerate(calls)]


def _writable(calls: Sequence[ToolCall], fmt: str) -> list[ParsedCall]:
    return [call.named(fmt, i) for i, call in enumerate(parsed(calls, fmt))]


# -- openai ----------------------------------------------------------------------------------


def openai_tool_calls(calls: Sequence[ToolCall]) -> OpenAIToolCalls:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]


def _openai_call(item: Any, index: int) -> ParsedCall:
    function = item.get("function") if isinstance(item, Mapping) else None
    if not isinstance(function, Mapping):
        raise CallFormatError("openai", f"tool_calls[{index}] needs a 'function' object with 'name' and 'arguments'")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise CallFormatError("openai", f"tool_calls[{index}].function needs a non-empty string 'name'")
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping):  # some clients hand over the parsed object
        arguments = json.dumps(arguments)
    if arguments is not None and not isinstance(arguments, str):
        raise CallFormatError("openai", f"tool_calls[{index}] ({name}): arguments must be a JSON string, not {json_kind(arguments)}")
    return ParsedCall(name, json_object(arguments or "{}", "openai", f"tool_calls[{index}] ({name}): arguments"))


def parse_openai_tool_calls(tool_calls: str | Sequence[Any]) -> list[ParsedCall]:
    """The calls of an OpenAI ``tool_calls`` list (or its JSON text)."""
    if isinstance(tool_calls, str):
        tool_calls = json_value(tool_calls, "openai", "the tool_calls text", CallFormatError)
    if not isinstance(tool_calls, Sequence) or isinstance(tool_calls, str):
        raise CallFormatError("openai", f"tool_calls must be a list, not {json_kind(tool_calls)}")
    return [_openai_call(item, i) for i, item in enumerate(tool_calls)]


# -- every format ------------------------------------------------------------------------------


@overload
def render_calls(calls: Sequence[ToolCall], fmt: Literal["openai"]) -> OpenAIToolCalls: ...
@overload
def render_calls(calls: Sequence[ToolCall], fmt: TextCallFormat) -> str: ...
@overload
def render_calls(calls: Sequence[ToolCall], fmt: str) -> str | OpenAIToolCalls: ...
def render_calls(calls: Sequence[ToolCall], fmt: str) -> str | OpenAIToolCalls:
    """One turn's calls in `fmt`: a list of dicts for ``openai``, text for the others."""
    if fmt == "openai":
        return openai_tool_calls(calls)
    module = _text_format(fmt)
    result: str = module.render(_writable(calls, fmt))
    return result


def parse_calls(rendered: str | Sequence[Any], fmt: str) -> list[ParsedCall]:
    """The calls of a rendering (strict: for text formats the text must be calls only, except
    react's leading Thought). Raises :class:`CallFormatError` with the reason."""
    if fmt == "openai":
        return parse_openai_tool_calls(rendered)
    module = _text_format(fmt)
    if not isinstance(rendered, str):
        raise CallFormatError(fmt, f"expected text, not {type(rendered).__name__}")
    result: list[ParsedCall] = module.parse(rendered)
    return result


def render_turn(content: str | None, calls: Sequence[ToolCall], fmt: str) -> str:
    """An assistant turn's text in a text call format: its own text, then its calls (react: the
    text is the Thought). An empty text counts as no text. A turn without calls is its text,
    refused when that text would read back as a call (an answer ending with ``[f(a=1)]``)."""
    module = _text_format(fmt)
    if not calls:
        try:
            misread = module.parse_turn(content or "")[1]
        except CallFormatError as exc:
            raise CallFormatError(fmt, f"the turn's text would read back as a malformed call ({exc.reason})") from None
        if misread:
            raise CallFormatError(fmt, f"the turn's text would read back as a call to {misread[0].name!r}")
        return content or ""
    calls_text: str = module.render(_writable(calls, fmt))
    if not content:
        return calls_text
    turn: str = module.render_turn(content, calls_text)
    return turn


def parse_turn(text: str, fmt: str) -> tuple[str | None, list[ParsedCall]]:
    """(the turn's own text or None, its calls) of an assistant turn in a text call format.

    A turn without calls is all text. Malformed call syntax raises :class:`CallFormatError` for
    react and xml, whose markers (``Action:``, ``<tool_call>``) are unmistakable; for json and
    python a last line that does not parse is taken as text (see :mod:`.trailing`)."""
    result: tuple[str | None, list[ParsedCall]] = _text_format(fmt).parse_turn(text)
    return result
