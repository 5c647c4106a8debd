"""The xml call format: one ``<tool_call>`` element per call, after the turn's text::

    <tool_call>
      <name>get_weather</name>
      <arguments>{"city": "Paris", "days": 3}</arguments>
    </tool_call>

The arguments stay a JSON object inside the element (as in Hermes-style ``<tool_call>`` output),
which is lossless by construction; the XML escaping of ``<`` and ``&`` means a value that contains
``</tool_call>`` cannot end the element early. Elements are written and read with
:mod:`xml.etree.ElementTree`. A turn's text must not itself contain ``<tool_call>`` (it would read
back as a call), and a name must be representable in XML text: both raise :class:`CallFormatError`.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from toolfactory.render.errors import CallFormatError
from toolfactory.render.parsed import ParsedCall, json_object

NAME = "xml"
OPEN, CLOSE = "<tool_call>", "</tool_call>"
BLOCK = re.compile(re.escape(OPEN) + r".*?" + re.escape(CLOSE), re.DOTALL)
# Characters XML 1.0 cannot carry at all, and a carriage return, which XML parsers turn into "\n".
NOT_IN_XML_TEXT = re.compile("[^\t\n\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _json(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return json.dumps(value) if NOT_IN_XML_TEXT.search(text) else text  # JSON's \u escapes are plain ASCII


def render(calls: list[ParsedCall]) -> str:
    blocks = []
    for i, call in enumerate(calls):
        if not call.name or NOT_IN_XML_TEXT.search(call.name):
            raise CallFormatError(NAME, f"call {i} ({call.name!r}): the name has characters XML text cannot hold")
        element = ET.Element("tool_call")
        ET.SubElement(element, "name").text = call.name
        ET.SubElement(element, "arguments").text = _json(call.arguments)
        ET.indent(element)
        blocks.append(ET.tostring(element, encoding="unicode"))
    return "\n".join(blocks)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _parse_block(block: str, index: int) -> ParsedCall:
    try:
        element = ET.fromstring(block)
    except ET.ParseError as exc:
        raise CallFormatError(NAME, f"call {index} is not well-formed XML: {exc}") from None
    children = {child.tag: child for child in element}
    unexpected = sorted(set(children) - {"name", "arguments"})
    if unexpected or len(children) != len(element):
        raise CallFormatError(NAME, f"call {index}: a <tool_call> holds one <name> and one <arguments>, found <{'>, <'.join(c.tag for c in element)}>")
    if (element.text or "").strip():
        raise CallFormatError(NAME, f"call {index}: text directly inside <tool_call>: {element.text.strip()[:40]!r}")
    name = children["name"].text if "name" in children else None
    if not name:
        raise CallFormatError(NAME, f"call {index}: <tool_call> has no <name>")
    if "arguments" not in children:
        raise CallFormatError(NAME, f"call {index} ({name}): no <arguments> (write {{}} for none)")
    arguments = json_object((children["arguments"].text or "").strip(), NAME, f"call {index} ({name}): <arguments>")
    return ParsedCall(name, arguments)


def _blocks(text: str, start: int) -> list[ParsedCall]:
    """The calls of text[start:], which must hold nothing but <tool_call> elements."""
    calls = []
    position = start
    for match in BLOCK.finditer(text, start):
        between = text[position:match.start()]
        if between.strip():
            place = "before the first <tool_call>" if not calls else "between <tool_call> elements"
            raise CallFormatError(NAME, f"line {_line(text, position)}: text {place}: {between.strip()[:40]!r}")
        calls.append(_parse_block(match.group(), len(calls)))
        position = match.end()
    rest = text[position:]
    if rest.strip():
        reason = "an unclosed <tool_call>" if OPEN in rest else f"text after the calls: {rest.strip()[:40]!r}"
        raise CallFormatError(NAME, f"line {_line(text, position)}: {reason}")
    return calls


def parse(text: str) -> list[ParsedCall]:
    return _blocks(text, 0)


def render_turn(content: str, calls_text: str) -> str:
    if OPEN in content:
        raise CallFormatError(NAME, f"the turn's text contains {OPEN}, which would read back as a call")
    return f"{content}\n{calls_text}"


def parse_turn(text: str) -> tuple[str | None, list[ParsedCall]]:
    """(text before the first <tool_call>, calls)."""
    start = text.find(OPEN)
    if start < 0:
        return text or None, []
    head = text[:start]
    content = head[:-1] if head.endswith("\n") else head
    return content or None, _blocks(text, start)
