"""What the rule layer derives from one function definition, once per distinct definition.

The records of a dataset offer the same APIs again and again (xLAM's 60,000 records draw on
3,673 of them; a factory run's dialogues draw on its tool pool), so the size and nesting of a
definition, its definition problems and its compiled arguments schema are computed once per
distinct definition, keyed by its JSON text, and not once per record; a definition no other
record offers is not kept (:func:`facts_of`). What needs a recursive walk
(problems, the schema) is computed only when asked: a record over the depth limit is rejected
before anything walks its schemas (:mod:`toolfactory.stages.verify.limits`).
"""

from __future__ import annotations

import sys
from functools import cached_property

from pydantic_core import PydanticSerializationError

from toolfactory.models import Function
from toolfactory.definitions.validity import uncached_function_problems
from toolfactory.stages.verify.rules.arguments_schema import ArgumentsSchema, arguments_schema

CACHED = 16384  # distinct definitions kept
SEEN = 1 << 16  # definitions remembered as met once (their hashes: about 4 MB)


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
        """(reason code, message) of each definition problem
        (:func:`~toolfactory.definitions.validity.function_problems`; kept here, once per definition)."""
        return uncached_function_problems(self.function)

    @cached_property
    def arguments(self) -> ArgumentsSchema:
        """The compiled schema its calls' arguments are checked against."""
        return arguments_schema(self.function.parameters)


# A plain dict that starts over when full: a lookup costs a third of an LRU cache's, and a
# dataset's working set of APIs is far below the bound.
_facts: dict[str, FunctionFacts] = {}
# The hashes of the definitions met once. A definition's facts are kept from its second record
# on: a dataset whose APIs are all new (no two records share one) would otherwise fill the cache
# with facts no record asks for again, and the garbage collector's passes over them made such a
# run take twice as long (measured). An integer is no object the collector visits.
_seen: set[int] = set()


def facts_of(function: Function) -> FunctionFacts:
    """The facts of `function`, computed once per distinct definition that recurs."""
    try:
        text = function.model_dump_json()
    except PydanticSerializationError:
        # Nested deeper than pydantic serializes (about 255 levels, above any depth limit): no
        # text, so the depth check walks the schemas and rejects the record.
        return FunctionFacts(function, None)
    found = _facts.get(text)
    if found is None:
        found = FunctionFacts(function, text)
        key = hash(text)  # two texts with one hash: the second is kept from its first record on
        if key in _seen:
            if len(_facts) >= CACHED:
                _facts.clear()
            _facts[text] = found
        else:
            if len(_seen) >= SEEN:
                _seen.clear()
            _seen.add(key)
    return found


def clear() -> None:
    """Forget every definition (benchmarks measure a cold start with it)."""
    _facts.clear()
    _seen.clear()
