"""toolllm: ToolLLM's recipe (Qin et al., 2023, §2.2–2.3).

Tasks: a tool set sampled within one tool, category or collection (I1/I2/I3, `tasks.scenarios`),
its APIs probed first (`tasks.api_filter`, A.1), and instructions with their relevant APIs
written from three seed examples (:mod:`toolfactory.stages.tasks.toolllm`). Dialogues: a solution
path found by DFSDT (or ReAct) with the Finish function
(:class:`~toolfactory.stages.dialogues.search_dialogue.SearchDialogue`). Verify: no step limit
(the search has its own depth), no error recovery kept. Blueprint tasks of its anchors are played
by toolalpaca's agents: a search backtracks, and its abandoned branches would leave calls in the
one environment.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from toolfactory.config import Config
from toolfactory.models import Rejected, Task, Tool
from toolfactory.recipes.base import Needs, Recipe
from toolfactory.stages.verify.policy import Policy

if TYPE_CHECKING:
    from toolfactory.stages.base import ShardContext
    from toolfactory.stages.dialogues.drivers import Driver
    from toolfactory.stages.tasks.makers import TaskShard


class ToolLLM(Recipe):
    name = "toolllm"
    card = ("ToolLLM (Qin et al., 2023): tool sets sampled within one tool, category or collection, their APIs "
            "probed first, instructions written from seed examples, and a solution path found by depth-first "
            "search over the assistant's actions (DFSDT).")
    policy = Policy(name, max_steps=None, keep_error_recovery=False)
    blueprint_dialogues = "toolalpaca"

    async def tasks(self, anchor: Tool, count: int, rng: random.Random, shard: TaskShard) -> list[Task | Rejected]:
        from toolfactory.stages.tasks.sampling import sample_tool_set, weighted
        from toolfactory.stages.tasks.toolllm import toolllm_tasks

        settings = shard.ctx.config.tasks
        scenarios: dict[str, float] = {scenario: share for scenario, share in settings.scenarios.items()}
        tool_set = sample_tool_set(shard.hierarchy, anchor, weighted(rng, scenarios), rng,
                                   max_tools=settings.max_tools_per_set, max_apis=settings.max_apis_per_tool)
        return await toolllm_tasks(tool_set, count, rng, shard.ctx, shard.out, shard.api_filter, shard.explorer,
                                   recipe=self.name)

    def driver(self, ctx: ShardContext) -> Driver:
        from toolfactory.stages.dialogues.search_dialogue import SearchDialogue

        return SearchDialogue(ctx)

    def needs(self, config: Config) -> Needs:
        # The designer probes the APIs (A.1) and picks the keys long responses keep (A.2).
        designer = config.tasks.api_filter.enabled or config.dialogues.compression_keys == "llm"
        return Needs(roles=frozenset({"designer"}) if designer else frozenset())


RECIPE = ToolLLM()
