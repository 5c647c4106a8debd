"""Preference data: the pairs of :mod:`toolfactory.export.pairs` in two trainers' formats.

``trl_preference``: TRL's conversational preference format, as its ``DPOTrainer`` (and the other
preference trainers) read it, one JSON object a line::

    {"prompt": [{"role": "system", ...}, {"role": "user", ...}, ...],      # the shared messages
     "chosen": [{"role": "assistant", ...}], "rejected": [{"role": "assistant", ...}],
     "tools": [{"type": "function", "function": {name, description, parameters}}],
     "id", "chosen_id", "rejected_id", "recipe", "rejected_reasons": [...], "pair_source", "synthesized"}

Assistant calls are ``{"type": "function", "function": {"name", "arguments": {...}}}`` with the
arguments as an object, which is what chat templates render (``arguments | tojson``); arguments
that are no JSON object (a rejected reply's malformed call) stay the text they were. Tool
messages carry ``name`` and ``tool_call_id``. TRL renders ``tools`` into the prompt through the
tokenizer's chat template (``maybe_apply_chat_template(example, tokenizer, tools=...)`` and its
``tools`` column).

``llamafactory_ranking``: LLaMA-Factory's ShareGPT preference data (``ranking: true``)::

    {"conversations": [{"from": "human", ...}, {"from": "function_call", ...}, {"from": "observation", ...}],
     "chosen": {"from": "gpt" | "function_call", "value": ...}, "rejected": {...},
     "system": "...", "tools": "[...]", <the same pair columns>}

with its rules (``SharegptDatasetConverter``): the conversation alternates human/observation and
gpt/function_call and ends with a human or observation turn (an odd count), and chosen and
rejected are one assistant-side turn each, so a pair is always one step here (``preference.
completion: rest`` applies to ``trl_preference`` only). A step with several calls is one
``function_call`` turn whose value is the JSON list of the calls. ``dataset_info.json`` declares the
split files with ``ranking: true`` and the column names.

Every pair keeps the rejected side's reason codes (``rejected_reasons``), its source
(``pair_source``) and whether it was synthesized. An accepted dialogue without a pair is skipped
with ``no_rejected_attempt``; the export summary counts it.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Mapping, Sequence

from toolfactory.export.base import NO_REJECTED_ATTEMPT, ROLE_ORDER, ExportOptions, JsonlExporter, Skip
from toolfactory.export.output import OutputDir
from toolfactory.export.pairs import Attempt, PairMaker, PreferencePair
from toolfactory.export.sharegpt import conversation
from toolfactory.export.stats import ExportStats
from toolfactory.export.turns import function_dict
from toolfactory.models import Dialogue, Message, ToolCall


def _arguments(call: ToolCall) -> Any:
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        return call.arguments
    return value if isinstance(value, dict) else call.arguments


def _split_system(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    k = 0
    while k < len(messages) and messages[k].role == "system":
        k += 1
    return "\n\n".join(m.content or "" for m in messages[:k]), list(messages[k:])


class PreferenceExporter(JsonlExporter):
    """The pairs of each accepted dialogue, one row a pair (see the module doc)."""

    steps_only: ClassVar[bool] = False
    """Whether the format holds one reply a side (then pairs are one step whatever ``completion`` says)."""

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        self.attempts: Mapping[str, list[Attempt]] = {}
        """The run's rejected attempts by task id: :func:`~toolfactory.export.run.export_run` sets
        them (:func:`~toolfactory.export.pairs.rejected_attempts`) before the first record."""

    def write(self, split: str, dialogue: Dialogue) -> None:
        settings = self.options.preference
        maker = PairMaker(self.attempts, "step" if self.steps_only else settings.completion, settings.synthesize,
                          tuple(settings.corruptions), settings.max_pairs_per_dialogue)
        rows = []
        for pair in maker.pairs(dialogue):
            try:
                rows.append({**self.row(pair), **pair.metadata()})
            except Skip:
                continue  # this pair has no layout in the format; the dialogue's others may
        if not rows:
            raise Skip(NO_REJECTED_ATTEMPT, "no rejected attempt of the task parts from it at an assistant reply")
        for row in rows:
            self.files[split].write(row)

    def convert(self, dialogue: Dialogue) -> dict[str, Any]:  # one dialogue is several rows: see write
        raise NotImplementedError

    def row(self, pair: PreferencePair) -> dict[str, Any]:
        raise NotImplementedError


def chat_message(message: Message) -> dict[str, Any]:
    """A message as chat templates read it (arguments as objects)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments(c)}}
                             for c in message.tool_calls]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        if message.name:
            out["name"] = message.name
    return out


class TRLPreferenceExporter(PreferenceExporter):
    name = "trl_preference"

    def row(self, pair: PreferencePair) -> dict[str, Any]:
        return {"prompt": [chat_message(m) for m in pair.prompt], "chosen": [chat_message(m) for m in pair.chosen],
                "rejected": [chat_message(m) for m in pair.rejected], "tools": [f.openai_tool() for f in pair.tools]}


def _turn(message: Message) -> dict[str, str]:
    """One assistant reply as one ShareGPT turn."""
    if message.tool_calls:
        calls = [{"name": c.name, "arguments": _arguments(c)} for c in message.tool_calls]
        return {"from": "function_call", "value": json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)}
    return {"from": "gpt", "value": message.content or ""}


class LlamaFactoryRankingExporter(PreferenceExporter):
    name = "llamafactory_ranking"
    steps_only = True

    def row(self, pair: PreferencePair) -> dict[str, Any]:
        system, prompt = _split_system(pair.prompt)
        # The prompt's turns laid out with a closing reply, which is then taken off: the layout
        # rules are those of a whole conversation, and a ranking prompt is one without its reply.
        turns = conversation([*prompt, Message(role="assistant", content="")])[:-1]
        if not turns or turns[-1]["from"] not in ("human", "observation"):
            raise Skip(ROLE_ORDER, "the prompt does not end with a user or tool turn")
        chosen, rejected = _turn(pair.chosen[0]), _turn(pair.rejected[0])
        if chosen == rejected:
            raise Skip(ROLE_ORDER, "the two replies differ only in text the format leaves out")
        return {"conversations": turns, "chosen": chosen, "rejected": rejected, "system": system,
                "tools": json.dumps([function_dict(f) for f in pair.tools], ensure_ascii=False)}

    def close(self, stats: ExportStats) -> dict[str, int]:
        files = super().close(stats)
        columns = {"messages": "conversations", "chosen": "chosen", "rejected": "rejected", "system": "system", "tools": "tools"}
        info = {f"{stats.run_id}_{split}_ranking": {"file_name": f"{split}.jsonl", "formatting": "sharegpt", "ranking": True,
                                                    "columns": columns}
                for split in self.splits}
        self.out.write_bytes("dataset_info.json", (json.dumps(info, indent=2) + "\n").encode())
        return files
