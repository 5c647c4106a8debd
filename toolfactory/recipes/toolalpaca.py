"""toolalpaca: ToolAlpaca's recipe (Tang et al., 2023, §3).

Tasks: the user agent writes requests for one tool (:mod:`toolfactory.stages.tasks.toolalpaca`,
Fig. 8). Dialogues: the multi-agent simulation, with the paper's ReAct assistant
(:class:`~toolfactory.stages.dialogues.react.ReactDialogue`) or, with
``dialogues.assistant_format: native``, native calls; its tool executor plays the API's
validation too while the recipe is in ``dialogues.api_errors`` (the default). Verify: at most
five steps, and an error the assistant recovered from is kept (§4.1).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from toolfactory.models import Rejected, Task, Tool
from toolfactory.recipes.base import Recipe
from toolfactory.stages.verify.policy import ASK_USER, Policy

if TYPE_CHECKING:
    from toolfactory.stages.base import ShardContext
    from toolfactory.stages.dialogues.drivers import Driver
    from toolfactory.stages.tasks.makers import TaskShard


class ToolAlpaca(Recipe):
    name = "toolalpaca"
    card = ("ToolAlpaca (Tang et al., 2023): a user agent writes requests for one tool; the user agent, the "
            "assistant (a ReAct agent) and a simulated tool executor play them in a multi-agent simulation.")
    policy = Policy(name, max_steps=5, keep_error_recovery=True, builtin_functions=frozenset({ASK_USER}))

    async def tasks(self, anchor: Tool, count: int, rng: random.Random, shard: TaskShard) -> list[Task | Rejected]:
        from toolfactory.stages.tasks.toolalpaca import toolalpaca_tasks

        return list(await toolalpaca_tasks(anchor, count, shard.ctx, shard.explorer, recipe=self.name))

    def driver(self, ctx: ShardContext) -> Driver:
        from toolfactory.stages.dialogues.native import NativeDialogue
        from toolfactory.stages.dialogues.react import ReactDialogue

        return ReactDialogue() if ctx.config.dialogues.assistant_format == "react" else NativeDialogue()


RECIPE = ToolAlpaca()
