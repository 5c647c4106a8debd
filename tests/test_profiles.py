"""Each provider profile of the simulator, through the real preflight and the stages a run's
shards run: settings left `auto` are chosen by preflight (text calls without a tool parser, the
schema in the prompt for a plain-text server, `max_completion_tokens` and no temperature for a
reasoning model), and the tasks, dialogues and verify stages, on the config with those choices,
make accepted dialogues of every recipe from every family's answer shapes. The choices as a whole
run records and re-sends them: tests/test_profiles_e2e.py."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from conftest import small_run_overrides
from toolfactory.catalog import load_seed_catalog
from toolfactory.config import Config, load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue
from toolfactory.preflight import Preflight, apply_choices, check_endpoint
from toolfactory.simulator import start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.verify.stage import VerifyStage
from toolfactory.storage import ObjectStore

# The modes each profile's preflight chooses for the assistant's calls and the user's JSON.
CHOSEN = {
    "openai": ("native", "json_schema"),
    "vllm-hermes": ("native", "json_schema"),
    "vllm-no-tool-parser": ("text", "json_schema"),
    "plain-text": ("text", "prompt"),
    "reasoning": ("native", "json_schema"),
}


def profile_overrides(root: Path, profile: str, **extra: Any) -> list[str]:
    """A small run of every recipe against `profile`, everything else `auto` (also the whole
    run's of tests/test_profiles_e2e.py)."""
    return small_run_overrides(root, **{
        # toolllm keeps about half of its instructions (its searches give up, as real ones do), so
        # it anchors more of the tools than the others: a handful of its instructions, not two.
        "tools.max_tools": 6, "tools.tools_per_shard": 6, "tasks.recipes": "{toolalpaca: 1, toolllm: 3, toolace: 1}",
        # toolllm's tool sets of one tool: its multi-tool sets, whose (tool, API) pairs the
        # simulator draws apart, are measured by benchmarks/recipes.py, too few here to count on.
        "tasks.scenarios": "{single_tool: 1}",
        "llm.simulator.obedience": 0.9, "verify.judges": "[]",  # the judges' own answers are shapes like any other
        "llm.simulator.profile": profile,
        **extra,
    })


def assert_chosen(preflight: Preflight | dict[str, Any], profile: str) -> None:
    """`preflight` (the report, or as a manifest records it) chose what `profile` needs."""
    recorded = preflight.record() if isinstance(preflight, Preflight) else preflight
    choices = recorded["choices"]
    assert (choices["llm.roles.assistant.tool_calling"], choices["llm.roles.user.structured_output"]) == CHOSEN[profile]
    limit_field = "max_completion_tokens" if profile == "reasoning" else "max_tokens"
    assert {v for k, v in choices.items() if k.endswith(".max_tokens_parameter")} == {limit_field}
    dropped = {k for k, v in choices.items() if k.endswith(".temperature") and v is None}
    checked = {p["role"] for p in recorded["probes"] if p["capability"] == "chat"}
    assert dropped == ({f"llm.roles.{role}.temperature" for role in checked} if profile == "reasoning" else set())


def assert_clean_dialogues_of_every_recipe(accepted: list[Dialogue]) -> None:
    assert {d.recipe for d in accepted} == {"toolalpaca", "toolllm", "toolace"}
    # Reasoning and call syntax never leak into the training text.
    texts = [m.content or "" for d in accepted for m in d.messages]
    assert not any("<think>" in t or "<tool_call>" in t or "```" in t for t in texts)


async def preflight_and_stages(config: Config, endpoint: Endpoint) -> tuple[Preflight, StageOutput]:
    """Preflight, then the tasks, dialogues and verify stages, one shard each, as a run's shards
    run them on the config with preflight's choices."""
    report = await check_endpoint(config, endpoint)
    assert not report.problems, report.table()
    chosen = apply_choices(config, report.choices)
    catalog = load_seed_catalog()
    random.Random(config.run.seed).shuffle(catalog)  # as planning orders a run's sources
    tools = [t.model_dump() for t in catalog[: config.tools.max_tools]]
    async with LLMGateway(endpoint, chosen.llm) as gateway:
        ctx = ShardContext(config=chosen, run_id="r", gateway=gateway, store=ObjectStore.open(chosen.storage))
        tasks = await TasksStage().run(ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), tools, ctx)
        made = await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks.records], ctx)
        verified = await VerifyStage().run(ShardSpec("verify", 0, ()), [d.model_dump() for d in made.records], ctx)
    return report, verified


@pytest.mark.parametrize("profile", list(CHOSEN))
def test_each_profile_s_preflight_chooses_its_modes_and_the_stages_accept_dialogues_of_every_recipe(
        profile: str, tmp_path: Path) -> None:
    config = load_config(None, profile_overrides(tmp_path / "data", profile), environ={})
    with start_simulator(config.llm.simulator) as sim:
        report, verified = asyncio.run(preflight_and_stages(config, Endpoint(sim.base_url, "sk-profiles")))
    assert_chosen(report, profile)
    accepted = [r for r in verified.records if isinstance(r, Dialogue)]
    assert len(accepted) == len(verified.records)
    assert_clean_dialogues_of_every_recipe(accepted)
