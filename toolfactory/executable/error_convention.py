"""A source's error convention: how it answers a failed call without flagging it as an error.

Some sources answer a call that failed as they answer one that worked. BFCL's Python
environments return ``{"error": "cd: no such folder"}`` (or ``{"booking_status": false,
"error": "Invalid access token"}``) rather than raise; servers built on the low-level MCP SDK
often return the text ``Error: …`` or ``Database error: …`` without ``isError``. Read as working
answers, such refusals make vetting call a tool that never ran ``works`` and a write tool
read-only.

Vetting therefore learns each source's convention before it probes (:func:`invalid_calls`): it
calls a tool the source does not list, and each tool without its required arguments, with
values of the wrong type, with a value outside its ``enum``, and with a string that names
nothing. Every such call must fail; an answer to one that is not flagged shows how the source
says "no", by one of two markers:

* a **key**: the answer is a JSON object (or a list of them) holding a non-empty field whose
  name says the call failed (``error``, ``errors``, ``exception``, ``failure``…), learnt only
  from a call that breaks the schema;
* a **label**: the answer's first line starts with a short label (at most three words) before a
  colon, and the label says something failed (``Error:``, ``Database error:``).

Only a marker that says something failed is learnt, and only from answers to these calls: a
source that flags its errors learns nothing, so its correct answers that start like a label
("Error rate: 2 %") stay answers; and an answer that starts like an ordinary sentence or label
("Echo: hello", "Note: …"), or an object of ordinary fields (``{"result": 3}``), is never
taken for an error, even when a call that must fail was answered so. The learnt
:class:`ErrorConvention` is kept on the source's vetting card; vetting counts the answers it
matches as errors (answered as data: a refusal), and a run can read it from the card.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from toolfactory.executable.probes import instance
from toolfactory.models import Function

#: A string that names nothing a source holds (no file, table, user or id is called so).
NONSENSE = "(no such value)"
# Words that say something failed, in a field's name or a label.
_FAILED = re.compile(r"^(errors?|fail(s|ed|ure)?|invalid|exceptions?|traceback|denied|refused"
                     r"|rejected|unauthori[sz]ed|forbidden)$", re.IGNORECASE)
# A label: one to three words of letters before a colon, at the start of the first line.
_LABEL = re.compile(r"^\s*([A-Za-z][A-Za-z-]*(?: [A-Za-z][A-Za-z-]*){0,2}):(?:\s|$)")
# A wrong value for each JSON type: one that no schema of that type admits and that few
# functions written for it accept (an object where a string is expected has no string methods).
_WRONG = {"string": {"not": "a string"}, "integer": "not a number", "number": "not a number",
          "boolean": "not a boolean", "array": 0, "object": "not an object"}


def _words(name: str) -> list[str]:
    """A field's name as words (``errorMessage``, ``error_message`` → error, message)."""
    return [w for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]


def failure_field(name: str) -> bool:
    """Whether a field's name says that the call failed (``error``, ``exception``); a field of
    the answer's subject (``verification_failure``: what a check found) does not."""
    return bool(_FAILED.match(name))


def failure_label(label: str) -> bool:
    """Whether a leading label says something failed (``Error``, ``Database error``)."""
    return any(_FAILED.match(word) for word in _words(label))


def answer_value(structured: Any, content: str) -> Any:
    """A call's answer as a value: its structured content, else its text read as JSON or as a
    Python literal (servers written in Python often answer ``str()`` of a list of dicts), else
    the text itself."""
    if structured is not None:
        return structured
    text = content.strip()
    if text[:1] in ("{", "[", '"') or text in ("true", "false", "null"):
        try:
            return json.loads(text)
        except ValueError:
            pass
    if text[:1] in ("{", "[", "(", "'", '"'):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return content


def _objects(value: Any) -> list[dict[str, Any]]:
    """The objects an answer is: itself, or the objects of a list."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


def label_of(content: str) -> str | None:
    """The leading label of an answer's first line (``Database error`` of ``Database error:
    near "x"``), None when it starts otherwise."""
    found = _LABEL.match(content.split("\n", 1)[0])
    return found[1] if found else None


@dataclass
class ErrorConvention:
    """How one source answers a failed call without flagging it (see the module doc)."""

    keys: list[str] = field(default_factory=list)
    """Fields whose non-empty value marks an answer as an error (``error``)."""
    labels: list[str] = field(default_factory=list)
    """Leading labels that mark an answer's text as an error (``Error``, ``Database error``)."""

    def __bool__(self) -> bool:
        return bool(self.keys or self.labels)

    def matches(self, content: str, structured: Any = None) -> bool:
        """Whether an answer is an error by this convention."""
        if not self:
            return False
        label = label_of(content) if self.labels else None
        if label is not None and label.casefold() in {known.casefold() for known in self.labels}:
            return True
        if self.keys:
            objects = _objects(answer_value(structured, content))
            return any(bool(obj.get(key)) for obj in objects for key in self.keys)
        return False

    def describe(self) -> str:
        """The convention in a line (``text starting "Error:", objects with a non-empty "error"``)."""
        parts = ([f"text starting {', '.join(repr(label + ':') for label in self.labels)}"] if self.labels else []) + \
                ([f"objects with a non-empty {', '.join(repr(key) for key in self.keys)}"] if self.keys else [])
        return "; ".join(parts) or "none (errors are flagged)"

    def to_dict(self) -> dict[str, list[str]]:
        return {"keys": list(self.keys), "labels": list(self.labels)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ErrorConvention:
        """The convention a card keeps (an empty one for a card made before conventions were learnt)."""
        data = data or {}
        return cls(keys=[str(k) for k in data.get("keys") or []], labels=[str(x) for x in data.get("labels") or []])


@dataclass(frozen=True)
class InvalidCall:
    """A call that must fail, and why it must."""

    name: str
    arguments: dict[str, Any]
    why: str
    """``unknown_tool``, ``missing_required``, ``wrong_type``, ``outside_enum`` or ``names_nothing``."""


def _unknown_name(listed: set[str]) -> str:
    name, n = "no_such_tool", 1
    while name in listed:
        n += 1
        name = f"no_such_tool_{n}"
    return name


def _kind(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def invalid_calls(functions: Iterable[Function]) -> list[InvalidCall]:
    """Calls that must fail (see the module doc): one to a tool that is not listed, and, per tool
    with parameters, up to four that break its schema or name nothing."""
    functions = list(functions)
    calls = [InvalidCall(_unknown_name({fn.name for fn in functions}), {"value": NONSENSE}, "unknown_tool")]
    for fn in functions:
        schema = fn.parameters or {}
        listed = schema.get("properties")
        properties = {name: spec for name, spec in (listed if isinstance(listed, dict) else {}).items()
                      if isinstance(spec, dict)}
        if not properties:
            continue
        required = [name for name in schema.get("required") or [] if name in properties]
        if required:
            calls.append(InvalidCall(fn.name, {}, "missing_required"))
        base = instance(schema, 0, required_only=True)
        wrong = {name: _WRONG[_kind(spec) or ""] for name, spec in properties.items()
                 if (name in required or not required) and _kind(spec) in _WRONG}
        if wrong:
            calls.append(InvalidCall(fn.name, {**base, **wrong}, "wrong_type"))
        enums = {name: NONSENSE for name, spec in properties.items() if isinstance(spec.get("enum"), list)
                 and NONSENSE not in spec["enum"] and (name in required or not required)}
        if enums:
            calls.append(InvalidCall(fn.name, {**base, **enums}, "outside_enum"))
        names = {name: NONSENSE for name, spec in properties.items() if _kind(spec) == "string"
                 and not spec.get("enum") and not spec.get("format") and (name in required or not required)}
        if names:
            calls.append(InvalidCall(fn.name, {**base, **names}, "names_nothing"))
    return calls


#: The calls that break the schema, and so must fail whatever the tool does.
BREAKS_SCHEMA = frozenset({"unknown_tool", "missing_required", "wrong_type", "outside_enum"})


def learn(answers: Iterable[tuple[InvalidCall, str, Any]]) -> ErrorConvention:
    """The convention shown by the unflagged answers (the call, its content, its structured
    content) to calls that must fail. A key is learnt only from a call that breaks the schema: a
    tool whose work is to check things answers a value that names nothing with a correct
    ``{"valid": false, "error": …}``."""
    keys: list[str] = []
    labels: list[str] = []
    for call, content, structured in answers:
        for obj in _objects(answer_value(structured, content)) if call.why in BREAKS_SCHEMA else []:
            keys += [str(key) for key, value in obj.items()
                     if failure_field(str(key)) and isinstance(value, str) and value.strip()]
        label = label_of(content)
        if label is not None and failure_label(label):
            labels.append(label)
    return ErrorConvention(keys=list(dict.fromkeys(keys)), labels=list(dict.fromkeys(labels)))
