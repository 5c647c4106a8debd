"""Tool descriptions as Markdown: a heading per function, its description, its schemas as JSON.

One section per function, sections separated by a blank line::

    ## get_forecast

    Get a daily weather forecast.

    **Endpoint**: `GET /v1/forecast`

    **Parameters**
    ```json
    {"type": "object", ...}          (indented JSON)
    ```

    **Returns**
    ```json
    {...}
    ```

The description paragraph and the endpoint line are left out when empty, **Returns** when it is
the default. The schemas stay JSON because a Markdown table cannot hold nested JSON Schema
losslessly; an indented JSON block never has a line starting with a fence, so it ends unambiguously.

Free text is written as is when it reads back unchanged and as a JSON string otherwise: a name
that is not one clean line, a description with a line ``**Parameters**``, ``**Returns**`` or
``**Endpoint**: …`` (it would read as structure) or that starts with ``"``. An endpoint that is not
``METHOD /path`` (only one of the two set, or a backtick in the path) is written as a JSON object.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolfactory.render.errors import ToolFormatError
from toolfactory.render.parsed import json_value

NAME = "markdown"
PARAMETERS = "\n**Parameters**\n```json\n"
RETURNS = "\n\n**Returns**\n```json\n"
FENCE_END = "\n```"
ENDPOINT = "**Endpoint**: "
STRUCTURE_LINE = re.compile(r"^(?:\*\*Parameters\*\*|\*\*Returns\*\*|\*\*Endpoint\*\*:.*)$", re.MULTILINE)
# A description never starts with the endpoint line (_description quotes such text), so the
# lookahead settles which of the two optional parts a lone "**Endpoint**: ..." line is.
MIDDLE = re.compile(r"(?:\n(?!\*\*Endpoint\*\*:)(?P<description>.*?)\n)?(?:\n\*\*Endpoint\*\*: (?P<endpoint>[^\n]*)\n)?", re.DOTALL)


def _name(name: str) -> str:
    plain = name and "\n" not in name and "\r" not in name and name == name.strip() and not name.startswith('"')
    return name if plain else json.dumps(name, ensure_ascii=False)


def _description(text: str) -> str:
    plain = not text.startswith('"') and not STRUCTURE_LINE.search(text)
    return text if plain else json.dumps(text, ensure_ascii=False)


def _endpoint(method: str | None, path: str | None) -> str | None:
    if method is None and path is None:
        return None
    if method and path and re.fullmatch(r"[A-Za-z]+", method) and path == path.strip() and not re.search(r"[`\n\r]", path):
        return f"`{method} {path}`"
    return json.dumps({k: v for k, v in (("method", method), ("path", path)) if v is not None}, ensure_ascii=False)


def _section(fields: dict[str, Any]) -> str:
    parts = [f"## {_name(fields['name'])}\n"]
    if fields["description"]:
        parts.append(f"\n{_description(fields['description'])}\n")
    endpoint = _endpoint(fields.get("method"), fields.get("path"))
    if endpoint is not None:
        parts.append(f"\n{ENDPOINT}{endpoint}\n")
    parts.append(f"{PARAMETERS}{json.dumps(fields['parameters'], indent=2, ensure_ascii=False)}{FENCE_END}")
    if "returns" in fields:
        parts.append(f"{RETURNS}{json.dumps(fields['returns'], indent=2, ensure_ascii=False)}{FENCE_END}")
    return "".join(parts)


def render(functions: list[dict[str, Any]]) -> str:
    return "\n\n".join(_section(fields) for fields in functions)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _json_text(text: str, what: str) -> Any:
    return json_value(text, NAME, what, ToolFormatError)


def _free_text(raw: str, what: str) -> str:
    if not raw.startswith('"'):
        return raw
    value = _json_text(raw, what)
    if not isinstance(value, str):
        raise ToolFormatError(NAME, f"{what} starts with a quote but is not a JSON string")
    return value


def _read_endpoint(raw: str, where: str) -> dict[str, Any]:
    match = re.fullmatch(r"`([A-Za-z]+) ([^`]*)`", raw)
    if match:
        return {"method": match.group(1), "path": match.group(2)}
    value = _json_text(raw, f"{where}: the endpoint")
    if not isinstance(value, dict) or not set(value) <= {"method", "path"}:
        raise ToolFormatError(NAME, f"{where}: the endpoint must be `METHOD /path` or a JSON object with method and path")
    return value


def _schema_block(text: str, start: int, what: str) -> tuple[Any, int]:
    end = text.find(FENCE_END, start)
    if end < 0:
        raise ToolFormatError(NAME, f"line {_line(text, start)}: the {what} block has no closing ```")
    return _json_text(text[start:end], what), end + len(FENCE_END)


def parse(text: str) -> list[dict[str, Any]]:
    """The functions' fields of a Markdown description (validated by the caller)."""
    text = text.strip()
    functions: list[dict[str, Any]] = []
    position = 0
    while text:
        if not text.startswith("## ", position):
            raise ToolFormatError(NAME, f"line {_line(text, position)}: expected a '## <function name>' heading")
        heading_end = text.find("\n", position)
        if heading_end < 0:
            raise ToolFormatError(NAME, f"line {_line(text, position)}: a heading without a **Parameters** block")
        name = _free_text(text[position + 3:heading_end], f"line {_line(text, position)}: the function name")
        where = f"function {len(functions)} ({name})"
        parameters_at = text.find(PARAMETERS, heading_end)
        if parameters_at < 0:
            raise ToolFormatError(NAME, f"{where}: no **Parameters** block with a ```json fence")
        middle = MIDDLE.fullmatch(text, heading_end + 1, parameters_at) if parameters_at > heading_end else MIDDLE.fullmatch("")
        if middle is None:
            raise ToolFormatError(NAME, f"{where}: unexpected text between the heading and **Parameters** (line {_line(text, heading_end + 1)})")
        fields: dict[str, Any] = {"name": name, "description": ""}
        if middle.group("description") is not None:
            fields["description"] = _free_text(middle.group("description"), f"{where}: the description")
        if middle.group("endpoint") is not None:
            fields.update(_read_endpoint(middle.group("endpoint"), where))
        fields["parameters"], position = _schema_block(text, parameters_at + len(PARAMETERS), f"{where}: parameters")
        if text.startswith(RETURNS, position):
            fields["returns"], position = _schema_block(text, position + len(RETURNS), f"{where}: returns")
        functions.append(fields)
        if position == len(text):
            break
        if not text.startswith("\n\n## ", position):
            raise ToolFormatError(NAME, f"line {_line(text, position)}: expected a blank line and the next '## ' heading")
        position += 2
    return functions
