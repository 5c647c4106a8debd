"""What the rule layer derives from one function definition, once per distinct definition.

The records of a dataset offer the same APIs again and again (xLAM's 60,000 records draw on
3,673 of them; a factory run's dialogues draw on its tool pool), so the size and nesting of a
definition, its definition problems and its compiled arguments schema are computed once per
distinct definition, keyed by its JSON text, and not once per record. What needs a recursive walk
(problems, the schema) is computed only when asked: a record over the depth limit is rejected
before anything walks its schemas (:mod:`toolfactory.stages.verify.limits`).
"""

from __future__ import annotations

import sys
from functools import cached_property

from pydantic_core import PydanticSerializationError

from toolfactory.models import Function
from toolfactory.stages.tools.definition import function_problems
from toolfactory.stages.verify.rules.arguments_schema import ArgumentsSchema, arguments_schema

CACHED = 16384  # distinct definitions kept


class FunctionFacts:
    """One function definition's facts (the definition is read-only once it is in a record)."""

    def __init__(self, function: Function, text: str | None) -> None:
        self.function = function
        self.chars = len(text) if text is not None else 0
        """Characters of the definition as JSON."""
        self.brackets = text.count("{") + text.count("[") if text is not None else sys.maxsize
        """An upper bound of the nesting depth of its schemas."""

    @cached_property
    def problems(self) -> tuple[tuple[str, str], ...]:
        """(reason code, message) of each definition problem (:func:`function_problems`)."""
        return function_problems(self.function)

    @cached_property
    def arguments(self) -> ArgumentsSchema:
        """The compiled schema its calls' arguments are checked against."""
        return arguments_schema(self.function.parameters)


# A plain dict that starts over when full: a lookup costs a third of an LRU cache's, and a
# dataset's working set of APIs is far below the bound.
_facts: dict[str, FunctionFacts] = {}


def facts_of(function: Function) -> FunctionFacts:
    """The facts of `function`, computed once per distinct definition."""
    try:
        text = function.model_dump_json()
    except PydanticSerializationError:
        # Nested deeper than pydantic serializes (about 255 levels, above any depth limit): no
        # text, so the depth check walks the schemas and rejects the record.
        return FunctionFacts(function, None)
    found = _facts.get(text)
    if found is None:
        if len(_facts) >= CACHED:
            _facts.clear()
        found = _facts[text] = FunctionFacts(function, text)
    return found


def clear() -> None:
    """Forget every definition (benchmarks measure a cold start with it)."""
    _facts.clear()
