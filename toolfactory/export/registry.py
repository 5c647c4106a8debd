"""The export formats by name (the CLI's ``--format`` values)."""

from __future__ import annotations

from toolfactory.export.base import Exporter
from toolfactory.export.bfcl import BFCLExporter
from toolfactory.export.hf import HFExporter
from toolfactory.export.openai import OpenAIExporter
from toolfactory.export.preference import LlamaFactoryRankingExporter, TRLPreferenceExporter
from toolfactory.export.sharegpt import ShareGPTExporter
from toolfactory.export.tasks import TasksExporter
from toolfactory.export.toolalpaca import ToolAlpacaExporter
from toolfactory.export.toolbench import ToolBenchExporter
from toolfactory.export.xlam import XLAMExporter

EXPORTERS: dict[str, type[Exporter]] = {
    cls.name: cls
    for cls in (OpenAIExporter, ShareGPTExporter, ToolBenchExporter, ToolAlpacaExporter, XLAMExporter, BFCLExporter, HFExporter,
                TasksExporter, TRLPreferenceExporter, LlamaFactoryRankingExporter)
}
FORMATS: tuple[str, ...] = tuple(EXPORTERS)
