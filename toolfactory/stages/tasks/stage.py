"""The tasks stage: sampled tool sets and user instructions, by recipe.

Every tool of the pool anchors `tasks.instructions_per_tool` instructions (a tool of an
executable source `tasks.instructions_per_executable_tool`). Its recipe is drawn (seeded by the
run and the tool) from `tasks.recipes`; the instructions of an executable source's tool draw one
each, so that a source's many instructions are not all one recipe's:

* toolalpaca (:mod:`.toolalpaca`): the user agent writes requests for the one tool (Fig. 8);
* toolllm (:mod:`.toolllm`): an I1/I2/I3 tool set (`tasks.scenarios`), its APIs probed first
  (:mod:`.api_filter`, ToolLLM A.1), and instructions with their relevant APIs from a prompt
  with three seed examples (ToolLLM §2.2);
* toolace (:mod:`.toolace`): same-domain APIs, a target mode, turns and language style (§2.2).

With `tasks.blueprints` on, a tool from an executable source gets tasks from verified blueprints
instead (:mod:`.blueprints`, APIGen-MT): ground-truth calls run first, the task keeps their state.

With `tasks.explore` on, every recipe's prompt (and the blueprint designer's) over a tool from an
executable source lists what a fresh environment of it holds, found by exploring it once per
source and shard (:mod:`.exploration`), so that requests name things that exist.

The pool is one shard; the stage reads it in as many parts as there were tools shards (part i
holds every n-th tool), and every part sees the whole pool for the samplers. The profile counts
recipes, scenarios, modes, and every pool tool and API offered (`tool_uses`, `api_uses`:
the stats show how many distinct ones, the coverage of the pool).

Self-guided complexity (`tasks.complexity`, toolace, when a target model is set): the part's
first `probe_tools` toolace anchors make their tasks unguided; the target model is evaluated on
them (:mod:`.complexity_guide`) and the part's other toolace anchors make tasks one step beyond
its ability. The profile holds both distributions (`complexity_before`, `complexity_after`, per
dimension and value), the probe's pass rate and the guided complexity.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, ClassVar

from toolfactory.executable.session import executable_source
from toolfactory.models import Rejected, Task, Tool
from toolfactory.stages.base import Planning, ShardContext, ShardSpec, StageOutput
from toolfactory.stages.pool.hierarchy import PoolHierarchy
from toolfactory.stages.records import map_records
from toolfactory.stages.tasks import complexity_guide
from toolfactory.stages.tasks.api_filter import ApiFilter
from toolfactory.stages.tasks.blueprints import Blueprints
from toolfactory.stages.tasks.exploration import Explorer
from toolfactory.stages.tasks.sampling import sample_tool_set, weighted
from toolfactory.stages.tasks.toolace import toolace_tasks
from toolfactory.stages.tasks.toolalpaca import toolalpaca_tasks
from toolfactory.stages.tasks.toolllm import toolllm_tasks


class TasksStage:
    name: ClassVar[str] = "tasks"

    def plan(self, planning: Planning) -> list[ShardSpec]:
        pool, parts = planning.outputs("pool"), len(planning.plans["tools"])
        return [ShardSpec(self.name, i, pool, {"part": i, "parts": parts}) for i in range(parts)] if pool else []

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.tasks
        pool = [Tool.model_validate(data) for data in inputs]
        hierarchy = PoolHierarchy(pool)
        # A supplement shard (toolfactory/run/fan_in.py) anchors on the tools of one later pool part
        # and samples tool sets from the whole pool.
        anchoring = [Tool.model_validate(data) for data in ctx.read(shard.params["anchors"])] if "anchors" in shard.params else pool
        anchors = anchoring[shard.params["part"] :: shard.params["parts"]]
        out = StageOutput()
        if shard.params["part"] == 0:
            out.count("coverage", "pool_tools", len(pool))
        api_filter = ApiFilter(ctx, out) if settings.api_filter.enabled else None
        # One exploration per executable source and shard, on the first anchor that needs it.
        explorer = Explorer(ctx, out, pool) if settings.explore else None
        blueprints = Blueprints(ctx, explorer) if settings.blueprints.enabled else None

        guide: complexity_guide.Complexity | None = None

        def recipe_of(anchor: Tool) -> tuple[random.Random, str]:
            rng = random.Random(f"{ctx.config.run.seed}:tasks:{anchor.id}")
            return rng, weighted(rng, settings.recipes)

        async def tasks_for(anchor: Tool) -> list[Task | Rejected]:
            rng, recipe = recipe_of(anchor)
            count = settings.instructions_per_tool
            if settings.instructions_per_executable_tool is not None and executable_source(anchor) is not None:
                count = settings.instructions_per_executable_tool
            if blueprints is not None and blueprints.applies(anchor):
                return await blueprints.tasks(anchor, count, rng, recipe)
            if executable_source(anchor) is None or count == 1:
                return await made_by(recipe, anchor, count, rng)
            # A source anchors many instructions (its functions, its state): each draws its own
            # recipe, so that a source's data is not all one recipe's by one draw.
            drawn = Counter([recipe, *(weighted(rng, settings.recipes) for _ in range(count - 1))])
            found: list[Task | Rejected] = []
            for each, n in sorted(drawn.items()):
                found += await made_by(each, anchor, n, rng)
            return found

        async def made_by(recipe: str, anchor: Tool, count: int, rng: random.Random) -> list[Task | Rejected]:
            if recipe == "toolalpaca":
                return list(await toolalpaca_tasks(anchor, count, ctx, explorer))
            if recipe == "toolllm":
                tool_set = sample_tool_set(hierarchy, anchor, weighted(rng, settings.scenarios), rng,
                                           max_tools=settings.max_tools_per_set, max_apis=settings.max_apis_per_tool)
                return await toolllm_tasks(tool_set, count, rng, ctx, out, api_filter, explorer)
            return list(await toolace_tasks(anchor, hierarchy, count, rng, ctx, guide, explorer))

        def as_record(t: Task) -> tuple[str, dict[str, Any]]:
            return t.id, t.model_dump()

        try:
            probes: list[Tool] = []
            if settings.complexity.enabled and settings.complexity.target_model:
                probes = [a for a in anchors if recipe_of(a)[1] == "toolace" and not (blueprints and blueprints.applies(a))
                          ][: settings.complexity.probe_tools]
            if probes:
                probed = await map_records(self.name, probes, tasks_for, as_record)
                out.merge(probed)
                before = [t for t in probed.records if isinstance(t, Task)]
                results = await complexity_guide.evaluate(before, ctx)
                guide = complexity_guide.guided(results, settings.complexity)
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
            rest = [a for a in anchors if a not in probes]
            guided = await map_records(self.name, rest, tasks_for, as_record)
            out.merge(guided)
            if guide is not None:
                after = [t for t in guided.records if isinstance(t, Task) and t.recipe == "toolace"]
                for name, values in complexity_guide.distribution(after).items():
                    for value, n in values.items():
                        out.count("complexity_after", f"{name}={value}", n)
        finally:
            if api_filter is not None:
                await api_filter.aclose()
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
        return out
