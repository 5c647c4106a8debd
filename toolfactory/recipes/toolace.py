"""toolace: ToolACE's recipe (Liu et al., 2024, §2.2).

Tasks: requests over same-domain APIs, each written for a target mode (single, parallel,
multiple, dependent, non-tool, missing or insufficient information), number of turns and language
style (:mod:`toolfactory.stages.tasks.toolace`), guided to just beyond the target model's ability
when `tasks.complexity` names one. Dialogues: the multi-agent simulation with native calls, the
assistant thinking formally before each decision and keeping the one its samples agree on
(:class:`~toolfactory.stages.dialogues.native.NativeDialogue`). Verify: no step limit, no error
recovery kept.
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


class ToolACE(Recipe):
    name = "toolace"
    card = ("ToolACE (Liu et al., 2024): requests over APIs of one domain, each written for a target mode (single, "
            "parallel, dependent or no call, a missing value), played by an assistant that thinks formally before "
            "each decision and keeps the decision its samples agree on (self-consistency).")
    policy = Policy(name, max_steps=None, keep_error_recovery=False)
    complexity_guided = True

    async def tasks(self, anchor: Tool, count: int, rng: random.Random, shard: TaskShard) -> list[Task | Rejected]:
        from toolfactory.stages.tasks.toolace import toolace_tasks

        return list(await toolace_tasks(anchor, shard.hierarchy, count, rng, shard.ctx, shard.guide, shard.explorer,
                                        recipe=self.name))

    def driver(self, ctx: ShardContext) -> Driver:
        from toolfactory.stages.dialogues.native import NativeDialogue

        settings = ctx.config.dialogues
        return NativeDialogue(think=settings.formal_thinking, samples=settings.self_consistency)

    def needs(self, config: Config) -> Needs:
        complexity = config.tasks.complexity
        guided = complexity.enabled and bool(complexity.target_model)  # the target model is probed
        return Needs(roles=frozenset({"target"}) if guided else frozenset(),
                     structured=frozenset({"assistant"}) if config.dialogues.formal_thinking else frozenset())


RECIPE = ToolACE()
