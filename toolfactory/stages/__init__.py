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
# Each stage by name, in run order: the module and class that make it.
_STAGE_CLASSES: dict[str, tuple[str, str]] = {
    "domains": ("toolfactory.stages.domains.stage", "DomainsStage"),
    "tools": ("toolfactory.stages.tools.stage", "ToolsStage"),
    "pool": ("toolfactory.stages.pool.stage", "PoolStage"),
    "tasks": ("toolfactory.stages.tasks.stage", "TasksStage"),
    "dialogues": ("toolfactory.stages.dialogues.stage", "DialoguesStage"),
    "verify": ("toolfactory.stages.verify.stage", "VerifyStage"),
    "measure": ("toolfactory.stages.measure.stage", "MeasureStage"),
    "select": ("toolfactory.stages.select.stage", "SelectStage"),
    "curate": ("toolfactory.stages.curate.stage", "CurateStage"),
}
DATASET_STAGE = "curate"  # the stage whose output is the run's dataset
STAGE_NAMES: tuple[str, ...] = tuple(_STAGE_CLASSES)
_stages: dict[str, Stage] = {}  # each stage made once, when first asked for


def _all_stages() -> tuple[Stage, ...]:
    return tuple(stage_named(name) for name in STAGE_NAMES)


def __getattr__(name: str) -> Any:
    if name == "STAGES":
        return _all_stages()
    if name in _BASE:
        return getattr(import_module("toolfactory.stages.base"), name)
    for module, class_name in _STAGE_CLASSES.values():
        if class_name == name:
            return getattr(import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stage_named(name: str) -> Stage:
    """The stage called `name`, importing only its own module: a worker's shard of one stage
    would otherwise load every stage's libraries (MCP, datasketch, scipy), seconds per worker."""
    if name not in _stages:
        if name not in _STAGE_CLASSES:
            raise KeyError(f"unknown stage {name!r} (stages: {', '.join(STAGE_NAMES)})")
        module, class_name = _STAGE_CLASSES[name]
        _stages[name] = getattr(import_module(module), class_name)()
    return _stages[name]


__all__ = ["DATASET_STAGE", "STAGES", "STAGE_NAMES", "Planning", "ShardContext", "ShardSpec", "Stage", "StageOutput", "stage_named"]
