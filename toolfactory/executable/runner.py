"""The process a Python environment runs in: one instance of its class, driven over JSON lines.

The parent (:mod:`.python_env`) starts ``python -m toolfactory.executable.runner`` through the
confining launcher, in the session's own temporary folder, and writes one request per line on
its stdin; the runner answers each with one line on the protocol channel:

* ``{"op": "init", "class_path": "pkg.mod:Class", "initial_state": {…}}`` → ``{"ok": true}``:
  import the class and make the instance (its initial state given as described in
  :func:`instantiate`);
* ``{"op": "describe"}`` → ``{"methods": [{"name", "doc", "parameters", "returns"}…]}``: its
  public methods, parameters as JSON Schema from their type hints (pydantic) and descriptions
  from their docstrings;
* ``{"op": "call", "name": …, "arguments": {…}}`` → ``{"content", "is_error", "structured"}``;
* ``{"op": "state"}`` → ``{"state": …}``: the instance's public attributes (see :func:`snapshot`).

A method's own output (``print``) must not break the protocol: the runner keeps the original
stdout for its answers and points file descriptor 1 at stderr, which the parent drains and caps.
A request the runner cannot serve (no such class, a bad initial state) is answered with
``{"error": …}``; only the parent decides what that means.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable
from typing import Any, TextIO

import docstring_parser
from pydantic import ConfigDict, create_model

#: BFCL's environments take their initial state through this method (``multi_turn_utils``).
LOAD_SCENARIO = "_load_scenario"


def load_class(class_path: str) -> type:
    """The class named ``package.module:ClassName``."""
    module_name, _, class_name = class_path.partition(":")
    module = importlib.import_module(module_name)
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise ImportError(f"module {module_name!r} has no class {class_name!r}")  # noqa: TRY004 - a missing name, as `from module import name` says
    return found


def instantiate(cls: type, initial_state: dict[str, Any]) -> Any:
    """An instance in `initial_state`: a class with BFCL's ``_load_scenario(config)`` is made
    without arguments and given a copy of the state there (as BFCL's own executor does); any
    other class gets the state as constructor keyword arguments."""
    if callable(getattr(cls, LOAD_SCENARIO, None)):
        instance = cls()
        getattr(instance, LOAD_SCENARIO)(copy.deepcopy(initial_state))
        return instance
    return cls(**copy.deepcopy(initial_state))


def public_methods(cls: type) -> list[tuple[str, Callable[..., Any]]]:
    """The class's public methods (not starting with ``_``), in name order."""
    return [(name, member) for name, member in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")]


def describe(name: str, function: Callable[..., Any]) -> dict[str, Any]:
    """One method as a function doc: its parameters' JSON Schema from the type hints (through a
    pydantic model of the signature), the descriptions from its docstring."""
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: the parameter takes any value
        hints = {}
    doc = docstring_parser.parse(inspect.getdoc(function) or "")
    described = {param.arg_name: param.description or "" for param in doc.params}
    fields: dict[str, Any] = {}
    for parameter in list(signature.parameters.values())[1:]:  # the first is the instance
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    model = create_model(f"{name}_arguments", __config__=ConfigDict(arbitrary_types_allowed=True), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for key, prop in (schema.get("properties") or {}).items():
        prop.pop("title", None)
        if described.get(key):
            prop["description"] = described[key]
    schema.setdefault("properties", {})
    summary = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)
    returns = {"type": "object"}
    if doc.returns is not None and doc.returns.description:
        returns = {"description": doc.returns.description}
    return {"name": name, "doc": summary, "parameters": schema, "returns": returns}


def snapshot(value: Any, enclosing: tuple[int, ...] = ()) -> Any:
    """`value` as JSON: an object as its public attributes (names not starting with ``_``, as
    BFCL's state checker compares ``vars()``), recursively; a reference back to an enclosing
    object (a directory's parent) is left out; sets in sorted order; anything else as ``str``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if id(value) in enclosing:
        return None
    inner = (*enclosing, id(value))
    if isinstance(value, dict):
        return {str(key): snapshot(item, inner) for key, item in value.items() if id(item) not in inner}
    if isinstance(value, (list, tuple)):
        return [snapshot(item, inner) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((snapshot(item, inner) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return {key: snapshot(item, inner) for key, item in attributes.items()
                if not key.startswith("_") and id(item) not in inner}
    return str(value)


def result(value: Any) -> dict[str, Any]:
    """A method's return value as an answer: a string as it is, a JSON-able value as JSON (and
    structured), anything else as its ``str``."""
    if isinstance(value, str):
        return {"content": value, "is_error": False, "structured": None}
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return {"content": str(value), "is_error": False, "structured": None}
    return {"content": text, "is_error": False, "structured": value}


class Runner:
    """One instance and the requests it serves."""

    def __init__(self) -> None:
        self.cls: type | None = None
        self.instance: Any = None

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "init":
            try:
                self.cls = load_class(str(request["class_path"]))
                self.instance = instantiate(self.cls, dict(request.get("initial_state") or {}))
            except Exception as exc:  # noqa: BLE001 - reported to the parent, which rejects the source
                return {"error": f"{type(exc).__name__}: {exc}"}
            return {"ok": True}
        if self.cls is None:
            return {"error": "not initialized"}
        if op == "describe":
            return {"methods": [describe(name, function) for name, function in public_methods(self.cls)]}
        if op == "state":
            return {"state": snapshot(self.instance)}
        if op == "call":
            name = str(request.get("name"))
            method = getattr(self.instance, name, None) if not name.startswith("_") else None
            if method is None or not callable(method):
                return {"content": f"AttributeError: no function {name!r}", "is_error": True, "structured": None}
            try:
                return result(method(**dict(request.get("arguments") or {})))
            except Exception as exc:  # noqa: BLE001 - the tool's error: the assistant sees it
                return {"content": f"{type(exc).__name__}: {exc}", "is_error": True, "structured": None}
        return {"error": f"unknown op {op!r}"}


def serve(requests: TextIO, answers: TextIO) -> None:
    runner = Runner()
    for line in requests:
        answer = runner.handle(json.loads(line))
        answers.write(json.dumps(answer, ensure_ascii=False, default=str) + "\n")
        answers.flush()


def main() -> None:
    # Answers go to a private copy of stdout; whatever the methods print goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, protocol)


if __name__ == "__main__":
    main()
