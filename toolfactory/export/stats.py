"""What an export counts as it streams: records per split, skips with reasons, and the make-up
of the data (recipes, modes, scenarios, tool sources, models) for the summary and the dataset card.

Counters only: their size grows with the number of distinct tools, models and reasons, never
with the number of records. The first few skipped records of each reason are kept as examples.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from toolfactory.curation import turn_masks
from toolfactory.llm.identity import EndpointIdentity
from toolfactory.models import Dialogue

EXAMPLES_PER_REASON = 5
EXECUTABLE_KINDS = frozenset({"python", "mcp"})  # ToolRef.source of the tools of executable sources (mark_executable)
EXECUTED = "executed"  # some call ran on a real tool, and every tool the record offers is executable
EXECUTED_AND_PLAYED = "executed and LLM-played"  # some call ran; some offered tools are played by an LLM
PLAYED = "LLM-played"  # every tool response was written by an LLM (or the simulator)
NO_RESPONSES = "no tool responses"
#: The formats whose files mark a masked assistant turn (OpenAI's ``weight: 0``, the HF export's
#: ``train``); the others write it as a turn to learn (sharegpt: see its module doc).
MASKING_FORMATS = frozenset({"openai", "hf"})


def executed_calls(dialogue: Dialogue) -> list[dict[str, Any]]:
    """The calls the dialogues stage ran on executable tools (``generation.execution.calls``)."""
    execution = dialogue.generation.get("execution")
    calls = execution.get("calls") if isinstance(execution, dict) else None
    return [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def execution_kind(dialogue: Dialogue) -> str:
    """Where the record's tool responses come from: one of the labels above."""
    if executed_calls(dialogue):
        played = any(ref.source not in EXECUTABLE_KINDS for ref in dialogue.source_tools)
        return EXECUTED_AND_PLAYED if played else EXECUTED
    return PLAYED if any(m.role == "tool" for m in dialogue.messages) else NO_RESPONSES


@dataclass
class ExportStats:
    splits: tuple[str, ...]
    run_id: str = ""
    fmt: str = ""
    split_spec: dict[str, Any] = field(default_factory=dict)  # SplitSpec.to_dict() and the seed
    read: int = 0
    exported: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_examples: list[dict[str, str]] = field(default_factory=list)
    units: dict[str, set[str]] = field(default_factory=dict)
    recipes: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    scenarios: Counter[str] = field(default_factory=Counter)
    tool_sources: Counter[str] = field(default_factory=Counter)
    categories: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    # Per record, so that every table of the dataset card sums to the records exported:
    # (origin, recipe, models) where origin is "generated" (the record names the models that
    # wrote it) or "imported" (it names none: a reader's output), and each record's set of tool sources.
    provenance: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    tool_provenance: Counter[str] = field(default_factory=Counter)
    endpoint: EndpointIdentity | None = None  # who answered the run's requests (its manifest); None: imported data
    # Whether the record's tool responses came from tools that really ran (see `execution_kind`),
    # and, per executable source, the records that ran calls on it and those calls.
    execution: Counter[str] = field(default_factory=Counter)
    executed_records: Counter[str] = field(default_factory=Counter)
    executed_calls: Counter[str] = field(default_factory=Counter)
    # The run's referee counts and the records its judges decided alone (the verify stage's profile,
    # toolfactory/stages/verify/referee.py): the same for every export of the run.
    referee: dict[str, int] = field(default_factory=dict)
    judged_alone: dict[str, int] = field(default_factory=dict)
    # What the run's records were decontaminated against and what that rejected (the select and
    # curate stages' profiles, toolfactory/curation/contamination.py): dimension -> value -> count.
    decontamination: dict[str, dict[str, int]] = field(default_factory=dict)
    # Turn-level loss masks of the records exported (toolfactory/curation/turn_masks.py): assistant
    # turns, the masked ones by reason, and the records with at least one masked turn.
    assistant_turns: int = 0
    turn_masks: Counter[str] = field(default_factory=Counter)
    masked_records: int = 0

    @property
    def simulated(self) -> bool:
        return self.endpoint is not None and self.endpoint.simulated

    def skip(self, record_id: str, reason: str, detail: str) -> None:
        self.skipped[reason] += 1
        if self.skipped[reason] <= EXAMPLES_PER_REASON:
            self.skipped_examples.append({"id": record_id, "reason": reason, "detail": detail[:300]})

    def add(self, split: str, dialogue: Dialogue, units: list[str]) -> None:
        """Count a record that was written to `split`."""
        self.exported[split] += 1
        # a record without tools is its own unit: not kept, or the set would grow with the records
        self.units.setdefault(split, set()).update(u for u in units if not u.startswith("record:"))
        self.recipes[dialogue.recipe] += 1
        self.modes[dialogue.mode] += 1
        self.scenarios[dialogue.scenario] += 1
        for ref in dialogue.source_tools:
            self.tool_sources[ref.source] += 1
            self.categories[ref.category] += 1
        if not dialogue.source_tools:
            self.tool_sources["unrecorded"] += 1
        for role, model in sorted(dialogue.models.items()):
            self.models[f"{role}: {model}"] += 1
        models = ", ".join(f"{role}: {model}" for role, model in sorted(dialogue.models.items()))
        self.provenance["generated" if models else "imported", dialogue.recipe, models] += 1
        self.tool_provenance[" + ".join(sorted({ref.source for ref in dialogue.source_tools})) or "unrecorded"] += 1
        self.execution[execution_kind(dialogue)] += 1
        masks = turn_masks.counts(dialogue)
        self.assistant_turns += sum(masks[turn_masks.TURNS].values())
        self.turn_masks.update(masks[turn_masks.PROFILE])
        self.masked_records += bool(masks[turn_masks.PROFILE])
        ran = Counter(str(call.get("source")) for call in executed_calls(dialogue))
        self.executed_records.update(ran.keys())
        self.executed_calls.update(ran)

    def summary(self) -> dict[str, Any]:
        return {
            "records": self.read,
            "exported": sum(self.exported.values()),
            "splits": {split: self.exported[split] for split in self.splits},
            "units_per_split": {split: len(self.units.get(split, ())) for split in self.splits},
            "skipped": dict(self.skipped.most_common()),
            "skipped_examples": self.skipped_examples,
            "recipes": dict(self.recipes.most_common()),
            "modes": dict(self.modes.most_common()),
            "scenarios": dict(self.scenarios.most_common()),
            "tool_sources": dict(self.tool_sources.most_common()),
            "models": dict(self.models.most_common()),
            "execution": dict(self.execution.most_common()),
            "turn_masks": {"carried": self.fmt in MASKING_FORMATS, "assistant_turns": self.assistant_turns, "masked_records": self.masked_records,
                           "masked_turns": dict(sorted(self.turn_masks.most_common(), key=lambda kv: (-kv[1], kv[0])))},
            "executed_sources": {source: {"records": n, "calls": self.executed_calls[source]}
                                 for source, n in sorted(self.executed_records.items())},
        }
