"""The stages of the factory, in run order."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfactory.stages.base import Planning, ShardContext, ShardSpec, Stage, StageOutput

# Imported when first asked for: `toolfactory verify` reads one stage's rules, and importing every
# stage would load the LLM gateway (openai) and the curation libraries (datasketch, scipy) it never
# uses, seconds of start-up.
_BASE = ("Planning", "ShardContext", "ShardSpec", "Stage", "StageOutput")
_STAGE_CLASSES = (
    ("toolfactory.stages.domains.stage", "DomainsStage"), ("toolfactory.stages.tools.stage", "ToolsStage"),
    ("toolfactory.stages.pool.stage", "PoolStage"), ("toolfactory.stages.tasks.stage", "TasksStage"),
    ("toolfactory.stages.dialogues.stage", "DialoguesStage"), ("toolfactory.stages.verify.stage", "VerifyStage"),
    ("toolfactory.stages.measure.stage", "MeasureStage"), ("toolfactory.stages.select.stage", "SelectStage"),
    ("toolfactory.stages.curate.stage", "CurateStage"),
)
DATASET_STAGE = "curate"  # the stage whose output is the run's dataset
STAGE_NAMES: tuple[str, ...] = ("domains", "tools", "pool", "tasks", "dialogues", "verify", "measure", "select", "curate")
_stages: dict[str, Stage] = {}  # each stage made once, when first asked for


def _all_stages() -> tuple[Stage, ...]:
    return tuple(stage_named(name) for name in STAGE_NAMES)


def __getattr__(name: str) -> Any:
    if name == "STAGES":
        return _all_stages()
    if name in _BASE:
        return getattr(import_module("toolfactory.stages.base"), name)
    for module, class_name in _STAGE_CLASSES:
        if class_name == name:
            return getattr(import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stage_named(name: str) -> Stage:
    """The stage called `name`, importing only its own module: a worker's shard of one stage
    would otherwise load every stage's libraries (MCP, datasketch, scipy), seconds per worker."""
    if name not in _stages:
        if name not in STAGE_NAMES:
            raise KeyError(f"unknown stage {name!r} (stages: {', '.join(STAGE_NAMES)})")
        module, class_name = _STAGE_CLASSES[STAGE_NAMES.index(name)]
        _stages[name] = getattr(import_module(module), class_name)()
    return _stages[name]


__all__ = ["DATASET_STAGE", "STAGES", "STAGE_NAMES", "Planning", "ShardContext", "ShardSpec", "Stage", "StageOutput", "stage_named"]
