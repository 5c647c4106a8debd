"""API definition clarity (ToolACE Table 6): the tool list a record offers is well defined.

The same checks as the tools stage applies to tools entering the pool, applied here to the tool
list of each record, which matters for datasets toolfactory did not make (`toolfactory verify`).
A missing description is a warning: it hurts clarity, not executability, and real sources
(ToolBench) often ship blank ones. So is a name outside OpenAI's API limit (``math.factorial``):
it is the data's own convention, a problem only for a consumer that sends it to OpenAI.
"""

from __future__ import annotations

from typing import Iterator

from toolfactory.models import Function

from toolfactory.definitions.validity import NAME_NOT_OPENAI
from toolfactory.stages.verify.rules.registry import Finding, Sample, rule


_WARNINGS = frozenset({"tool_missing_description", NAME_NOT_OPENAI})


def problems_of(sample: Sample) -> list[tuple[Function, tuple[tuple[str, str], ...]]]:
    """Each offered function with its definition problems (computed once per distinct definition)."""
    return [(fn, facts.problems) for fn, facts in zip(sample.dialogue.tools, sample.facts)]


@rule("tool_definition_invalid")
def definition_invalid(sample: Sample) -> Iterator[Finding]:
    """A function of the tool list with an invalid name or schema, a parameters schema that is not
    an object, required arguments it does not declare, or a name used twice."""
    seen: set[str] = set()
    for i, (fn, problems) in enumerate(problems_of(sample)):
        if fn.name in seen:
            yield f"tools[{i}]", f"function name {fn.name!r} used twice"
        seen.add(fn.name)
        for code, message in problems:
            if code not in _WARNINGS:
                yield f"tools[{i}]", message


@rule("tool_description_missing", severity="warning")
def description_missing(sample: Sample) -> Iterator[Finding]:
    """A function of the tool list without a description."""
    for i, (fn, problems) in enumerate(problems_of(sample)):
        if any(code == "tool_missing_description" for code, _ in problems):
            yield f"tools[{i}]", f"{fn.name}: no description"


@rule("tool_name_not_openai", severity="warning")
def name_not_openai(sample: Sample) -> Iterator[Finding]:
    """A function name that OpenAI's API would refuse (dots, more than 64 characters, ...)."""
    for i, (_, problems) in enumerate(problems_of(sample)):
        for code, message in problems:
            if code == NAME_NOT_OPENAI:
                yield f"tools[{i}]", message
