"""The tasks stage: sampled tool sets and user instructions, by recipe.

Every tool of the pool anchors `tasks.instructions_per_tool` instructions (a tool of an
executable source `tasks.instructions_per_executable_tool`). Its recipe is drawn (seeded by the
run and the tool) from `tasks.recipes`; the instructions of an executable source's tool draw one
each, so that a source's many instructions are not all one recipe's. The recipe
(:mod:`toolfactory.recipes`) makes the tasks, all through one signature (:mod:`.makers`):

* toolalpaca (:mod:`.toolalpaca`): the user agent writes requests for the one tool (Fig. 8);
* toolllm (:mod:`.toolllm`): an I1/I2/I3 tool set (`tasks.scenarios`), its APIs probed first
  (:mod:`.api_filter`, ToolLLM A.1), and instructions with their relevant APIs from a prompt
  with three seed examples (ToolLLM §2.2);
* toolace (:mod:`.toolace`): same-domain APIs, a target mode, turns and language style (§2.2).

With `tasks.blueprints` on, a tool from an executable source gets tasks from verified blueprints
instead (:mod:`.blueprints`, APIGen-MT): ground-truth calls run first, the task keeps their state.
The drawn recipe still plays the dialogue (or the one it names for blueprints: toolllm's search
cannot backtrack in one live environment), so blueprints are an option over every recipe, not a
recipe of their own.

With `tasks.explore` on, every recipe's prompt (and the blueprint designer's) over a tool from an
executable source lists what a fresh environment of it holds, found by exploring it once per
source and shard (:mod:`.exploration`), so that requests name things that exist.

The pool is one shard; the stage reads it in as many parts as there were tools shards (part i
holds every n-th tool), and every part sees the whole pool for the samplers. The profile counts
recipes, scenarios, modes, and every pool tool and API offered (`tool_uses`, `api_uses`:
the stats show how many distinct ones, the coverage of the pool).

Self-guided complexity (`tasks.complexity`, for the recipes it guides: toolace, when a target
model is set): the part's first `probe_tools` anchors of such recipes make their tasks unguided;
the target model is evaluated on them (:mod:`.complexity_guide`) and the part's other ones make tasks one step beyond
its ability. The profile holds both distributions (`complexity_before`, `complexity_after`, per
dimension and value), the probe's pass rate and the guided complexity.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, ClassVar

from toolfactory.executable.counts import SESSIONS_REUSED, SESSIONS_STARTED
from toolfactory.executable.session import executable_source
from toolfactory.models import Rejected, Task, Tool
from toolfactory.recipes import recipe_named
from toolfactory.recipes.base import Recipe
from toolfactory.stages.base import FAN_OUT, Inputs, Planning, ShardContext, ShardSpec, StageOutput, upstream_of
from toolfactory.stages.pool.hierarchy import PoolHierarchy
from toolfactory.stages.records import map_records
from toolfactory.stages.tasks import complexity_guide
from toolfactory.stages.tasks.api_filter import ApiFilter
from toolfactory.stages.tasks.blueprints import Blueprints
from toolfactory.stages.tasks.exploration import Explorer
from toolfactory.stages.tasks.makers import TaskShard
from toolfactory.stages.tasks.sampling import weighted


class TasksStage:
    name: ClassVar[str] = "tasks"
    inputs: ClassVar[Inputs] = Inputs("pool", FAN_OUT)

    def plan(self, planning: Planning) -> list[ShardSpec]:
        pool, parts = planning.outputs(upstream_of(self.inputs)), len(planning.plans["tools"])
        return [ShardSpec(self.name, i, pool, {"part": i, "parts": parts}) for i in range(parts)] if pool else []

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.tasks
        pool = [Tool.model_validate(data) for data in inputs]
        # A supplement shard (toolfactory/run/fan_in.py) anchors on the tools of one later pool part
        # and samples tool sets from the whole pool.
        anchoring = [Tool.model_validate(data) for data in ctx.read(shard.params["anchors"])] if "anchors" in shard.params else pool
        anchors = anchoring[shard.params["part"] :: shard.params["parts"]]
        out = StageOutput()
        if shard.params["part"] == 0:
            out.count("coverage", "pool_tools", len(pool))
        # One exploration per executable source and shard, on the first anchor that needs it.
        explorer = Explorer(ctx, out, pool) if settings.explore else None
        parts = TaskShard(ctx, out, PoolHierarchy(pool), explorer, ApiFilter(ctx, out) if settings.api_filter.enabled else None)
        blueprints = Blueprints(ctx, explorer) if settings.blueprints.enabled else None

        def recipe_of(anchor: Tool) -> tuple[random.Random, Recipe]:
            rng = random.Random(f"{ctx.config.run.seed}:tasks:{anchor.id}")
            return rng, recipe_named(weighted(rng, settings.recipes))

        async def tasks_for(anchor: Tool) -> list[Task | Rejected]:
            rng, recipe = recipe_of(anchor)
            count = settings.instructions_per_tool
            if settings.instructions_per_executable_tool is not None and executable_source(anchor) is not None:
                count = settings.instructions_per_executable_tool
            if blueprints is not None and blueprints.applies(anchor):
                return await blueprints.tasks(anchor, count, rng, recipe.blueprint_dialogues or recipe.name)
            if executable_source(anchor) is None or count == 1:
                return await recipe.tasks(anchor, count, rng, parts)
            # A source anchors many instructions (its functions, its state): each draws its own
            # recipe, so that a source's data is not all one recipe's by one draw.
            drawn = Counter([recipe.name, *(weighted(rng, settings.recipes) for _ in range(count - 1))])
            found: list[Task | Rejected] = []
            for name, n in sorted(drawn.items()):
                found += await recipe_named(name).tasks(anchor, n, rng, parts)
            return found

        def as_record(t: Task) -> tuple[str, dict[str, Any]]:
            return t.id, t.model_dump()

        try:
            probes: list[Tool] = []
            if settings.complexity.enabled and settings.complexity.target_model:
                probes = [a for a in anchors if recipe_of(a)[1].complexity_guided and not (blueprints and blueprints.applies(a))
                          ][: settings.complexity.probe_tools]
            if probes:
                probed = await map_records(self.name, probes, tasks_for, as_record)
                out.merge(probed)
                parts.guide = await self._guide([t for t in probed.records if isinstance(t, Task)], ctx, out)
            guided = await map_records(self.name, [a for a in anchors if a not in probes], tasks_for, as_record)
            out.merge(guided)
            if parts.guide is not None:
                after = [t for t in guided.records if isinstance(t, Task) and recipe_named(t.recipe).complexity_guided]
                for name, values in complexity_guide.distribution(after).items():
                    for value, n in values.items():
                        out.count("complexity_after", f"{name}={value}", n)
        finally:
            if parts.api_filter is not None:
                await parts.api_filter.aclose()
        for (source, began), n in sorted((blueprints.sessions if blueprints is not None else {}).items()):
            out.count(SESSIONS_REUSED if began == "reused" else SESSIONS_STARTED, source, n)
        _profile(out)
        return out

    @staticmethod
    async def _guide(before: list[Task], ctx: ShardContext, out: StageOutput) -> complexity_guide.Complexity | None:
        """The complexity the shard's other tasks are guided to, from the target model's results
        on the probe tasks `before`; both distributions and the probe's pass rate counted."""
        results = await complexity_guide.evaluate(before, ctx)
        guide = complexity_guide.guided(results, ctx.config.tasks.complexity)
        out.count("complexity_probe", "tasks", len(results))
        out.count("complexity_probe", "passed", sum(ok for _, ok in results))
        for name, values in complexity_guide.distribution(before).items():
            for value, n in values.items():
                out.count("complexity_before", f"{name}={value}", n)
        if guide is not None:
            # One count per shard and dimension (`apis=5`): summed over shards, the stats
            # show how often each level was chosen, not a meaningless sum of levels.
            for name, value in complexity_guide.summary(guide).items():
                out.count("complexity_guided", f"{name}={value}")
        return guide


def _profile(out: StageOutput) -> None:
    """Count what the shard's tasks are made of: recipes, scenarios, modes, turns, blueprints, and
    every tool and API offered (the pool's coverage)."""
    for task in out.records:
        assert isinstance(task, Task)
        out.count("recipes", task.recipe)
        out.count("scenarios", task.scenario)
        out.count("modes", task.mode)
        out.count("turns", str(task.turns))
        if task.blueprint is not None:
            out.count("blueprints", "kept")
        for tool in task.tools:
            out.count("tool_uses", tool.id)
            for fn in tool.functions:
                out.count("api_uses", f"{tool.id}/{fn.name}")
