"""What the factory keeps, apart from what is valid (ToolAlpaca §4.1 filters, ToolLLM §2.3).

The rule layer has two kinds of rules. **Validity** rules ask whether a record is correct (a call
the API accepts, a response for every call). **Policy** rules (the ``filter_*`` codes) ask whether
a recipe keeps it: ToolAlpaca drops dialogues of more than five steps, ToolLLM's search has its
own depth limit instead. A :class:`Policy` carries those choices for one recipe:

* ``max_steps``: the most function calls (``filter_too_many_steps``); None for no limit;
* ``keep_error_recovery``: a call answered with an error (the pipeline's ``{"status_code": 400}``
  or the API's error written by ToolAlpaca's error-aware executor) and later made again
  correctly is kept, as ToolAlpaca keeps it (that is how a model learns to recover): ``filter_parse_error`` then flags only errors that were never recovered, and the
  validity findings on the recovered call itself are warnings, not errors.
* ``rejecting``: warning rules whose findings reject a record under this policy
  (``verify.rejecting_warnings``: e.g. ``arg_value_ungrounded`` for a team that wants every
  argument value traced to the conversation);
* ``builtin_functions``: actions the recipe's agent has besides the offered functions, which a
  call may name without being ``call_unknown_function``: ToolAlpaca's ``getDetails`` (its agent's
  "ask the user", which its golden answers use); nothing else is known outside the tool list.
  A validity matter: the rule layer knows those of the dialogue's recipe whatever policy is
  applied, and those of the applied policy (``--policy toolalpaca`` on another format's records).

`toolfactory verify` on external data applies validity only unless a policy is asked for; the
factory's verify stage applies the policy of each dialogue's recipe (:func:`for_recipe`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from toolfactory.config.recipes import recipe_names

if TYPE_CHECKING:
    from toolfactory.stages.verify.rules.registry import Sample

PARSE_ERROR_STATUS = 400
ASK_USER = "getDetails"  # ToolAlpaca's built-in action that asks the user for a missing value


@dataclass(frozen=True)
class Policy:
    """One recipe's filters (see the module doc)."""

    name: str = "default"
    max_steps: int | None = 5
    keep_error_recovery: bool = False
    builtin_functions: frozenset[str] = frozenset()
    rejecting: frozenset[str] = frozenset()


DEFAULT = Policy()


class _RecipePolicies(Mapping[str, Policy]):
    """Each recipe's policy, as its recipe declares it (:attr:`toolfactory.recipes.base.Recipe.policy`:
    ToolAlpaca's five-step cap and its error-and-recovery dialogues; ToolLLM's paths bounded by
    the search's own max_depth; ToolACE states no step limit). A recipe's module is imported when
    its policy is first asked for."""

    def __getitem__(self, name: str) -> Policy:
        from toolfactory.recipes import recipe_named  # the recipes are made of the stages' parts, this module's too

        if name not in recipe_names():
            raise KeyError(name)
        return recipe_named(name).policy

    def __iter__(self) -> Iterator[str]:
        return iter(recipe_names())

    def __len__(self) -> int:
        return len(recipe_names())


POLICIES: Mapping[str, Policy] = _RecipePolicies()


def for_recipe(recipe: str, max_steps: dict[str, int] | None = None, keep_error_recovery: list[str] | None = None,
               rejecting: Iterable[str] = ()) -> Policy:
    """The policy of `recipe`, with the config's per-recipe overrides when given, and the warning
    rules that reject under it."""
    base = POLICIES.get(recipe, Policy(recipe))
    steps = base.max_steps if max_steps is None else max_steps.get(recipe)
    recovery = base.keep_error_recovery if keep_error_recovery is None else recipe in keep_error_recovery
    return Policy(recipe, steps, recovery, base.builtin_functions, frozenset(rejecting))


def error_text(content: str | None) -> str | None:
    """The error of a tool message that is the pipeline's answer to an unexecutable call, or None."""
    if not content or '"status_code"' not in content:
        return None
    try:
        body = json.loads(content)
    except (json.JSONDecodeError, RecursionError):
        return None
    if isinstance(body, dict) and body.get("status_code") == PARSE_ERROR_STATUS and "error" in body:
        return str(body["error"])
    return None


def api_error(content: str | None) -> bool:
    """Whether a tool message is an error answer: the pipeline's 400, or any 4xx/5xx the tool
    executor gave as the API's error (``{"status_code": 422, "error": …}``)."""
    if not content or '"status_code"' not in content:
        return False
    try:
        body = json.loads(content)
    except (json.JSONDecodeError, RecursionError):
        return False
    status = body.get("status_code") if isinstance(body, dict) else None
    return isinstance(status, int) and status >= 400 and "error" in body


def recovered_calls(sample: "Sample") -> dict[str, int]:
    """{call path: index of its error response} for each call answered with an error (the
    pipeline's or the API's, :func:`api_error`) and followed by a call to the same function that
    got a real response."""
    by_id = {call.call.id: call for call in sample.calls}
    failed: list[tuple[int, str, str]] = []  # (response index, call path, function)
    answered: list[tuple[int, str]] = []  # (response index, function) of real responses
    for i, message in enumerate(sample.messages):
        call = by_id.get(message.tool_call_id or "") if message.role == "tool" else None
        if call is None:
            continue
        if not api_error(message.content):
            answered.append((i, call.name))
        else:
            failed.append((i, call.path, call.name))
    return {path: i for i, path, name in failed if any(j > i and other == name for j, other in answered)}
