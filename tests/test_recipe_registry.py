"""The recipe registry: a recipe is one object, registered once, and the config and every stage
use it by name; a dialogue's cost is counted where its requests are sent, whatever its shape.

Through the real gateway and the simulator over HTTP, as tests/test_recipes.py."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import http
from test_recipes import NO_FAULTS, pool, sim  # noqa: F401 - fixtures are found by name
from toolfactory.config import Config, load_config
from toolfactory.errors import ConfigError
from toolfactory.export.card import dataset_card, recipes_made
from toolfactory.export.stats import ExportStats
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Rejected, Task, Tool, stable_id
from toolfactory.preflight import run_needs
from toolfactory.recipes import all_recipes, recipe_named, register, unregister
from toolfactory.recipes.base import Needs, Recipe
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.base import Stage
from toolfactory.stages.dialogues.drivers import Driver
from toolfactory.stages.dialogues.modes import OPEN_MODE
from toolfactory.stages.dialogues.native import NativeDialogue
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.makers import TaskShard
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.verify.policy import POLICIES, Policy
from toolfactory.storage import ObjectStore


class Echo(Recipe):
    """A recipe of the tests' own: one request per function of the anchor, naming what it needs."""

    name = "echo"
    card = "Echo: one request per function of a tool, played with native calls."
    policy = Policy(name, max_steps=3)

    async def tasks(self, anchor: Tool, count: int, rng: random.Random, shard: TaskShard) -> list[Task | Rejected]:
        functions = anchor.functions[:count]
        return [Task(id=stable_id(self.name, anchor.id, str(k)), tools=[anchor], recipe=self.name, mode=OPEN_MODE,
                     instruction=f"Could you {fn.description[:1].lower()}{fn.description[1:].rstrip('.')} for me?",
                     relevant_functions=[fn.name])
                for k, fn in enumerate(functions)]

    def driver(self, ctx: ShardContext) -> Driver:
        return NativeDialogue()

    def needs(self, config: Config) -> Needs:
        return Needs(roles=frozenset({"designer"}))


@pytest.fixture
def echo() -> Iterator[Recipe]:
    recipe = register(Echo())
    try:
        yield recipe
    finally:
        unregister(recipe.name)


def run(sim: Any, stage: Stage, spec: ShardSpec, inputs: list[dict[str, Any]], config: Config,
        knobs: dict[str, float] | None = None) -> tuple[StageOutput, dict[str, Any]]:
    """The stage's output, and what its gateway sent (the meter's totals)."""
    http.post(f"{sim.root_url}/simulator/settings", json={**NO_FAULTS, **(knobs or {})}).raise_for_status()

    async def go() -> tuple[StageOutput, dict[str, Any]]:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id="r", gateway=gateway, store=ObjectStore.open(config.storage))
            return await stage.run(spec, inputs, ctx), gateway.meter.totals()

    return asyncio.run(go())


def test_a_recipe_the_registry_does_not_know_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(None, ["tasks.recipes={echo: 1}"], environ={})
    assert "tasks.recipes.echo" in str(refused.value) and "unknown recipe 'echo'" in str(refused.value)
    assert "'toolalpaca', 'toolllm', 'toolace'" in str(refused.value)
    with pytest.raises(ConfigError, match=r"verify\.keep_error_recovery\.0: .*unknown recipe 'echo'"):
        load_config(None, ["verify.keep_error_recovery=[echo]"], environ={})


def test_a_registered_recipe_is_accepted_by_the_config_and_used_by_every_stage(sim: Any, pool: list[Tool], tmp_path: Path,
                                                                                echo: Recipe) -> None:
    config = load_config(None, [f"storage.root={tmp_path}", "tasks.recipes={echo: 1}", "dialogues.api_errors=[echo]",
                                "verify.max_steps={echo: 3}", "verify.keep_error_recovery=[echo]"], environ={})
    anchors = [t for t in pool if len(t.functions) >= 2][:3]
    tasks_out, _ = run(sim, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [t.model_dump() for t in anchors],
                       config)
    tasks = [t for t in tasks_out.records if isinstance(t, Task)]
    assert len(tasks) == 2 * len(anchors) and {t.recipe for t in tasks} == {"echo"}
    assert tasks_out.profile["recipes"] == {"echo": len(tasks)}

    dialogues_out, _ = run(sim, DialoguesStage(), ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], config)
    dialogues = [d for d in dialogues_out.records if isinstance(d, Dialogue)]
    assert dialogues and {d.recipe for d in dialogues} == {"echo"}
    assert all(d.llm_calls > 0 and "decision_samples" in d.generation for d in dialogues)  # the native driver played them
    assert POLICIES["echo"] is echo.policy and "echo" in all_recipes()
    assert "designer" in run_needs(config).roles  # its preflight needs count
    stats = ExportStats(splits=("train",), provenance={("generated", "echo", "m"): 2})  # type: ignore[arg-type]
    assert echo.card in dataset_card(stats, {"train": "data/train.parquet"})


def test_a_recipe_is_registered_once_and_the_built_in_ones_stay() -> None:
    toolace = recipe_named("toolace")
    with pytest.raises(ValueError, match="exists already"):
        register(type("Again", (Echo,), {"name": "toolace"})())
    with pytest.raises(ValueError, match="built-in"):
        unregister("toolace")
    assert recipe_named("toolace") is toolace and list(all_recipes()) == ["toolalpaca", "toolllm", "toolace"]


def test_the_card_describes_the_recipes_that_generated_records_only() -> None:
    stats = ExportStats(splits=("train",))
    stats.provenance.update({("generated", "toolace", "assistant: m"): 3, ("imported", "toolalpaca", ""): 2,
                             ("generated", "verifier-corpus", "assistant: m"): 1})
    text = recipes_made(stats)
    assert text == f"- `toolace`: {recipe_named('toolace').card}\n"  # the ToolAlpaca reader's records are no recipe's


SHAPES = {
    "react": ("toolalpaca", ["dialogues.assistant_format=react"]),
    "native": ("toolalpaca", ["dialogues.assistant_format=native"]),
    "native_thinking_self_consistency": ("toolace", ["dialogues.self_consistency=3"]),
    "search": ("toolllm", ["dialogues.compression_keys=returns_schema"]),  # no shard-wide A.2 decision
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_dialogues_llm_calls_are_every_request_its_agents_sent(sim: Any, pool: list[Tool], tmp_path: Path, shape: str) -> None:
    # Clarifications, declines, invalid calls (a 400 without the model), multi-turn follow-ups and
    # early rejections all happen here: whatever branch a dialogue took, its record (or its
    # rejection) holds what it sent, and together they hold everything the stage sent.
    recipe, overrides = SHAPES[shape]
    config = load_config(None, [f"storage.root={tmp_path}", f"tasks.recipes={{{recipe}: 1}}", "tasks.instructions_per_tool=2",
                                "tasks.multi_turn=0.5", "llm.cache=false", *overrides], environ={})
    tasks_out, _ = run(sim, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [t.model_dump() for t in pool[:4]],
                       config)
    tasks = [t.model_dump() for t in tasks_out.records if isinstance(t, Task)]
    knobs = {"rate_clarify": 0.3, "rate_decline": 0.1, "rate_missing_required": 0.2, "rate_follow_up_call": 0.3,
             "sample_variation": 0.3}  # self-consistency's samples mostly agree, not always
    out, sent = run(sim, DialoguesStage(), ShardSpec("dialogues", 0, ()), tasks, config, knobs)
    assert out.records, out.rejections()
    recorded = sum(d.llm_calls for d in out.records if isinstance(d, Dialogue)) + sum(
        int(r.record.get("llm_calls") or 0) for r in out.rejected)
    # A structured answer re-asked (or a cut answer asked again) is one request of its agent.
    assert recorded == sent["calls"] + sent["cache_hits"] - sent["reasks"] > 0
    assert sum(out.profile["llm_calls"].values()) == recorded
