"""Self-guided complexity (ToolACE §2.2, self-guided dialogue generation): a complexity
evaluator measures what the target model already handles, and the tasks made after are just
beyond it.

A task's complexity is three numbers: the APIs offered (candidates to choose from), the calls
its request needs, and its user turns. The evaluator gives a sample of tasks to the target model
(the `target` role, through the gateway, with the dialogue stage's system prompt) and checks its
first turn against the task's structured expectations: a tool mode must call only functions
the task lists, with arguments that validate (a parallel request several at once; a dependent
one its first step, the rest can only follow the results); a non-tool request, or one missing a
required value, must get no call.
For each dimension the ability is the highest value whose probe tasks pass at least
`pass_threshold` of the time; the guided complexity is one step beyond it, within bounds.

The paper's evaluator scores the target's loss on samples; pass/fail works with any endpoint
(an API model has no loss to read), at the price of being coarser.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from toolfactory.config import ComplexityGuideConfig
from toolfactory.models import ToolCall, Task
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.agents import call_error
from toolfactory.stages.dialogues.simulation import SYSTEM_PROMPT

NO_CALL_MODES = ("non_tool", "insufficient_info", "missing_params")  # the first turn must not call
MULTI_CALL_MODES = ("parallel", "dependent")


@dataclass(frozen=True)
class Complexity:
    apis: int  # functions offered
    calls: int  # calls the request needs
    turns: int  # user turns

    @property
    def label(self) -> str:
        return f"apis={self.apis} calls={self.calls} turns={self.turns}"


def task_complexity(task: Task) -> Complexity:
    """The complexity a task was made with."""
    apis = sum(len(tool.functions) for tool in task.tools)
    needed = len(task.relevant_functions)
    # A single or multiple request needs one call whatever it lists; a parallel or dependent one
    # at least two, more when it lists more functions.
    calls = 0 if task.mode in NO_CALL_MODES else max(needed, 2) if task.mode in MULTI_CALL_MODES else 1
    return Complexity(apis, calls, task.turns)


def passed(task: Task, calls: list[ToolCall]) -> bool:
    """Whether the target's first turn does what the task needs (see the module doc)."""
    if task.mode in NO_CALL_MODES:
        return not calls
    if not calls:
        return False
    functions = {fn.name: fn for tool in task.tools for fn in tool.functions}
    if any(call_error(functions.get(c.name), c.name, c.arguments) for c in calls):
        return False
    names, wanted = {c.name for c in calls}, set(task.relevant_functions)
    if wanted and not names <= wanted:  # a function the request does not need
        return False
    if task.mode == "parallel":  # every call at once
        return len(calls) >= 2
    # One call (single, multiple), or the first step of dependent calls: the rest can only
    # follow the results.
    return True


async def evaluate(tasks: list[Task], ctx: ShardContext) -> list[tuple[Complexity, bool]]:
    """Each task's complexity and whether the target model passed it."""
    async def one(task: Task) -> tuple[Complexity, bool]:
        offered = [fn.openai_tool() for tool in task.tools for fn in tool.functions]
        reply = await ctx.gateway.chat("target", [{"role": "system", "content": SYSTEM_PROMPT},
                                                  {"role": "user", "content": task.instruction}],
                                       tools=offered, tool_choice="auto")
        calls = [ToolCall(id=c.get("id") or str(i), name=c["function"]["name"], arguments=c["function"].get("arguments") or "")
                 for i, c in enumerate(reply.get("tool_calls") or [])]
        return task_complexity(task), passed(task, calls)

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def _ability(results: list[tuple[int, bool]], threshold: float) -> int | None:
    """The highest value whose results pass at least `threshold` (None: none does)."""
    by_value: dict[int, list[bool]] = defaultdict(list)
    for value, ok in results:
        by_value[value].append(ok)
    within = [v for v, oks in by_value.items() if sum(oks) / len(oks) >= threshold]
    return max(within) if within else None


def guided(results: list[tuple[Complexity, bool]], settings: ComplexityGuideConfig) -> Complexity | None:
    """The complexity of the tasks to make: one step beyond the target's ability in each
    dimension (the easiest level seen where it passes nothing); None without results."""
    if not results:
        return None
    threshold = settings.pass_threshold

    def beyond(values: list[tuple[int, bool]], floor: int, ceiling: int) -> int:
        ability = _ability(values, threshold)
        start = min(v for v, _ in values) if ability is None else ability + 1
        return max(floor, min(ceiling, start))

    # Calls are measured on the tasks that need calls (a non-tool task's 0 says nothing of them).
    calling = [(c.calls, ok) for c, ok in results if c.calls > 0] or [(1, False)]
    return Complexity(
        apis=beyond([(c.apis, ok) for c, ok in results], 1, settings.max_apis),
        calls=beyond(calling, 1, settings.max_calls),
        turns=beyond([(c.turns, ok) for c, ok in results], 1, settings.max_turns),
    )


def distribution(tasks: list[Task]) -> dict[str, dict[str, int]]:
    """{dimension: {value: tasks}}, for the profile's before/after report."""
    out: dict[str, dict[str, int]] = {"apis": {}, "calls": {}, "turns": {}}
    for task in tasks:
        c = task_complexity(task)
        for name, value in (("apis", c.apis), ("calls", c.calls), ("turns", c.turns)):
            out[name][str(value)] = out[name].get(str(value), 0) + 1
    return out


def summary(complexity: Complexity) -> dict[str, Any]:
    return {"apis": complexity.apis, "calls": complexity.calls, "turns": complexity.turns}
