"""Trainable exports of a run's accepted dialogues (docs/architecture.md §2, curate and exports; ToolACE §2.2.2
on format generalization, ToolLLM §3 on held-out tools).

:func:`export_run` streams the ``verify`` shards of a run into one format, one file per split
(train / validation / test, split by tool or by category: :class:`SplitSpec`), and returns a
summary with the counts and the records skipped, by reason.

==========  =====================================================================================
format      output (per split)
==========  =====================================================================================
openai      ``<split>.jsonl``: OpenAI chat fine-tuning lines ``{messages, tools}``
sharegpt    ``<split>.jsonl``: LLaMA-Factory ShareGPT ``{conversations, system, tools}``
toolbench   ``answer/<split>/<query_id>_<method>.json`` ToolBench answers + ``toolllama/<split>.json`` conversations
toolalpaca  ``<split>.json``: ToolAlpaca tool entries (one per tool) with golden answers and instances
xlam        ``<split>.jsonl``: xLAM ``{id, query, tools, answers}`` (single-turn records, every call)
bfcl        ``<split>/BFCL_v4_<category>.json`` + ``possible_answer/`` (ids ``<category>_<n>``); dialogues over
            BFCL's executable environments as ``multi_turn_base`` entries with their initial configuration
hf          ``data/<split>.parquet`` with nested features + ``README.md`` dataset card
tasks       ``<split>.jsonl``: verifiable tasks of the records whose tools ran (prompt, tools, environment,
            initial state, ground-truth calls, target state) for a trainer to replay
==========  =====================================================================================
"""

from __future__ import annotations

from toolfactory.export.base import REASONS, Exporter, ExportError, ExportOptions, Skip
from toolfactory.export.output import OutputDir
from toolfactory.export.registry import EXPORTERS, FORMATS
from toolfactory.export.run import export_run
from toolfactory.export.splits import SPLITS, SplitSpec, record_split, unit_split

__all__ = [
    "EXPORTERS",
    "FORMATS",
    "REASONS",
    "SPLITS",
    "ExportError",
    "ExportOptions",
    "Exporter",
    "OutputDir",
    "Skip",
    "SplitSpec",
    "export_run",
    "record_split",
    "unit_split",
]
