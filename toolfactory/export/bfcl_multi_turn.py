"""BFCL's multi-turn entries for dialogues over BFCL's own executable environments (sources with a
``preset``: GorillaFileSystem, TwitterAPI, …), laid out as ``bfcl-eval`` lays out its
``multi_turn_base`` category::

    <split>/BFCL_v4_multi_turn_base.json                  {"id", "question": [[user message], ...], "initial_config": {Class: state},
                                                           "path": ["Class.method", ...], "involved_classes": [...],
                                                           "excluded_function": [...], "function": [...]}
    <split>/possible_answer/BFCL_v4_multi_turn_base.json  {"id", "ground_truth": [["f(a='x', b=1)", ...], ...]}

Each user turn of the dialogue is one question turn, and its ground truth is the calls that ran
between it and the next user turn, written in BFCL's call syntax (Python literals). BFCL's
loader fills ``function`` from the involved classes' doc files; ``excluded_function`` names
the documented functions that the dialogue did not offer (the source's allow and deny lists),
which BFCL leaves out, and ``function`` holds the offered ones for a reader that does not load
the docs. ``initial_config`` is each source's ``initial_state``.

The ground truth leaves out a call that raised (the dialogue's assistant recovered from it; an
answer to BFCL's question is the calls that do the task, and BFCL's checker requires the
ground truth's results among the model's). Only records whose executed calls are the
dialogue's calls are written (:func:`~toolfactory.export.executed.executed`); a record that
offers anything but BFCL's environments, two sources of one class, or a source the run's
configuration does not name (a run without a manifest) is not a multi-turn entry and goes
through the single-turn categories.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfactory.executable.python_env import read_function_docs
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.export.base import NO_CALLS, Skip
from toolfactory.export.executed import ExecutedCall, executed, function_sources
from toolfactory.models import Dialogue, Tool

MULTI_TURN = "multi_turn_base"


def call_text(call: ExecutedCall) -> str:
    """A call in BFCL's syntax, ``name(a='x', b=1)``: the arguments as Python literals, which BFCL
    evaluates on the class's instance."""
    return f"{call.name}({', '.join(f'{key}={value!r}' for key, value in call.arguments.items())})"


def bfcl_classes(dialogue: Dialogue, tools: Mapping[str, Tool],
                 sources: Mapping[str, ExecutableSourceSettings]) -> dict[str, PythonEnvironmentSettings] | None:
    """Source name → its settings, when every function the dialogue offers comes from a BFCL
    preset source and no class is offered twice; None when the record is not BFCL multi-turn."""
    owners = function_sources(dialogue, tools)
    if not dialogue.tools or any(f.name not in owners for f in dialogue.tools):
        return None
    names = sorted(set(owners.values()))
    if any(name not in sources for name in names):
        return None  # which class runs it is unknown: the record is read as any other
    found = {name: sources[name] for name in names}
    presets = [s.preset for s in found.values() if isinstance(s, PythonEnvironmentSettings)]
    if len(presets) != len(found) or None in presets or len(set(presets)) != len(presets):
        return None
    return found  # type: ignore[return-value]


def multi_turn(dialogue: Dialogue, tools: Mapping[str, Tool], sources: Mapping[str, ExecutableSourceSettings],
               functions: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(question entry, possible answer), ids not yet given; None for a record that is not over
    BFCL's environments alone. `functions` are the offered functions in BFCL's form."""
    classes = bfcl_classes(dialogue, tools, sources)
    if classes is None:
        return None
    run = executed(dialogue, tools)
    truth: list[list[str]] = [[] for _ in run.turns]
    path: list[str] = []
    for call in run.calls:
        if call.is_error:
            continue
        truth[call.turn].append(call_text(call))
        preset = str(classes[call.source].preset)
        if f"{preset}.{call.name}" not in path:
            path.append(f"{preset}.{call.name}")
    if not any(truth):
        raise Skip(NO_CALLS, "no call of the dialogue ran without an error")
    offered = {f.name for f in dialogue.tools}
    involved = [str(s.preset) for s in classes.values()]
    documented = [str(doc.get("name")) for s in classes.values() for doc in read_function_docs(str(s.resolved_function_docs()))]
    question = {
        "question": [[{"role": "user", "content": turn}] for turn in run.turns],
        "initial_config": {str(s.preset): s.initial_state for s in classes.values()},
        "path": path,
        "involved_classes": involved,
        "excluded_function": [name for name in documented if name not in offered],
        "function": functions,
    }
    return question, {"ground_truth": truth}
