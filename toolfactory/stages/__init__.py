"""The stages of the factory, in run order."""

from __future__ import annotations

from toolfactory.stages.base import Planning, ShardContext, ShardSpec, Stage, StageOutput
from toolfactory.stages.curate.stage import CurateStage
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.domains.stage import DomainsStage
from toolfactory.stages.measure.stage import MeasureStage
from toolfactory.stages.pool.stage import PoolStage
from toolfactory.stages.select.stage import SelectStage
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.tools.stage import ToolsStage
from toolfactory.stages.verify.stage import VerifyStage

STAGES: tuple[Stage, ...] = (
    DomainsStage(), ToolsStage(), PoolStage(), TasksStage(), DialoguesStage(), VerifyStage(), MeasureStage(), SelectStage(),
    CurateStage(),
)
DATASET_STAGE = "curate"  # the stage whose output is the run's dataset
STAGE_NAMES: tuple[str, ...] = tuple(stage.name for stage in STAGES)


def stage_named(name: str) -> Stage:
    for stage in STAGES:
        if stage.name == name:
            return stage
    raise KeyError(f"unknown stage {name!r} (stages: {', '.join(STAGE_NAMES)})")


__all__ = ["DATASET_STAGE", "STAGES", "STAGE_NAMES", "Planning", "ShardContext", "ShardSpec", "Stage", "StageOutput", "stage_named"]
