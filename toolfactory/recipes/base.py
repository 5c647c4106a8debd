"""What a recipe is: one object holding every part of one way of making data.

A recipe (ToolAlpaca, ToolLLM, ToolACE, …) decides, across stages, how a tool becomes training
dialogues: how the tasks stage writes tasks over an anchor tool (:meth:`Recipe.tasks`), how the
dialogues stage plays them (:meth:`Recipe.driver`, one driver per dialogue shape,
:mod:`toolfactory.stages.dialogues.drivers`), what the verify stage keeps of them
(:attr:`Recipe.policy`), what it asks of the endpoint (:meth:`Recipe.needs`, for preflight) and
what the dataset card says of it (:attr:`Recipe.card`). The stages ask the task's recipe for the
part they need and never branch on its name, so a recipe is one module of
:mod:`toolfactory.recipes` and one name in :data:`toolfactory.config.recipes.BUILTIN`.

A recipe's module declares it: its name, card, policy and needs are plain values, and its
task maker and driver are imported when first used. `toolfactory verify` reads a recipe's policy,
preflight its needs and an export its card without loading the LLM client or the stages' agents.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolfactory.config import Config
from toolfactory.models import Rejected, Task, Tool
from toolfactory.stages.verify.policy import Policy

if TYPE_CHECKING:
    from toolfactory.stages.base import ShardContext
    from toolfactory.stages.dialogues.drivers import Driver
    from toolfactory.stages.tasks.makers import TaskShard


@dataclass(frozen=True)
class Needs:
    """What a recipe asks of the endpoint beyond what every recipe asks (a user agent writing
    tasks and playing the user, an assistant offered functions, a tool executor answering JSON)."""

    roles: frozenset[str] = frozenset()
    """Roles the recipe calls besides the user, the assistant and the tool."""
    structured: frozenset[str] = frozenset()
    """Roles the recipe asks for JSON answers besides those that always answer JSON."""

    def __or__(self, other: Needs) -> Needs:
        return Needs(self.roles | other.roles, self.structured | other.structured)


class Recipe(ABC):
    """One recipe. A subclass sets the attributes and makes the tasks and the driver; its module
    holds the one instance (``RECIPE``)."""

    name: str
    """What the config (`tasks.recipes`) and every task and dialogue record call it."""
    card: str
    """What the dataset card says it does: one sentence, with the paper it follows."""
    policy: Policy
    """What the verify stage keeps of its dialogues (before the config's `verify` overrides)."""
    complexity_guided: bool = False
    """Whether self-guided complexity (`tasks.complexity`) probes and guides its tasks."""
    blueprint_dialogues: str | None = None
    """The recipe whose agents play the blueprint tasks (`tasks.blueprints`) drawn for this one;
    None: its own. A search that backtracks cannot play one: its abandoned branches would leave
    calls in the one environment that no request asked for."""

    @abstractmethod
    async def tasks(self, anchor: Tool, count: int, rng: random.Random, shard: TaskShard) -> list[Task | Rejected]:
        """`count` tasks anchored on `anchor` (or the rejections of those that failed); `rng` is
        seeded by the run and the anchor."""

    @abstractmethod
    def driver(self, ctx: ShardContext) -> Driver:
        """The driver of this recipe's dialogues for one dialogues shard."""

    def needs(self, config: Config) -> Needs:
        """What this recipe asks of the endpoint under `config` (:mod:`toolfactory.preflight`)."""
        return Needs()

    def __repr__(self) -> str:
        return f"<recipe {self.name}>"
