"""Tool descriptions in five formats (ToolACE §2.2.2 and Appendix B, format generalization).

A model trained on one way of describing tools overfits it; the same functions are therefore
rendered as ``json``, ``yaml``, ``xml``, ``markdown`` or ``natural`` (language) text.

* ``json``: a JSON list of ``{name, description, parameters, returns, method, path}`` objects;
* ``yaml``: the same list in YAML (PyYAML's safe dumper and loader);
* ``xml``: ``<tools><function name=…>`` with elements shaped like the schema (:mod:`.tools_xml`);
* ``markdown``: a heading per function, its description, its schemas as JSON blocks
  (:mod:`.tools_markdown`);
* ``natural``: prose, one sentence per parameter (:mod:`.tools_prose`).

Every parsable format is lossless: ``parse_tools(render_tools(fs, fmt), fmt) == fs`` for any
:class:`~toolfactory.models.Function` list (the order of keys inside a schema object is not kept
by xml; JSON Schema gives it no meaning). ``returns`` is left out when it is the default
``{"type": "object"}``, and ``method``/``path`` when unset, so prompts stay short; parsing
restores the defaults. Natural language is render-only: prose cannot be parsed back without
guessing, so :func:`parse_tools` refuses it.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Sequence

import yaml
from pydantic import ValidationError

from toolfactory import fast_yaml
from toolfactory.models import Function
from toolfactory.render import tools_markdown, tools_prose, tools_xml
from toolfactory.render.errors import ToolFormatError, unknown_format
from toolfactory.render.parsed import json_kind, json_problem, json_value

ToolFormat = Literal["json", "yaml", "xml", "markdown", "natural"]
TOOL_FORMATS: tuple[str, ...] = ("json", "yaml", "xml", "markdown", "natural")
PARSABLE_TOOL_FORMATS: tuple[str, ...] = ("json", "yaml", "xml", "markdown")

DEFAULT_RETURNS: dict[str, Any] = {"type": "object"}


def function_fields(fn: Function) -> dict[str, Any]:
    """The fields a description shows, in reading order; defaults are left out."""
    fields: dict[str, Any] = {"name": fn.name, "description": fn.description, "parameters": fn.parameters}
    if fn.returns != DEFAULT_RETURNS:
        fields["returns"] = fn.returns
    if fn.method is not None:
        fields["method"] = fn.method
    if fn.path is not None:
        fields["path"] = fn.path
    return fields


def function_from_fields(value: Any, fmt: str, index: int) -> Function:
    """A Function from parsed fields; anything missing, unknown or mistyped is a ToolFormatError."""
    if not isinstance(value, dict):
        raise ToolFormatError(fmt, f"function {index} must be a mapping, not {json_kind(value)}")
    problem = json_problem(value)
    if problem:
        raise ToolFormatError(fmt, f"function {index}: {problem}")
    if not isinstance(value.get("name"), str):
        raise ToolFormatError(fmt, f"function {index} needs a string 'name'")
    try:
        return Function.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ToolFormatError(fmt, f"function {index} ({value['name']}): {where}: {first['msg']}") from None


def _functions(value: Any, fmt: str) -> list[Function]:
    if not isinstance(value, list):
        raise ToolFormatError(fmt, f"expected a list of functions, not {json_kind(value)}")
    return [function_from_fields(item, fmt, i) for i, item in enumerate(value)]


def _parse_yaml(text: str) -> list[Function]:
    try:
        value = fast_yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ToolFormatError("yaml", f"not YAML: {problem}{where}") from None
    except RecursionError:
        raise ToolFormatError("yaml", "nested too deeply") from None
    return _functions(value, "yaml")


def render_tools(functions: Sequence[Function], fmt: str) -> str:
    """The functions described in `fmt` (one of :data:`TOOL_FORMATS`)."""
    fields = [function_fields(fn) for fn in functions]
    if fmt == "json":
        return json.dumps(fields, indent=2, ensure_ascii=False)
    if fmt == "yaml":
        # A wide line limit: PyYAML would otherwise fold long descriptions over several lines.
        text: str = yaml.dump(fields, Dumper=fast_yaml.DUMPER, sort_keys=False, allow_unicode=True, width=1 << 16)
        return text.rstrip("\n")
    if fmt == "xml":
        return tools_xml.render(fields)
    if fmt == "markdown":
        return tools_markdown.render(fields)
    if fmt == "natural":
        return tools_prose.render(fields)
    raise unknown_format("tool", fmt, TOOL_FORMATS)


def parse_tools(text: str, fmt: str) -> list[Function]:
    """The functions of a description in a parsable format; raises :class:`ToolFormatError`."""
    if fmt == "json":
        return _functions(json_value(text, "json", "the tool list", ToolFormatError), "json")
    if fmt == "yaml":
        return _parse_yaml(text)
    if fmt == "xml":
        return [function_from_fields(f, "xml", i) for i, f in enumerate(tools_xml.parse(text))]
    if fmt == "markdown":
        return [function_from_fields(f, "markdown", i) for i, f in enumerate(tools_markdown.parse(text))]
    if fmt == "natural":
        raise ToolFormatError("natural", "natural-language descriptions are render-only: prose cannot be parsed back without guessing")
    raise unknown_format("tool", fmt, TOOL_FORMATS)
