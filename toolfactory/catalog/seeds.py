"""The in-context seed pool of ToolLLM-style instruction generation (ToolLLM §2.2, appendix A.7).

Every instruction-generation prompt holds three seed examples drawn at random from a
hand-written pool: single-tool seeds when the sampled tool set has one tool (I1), multi-tool
seeds when it has several (I2/I3). ``instruction_seeds.yaml`` is our own pool of 12 and 36
seeds; :func:`render_seed` writes one of them in the wording of the paper's prompt.
"""

from __future__ import annotations

import json
import pathlib
import random
from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolfactory import fast_yaml

INSTRUCTION_SEEDS_FILE = "instruction_seeds.yaml"
SEEDS_PER_PROMPT = 3


class SeedTool(BaseModel):
    """A tool of a seed, reduced to what the prompt shows: its name and API names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    apis: list[str] = Field(min_length=1)


class SeedQuery(BaseModel):
    """An example user query and the ``[tool, api]`` pairs needed to answer it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str
    relevant_apis: list[tuple[str, str]] = Field(min_length=1)


class Seed(BaseModel):
    """One in-context example: a tool set and sample queries over it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[SeedTool] = Field(min_length=1)
    queries: list[SeedQuery] = Field(min_length=1)

    @model_validator(mode="after")
    def _relevant_apis_are_offered(self) -> Seed:
        offered = self.api_pairs()
        for query in self.queries:
            unknown = [pair for pair in query.relevant_apis if pair not in offered]
            if unknown:
                raise ValueError(
                    f"query {query.query[:60]!r}... names APIs its seed does not offer: {unknown}; "
                    f"offered: {sorted(offered)}"
                )
        return self

    def api_pairs(self) -> set[tuple[str, str]]:
        """Every ``(tool, api)`` the seed offers."""
        return {(tool.name, api) for tool in self.tools for api in tool.apis}

    def tool_names(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.tools)


class InstructionSeeds(BaseModel):
    """The whole pool, split as the paper splits it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    single_tool: list[Seed]
    multi_tool: list[Seed]

    @model_validator(mode="after")
    def _tool_counts_match_the_split(self) -> InstructionSeeds:
        for index, seed in enumerate(self.single_tool):
            if len(seed.tools) != 1:
                raise ValueError(f"single_tool[{index}] has {len(seed.tools)} tools; expected 1")
        for index, seed in enumerate(self.multi_tool):
            if len(seed.tools) < 2:
                raise ValueError(f"multi_tool[{index}] has {len(seed.tools)} tool; expected at least 2")
        return self

    def sample(self, rng: random.Random, multi_tool: bool, k: int = SEEDS_PER_PROMPT) -> list[Seed]:
        """`k` distinct seeds for one prompt, from the pool that matches the tool set."""
        return rng.sample(self.multi_tool if multi_tool else self.single_tool, k)


def instruction_seeds_path() -> pathlib.Path:
    """Path of the shipped ``instruction_seeds.yaml``."""
    return pathlib.Path(str(resources.files(__package__).joinpath(INSTRUCTION_SEEDS_FILE)))


@lru_cache(maxsize=1)
def load_instruction_seeds() -> InstructionSeeds:
    """The shipped seed pool, validated; read once a process (the tasks stage asks for it per
    tool set), and frozen, so every caller sees the same pool."""
    data = fast_yaml.load_file(instruction_seeds_path())
    if not isinstance(data, dict):
        raise ValueError(f"{INSTRUCTION_SEEDS_FILE}: expected a mapping with 'single_tool' and 'multi_tool'")
    return InstructionSeeds.model_validate(data)


def render_seed(seed: Seed) -> str:
    """One seed as prompt text, worded like the examples of ToolLLM appendix A.7.

    A single-tool seed lists its related APIs by name, a multi-tool seed as ``[tool, api]``
    pairs: the two answer formats the respective prompts ask the model for.
    """
    if len(seed.tools) == 1:
        tool = seed.tools[0]
        header = f"For example, with tool {_quote(tool.name)}, given the api_names are {_names(tool.apis)}."
        related = [[_quote(api) for _, api in query.relevant_apis] for query in seed.queries]
    else:
        tool_list = "[" + ", ".join(_quote(tool.name) for tool in seed.tools) + "]"
        api_names = ", ".join(f"(tool {_quote(tool.name)}) {_quote(api)}" for tool in seed.tools for api in tool.apis)
        header = f"For example, with tools {tool_list}, given the api_names are {api_names}."
        related = [[f"[{_quote(name)}, {_quote(api)}]" for name, api in query.relevant_apis] for query in seed.queries]
    lines = [header, "Some sample queries and related_apis would be:"]
    for query, apis in zip(seed.queries, related):
        text = " ".join(query.query.split())
        lines.append(f'"query": {_quote(text)}, "related_apis": [{", ".join(apis)}]')
    return "\n".join(lines)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _names(names: list[str]) -> str:
    return ", ".join(_quote(name) for name in names)


__all__ = [
    "INSTRUCTION_SEEDS_FILE",
    "SEEDS_PER_PROMPT",
    "InstructionSeeds",
    "Seed",
    "SeedQuery",
    "SeedTool",
    "instruction_seeds_path",
    "load_instruction_seeds",
    "render_seed",
]
