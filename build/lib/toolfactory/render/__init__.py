"""Format generalization (ToolACE §2.2.2, Appendix B): the same tools, calls and dialogues written
in several formats, so that a model trained on the data does not overfit one of them.

* :mod:`.tools`: tool descriptions as ``json``, ``yaml``, ``xml``, ``markdown`` (all parsed back
  losslessly) and ``natural`` language (render-only);
* :mod:`.calls`: one turn's calls as ``openai`` ``tool_calls``, ``json``, ``python`` (ToolACE),
  ``react`` (ToolAlpaca, ToolLLaMA) and ``xml``, each parsed back;
* :mod:`.dialogue`: a whole dialogue in a (description format, call format) pair, with the system
  prompt that declares both (``Function call format: <name>``, read by the verifier), and back;
  :func:`chat_messages` gives its OpenAI chat dicts.

Errors: :class:`RenderError` and its two kinds, :class:`ToolFormatError` and :class:`CallFormatError`
(see :mod:`.errors`).
"""

from __future__ import annotations

from toolfactory.render.calls import (
    CALL_FORMATS,
    TEXT_CALL_FORMATS,
    CallFormat,
    OpenAIToolCalls,
    TextCallFormat,
    openai_tool_calls,
    parse_calls,
    parse_openai_tool_calls,
    parse_turn,
    parsed,
    render_calls,
    render_turn,
)
from toolfactory.render.dialogue import (
    CALL_FORMAT_STATEMENTS,
    ParsedDialogue,
    SystemPrompt,
    call_format_statement,
    chat_messages,
    parse_dialogue,
    parse_system_prompt,
    render_dialogue,
    system_prompt,
)
from toolfactory.render.errors import CallFormatError, RenderError, ToolFormatError
from toolfactory.render.parsed import ParsedCall
from toolfactory.render.tools import PARSABLE_TOOL_FORMATS, TOOL_FORMATS, ToolFormat, parse_tools, render_tools

__all__ = [
    "CALL_FORMATS",
    "CALL_FORMAT_STATEMENTS",
    "PARSABLE_TOOL_FORMATS",
    "TEXT_CALL_FORMATS",
    "TOOL_FORMATS",
    "CallFormat",
    "CallFormatError",
    "OpenAIToolCalls",
    "ParsedCall",
    "ParsedDialogue",
    "RenderError",
    "SystemPrompt",
    "TextCallFormat",
    "ToolFormat",
    "ToolFormatError",
    "call_format_statement",
    "chat_messages",
    "openai_tool_calls",
    "parse_calls",
    "parse_dialogue",
    "parse_openai_tool_calls",
    "parse_system_prompt",
    "parse_tools",
    "parse_turn",
    "parsed",
    "render_calls",
    "render_dialogue",
    "render_tools",
    "render_turn",
    "system_prompt",
]
