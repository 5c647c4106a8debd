"""Readers of existing tool-use datasets into canonical :class:`~toolfactory.models.Dialogue` records.

One module per format, each with ``read(path) -> Iterator[Dialogue | FormatError]`` (the contract
is in :mod:`toolfactory.formats.base`) and ``NOT_APPLICABLE``: the rule codes that cannot judge
that format's shape (with the reason of each in ``NOT_APPLICABLE_REASONS``), which the verify
report skips.

=============  ==================================================================================
format         input
=============  ==================================================================================
toolfactory    our own records: a pipeline Parquet shard (``id``, ``record``) or Dialogue JSONL
openai         OpenAI chat fine-tuning JSONL (``messages`` + ``tools``; legacy ``functions``)
sharegpt       LLaMA-Factory's ShareGPT with tools (``conversations`` + ``system`` + ``tools``)
toolbench      ToolBench DFSDT answer files (a file or a folder): the winning ``train_messages``
xlam           xLAM / APIGen ``{query, tools, answers}`` (JSON list or JSONL): calls only
toolalpaca     ToolAlpaca tools with ``Golden_Answers``: one record per golden answer, calls only
tooleval       ToolEval's converted answers ``{query_id: {query, available_tools, answer}}``
bfcl_multi_    BFCL's multi-turn entries with their possible answers: the ground-truth calls executed
turn           on BFCL's environments (needs ``bfcl-eval``), with the state they leave as target
=============  ==================================================================================
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Callable, Iterator

from toolfactory.formats import bfcl_multi_turn, openai, sharegpt, toolalpaca, toolbench, tooleval, toolfactory, xlam
from toolfactory.formats.base import REASONS, FormatError, UnreadableFile
from toolfactory.models import Dialogue

Reader = Callable[[Path], Iterator["Dialogue | FormatError"]]

MODULES: dict[str, ModuleType] = {
    "toolfactory": toolfactory,
    "openai": openai,
    "sharegpt": sharegpt,
    "toolbench": toolbench,
    "xlam": xlam,
    "toolalpaca": toolalpaca,
    "tooleval": tooleval,
    "bfcl_multi_turn": bfcl_multi_turn,
}
READERS: dict[str, Reader] = {name: module.read for name, module in MODULES.items()}
NOT_APPLICABLE: dict[str, frozenset[str]] = {name: module.NOT_APPLICABLE for name, module in MODULES.items()}
NOT_APPLICABLE_REASONS: dict[str, dict[str, str]] = {name: module.NOT_APPLICABLE_REASONS for name, module in MODULES.items()}
FORMATS: tuple[str, ...] = tuple(MODULES)


def reader(fmt: str) -> Reader:
    """The reader of `fmt`; a KeyError names the known formats."""
    try:
        return READERS[fmt]
    except KeyError:
        raise KeyError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})") from None


def read(path: str | Path, fmt: str) -> Iterator[Dialogue | FormatError]:
    return reader(fmt)(Path(path))


__all__ = ["FORMATS", "NOT_APPLICABLE", "NOT_APPLICABLE_REASONS", "READERS", "REASONS", "FormatError", "Reader",
           "UnreadableFile", "read", "reader"]
