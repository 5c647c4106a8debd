"""API definition clarity (ToolACE Table 6): the tool list a record offers is well defined.

The same checks as the tools stage applies to tools entering the pool, applied here to the tool
list of each record, which matters for datasets toolfactory did not make (`toolfactory verify`).
A missing description is a warning: it hurts clarity, not executability, and real sources
(ToolBench) often ship blank ones.
"""

from __future__ import annotations

from typing import Iterator

from toolfactory.stages.tools.definition import function_problems
from toolfactory.stages.verify.rules.registry import Finding, Sample, rule


@rule("tool_definition_invalid")
def definition_invalid(sample: Sample) -> Iterator[Finding]:
    """A function of the tool list with an invalid name or schema, a parameters schema that is not
    an object, required arguments it does not declare, or a name used twice."""
    seen: set[str] = set()
    for i, fn in enumerate(sample.dialogue.tools):
        if fn.name in seen:
            yield f"tools[{i}]", f"function name {fn.name!r} used twice"
        seen.add(fn.name)
        for code, message in function_problems(fn):
            if code != "tool_missing_description":
                yield f"tools[{i}]", message


@rule("tool_description_missing", severity="warning")
def description_missing(sample: Sample) -> Iterator[Finding]:
    """A function of the tool list without a description."""
    for i, fn in enumerate(sample.dialogue.tools):
        if any(code == "tool_missing_description" for code, _ in function_problems(fn)):
            yield f"tools[{i}]", f"{fn.name}: no description"
