"""A Hugging Face dataset: ``data/<split>.parquet`` with nested features, and a dataset card.

``datasets.load_dataset("parquet", data_files=...)`` (or the Hub, given the card's ``configs``)
reads the files with typed features, so the schema is fixed: a struct needs the same keys in
every row. Where keys vary from record to record — a tool's JSON Schema ``parameters`` and
``returns`` — the value is JSON text::

    id, recipe, scenario, mode, target_mode: string          llm_calls: int64
    messages: list<{role, content, tool_calls: list<{id, type, function: {name, arguments}}>,
                    tool_call_id, name, masked: bool, train: bool, mask: string}>
                                                          (+ reasoning with include_reasoning)
    tools: list<{name, description, parameters: JSON text, returns: JSON text}>
    models: list<{role, model}>              source_tools: list<{id, name, category, source}>
    generation: JSON text (how the dialogue was made; its keys vary with the recipe)
    verdicts: list<{code, passed, severity, message, path}>    judgements: list<{aspect, passes}>

``train`` is the loss mask: true for an assistant turn to be learned, false for every other
message and for an assistant turn kept for context only, whose reason code is in ``mask``
(:mod:`toolfactory.curation.turn_masks`: ``error_recovered``, ``samples_disagreed``,
``flagged_<rule>``; null otherwise). ``masked`` is the dialogues stage's own flag (ToolACE's
disagreeing samples), kept for readers of earlier exports; ``train`` covers it.
Fields the record model does not have yet are written empty (null, false, ``{}``).

Messages follow OpenAI's chat shape (``tool_calls[].function.arguments`` the generated text),
which chat templates and TRL read. Rows are written in row groups of :data:`ROW_GROUP` records,
so memory stays flat. The card (``README.md``, :mod:`toolfactory.export.card`) is written last;
it lists the splits that have records (``datasets`` cannot load a split without rows).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from toolfactory.curation import turn_masks
from toolfactory.export.base import Exporter, ExportOptions
from toolfactory.export.card import dataset_card
from toolfactory.export.output import OutputDir, OutputFile
from toolfactory.export.stats import ExportStats
from toolfactory.models import Dialogue, Message

ROW_GROUP = 1000
_STRING = pa.string()
CALL = pa.struct([("id", _STRING), ("type", _STRING), ("function", pa.struct([("name", _STRING), ("arguments", _STRING)]))])
TOOL = pa.struct([("name", _STRING), ("description", _STRING), ("parameters", _STRING), ("returns", _STRING)])
MODEL = pa.struct([("role", _STRING), ("model", _STRING)])
SOURCE_TOOL = pa.struct([("id", _STRING), ("name", _STRING), ("category", _STRING), ("source", _STRING)])
VERDICT = pa.struct([("code", _STRING), ("passed", pa.bool_()), ("severity", _STRING), ("message", _STRING), ("path", _STRING)])
JUDGEMENT = pa.struct([("aspect", _STRING), ("passes", pa.bool_())])


def message_type(include_reasoning: bool) -> pa.StructType:
    fields = [("role", _STRING), ("content", _STRING), ("tool_calls", pa.list_(CALL)), ("tool_call_id", _STRING), ("name", _STRING),
              ("masked", pa.bool_()), ("train", pa.bool_()), ("mask", _STRING)]
    return pa.struct(fields + ([("reasoning", _STRING)] if include_reasoning else []))


def schema(include_reasoning: bool) -> pa.Schema:
    return pa.schema([
        ("id", _STRING), ("messages", pa.list_(message_type(include_reasoning))), ("tools", pa.list_(TOOL)),
        ("recipe", _STRING), ("scenario", _STRING), ("mode", _STRING), ("target_mode", _STRING), ("models", pa.list_(MODEL)),
        ("llm_calls", pa.int64()), ("source_tools", pa.list_(SOURCE_TOOL)), ("generation", _STRING),
        ("verdicts", pa.list_(VERDICT)), ("judgements", pa.list_(JUDGEMENT)),
    ])


def message_row(message: Message, include_reasoning: bool) -> dict[str, Any]:
    mask = turn_masks.reason(message)
    row: dict[str, Any] = {
        "role": message.role,
        "content": message.content,
        "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                       for c in message.tool_calls] if message.tool_calls else None,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "masked": bool(message.masked),
        "train": message.role == "assistant" and mask is None,
        "mask": mask,
    }
    if include_reasoning:
        row["reasoning"] = message.reasoning
    return row


def row(dialogue: Dialogue, include_reasoning: bool) -> dict[str, Any]:
    return {
        "id": dialogue.id,
        "messages": [message_row(m, include_reasoning) for m in dialogue.messages],
        "tools": [{"name": f.name, "description": f.description, "parameters": json.dumps(f.parameters, ensure_ascii=False),
                   "returns": json.dumps(f.returns, ensure_ascii=False)} for f in dialogue.tools],
        "recipe": dialogue.recipe,
        "scenario": dialogue.scenario,
        "mode": dialogue.mode,
        "target_mode": getattr(dialogue, "target_mode", None),
        "models": [{"role": role, "model": model} for role, model in sorted(dialogue.models.items())],
        "llm_calls": dialogue.llm_calls,
        "source_tools": [{"id": t.id, "name": t.name, "category": t.category, "source": t.source} for t in dialogue.source_tools],
        "generation": json.dumps(getattr(dialogue, "generation", None) or {}, ensure_ascii=False, sort_keys=True),
        "verdicts": [{"code": v.code, "passed": v.passed, "severity": v.severity, "message": v.message, "path": v.path}
                     for v in dialogue.verdicts],
        "judgements": [{"aspect": j.aspect, "passes": j.passes} for j in dialogue.judgements],
    }


class _ParquetSplit:
    def __init__(self, out: OutputDir, name: str, table_schema: pa.Schema) -> None:
        self.schema = table_schema
        self.file: OutputFile = out.open(name)
        self.writer = pq.ParquetWriter(self.file.raw, table_schema, compression="zstd")
        self.rows: list[dict[str, Any]] = []
        self.count = 0

    def write(self, values: dict[str, Any]) -> None:
        self.rows.append(values)
        self.count += 1
        if len(self.rows) >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows.clear()

    def commit(self) -> int:
        self.flush()
        self.writer.close()
        self.file.commit()
        return self.count

    def discard(self) -> None:
        self.file.discard()


class HFExporter(Exporter):
    name = "hf"

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        table_schema = schema(options.include_reasoning)
        self.files = {s: _ParquetSplit(out, f"data/{s}.parquet", table_schema) for s in self.splits}

    def write(self, split: str, dialogue: Dialogue) -> None:
        self.files[split].write(row(dialogue, self.options.include_reasoning))

    def close(self, stats: ExportStats) -> dict[str, int]:
        counts = {f"data/{s}.parquet": file.commit() for s, file in self.files.items()}
        # `datasets` refuses a split without rows ("corresponds to no data"): the card lists only
        # the splits that have some (the empty file is still there, with the schema and no rows).
        listed = {s: f"data/{s}.parquet" for s in self.splits if counts[f"data/{s}.parquet"]}
        self.out.write_bytes("README.md", dataset_card(stats, listed).encode())
        return counts

    def abort(self) -> None:
        for file in self.files.values():
            file.discard()
