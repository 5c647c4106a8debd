"""The offered function tools: parsing `tools`, honouring `tool_choice`, matching by words.

The simulator has no language model, so "which function fits the request" is word overlap
between the user's message and a function's name and description. Two measures are used on
purpose: `choose_function` ranks functions by exact shared words (the historical choice, kept
stable so answers do not change), while `is_relevant` asks the looser question "does the
request share any word stem with any function at all", whose "no" makes the assistant decline.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import lexicon
from .errors import SimulatorError
from .text import STOPWORDS, identifier_words, lower_words

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
MIN_PREFIX = 4  # "book" matches "booking"; shorter words must match exactly


@dataclass(frozen=True)
class FunctionSpec:
    """One offered function tool."""

    name: str
    description: str
    parameters: dict[str, Any]

    def words(self) -> set[str]:
        """Words of the name and description (what `choose_function` scores)."""
        return set(identifier_words(self.name)) | {
            w for w in lower_words(self.description) if w not in STOPWORDS
        }

    def properties(self) -> dict[str, Any]:
        props = self.parameters.get("properties")
        return props if isinstance(props, dict) else {}

    def required(self) -> list[str]:
        required = self.parameters.get("required")
        return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []

    def topic_words(self) -> set[str]:
        """`words()` plus the top-level parameters' names, descriptions and enum values."""
        found = self.words()
        for name, schema in self.properties().items():
            found.update(identifier_words(str(name)))
            if not isinstance(schema, dict):
                continue
            texts = [schema.get("description")] + list(schema.get("enum") or [])
            for text in texts:
                if isinstance(text, str):
                    found.update(w for w in lower_words(text) if w not in STOPWORDS)
        return found

    def known_values(self) -> set[str]:
        """Values from the lexicon's closed lists its parameters take ('tokyo' for a city)."""
        return {
            value.lower()
            for name in self.properties()
            for value in lexicon.known_values(identifier_words(str(name)))
        }

    def phrase(self) -> str:
        """The name as words: `get_weather` -> 'get weather'."""
        return " ".join(identifier_words(self.name)) or self.name


def _require(condition: bool, message: str, param: str | None = None) -> None:
    if not condition:
        raise SimulatorError(message, param=param, code="invalid_request")


def parse_functions(body: dict[str, Any]) -> list[FunctionSpec]:
    """The function tools of the request (other tool types are ignored)."""
    tools = body.get("tools")
    if tools is None:
        return []
    _require(isinstance(tools, list), "'tools' must be an array.", "tools")
    specs: list[FunctionSpec] = []
    for index, tool in enumerate(tools):
        _require(isinstance(tool, dict), f"Invalid tool at tools[{index}].", f"tools[{index}]")
        if tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        _require(
            isinstance(function, dict) and isinstance(function.get("name"), str),
            f"tools[{index}].function.name is required.",
            f"tools[{index}].function",
        )
        parameters = function.get("parameters")
        specs.append(
            FunctionSpec(
                name=function["name"],
                description=str(function.get("description") or ""),
                parameters=parameters if isinstance(parameters, dict) else dict(EMPTY_PARAMETERS),
            )
        )
    return specs


def _named(entry: Any) -> str | None:
    """The function name in a tool_choice-like entry, either wire shape."""
    if not isinstance(entry, dict):
        return None
    function = entry.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return str(function["name"])
    return entry["name"] if isinstance(entry.get("name"), str) else None


def callable_functions(body: dict[str, Any], functions: list[FunctionSpec]) -> list[FunctionSpec]:
    """The functions the answer may call given `tool_choice` (empty: answer in text)."""
    choice = body.get("tool_choice")
    if not functions or choice == "none":
        return []
    if choice is None or choice in ("auto", "required"):
        return functions
    by_name = {spec.name: spec for spec in functions}
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools") or {}
        names = [_named(entry) for entry in allowed.get("tools") or []]
        chosen = [by_name[name] for name in names if name in by_name]
        _require(
            bool(chosen), "tool_choice.allowed_tools names no offered function.", "tool_choice"
        )
        return chosen
    name = _named(choice)
    _require(name is not None, "Invalid 'tool_choice'.", "tool_choice")
    _require(
        name in by_name, f"tool_choice names '{name}', which is not in 'tools'.", "tool_choice"
    )
    return [by_name[str(name)]]


def call_is_forced(body: dict[str, Any]) -> bool:
    """Whether `tool_choice` demands a call: "required", a named function, or allowed tools
    in "required" mode (then the assistant never asks back or declines)."""
    choice = body.get("tool_choice")
    if choice == "required":
        return True
    if not isinstance(choice, dict):
        return False
    if choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools")
        return isinstance(allowed, dict) and allowed.get("mode") == "required"
    return _named(choice) is not None


def wanted_words(context: Iterable[str]) -> set[str]:
    """The user's words as `choose_function` compares them (lower case, plus crude singulars)."""
    wanted = {w.lower() for w in context}
    return wanted | {w[:-1] for w in wanted if w.endswith("s") and len(w) > 3}


def word_score(spec: FunctionSpec, wanted: set[str]) -> int:
    """How many of the user's words the function's name and description share."""
    return len(spec.words() & wanted)


def choose_function(
    functions: list[FunctionSpec], context: list[str], rng: random.Random
) -> FunctionSpec:
    """The function sharing most words with the user's message (ties: a seeded pick)."""
    wanted = wanted_words(context)
    scores = [word_score(spec, wanted) for spec in functions]
    best = max(scores)
    return rng.choice(
        [spec for spec, score in zip(functions, scores, strict=True) if score == best]
    )


def _stem(word: str) -> str:
    word = word.lower()
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _related(first: str, second: str) -> bool:
    short, long = sorted((first, second), key=len)
    return short == long or (len(short) >= MIN_PREFIX and long.startswith(short))


def shares_stem(functions: list[FunctionSpec], context: list[str]) -> bool:
    """Whether a content word of the user's message shares a stem with some function's name,
    description, parameter names or enum values ("flight" ~ "flights", "book" ~ "booking")."""
    wanted = {_stem(word) for word in context}
    offered = {_stem(word) for spec in functions for word in spec.topic_words()}
    return any(_related(mine, theirs) for mine in wanted for theirs in offered)


def is_relevant(functions: list[FunctionSpec], context: list[str], user_text: str) -> bool:
    """Whether the user's message relates to some function: a shared word stem (see
    `shares_stem`) or a value its parameters take ("Sydney" for a `city`)."""
    if shares_stem(functions, context):
        return True
    spoken = f" {' '.join(lower_words(user_text))} "
    return any(f" {value} " in spoken for spec in functions for value in spec.known_values())
