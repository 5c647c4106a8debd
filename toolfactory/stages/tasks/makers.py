"""What a recipe's task maker is given: the parts of one tasks shard that its anchors share.

Every recipe makes its tasks through one signature, ``tasks(anchor, count, rng, shard)``
(:class:`toolfactory.recipes.base.Recipe`): the anchor tool, how many tasks it anchors, the
random draws seeded by the run and the anchor, and this :class:`TaskShard`. A maker takes what
it needs from the shard (toolllm the pool's hierarchy and the API filter, toolace the complexity
guide) and leaves the rest, so the stage never branches on the recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolfactory.stages.base import ShardContext, StageOutput
from toolfactory.stages.pool.hierarchy import PoolHierarchy
from toolfactory.stages.tasks.api_filter import ApiFilter
from toolfactory.stages.tasks.complexity_guide import Complexity
from toolfactory.stages.tasks.exploration import Explorer


@dataclass
class TaskShard:
    """One tasks shard's shared parts, built once by the stage."""

    ctx: ShardContext
    out: StageOutput
    """The shard's output: makers count what they drop on the way (`hallucinated_relevant_apis`)."""
    hierarchy: PoolHierarchy
    """The whole pool by category, collection and domain, for the tool-set samplers."""
    explorer: Explorer | None = None
    """What fresh environments of executable sources hold (`tasks.explore`); None when off."""
    api_filter: ApiFilter | None = None
    """Probes of the sampled APIs (`tasks.api_filter`, ToolLLM A.1); None when off."""
    guide: Complexity | None = None
    """The self-guided complexity (`tasks.complexity`), set once the shard's probe tasks were
    evaluated; None before, and when no target model is set."""
