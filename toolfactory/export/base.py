"""What every exporter shares: the exporter contract, :class:`Skip` with its reason codes, and
the export's errors.

An exporter turns accepted :class:`~toolfactory.models.Dialogue` records into one trainable
format and writes one file (or one folder) per split. It is fed one record at a time and keeps
no record once written, so an export's memory does not grow with the number of records.

A record that the format cannot hold (xLAM has no place for a second user turn, LLaMA-Factory's
ShareGPT layout none for two assistant turns in a row, …) raises :class:`Skip` with a stable
reason code: the record is left out of that format's files and counted, with the reason, in
the export summary. Skipping is per format; the record stays in the run.

An exporter whose format ``toolfactory verify`` reads back (:attr:`Exporter.read_as`) notes, for
each record it writes, the id that reader will give it and the record's recipe
(:meth:`Exporter.note`): the export's ``PROVENANCE.md`` maps them to the policy each recipe was
verified with (:mod:`toolfactory.stages.verify.export_policy`). That is one id per record held until
the export ends.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from toolfactory.config.export import PreferenceConfig
from toolfactory.errors import TerminalError, ToolfactoryError
from toolfactory.export.output import JsonLines, OutputDir
from toolfactory.formats.base import record_id
from toolfactory.stages.verify.export_policy import FormatChange, Group
from toolfactory.models import Dialogue, Tool

if TYPE_CHECKING:
    from toolfactory.executable.settings import ExecutableSourceSettings
    from toolfactory.export.stats import ExportStats

# Reason codes of skipped records (stable: they are counted in export summaries).
INVALID_RECORD = "invalid_record"  # the stored record does not validate as a Dialogue
NOT_SINGLE_TURN = "not_single_turn"  # the format holds one user request (xLAM, BFCL, ToolAlpaca)
NO_CALLS = "no_calls"  # the format is made of calls and the dialogue makes none (BFCL, ToolAlpaca)
CALLS_NOT_IN_FIRST_TURN = "calls_not_in_first_turn"  # xLAM/BFCL: the first assistant turn has no call but a later one does
CALLS_IN_SEVERAL_TURNS = "calls_in_several_turns"  # xLAM/BFCL hold the calls of one step; the record calls in several
ARGUMENTS_NOT_JSON = "arguments_not_json"  # the format stores arguments as a JSON object; the text is not one
ROLE_ORDER = "role_order"  # the message order has no layout in the format (ShareGPT alternation)
NO_FINAL_ANSWER = "no_final_answer"  # ToolBench paths end with Finish(give_answer): there is no answer to give
NOT_IN_SUBSET = "not_in_subset"  # the record is outside the subset the export asked for
CALL_FORMAT_UNWRITABLE = "call_format_unwritable"  # a call has no writing in the chosen text call format
FINISH_NOT_LAST = "finish_not_last"  # ToolBench: messages after the Finish call other than its answer
# Formats that keep the environment (bfcl's multi-turn entries, tasks; see export/executed.py):
NOT_EXECUTED = "not_executed"  # the format holds records whose calls really ran; this one's did not
NOT_REPLAYABLE = "execution_not_replayable"  # the calls that ran are not the dialogue's calls
PLAYED_CALLS = "played_calls"  # a replay runs every call; the record calls a tool an LLM played
SOURCE_NOT_CONFIGURED = "source_not_configured"  # the run's configuration does not name the record's source
# Preference formats (export/preference.py):
NO_REJECTED_ATTEMPT = "no_rejected_attempt"  # no rejected attempt of the task pairs with the record

REASONS: dict[str, str] = {
    INVALID_RECORD: "the stored record does not validate as a Dialogue",
    NOT_SINGLE_TURN: "the format holds one user request; the dialogue has none or several",
    NO_CALLS: "the format is made of function calls; the dialogue makes none",
    CALLS_NOT_IN_FIRST_TURN: "the first assistant turn makes no call but a later one does",
    CALLS_IN_SEVERAL_TURNS: "the format holds the calls of one step; the dialogue makes calls in several assistant turns",
    ARGUMENTS_NOT_JSON: "a call's arguments are not a JSON object, which the format requires",
    ROLE_ORDER: "the order of the messages cannot be laid out in the format",
    NO_FINAL_ANSWER: "the dialogue does not end with an answer that Finish(give_answer) could give",
    FINISH_NOT_LAST: "the dialogue goes on after its Finish call",
    CALL_FORMAT_UNWRITABLE: "a call cannot be written in the chosen text call format",
    NOT_IN_SUBSET: "the record is outside the subset the export asked for",
    NOT_EXECUTED: "the format holds records whose calls really ran; this record's calls did not",
    NOT_REPLAYABLE: "the calls that ran are not the dialogue's calls (a search that backtracked), so its recorded "
                    "state is not the state its calls leave",
    PLAYED_CALLS: "the record calls a tool an LLM played, which a replay cannot run",
    SOURCE_NOT_CONFIGURED: "the run's configuration does not name the executable source of the record's tools",
    NO_REJECTED_ATTEMPT: "no rejected attempt of the record's task parts from it at an assistant reply, so it makes no "
                         "preference pair",
}


class ExportError(TerminalError):
    """An export that cannot start or finish (unknown format, no accepted shards, bad split spec)."""


class Skip(ToolfactoryError):
    """Raised by an exporter for a record the format cannot hold: a reason code and a detail."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


SUBSETS = tuple(f"complexity={level}" for level in ("easy", "medium", "hard")) + tuple(
    f"diversity={level}" for level in ("low", "medium", "high"))


@dataclass(frozen=True)
class ExportOptions:
    """Choices that are the same for every format."""

    include_reasoning: bool = False
    """Export the assistant's reasoning (thinking) where the format has a place for it (``openai``
    as ``reasoning_content``, ``hf`` as ``messages.reasoning``). Off by default: reasoning is the
    generator's scratch work, and training on another model's thoughts is rarely wanted."""
    call_format: str = "openai"
    """``openai``: calls stay native ``tool_calls`` with a ``tools`` field. A text format
    (``json``, ``python``, ``react``, ``xml``; see :mod:`toolfactory.render`): the tools are
    described in the system prompt, which declares the format, and calls are written as text
    (ToolACE's format generalization; ``openai`` exporter). ``mixed``: a format per record,
    drawn from its id, so one dataset teaches every format."""
    tool_format: str = "json"
    """How the system prompt describes the tools with a text call format: ``json``, ``yaml``,
    ``xml``, ``markdown``, ``natural`` or ``mixed``."""

    preference: PreferenceConfig = field(default_factory=PreferenceConfig)
    """How preference pairs are made (``trl_preference``, ``llamafactory_ranking``; the config's
    ``export.preference``)."""

    subset: str | None = None
    """Only the records of a curation subset: ``complexity=easy|medium|hard`` (query complexity
    level) or ``diversity=low|medium|high`` (ToolACE's diversity subsets)."""

    def selects(self, dialogue: Dialogue) -> bool:
        if self.subset is None:
            return True
        kind, _, level = self.subset.partition("=")
        curation = dialogue.curation
        return curation.get("complexity_level") == level if kind == "complexity" else level in curation.get("diversity", [])

    def __post_init__(self) -> None:
        from toolfactory.render import CALL_FORMATS, TOOL_FORMATS

        if self.subset is not None and self.subset not in SUBSETS:
            raise ExportError(f"unknown subset {self.subset!r} (one of: {', '.join(SUBSETS)})")

        for label, value, allowed in (("call format", self.call_format, CALL_FORMATS), ("tool format", self.tool_format, TOOL_FORMATS)):
            if value not in (*allowed, "mixed"):
                raise ExportError(f"unknown {label} {value!r} (one of: {', '.join((*allowed, 'mixed'))})")


class Exporter(ABC):
    """One format's writer for one export; see the module doc."""

    name: ClassVar[str]
    needs_tools: ClassVar[bool] = False
    """Whether the format describes whole tools (name, description, link…), which the records
    only reference: then :func:`~toolfactory.export.run.export_run` sets :attr:`tools` to the
    run's tool pool by id before the first record."""
    needs_sources: ClassVar[bool] = False
    """Whether the format describes the executable sources the records ran on (their
    configuration and initial state): then :attr:`sources` is the run's configured sources by
    name (from its manifest; empty for a run without one)."""
    read_as: ClassVar[str | None] = None
    """The ``toolfactory verify --format`` that reads the written records back, if any: the
    exporter then notes the id it gives each record (:meth:`note`)."""

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        self.out = out
        self.splits = tuple(splits)
        self.options = options
        self.tools: Mapping[str, Tool] = {}
        self.sources: Mapping[str, ExecutableSourceSettings] = {}
        self.read_back: dict[Group, list[str]] = {}
        """(recipe, what the format changed) → the ids :attr:`read_as`'s reader gives those records."""

    def note(self, read_id: str, recipe: str, change: FormatChange | None = None) -> None:
        """Note that the record `toolfactory verify --format <read_as>` will read as `read_id` is of
        `recipe`, and what the format changed in it that its recipe's policy judges."""
        self.read_back.setdefault((recipe, change), []).append(read_id)

    @abstractmethod
    def write(self, split: str, dialogue: Dialogue) -> None:
        """Write one record to `split`'s file, or raise :class:`Skip`."""

    @abstractmethod
    def close(self, stats: ExportStats) -> dict[str, int]:
        """Make every file visible; the number of rows (records) of each, by file name."""

    @abstractmethod
    def abort(self) -> None:
        """Drop the files written so far (the export failed)."""


class JsonlExporter(Exporter):
    """A format of one JSON object per record, in ``<split>.jsonl`` (or, with ``writer =
    JsonList``, a JSON list in ``<split>.json``)."""

    suffix: ClassVar[str] = ".jsonl"
    writer: ClassVar[type[JsonLines]] = JsonLines

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        self.files = {split: self.writer(out, f"{split}{self.suffix}") for split in self.splits}

    @abstractmethod
    def convert(self, dialogue: Dialogue) -> dict[str, Any]:
        """The record in the format, or raise :class:`Skip`."""

    def write(self, split: str, dialogue: Dialogue) -> None:
        record = self.convert(dialogue)
        self.files[split].write(record)
        if self.read_as is not None:
            self.note(record_id(self.read_as, record), dialogue.recipe)

    def close(self, stats: ExportStats) -> dict[str, int]:
        return {f"{split}{self.suffix}": file.commit() for split, file in self.files.items()}

    def abort(self) -> None:
        for file in self.files.values():
            file.discard()
