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
toolbench      ToolBench DFSDT answer files (a file or a folder of them): the winning ``train_messages``
xlam           xLAM / APIGen ``{query, tools, answers}`` (JSON list or JSONL): calls only
toolalpaca     ToolAlpaca tools with ``Golden_Answers``: one record per golden answer, calls only
tooleval       ToolEval's converted answers ``{query_id: {query, available_tools, answer}}``
bfcl_multi_    BFCL's multi-turn entries with their possible answers: the ground-truth calls executed
turn           on BFCL's environments (needs ``bfcl-eval``), with the state they leave as target
=============  ==================================================================================

A ``path`` is a file or a folder in every format: a folder is read file by file, in name order
(:func:`~toolfactory.formats.base.read_files`; ``toolbench`` and ``tooleval`` look into
subfolders too, see their modules), and a file may start with UTF-8's byte-order mark. A record
that holds an integer longer than Python converts is ``record_unreadable`` in every format,
wherever it holds it (the rule is in :mod:`toolfactory.formats.base`). An export of the factory
says in its ``PROVENANCE.md`` how the run verified each record (:mod:`toolfactory.stages.verify.export_policy`).

The readers are imported when first used: ``FORMATS`` (the names the CLI's help lists) costs
nothing to import.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterator

from toolfactory.models import Dialogue

if TYPE_CHECKING:
    from toolfactory.formats.base import REASONS, FormatError, UnreadableFile

FORMATS: tuple[str, ...] = ("toolfactory", "openai", "sharegpt", "toolbench", "xlam", "toolalpaca", "tooleval", "bfcl_multi_turn")

Reader = Callable[[Path], Iterator["Dialogue | FormatError"]]

MODULES: dict[str, ModuleType]
READERS: dict[str, Reader]
NOT_APPLICABLE: dict[str, frozenset[str]]
NOT_APPLICABLE_REASONS: dict[str, dict[str, str]]
_TABLES = ("MODULES", "READERS", "NOT_APPLICABLE", "NOT_APPLICABLE_REASONS")
_BASE = ("REASONS", "FormatError", "UnreadableFile")


def __getattr__(name: str) -> Any:
    """The readers' tables and the contract's names, imported on first use (PEP 562)."""
    if name in _BASE:
        return getattr(import_module("toolfactory.formats.base"), name)
    if name not in _TABLES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    modules = {fmt: import_module(f"toolfactory.formats.{fmt}") for fmt in FORMATS}
    globals().update({
        "MODULES": modules,
        "READERS": {fmt: module.read for fmt, module in modules.items()},
        "NOT_APPLICABLE": {fmt: module.NOT_APPLICABLE for fmt, module in modules.items()},
        "NOT_APPLICABLE_REASONS": {fmt: module.NOT_APPLICABLE_REASONS for fmt, module in modules.items()},
    })
    return globals()[name]


def named(formats: tuple[str, ...] = FORMATS) -> str:
    """The formats as a sentence lists them: ``a, b or c``."""
    return f"{', '.join(formats[:-1])} or {formats[-1]}" if len(formats) > 1 else "".join(formats)


def reader(fmt: str) -> Reader:
    """The reader of `fmt`; a KeyError names the known formats."""
    if fmt not in FORMATS:
        raise KeyError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    readers: dict[str, Reader] = __getattr__("READERS")
    return readers[fmt]


def read(path: str | Path, fmt: str) -> Iterator[Dialogue | FormatError]:
    return reader(fmt)(Path(path))


__all__ = ["FORMATS", "MODULES", "NOT_APPLICABLE", "NOT_APPLICABLE_REASONS", "READERS", "REASONS", "FormatError", "Reader",
           "UnreadableFile", "named", "read", "reader"]
