"""toolace recipe: multi-mode prompting of the user agent (ToolACE §2.2.1–2.2.2).

APIs are sampled from one domain (the anchor's), so that a dialogue stays on topic and offers
similar functions. Each task gets a target mode (``tasks.modes``), a number of user turns
(``tasks.multi_turn``) and a language style; the user agent is told all three. For
``non_tool`` the offered tools come from another domain than the request's subject, so no
offered tool fits; for ``multiple`` several similar functions are offered and one serves.
Whether the dialogue really has its target mode is checked by the verify stage. A ``dependent``
request is asked for only over functions of which one can feed another (:mod:`.data_flow`; up to
three tool sets are drawn, then the request is made ``parallel``, the other mode of several
calls), and the prompt names those links, as the data flow a model has to build the request on.

With a guided complexity (:mod:`.complexity_guide`) the task is made at it: that many APIs
offered (more same-domain tools, or fewer functions), a mode that needs that many calls (the
no-call modes keep their share), the request told how many calls it needs, and that many turns.
"""

from __future__ import annotations

import json
import random
from typing import Any

from toolfactory.config import TasksConfig
from toolfactory.models import Task, Tool, stable_id
from toolfactory.stages.base import ShardContext
from toolfactory.stages.pool.hierarchy import PoolHierarchy
from toolfactory.stages.tasks.complexity_guide import NO_CALL_MODES, Complexity
from toolfactory.stages.tasks.data_flow import Link, links
from toolfactory.stages.tasks.batches import in_batches
from toolfactory.stages.tasks.exploration import Explorer, section_for, with_section
from toolfactory.stages.tasks.sampling import other_domain_tools, sample_tool_set, weighted

MODE_GUIDES = {
    "single": "needs exactly one call of one function",
    "parallel": "needs several calls that do not depend on each other and can be made at once "
                "(the same function for different values, or different functions)",
    "multiple": "is served by exactly one of the functions, although several of them look similar",
    "dependent": "needs at least two calls where a later call's input comes from an earlier call's result",
    "non_tool": "is about the subject below, which none of the offered functions can serve",
    "missing_params": "needs a function but leaves out exactly one value the function requires, so "
                      "the assistant has to ask for it",
    # The same request; the dialogue ends at the assistant's question (see dialogues.simulation).
    "insufficient_info": "needs a function but leaves out exactly one value the function requires, so "
                         "the assistant has to ask for it",
}

# Language styles the user agent writes in (ToolACE's templates for similarity-guided
# complication): varied styles give queries of varied linguistic complexity.
STYLES = (
    "short and direct, like a command typed on a phone",
    "polite and detailed, with some background on why you need it",
    "a question with explicit constraints (dates, amounts, limits)",
    "casual and chatty, with a little small talk",
    "a multi-part request with a condition (if this, then that)",
    "formal business language",
    "written by a non-native speaker: simple words, slightly unusual phrasing",
    "embedded in a short story about your situation",
)

PROMPT = """\
You play a user who talks to an assistant that can call the functions below. Write {count}
different opening requests. Each request {guide}. Style: {style}. {turns}
{calls}Use concrete values (names, places, dates, amounts) instead of placeholders, never name a
function, and for each request list the functions it needs (none if no function fits).
{note}Functions offered to the assistant:
{functions}"""


def _functions_text(tools: list[Tool]) -> str:
    return "\n".join(
        f"- {fn.name}: {fn.description} Parameters: {json.dumps(fn.parameters, ensure_ascii=False)}"
        for tool in tools for fn in tool.functions
    )


def _schema(count: int, names: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "requests": {
                "type": "array",
                "minItems": count,
                "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "request": {"type": "string", "minLength": 10},
                        "functions": {"type": "array", "items": {"enum": names}, "uniqueItems": True},
                    },
                    "required": ["request", "functions"],
                },
            }
        },
        "required": ["requests"],
    }


def _guided_modes(modes: dict[str, float], calls: int) -> dict[str, float]:
    """The configured mode shares, kept to the modes whose requests need `calls` calls."""
    fits = {m: w for m, w in modes.items() if m in NO_CALL_MODES or (m in ("parallel", "dependent")) == (calls >= 2)}
    return fits if sum(fits.values()) > 0 else modes


def _with_api_count(tools: list[Tool], count: int) -> list[Tool]:
    """The tools cut to `count` functions in all (the anchor's first), tools left empty dropped."""
    out, left = [], count
    for tool in tools:
        if left <= 0:
            break
        out.append(tool.model_copy(update={"functions": tool.functions[:left]}))
        left -= len(out[-1].functions)
    return out


DEPENDENT_DRAWS = 3  # tool sets drawn for a dependent request before it becomes a parallel one
SHOWN_LINKS = 3  # links between functions a dependent request's prompt names


def _same_domain(hierarchy: PoolHierarchy, anchor: Tool, rng: random.Random, settings: TasksConfig,
                 guide: Complexity | None) -> list[Tool]:
    offered = sample_tool_set(hierarchy, anchor, "same_domain", rng, max_tools=settings.max_tools_per_set,
                              max_apis=settings.max_apis_per_tool).tools
    if guide is not None:
        wide = sample_tool_set(hierarchy, anchor, "same_domain", rng, max_tools=5, max_apis=10).tools
        offered = _with_api_count(wide, guide.apis)
    return offered


def _first_links(flow: list[Link]) -> list[Link]:
    """Up to :data:`SHOWN_LINKS` links, identifiers first (an `alert_id` from a list of alerts
    is what a dependent call usually carries), each later function once."""
    ordered = sorted(flow, key=lambda link: not link.carries_id)
    shown: list[Link] = []
    for link in ordered:
        if all(link.later != other.later for other in shown):
            shown.append(link)
    return shown[:SHOWN_LINKS]


async def toolace_tasks(anchor: Tool, hierarchy: PoolHierarchy, count: int, rng: random.Random, ctx: ShardContext,
                        guide: Complexity | None = None, explorer: Explorer | None = None, *, recipe: str) -> list[Task]:
    """`count` requests in one target mode over same-domain APIs, made for `recipe`."""
    settings = ctx.config.tasks
    mode = weighted(rng, _guided_modes(settings.modes, guide.calls) if guide else settings.modes)
    turns = rng.randint(2, 3) if rng.random() < settings.multi_turn else 1
    if guide is not None:
        turns = guide.turns
    style = rng.choice(STYLES)
    note = ""  # what the mode needs the model to know: the subject, the data flow
    if mode == "non_tool":
        offered = other_domain_tools(hierarchy, anchor, rng, rng.randint(1, 2)) or [anchor]
        if offered == [anchor]:
            mode = "single"  # a pool of one domain has no tool that does not fit
        else:
            note = f"Subject of the requests (NOT served by the functions): {anchor.name}: {anchor.description}\n"
    else:
        draws = DEPENDENT_DRAWS if mode == "dependent" else 1
        for _ in range(draws):  # a dependent request needs functions that chain
            offered = _same_domain(hierarchy, anchor, rng, settings, guide)
            flow = links([fn for tool in offered for fn in tool.functions]) if mode == "dependent" else []
            if flow:
                break
        if mode == "dependent":
            if flow:
                note = f"Functions that can feed each other: {'; '.join(link.sentence() for link in _first_links(flow))}.\n"
            else:  # no two of these functions chain: the other mode of several calls
                mode = "parallel"
    names = [fn.name for tool in offered for fn in tool.functions]
    section = await section_for(explorer, offered) if mode != "non_tool" else ""

    def prompt(n: int) -> str:
        return with_section(PROMPT.format(
            count=n, guide=MODE_GUIDES[mode], style=style, note=note, functions=_functions_text(offered),
            turns=f"The conversation will have {turns} user turns; write only the first request now." if turns > 1 else "",
            calls=f"Each request needs {guide.calls} function calls in all.\n" if guide and guide.calls >= 2 and mode in ("parallel", "dependent") else "",
        ), section)

    async def ask(content: str, n: int) -> list[dict[str, Any]]:
        answer = await ctx.gateway.structured("user", [{"role": "user", "content": content}], _schema(n, names), name="requests")
        return list(answer["requests"])

    requests = await in_batches(count, prompt, ask, lambda item: str(item["request"]))
    return [
        Task(
            id=stable_id(recipe, anchor.id, str(ctx.config.run.seed), str(k)),
            tools=offered,
            instruction=item["request"],
            relevant_functions=[] if mode == "non_tool" else list(item["functions"]),
            scenario="same_domain",
            mode=mode,
            recipe=recipe,
            turns=turns,
            style=style,
        )
        for k, item in enumerate(requests)
    ]
